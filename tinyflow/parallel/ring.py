"""Ring all-reduce: reduce-scatter then all-gather around a ring, 2(N-1) steps.

The buffer is cut into N chunks. In reduce-scatter step s, rank r sends chunk (r - s) to its
right neighbour and adds the chunk (r - s - 1) arriving from its left; after N-1 steps rank r
holds the full sum of chunk (r + 1). All-gather then passes the finished chunks around the
ring for N-1 more steps. Each rank sends 2(N-1) chunks, i.e. 2(N-1)/N of the buffer whatever
N is: the bandwidth optimum. Each chunk travels in segments, so the temporary buffer stays
small and the neighbour starts reducing before the whole chunk has arrived.
"""
from __future__ import annotations

from typing import Any

from tinyflow.device import array_module
from tinyflow.parallel._segments import chunk_bounds, exchange, segment_elements
from tinyflow.parallel.communicator import Communicator


def ring_allreduce(buf: Any, comm: Communicator, segment_bytes: int | None = None) -> None:
    """Sum the contiguous array ``buf`` over all ranks, in place, with the ring algorithm."""
    n, rank = comm.size, comm.rank
    if n == 1:
        return
    flat = buf.reshape(-1)  # a view: buf is contiguous
    chunks = chunk_bounds(flat.size, n)
    segment = segment_elements(flat, segment_bytes)
    length = min(segment, chunks[0][1] - chunks[0][0]) or 1  # chunk 0 is the longest
    xp = array_module(flat)
    tmps = (xp.empty(length, dtype=flat.dtype), xp.empty(length, dtype=flat.dtype))  # double buffer
    right, left = (rank + 1) % n, (rank - 1) % n
    for step in range(n - 1):  # reduce-scatter
        send, recv = chunks[(rank - step) % n], chunks[(rank - step - 1) % n]
        exchange(comm, flat, send, right, recv, left, tmps, segment, tag=step, reduce=True)
    for step in range(n - 1):  # all-gather: rank r starts with the finished chunk r + 1
        send, recv = chunks[(rank + 1 - step) % n], chunks[(rank - step) % n]
        exchange(comm, flat, send, right, recv, left, tmps, segment, tag=n + step, reduce=False)


def ring_bytes_sent(length: int, itemsize: int, rank: int, size: int) -> int:
    """Exact bytes rank ``rank`` sends in one ring all-reduce of ``length`` elements.

    Reduce-scatter sends every chunk except chunk (rank + 1), all-gather every chunk except
    chunk (rank + 2); with L = length and c_i the chunk lengths this is
    ``itemsize * (2 L - c[(rank+1) % N] - c[(rank+2) % N])``, which is exactly
    ``2 (N-1)/N * L * itemsize`` when N divides L; summed over ranks it is always
    ``2 (N-1) L * itemsize``.
    """
    if size == 1:
        return 0
    chunks = [b - a for a, b in chunk_bounds(length, size)]
    return itemsize * (2 * length - chunks[(rank + 1) % size] - chunks[(rank + 2) % size])
