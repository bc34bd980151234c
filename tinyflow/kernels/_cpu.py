"""CPU helpers for the reference kernels: reusable scratch buffers and a small thread pool.

NumPy runs one ufunc or copy on one core, while BLAS uses them all, so the slab kernels (im2col,
col2im, pooling) split their work by channel over a few threads with ``parallel_for`` (NumPy
releases the GIL inside its copies and ufuncs). The number of threads follows
``TINYFLOW_NUM_THREADS``, else ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS``, else the CPUs this
process may use. ``workspace`` hands out per-thread scratch arrays reused from call to call (fresh
100 MB temporaries every step cost as much in page faults as the copies), on a GPU too.
"""
from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

import numpy as np

__all__ = ["array_module", "register_array_module", "workspace", "release_workspace", "take_buffer", "give_buffer",
           "tune_allocator", "num_threads", "set_num_threads", "parallel_for", "blas_threads", "batched_matmul"]


# ------------------------------------------------------------------------------- array modules
# The kernels are written against ``xp``, the module of their arrays. NumPy's is theirs; the CUDA
# backend (tinyflow_cuda) registers its array type when it loads CuPy or its stand-in, so these
# kernels never import the device layer (tinyflow/device.py), which imports them.
_array_modules: list[tuple[type, ModuleType]] = []


def register_array_module(array_type: type, module: ModuleType) -> None:
    """Arrays of ``array_type`` belong to ``module`` (tinyflow_cuda calls this for cupy.ndarray)."""
    _array_modules[:] = [(array_type, module)] + [(t, m) for t, m in _array_modules if t is not array_type]


def array_module(arr: Any) -> ModuleType:
    """numpy for NumPy arrays (and Python scalars), cupy for CuPy arrays."""
    if isinstance(arr, (np.ndarray, np.generic, int, float, bool)):
        return np
    for array_type, module in _array_modules:
        if isinstance(arr, array_type):
            return module
    raise TypeError(f"expected a NumPy or CuPy array, got {type(arr).__name__}")


def device_key(arr: Any) -> int:
    """The CUDA device a (CuPy) array lives on, as a key for per-device buffers."""
    return int(arr.device.id)


# ------------------------------------------------------------------------------- workspace
class _Workspace(threading.local):
    """Grow-only scratch buffers, one per name, dtype and device, private to each thread."""

    def __init__(self) -> None:
        self.buffers: dict[tuple[str, Any, Any], Any] = {}


_workspace = _Workspace()


def workspace(xp: Any, name: str, shape: tuple[int, ...], dtype: Any, like: Any = None) -> Any:
    """A C-contiguous scratch array of ``shape``, valid until the next request for ``name`` (with
    this dtype, on this device) in this thread; grown when a larger one is asked for.

    For CuPy pass ``like``, an array on the buffer's device (without it, a fresh array each time).
    Reuse is safe on a GPU because a thread's kernels run in order on its stream; a thread that
    moves to another stream between two uses must synchronize first.
    """
    if xp is np:
        device = None
    elif like is None:
        return xp.empty(shape, dtype=dtype)
    else:
        device = device_key(like)
    size = math.prod(shape)
    key = (name, np.dtype(dtype), device)
    buf = _workspace.buffers.get(key)
    if buf is None or buf.size < size:
        buf = _workspace.buffers[key] = None  # drop the smaller one first: a GPU pool reuses its block
        buf = _workspace.buffers[key] = xp.empty(size, dtype=dtype)
    return buf[:size].reshape(shape)


def release_workspace() -> None:
    """Free this thread's scratch buffers and the recycled saved buffers (re-created on demand)."""
    _workspace.buffers.clear()
    with _recycled_lock:
        _recycled.clear()


# ------------------------------------------------------------------------------- recycled buffers
# Arrays an op saves from forward for its backward (which a workspace cannot hold: other layers
# run in between) and hands back when backward is done. The next step's forward takes them
# again, so a large saved array costs no fresh allocation and no page faults per step.
_recycled: dict[tuple[tuple[int, ...], Any], list[np.ndarray]] = {}
_recycled_lock = threading.Lock()
_MAX_RECYCLED = 4  # per shape and dtype: bounds what sits unused between steps


def take_buffer(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A NumPy array of ``shape`` (contents undefined): a recycled one if there is one."""
    key = (tuple(shape), np.dtype(dtype))
    with _recycled_lock:
        free = _recycled.get(key)
        if free:
            return free.pop()
    return np.empty(shape, dtype=dtype)


def give_buffer(buf: np.ndarray) -> None:
    """Hand back an array from :func:`take_buffer` that nothing references any more."""
    key = (buf.shape, buf.dtype)
    with _recycled_lock:
        free = _recycled.setdefault(key, [])
        if len(free) < _MAX_RECYCLED:
            free.append(buf)


# ------------------------------------------------------------------------------- the allocator
TRIM_THRESHOLD = 1 << 30  # bytes of free heap glibc may keep instead of returning them to the OS
MMAP_THRESHOLD = 32 << 20  # blocks above this still come from mmap (glibc's largest allowed value)


def tune_allocator() -> bool:
    """Let glibc's malloc keep freed memory for the next step instead of returning it to the OS.

    By default glibc serves blocks above 128 KB-32 MB from fresh mmaps and trims freed heap at
    128 KB, so each step page-faults its temporaries in again (10-15 % of an LSTM or MNIST-CNN step
    on the CPU); ``mallopt`` raises both thresholds. Called once when tinyflow is imported; skipped
    where the user set a ``MALLOC_*`` variable, with ``TINYFLOW_TUNE_MALLOC=0``, and off glibc.
    Returns whether it applied.
    """
    import ctypes
    import ctypes.util
    import platform

    if os.environ.get("TINYFLOW_TUNE_MALLOC", "1") == "0" or platform.system() != "Linux":
        return False
    if any(k.startswith("MALLOC_") for k in os.environ) or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's malloc.h
    return bool(mallopt(m_mmap_threshold, MMAP_THRESHOLD)) and bool(mallopt(m_trim_threshold, TRIM_THRESHOLD))


# ------------------------------------------------------------------------------- threads
_set_threads: int | None = None  # tinyflow.set_num_threads(n), which overrides the environment
_set_blas_threads: int | None = None


def set_num_threads(n: int) -> None:
    """``torch.set_num_threads``: the threads of tinyflow's CPU kernels and of NumPy's OpenBLAS
    (through OpenBLAS's own ``openblas_set_num_threads``, found among the loaded libraries)."""
    global _set_threads, _set_blas_threads
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive integer, got {n!r}")
    _set_threads = n
    setter = _openblas_setter()
    if setter is not None:
        setter(n)
        _set_blas_threads = n


def _openblas_setter() -> Callable[[int], None] | None:
    """OpenBLAS's set-threads entry point in this process (NumPy's scipy-openblas or a system
    OpenBLAS), or None where it cannot be found (another BLAS, or not Linux)."""
    found = _openblas_functions()
    return None if found is None else found[0]


def openblas_threads() -> int | None:
    """The threads NumPy's OpenBLAS says it uses now (``openblas_get_num_threads``), or None."""
    found = _openblas_functions()
    return None if found is None else found[1]()


def _openblas_functions() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    """(set, get) of the number of threads of the loaded OpenBLAS (NumPy's, where several are)."""
    import ctypes

    np.dot(np.ones((2, 2)), np.ones((2, 2)))  # NumPy loads its BLAS lazily on some builds
    paths = []
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                fields = line.split()
                name = os.path.basename(fields[-1]).lower() if len(fields) >= 6 else ""
                if "openblas" in name and ".so" in name and fields[-1] not in paths:
                    paths.append(fields[-1])
    except OSError:
        return None
    for path in sorted(paths, key=lambda p: "numpy" not in p):  # NumPy's own first (SciPy may bring one)
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_openblas", "64_"), ("scipy_openblas", ""), ("openblas", "64_"), ("openblas", "")):
            setter = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
            getter = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
            if setter is not None and getter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                return (lambda n, fn=setter: fn(int(n))), (lambda fn=getter: int(fn()))
    return None


def _threads_from_environment(variables: tuple[str, ...]) -> int:
    """The first positive integer among ``variables``, else the CPUs this process may use."""
    for var in variables:
        value = os.environ.get(var, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def num_threads() -> int:
    """Threads the CPU kernels may use (see the module docstring)."""
    if _set_threads is not None:
        return _set_threads
    return _threads_from_environment(("TINYFLOW_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"))


_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()
MIN_CHUNK = 1 << 16  # elements; below this a thread handoff costs more than it saves


def _forget_pool() -> None:
    """In a forked child the pool's threads do not exist: start a new pool on demand."""
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _executor(workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < workers:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tinyflow-cpu")
            _pool_size = workers
        return _pool


def parallel_for(xp: Any, n: int, body: Callable[[int, int], None], work: int = 0) -> None:
    """Run ``body(start, stop)`` over contiguous chunks of ``range(n)`` on several threads (the
    caller runs the last); chunks must write disjoint memory. Small loops (``work``: the elements
    the loop touches) and non-NumPy arrays (CuPy queues its work anyway) run inline."""
    threads = min(num_threads(), n, max(1, work // MIN_CHUNK)) if xp is np else 1
    if threads <= 1:
        body(0, n)
        return
    bounds = [n * t // threads for t in range(threads + 1)]
    pool = _executor(threads - 1)
    futures = [pool.submit(body, bounds[t], bounds[t + 1]) for t in range(threads - 1)]
    body(bounds[-2], bounds[-1])
    for f in futures:
        f.result()


def blas_threads() -> int:
    """The threads NumPy's BLAS runs each call on, as OpenBLAS reads its environment at start
    (``OPENBLAS_NUM_THREADS``, else ``OMP_NUM_THREADS``), else the CPUs this process may use;
    after ``tinyflow.set_num_threads(n)``, n."""
    if _set_blas_threads is not None:
        return _set_blas_threads
    return _threads_from_environment(("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"))


def batched_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[i] = a[i] @ b[i]`` for a batch of independent GEMMs (NumPy arrays).

    Where BLAS runs single-threaded and the kernels have threads, the batch is split over the
    pool (one handoff, not one BLAS fork/join per GEMM); otherwise one ``np.matmul``, threaded by
    BLAS: two threaded BLAS calls at once would oversubscribe the cores.
    """
    if blas_threads() == 1 and num_threads() > 1 and len(out) > 1:
        def part(i0: int, i1: int) -> None:
            np.matmul(a[i0:i1], b[i0:i1], out=out[i0:i1])

        parallel_for(np, len(out), part, work=out.size + a.size + b.size)
    else:
        np.matmul(a, b, out=out)
    return out
