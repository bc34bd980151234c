"""Devices and the array module (``xp``) that serves each one.

A tensor's data is a NumPy array on the CPU or a CuPy array on a GPU. Ops never name either
library: they ask for ``array_module(arr)`` (or ``ctx.xp`` inside a Function) and write the
same code against it.

Each device also owns a kernel module: ``tinyflow.kernels`` (the NumPy references) for the CPU,
``tinyflow_cuda.kernels`` (the .cu twins, same names and signatures) for CUDA. An op calls a
named kernel through its context (``ctx.kernels.im2col(...)``); other code asks
``kernels_of(arr)``. This is the one place that decides which kernels serve an array.

Everything that knows CUDA lives in ``tinyflow_cuda``; ``tinyflow`` reaches it only through
this module, and only when a ``cuda`` device or a CuPy array is involved.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Union

import numpy as np


class Device:
    """A place where tensors live: ``Device("cpu")`` or ``Device("cuda:N")``."""

    __slots__ = ("type", "index")

    def __init__(self, spec: Union[str, Device] = "cpu", index: int | None = None):
        if isinstance(spec, Device):
            self.type, self.index = spec.type, spec.index
            return
        if not isinstance(spec, str):
            raise TypeError(f"Device expects a string like 'cpu' or 'cuda:0', got {spec!r}")
        kind, _, idx = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"unknown device {spec!r}: expected 'cpu', 'cuda' or 'cuda:N'")
        if kind == "cpu":
            if idx or index:
                raise ValueError(f"device {spec!r}: the cpu device has no index")
            self.type, self.index = "cpu", None
            return
        if idx and index is not None:
            raise ValueError(f"device {spec!r}: index given twice")
        self.type = "cuda"
        self.index = int(idx) if idx else (index if index is not None else 0)

    @property
    def xp(self) -> ModuleType:
        """The array module (numpy or cupy) that holds arrays on this device."""
        if self.type == "cpu":
            return np
        import tinyflow_cuda

        return tinyflow_cuda.array_module(self.index)

    @property
    def kernels(self) -> ModuleType:
        """The kernel module serving this device: tinyflow.kernels or tinyflow_cuda.kernels."""
        return kernel_module(self.xp)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = Device(other)
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __str__(self) -> str:
        return "cpu" if self.type == "cpu" else f"cuda:{self.index}"

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + ("" if self.index is None else f", index={self.index}") + ")"

    def stream(self) -> Any:
        """A context manager that gives the calling thread a stream of its own on this device.

        On ``cuda``: a new CUDA stream of this device, current for this thread inside the block
        and synchronized when it ends (how ``run_local`` puts thread ranks side by side on one
        GPU). On ``cpu``: nothing happens.
        """
        if self.type == "cpu":
            import contextlib

            return contextlib.nullcontext()
        from tinyflow_cuda import streams

        return streams.stream_context(self.index)



CPU = Device("cpu")


def array_module(arr: Any) -> ModuleType:
    """numpy for NumPy arrays (and Python scalars), cupy for CuPy arrays."""
    if isinstance(arr, (np.ndarray, np.generic, int, float, bool)):
        return np
    import tinyflow_cuda

    return tinyflow_cuda.array_module_of(arr)


_kernel_modules: dict[ModuleType, ModuleType] = {}


def kernel_module(xp: ModuleType) -> ModuleType:
    """The kernel module for arrays of array module ``xp``: the references for NumPy, the CUDA
    twins otherwise (imported on first use, so the CPU path never loads tinyflow_cuda)."""
    module = _kernel_modules.get(xp)
    if module is None:
        if xp is np:
            import tinyflow.kernels as module
        else:
            import tinyflow_cuda.kernels as module
        _kernel_modules[xp] = module
    return module


def kernels_of(arr: Any) -> ModuleType:
    """The kernel module of the device ``arr`` lives on (``ctx.kernels`` outside an op)."""
    return kernel_module(array_module(arr))


def catch_oom(op: str, shape: tuple[int, ...]) -> Any:
    """A context manager that turns a device out-of-memory error inside it into one that names
    ``op``, the ``shape`` and what to do (CUDA only: the CPU never raises one)."""
    import tinyflow_cuda

    return tinyflow_cuda.catch_oom(op, tuple(shape))


def device_of(arr: Any) -> Device:
    """The Device an array lives on."""
    if isinstance(arr, (np.ndarray, np.generic)):
        return CPU
    import tinyflow_cuda

    return Device("cuda", tinyflow_cuda.device_index_of(arr))


def to_host(arr: Any) -> np.ndarray:
    """``arr`` as a NumPy array: itself on the CPU, a host copy of a CuPy array."""
    return arr if isinstance(arr, np.ndarray) else move(arr, CPU)


def move(arr: Any, device: Device) -> Any:
    """Copy ``arr`` to ``device`` (no copy when it is already there)."""
    src = device_of(arr)
    if src == device:
        return arr
    if device.type == "cpu":
        import tinyflow_cuda

        return tinyflow_cuda.to_host(arr)
    import tinyflow_cuda

    return tinyflow_cuda.to_device(arr, device.index)


# ---- handing a buffer to another thread (thread ranks, each on its own stream) ----------------
def handoff(arr: Any) -> Any:
    """A private copy of ``arr`` for another thread to read with :func:`receive_handoff`.

    On the CPU it is a plain copy. For a CuPy array the copy is queued on this thread's stream
    and marked with an event, so another thread's stream can wait for it without either thread
    blocking (tinyflow_cuda.streams).
    """
    if isinstance(arr, np.ndarray):
        return arr.copy()
    from tinyflow_cuda import streams

    return streams.handoff(arr)


def receive_handoff(dst: Any, message: Any) -> None:
    """Copy a :func:`handoff` message into ``dst`` (same size; any shape) on this thread's stream."""
    if isinstance(message, np.ndarray):
        dst[...] = message.reshape(dst.shape)
        return
    from tinyflow_cuda import streams

    streams.receive(dst, message)
