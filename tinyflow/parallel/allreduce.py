"""The collective entry points: ``allreduce``, ``broadcast``, ``all_gather`` (+ objects).

``allreduce(array, comm, algorithm="ring", op="sum")`` picks one of the algorithm files
(ring, tree, naive, native, or auto: one of ring, tree and native chosen per size by a cost
model fitted once per world) and runs it in place; ``op="mean"`` divides by the world size
afterwards. Arrays may be NumPy or CuPy arrays, or tinyflow Tensors (their ``.array``).
"""
from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np

from tinyflow.device import array_module, kernels_of
from tinyflow.dtypes import is_floating_or_complex
from tinyflow.parallel._segments import segment_bounds, segment_elements
from tinyflow.parallel.auto import algorithm_function
from tinyflow.parallel.communicator import Communicator
from tinyflow.parallel.naive import naive_allreduce
from tinyflow.parallel.native import native_allreduce
from tinyflow.parallel.ring import ring_allreduce
from tinyflow.parallel.tree import tree_allreduce, tree_broadcast_flat, tree_links

ALGORITHMS: dict[str, Callable[..., None]] = {
    "ring": ring_allreduce,
    "tree": tree_allreduce,
    "naive": naive_allreduce,
    "native": native_allreduce,
}
# What ``algorithm=`` accepts: the four algorithms, and auto (one of ring, tree, native per size).
ALGORITHM_CHOICES = (*ALGORITHMS, "auto")
OPS = ("sum", "mean")
GATHER_TAG = 300


def _raw(array: Any) -> Any:
    """The raw ndarray behind a Tensor (or the array itself)."""
    raw = getattr(array, "array", None)
    if raw is not None and hasattr(raw, "dtype") and not isinstance(array, np.ndarray):
        return raw
    return array


def _is_contiguous(a: Any) -> bool:
    return bool(a.flags.c_contiguous)


def allreduce(
    array: Any,
    comm: Communicator,
    algorithm: str = "ring",
    op: str = "sum",
    segment_bytes: int | None = None,
) -> Any:
    """Reduce ``array`` over every rank of ``comm`` in place and return it.

    ``algorithm`` is one of ring, tree, naive, native, auto; ``op`` is "sum" or "mean" (floating
    dtypes only). Every rank must call it with the same shape, dtype, algorithm and op.
    """
    if algorithm not in ALGORITHM_CHOICES:
        raise ValueError(
            f"allreduce: unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHM_CHOICES)}"
        )
    if op not in OPS:
        raise ValueError(f"allreduce: unknown op {op!r}; choose 'sum' or 'mean'")
    buf = _raw(array)
    if op == "mean" and not is_floating_or_complex(buf.dtype):
        raise TypeError(
            f"allreduce(op='mean'): a {buf.dtype} buffer cannot hold a mean; "
            f"cast to a floating dtype or use op='sum'"
        )
    work = buf if _is_contiguous(buf) else buf.copy()  # algorithms need a flat view
    if algorithm != "auto":
        ALGORITHMS[algorithm](work, comm, segment_bytes=segment_bytes)
    elif comm.size > 1:
        algorithm_function(comm, work)(work, comm, segment_bytes=segment_bytes)
    if op == "mean" and comm.size > 1:
        kernels_of(work).reduce_scale(work, 1.0 / comm.size)
    if work is not buf:
        buf[...] = work
    return array


def broadcast(array: Any, comm: Communicator, root: int = 0, segment_bytes: int | None = None) -> Any:
    """Copy ``root``'s ``array`` into every rank's ``array`` (in place) down a binomial tree."""
    if not 0 <= root < comm.size:
        raise ValueError(f"broadcast: root {root} is outside a world of size {comm.size}")
    buf = _raw(array)
    if comm.size == 1:
        return array
    work = buf if _is_contiguous(buf) else buf.copy()
    flat = work.reshape(-1)
    parent, children = tree_links(comm.rank, comm.size, root)
    segments = segment_bounds(0, flat.size, segment_elements(flat, segment_bytes))
    tree_broadcast_flat(flat, comm, segments, parent, children)
    if work is not buf:
        buf[...] = work
    return array


def all_gather(array: Any, comm: Communicator) -> Any:
    """Gather every rank's ``array`` (same shape everywhere) into a new (size, *shape) array.

    Ring all-gather: N-1 steps, each rank passing along the block it received last.
    """
    buf = _raw(array)
    xp = array_module(buf)
    out = xp.empty((comm.size, *buf.shape), dtype=buf.dtype)  # (N, *shape)
    out[comm.rank] = buf
    n, rank = comm.size, comm.rank
    for step in range(n - 1):
        send, recv = (rank - step) % n, (rank - step - 1) % n
        comm.sendrecv(out[send], (rank + 1) % n, out[recv], (rank - 1) % n, GATHER_TAG)
    return out


def all_gather_object(obj: Any, comm: Communicator) -> list[Any]:
    """Gather one picklable object from every rank; every rank gets the list in rank order."""
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    lengths = all_gather(np.array([payload.size], dtype=np.int64), comm)[:, 0]
    padded = np.zeros(int(lengths.max()), dtype=np.uint8)
    padded[: payload.size] = payload
    gathered = all_gather(padded, comm)  # (N, max_len)
    return [pickle.loads(gathered[r, : int(lengths[r])].tobytes()) for r in range(comm.size)]


def average_metrics(metrics: dict[str, float], comm: Communicator | None) -> dict[str, float]:
    """Average scalar metrics (loss, accuracy, ...) over all ranks; every rank gets the result.

    Every rank must pass the same keys. With no communicator (one process) it returns a copy.
    """
    if comm is None or comm.size == 1:
        return dict(metrics)
    keys = sorted(metrics)
    values = np.array([float(metrics[k]) for k in keys], dtype=np.float64)
    allreduce(values, comm, algorithm="ring", op="mean")
    return dict(zip(keys, values.tolist()))
