"""The stand-in's memory pools and the allocator in force (CuPy's ``cupy.cuda.memory``:
``MemoryPool``, ``get_default_memory_pool()``, ``using_allocator``).

Arrays live in NumPy's memory, so a pool holds nothing outside a capture; during one, each
allocation comes from the pool of the allocator in force (graph.py's ``Recording.allocate``),
from blocks of that pool's own. Below graph.py (which allocates) and cuda.py (which offers these
names as ``cupy.cuda``'s), above array.py (whose ``_MemoryPointer`` a ``malloc`` returns).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from cuda_tools.strict_cupy.array import _MemoryPointer


class MemoryPool:
    """``cupy.cuda.MemoryPool()`` and ``cupy.get_default_memory_pool()``: arrays live in NumPy's
    memory, so a pool holds nothing; ``malloc`` is an allocator for ``using_allocator``, and
    ``captured_bytes`` adds up what captures allocated from this pool (stand-in only)."""

    def __init__(self, allocator: Any = None) -> None:
        self.captured_bytes = 0
        self.captured_allocations = 0

    def malloc(self, size: int) -> Any:
        """An allocation of ``size`` bytes (the stand-in's arrays take NumPy memory instead)."""
        return _MemoryPointer(np.empty(int(size), dtype=np.uint8))

    ARENA_CHUNK = 1 << 22  # bytes of each block a pool takes for captures

    def _capture_array(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """An array for a capture, from this pool's own blocks (kept for the pool's life, never
        reused): as on a GPU, what a captured step allocates never has the address of an array
        made before the capture, so a table cached by address misses, as it would there."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        self.captured_bytes += nbytes
        self.captured_allocations += 1
        if nbytes == 0:
            return np.empty(shape, dtype=dtype)
        size = -(-nbytes // 256) * 256
        chunks = self.__dict__.setdefault("_chunks", [])
        if not chunks or chunks[-1][1] + size > chunks[-1][0].size:
            chunks.append([np.empty(max(size, self.ARENA_CHUNK), dtype=np.uint8), 0])
        chunk = chunks[-1]
        block = chunk[0][chunk[1]:chunk[1] + nbytes]
        chunk[1] += size
        return block.view(dtype).reshape(shape)

    def used_bytes(self) -> int:
        return 0

    def total_bytes(self) -> int:
        return 0

    def free_bytes(self) -> int:
        return 0

    def free_all_blocks(self, stream: Any = None) -> None:
        return None

    def set_limit(self, size: int | None = None, fraction: float | None = None) -> None:
        return None


_pool = MemoryPool()


def get_default_memory_pool() -> MemoryPool:
    return _pool


# ---- the allocator in force ---------------------------------------------------------------------
class _Allocator(threading.local):
    current: Callable[[int], Any] | None = None  # this thread's allocator (using_allocator), None: the default pool


_allocator = _Allocator()


@contextmanager
def using_allocator(allocator: Callable[[int], Any] | None = None) -> Iterator[None]:
    """``cupy.cuda.using_allocator``: ``allocator`` serves this thread's allocations in the block."""
    previous, _allocator.current = _allocator.current, allocator
    try:
        yield
    finally:
        _allocator.current = previous


def allocator_owner() -> Any:
    """The pool the allocator in force draws from (the default pool when none is set)."""
    current = _allocator.current
    if current is None:
        return get_default_memory_pool()
    return getattr(current, "__self__", current)  # a pool's bound malloc: the pool
