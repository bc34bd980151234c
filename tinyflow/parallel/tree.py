"""Tree all-reduce: reduce pairwise up a binomial tree to rank 0, then broadcast back down.

Round k pairs rank r (with bit k set and no lower bits) with rank r - 2^k, which adds r's
data into its own: after ceil(log2 N) rounds rank 0 holds the sum (Caffe's multi-GPU scheme).
The result then flows down the same tree. Large buffers are cut into segments that stream
through the tree: a leaf sends segment j+1 while its parent forwards segment j. Latency is
2 log2(N) messages instead of the ring's 2(N-1), but the root link carries the whole buffer
log2(N) times, so the ring wins on large buffers and the tree on small ones.
"""
from __future__ import annotations

from typing import Any

from tinyflow.device import array_module, kernels_of
from tinyflow.parallel._segments import segment_bounds, segment_elements
from tinyflow.parallel.communicator import Communicator

REDUCE_TAG = 100
BROADCAST_TAG = 101


def tree_links(rank: int, size: int, root: int = 0) -> tuple[int | None, list[int]]:
    """The parent (None at the root) and children of ``rank`` in the binomial tree at ``root``.

    Children are listed in the order their data arrives during the reduction (nearest first).
    """
    rel = (rank - root) % size
    parent = None
    children = []
    mask = 1
    while mask < size:
        if rel & mask:
            parent = (rel - mask + root) % size
            break
        if rel + mask < size:
            children.append((rel + mask + root) % size)
        mask <<= 1
    return parent, children


def tree_allreduce(buf: Any, comm: Communicator, segment_bytes: int | None = None) -> None:
    """Sum the contiguous array ``buf`` over all ranks, in place, with the binomial tree."""
    if comm.size == 1:
        return
    flat = buf.reshape(-1)
    parent, children = tree_links(comm.rank, comm.size)
    segments = segment_bounds(0, flat.size, segment_elements(flat, segment_bytes))
    if children and segments:
        tmp = array_module(flat).empty(segments[0][1] - segments[0][0], dtype=flat.dtype)
    for a, b in segments:  # reduce up the tree, one segment at a time
        for child in children:
            part = tmp[: b - a]
            comm.recv(part, child, REDUCE_TAG)
            kernels_of(flat).reduce_add(flat[a:b], part)
        if parent is not None:
            comm.send(flat[a:b], parent, REDUCE_TAG)
    tree_broadcast_flat(flat, comm, segments, parent, children)


def tree_broadcast_flat(
    flat: Any,
    comm: Communicator,
    segments: list[tuple[int, int]],
    parent: int | None,
    children: list[int],
) -> None:
    """Stream ``flat`` down the tree from its root, farthest subtree first."""
    for a, b in segments:
        if parent is not None:
            comm.recv(flat[a:b], parent, BROADCAST_TAG)
        for child in reversed(children):
            comm.send(flat[a:b], child, BROADCAST_TAG)
