"""Devices and the array module (``xp``) that serves each one.

A tensor's data is a NumPy array on the CPU or a CuPy array on a GPU. Ops never name either
library: they ask for ``array_module(arr)`` (or ``ctx.xp`` inside a Function) and write the
same code against it. Everything that knows CUDA lives in ``tinyflow_cuda``; this module only
asks it for the CuPy module when a ``cuda`` device is requested.
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


CPU = Device("cpu")


def array_module(arr: Any) -> ModuleType:
    """numpy for NumPy arrays (and Python scalars), cupy for CuPy arrays."""
    if isinstance(arr, (np.ndarray, np.generic, int, float, bool)):
        return np
    import tinyflow_cuda

    return tinyflow_cuda.array_module_of(arr)


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
