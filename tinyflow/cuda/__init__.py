"""``tinyflow.cuda``: the device questions PyTorch programs ask of ``torch.cuda``.

``tf.cuda.is_available()`` and ``tf.cuda.device_count()`` answer from the CUDA backend
(``tinyflow_cuda``, reached through tinyflow/device.py), so the usual
``device = "cuda" if tf.cuda.is_available() else "cpu"`` picks the GPU exactly where one works.
Random numbers are always drawn on the host from tinyflow's one generator, so the CUDA seeding
calls only have to exist; ``amp`` is ``torch.cuda.amp``'s pair (autocast, GradScaler), which
like PyTorch's turns itself off with a warning where CUDA is not available. CUDA graphs
(``CUDAGraph``, ``graph``, ``make_graphed_callables``) are in ``tinyflow.cuda.graphs``.
"""
from __future__ import annotations

from typing import Any

from tinyflow.cuda import amp  # noqa: F401  (torch.cuda.amp: autocast, GradScaler)
from tinyflow.cuda.graphs import (
    CUDAGraph,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
    make_graphed_callables,
)
from tinyflow.device import Device, cuda_backend

__all__ = [
    "is_available", "device_count", "current_device", "set_device", "get_device_name",
    "get_device_capability", "is_bf16_supported", "synchronize", "empty_cache",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "reset_peak_memory_stats",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "amp",
    "CUDAGraph", "graph", "graph_pool_handle", "is_current_stream_capturing", "make_graphed_callables",
]


def is_available() -> bool:
    """True when CuPy loads and at least one CUDA device is visible."""
    return bool(cuda_backend().is_available())


def device_count() -> int:
    return int(cuda_backend().device_count())


def _require(what: str) -> None:
    if not is_available():
        raise RuntimeError(f"tinyflow.cuda.{what}: CUDA is not available "
                           f"({cuda_backend().unavailable_reason()}); use device='cpu'")


def _index(device: Any) -> int:
    """The CUDA device index named by None (device 0), an int, 'cuda:N' or a Device."""
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    d = Device(device)
    if d.type != "cuda":
        raise ValueError(f"tinyflow.cuda: expected a CUDA device, got {device!r}")
    return d.index


def current_device() -> int:
    """The index of the current CUDA device (tinyflow names devices explicitly: always 0)."""
    _require("current_device()")
    return 0


def set_device(device: Any) -> None:
    """Accepted for compatibility: tinyflow puts tensors where ``device=`` / ``.to()`` say."""
    index = _index(device)
    if index >= 0:
        _require(f"set_device({device!r})")


def get_device_name(device: Any = None) -> str:
    _require("get_device_name()")
    cp = Device("cuda", _index(device)).xp
    props = cp.cuda.runtime.getDeviceProperties(_index(device))
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def get_device_capability(device: Any = None) -> tuple[int, int]:
    _require("get_device_capability()")
    cp = Device("cuda", _index(device)).xp
    props = cp.cuda.runtime.getDeviceProperties(_index(device))
    return int(props["major"]), int(props["minor"])


def is_bf16_supported() -> bool:
    return is_available() and get_device_capability()[0] >= 8


def synchronize(device: Any = None) -> None:
    """Wait for every kernel queued on the device (an error without CUDA, as PyTorch)."""
    cuda_backend().synchronize(None if device is None else _index(device))


def empty_cache() -> None:
    """Give cached blocks of device memory back (nothing to do without CUDA, as PyTorch)."""
    if is_available():
        cuda_backend().empty_cache()


def _memory(name: str, device: Any) -> int:
    if not is_available():
        return 0
    return int(getattr(cuda_backend(), name)(_index(device)))


def memory_allocated(device: Any = None) -> int:
    """Bytes held by tensors on the device; 0 without CUDA."""
    return _memory("memory_allocated", device)


def max_memory_allocated(device: Any = None) -> int:
    return _memory("max_memory_allocated", device)


def memory_reserved(device: Any = None) -> int:
    return _memory("memory_reserved", device)


def reset_peak_memory_stats(device: Any = None) -> None:
    if is_available():
        cuda_backend().reset_peak_memory_stats(_index(device))


def manual_seed(seed: int) -> None:
    """Nothing to seed: every random draw happens on the host (seed with ``tf.manual_seed``)."""
    int(seed)


def manual_seed_all(seed: int) -> None:
    int(seed)


def seed() -> None:
    """Nothing to seed: see ``manual_seed``."""


def seed_all() -> None:
    """Nothing to seed: see ``manual_seed``."""

