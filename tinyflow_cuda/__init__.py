"""tinyflow's CUDA backend: the only package that knows CuPy exists.

It imports cleanly without CuPy or a GPU; ``is_available()`` then says False and any request
for a CUDA device raises a RuntimeError that says why.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any

_cupy: ModuleType | None = None
_reason: str | None = None


def _load() -> ModuleType | None:
    global _cupy, _reason
    if _cupy is not None or _reason is not None:
        return _cupy
    try:
        import cupy  # noqa: PLC0415

        if cupy.cuda.runtime.getDeviceCount() < 1:
            _reason = "CuPy is installed but no CUDA device is visible"
            return None
        _cupy = cupy
        _register(cupy)
    except Exception as exc:  # ImportError, CUDARuntimeError, ...
        _reason = f"CuPy could not be loaded ({type(exc).__name__}: {exc})"
    return _cupy


def _register(module: ModuleType) -> None:
    """Tell the reference kernels (tinyflow.kernels) that ``module.ndarray`` arrays are ``module``'s."""
    from tinyflow.kernels._cpu import register_array_module

    register_array_module(module.ndarray, module)


def is_available() -> bool:
    """True when CuPy imports and at least one CUDA device is visible."""
    return _load() is not None


def unavailable_reason() -> str | None:
    _load()
    return _reason


def _require() -> ModuleType:
    cp = _load()
    if cp is None:
        raise RuntimeError(
            f"CUDA is not available: {_reason}. Install the extra with "
            "`pip install \"tinyflow[cuda]\"` on a machine with an NVIDIA GPU, or use device='cpu'."
        )
    return cp


def device_count() -> int:
    cp = _load()
    return 0 if cp is None else cp.cuda.runtime.getDeviceCount()


def array_module(index: int | None = 0) -> ModuleType:
    """The CuPy module, after checking that device ``index`` exists."""
    cp = _require()
    n = cp.cuda.runtime.getDeviceCount()
    if index is not None and not 0 <= index < n:
        raise RuntimeError(f"device cuda:{index} does not exist: this machine has {n} CUDA device(s)")
    return cp


def array_module_of(arr: Any) -> ModuleType:
    cp = _load()
    if cp is not None and isinstance(arr, cp.ndarray):
        return cp
    raise TypeError(f"expected a NumPy or CuPy array, got {type(arr).__name__}")


def device_index_of(arr: Any) -> int:
    return int(arr.device.id)


def to_host(arr: Any) -> Any:
    return arr.get()


def is_capturing() -> bool:
    """Whether the current stream of this thread is capturing a CUDA graph.

    Defined here, beside ``to_device`` (which refuses host-to-device copies during a capture),
    rather than in graphs.py: graphs.py builds on this module, so this module does not import it.
    ``tinyflow_cuda.graphs.is_capturing`` is this function."""
    if not is_available():
        return False
    stream = _require().cuda.get_current_stream()
    return bool(stream.ptr not in (0, 1) and stream.is_capturing())


def to_device(arr: Any, index: int | None) -> Any:
    cp = array_module(index)
    if is_capturing():  # CuPy would record a copy from a staging buffer it recycles: stale at replay
        raise RuntimeError("a host-to-device copy inside a CUDA graph capture: the graph would replay "
                           "the copy of this step's host data forever; make the value a device tensor "
                           "before capturing (or a capture slot, tinyflow.capture.Capture)")
    with cp.cuda.Device(index or 0):
        return cp.asarray(arr)


# ---- synchronisation and memory statistics ---------------------------------------------------
def synchronize(index: int | None = None) -> None:
    """Wait until every kernel queued on device ``index`` (the current one when None) is done."""
    cp = _require()
    device = cp.cuda.Device() if index is None else cp.cuda.Device(index)
    device.synchronize()


class _PeakTracker:
    """CuPy's memory pool reports the bytes in use now, not a high-water mark; this keeps one.

    ``memory_allocated()`` and every tinyflow allocation check (catch_oom) update it, and the
    tensor code can call ``record_peak()`` after large allocations. It is exact for code that
    records, and a lower bound otherwise: use ``peak_reserved()`` (the pool's total bytes,
    which only grows until reset) as the upper bound.
    """

    def __init__(self) -> None:
        self.peak: dict[int, int] = {}

    def record(self, index: int, used: int) -> int:
        if used > self.peak.get(index, 0):
            self.peak[index] = used
        return self.peak.get(index, 0)


_peaks = _PeakTracker()


def _pool_for(index: int | None) -> tuple[Any, int]:
    cp = _require()
    device = cp.cuda.runtime.getDevice() if index is None else int(index)
    with cp.cuda.Device(device):
        return cp.get_default_memory_pool(), device


def memory_allocated(index: int | None = None) -> int:
    """Bytes of device memory held by live arrays on device ``index`` (CuPy's pool, used bytes)."""
    pool, device = _pool_for(index)
    used = int(pool.used_bytes())
    _peaks.record(device, used)
    return used


def memory_reserved(index: int | None = None) -> int:
    """Bytes the memory pool holds from the driver on device ``index`` (used + cached free)."""
    pool, _ = _pool_for(index)
    return int(pool.total_bytes())


def record_peak(index: int | None = None) -> int:
    """Fold the current usage into the peak and return the peak (cheap: no synchronisation)."""
    memory_allocated(index)
    return max_memory_allocated(index)


def max_memory_allocated(index: int | None = None) -> int:
    """The largest ``memory_allocated`` seen since the last ``reset_peak_memory_stats``.

    Also at least the pool's current usage. For benchmarks, ``peak_reserved`` after a warm-up
    step with a fresh pool is the robust figure (see bench/gpu).
    """
    pool, device = _pool_for(index)
    return _peaks.record(device, int(pool.used_bytes()))


def peak_reserved(index: int | None = None) -> int:
    """The pool's total bytes: every block it ever took from the driver and has not released."""
    return memory_reserved(index)


def reset_peak_memory_stats(index: int | None = None) -> None:
    """Restart the peak at the current usage, and return cached free blocks to the driver so
    that ``peak_reserved`` measures from here."""
    pool, device = _pool_for(index)
    pool.free_all_blocks()
    _peaks.peak[device] = int(pool.used_bytes())


def empty_cache(index: int | None = None) -> None:
    """Return the pool's cached free blocks to the driver (like torch.cuda.empty_cache)."""
    pool, _ = _pool_for(index)
    pool.free_all_blocks()


# ---- out of memory ---------------------------------------------------------------------------
class OutOfMemoryError(MemoryError):
    """A device allocation failed; the message names the op, the shape and what to do."""

    def __init__(self, message: str, op: str, shape: tuple[int, ...]):
        super().__init__(message)
        self.op = op
        self.shape = shape


def _format_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"


def oom_error(op_name: str, shape: Any, exc: BaseException | None = None) -> OutOfMemoryError:
    """Build the error for a failed allocation of ``shape`` in ``op_name`` (not raised here)."""
    shape_t = tuple(int(s) for s in shape) if shape is not None else ()
    held = ""
    if _cupy is not None:
        try:
            held = (f" The memory pool holds {_format_bytes(memory_allocated())} in live arrays "
                    f"({_format_bytes(memory_reserved())} reserved).")
        except Exception:  # the statistics must never mask the real error
            held = ""
    cause = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
    message = (
        f"{op_name}: CUDA out of memory while allocating a tensor of shape {shape_t}{cause}.{held} "
        "Reduce the batch size (e.g. --batch-size half of the current one), use --amp to halve "
        "activation memory, or free tensors you no longer need."
    )
    return OutOfMemoryError(message, op_name, shape_t)


@contextlib.contextmanager
def catch_oom(op: str, shape: Any) -> Iterator[None]:
    """Turn CuPy's OutOfMemoryError inside the block into :func:`oom_error`'s error.

    Without CuPy this only runs the block (NumPy's own MemoryError passes through untouched).
    """
    try:
        yield
    except OutOfMemoryError:
        raise
    except Exception as exc:  # CuPy's error classes are only known once CuPy is loaded
        if _is_device_oom(exc):
            raise oom_error(op, shape, exc) from exc
        raise


def _is_device_oom(exc: BaseException) -> bool:
    """True for CuPy's pool OutOfMemoryError and the runtime's cudaErrorMemoryAllocation."""
    if _cupy is None:
        return False
    oom_type = _cupy_oom_type()
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    runtime_error = getattr(_cupy.cuda.runtime, "CUDARuntimeError", None)
    return (runtime_error is not None and isinstance(exc, runtime_error)
            and ("out of memory" in str(exc).lower() or "MemoryAllocation" in str(exc)))


def _cupy_oom_type() -> type | None:
    if _cupy is None:
        return None
    return getattr(_cupy.cuda.memory, "OutOfMemoryError", None)
