"""The collective entry points: ``allreduce``, ``broadcast``, ``all_gather`` (+ objects, from gather.py).

``allreduce(array, comm, algorithm="auto", op="sum")`` picks one of the algorithm files (ring,
tree, naive, native) and runs it in place; ``op="mean"`` divides by the world size afterwards.
Arrays may be NumPy or CuPy arrays, or tinyflow Tensors (their ``.array``).

The algorithm names and their default are defined here once (``ALGORITHM_CHOICES``,
``DEFAULT_ALGORITHM``); DataParallel, ``tinyflow train --allreduce``, the benchmarks and
``tinyflow.distributed`` take them from here. ``auto``, the default, chooses per buffer size:
from the world's timed cost model when one was fitted (auto.py: ``DataParallel(...,
calibrate=True)``, ``tinyflow train``, ``tinyflow bench allreduce``), else by a fixed size rule
(``choose_by_size``), so that nothing is timed unless asked for.

Before the data of a new kind of buffer moves, the ranks check that they agree on its length,
dtype, op and algorithm (``agree_on_signature``): buffers that differ would otherwise give a
wrong sum or overrun a receive buffer inside MPI. The check is one small all-gather per distinct
signature and communicator, remembered, so a training loop pays it on its first step only
(after that, one dictionary look-up per call: under 1 us).
A disagreement is a ``RankMismatchError`` raised on every rank, naming both ranks' values.

``all_gather`` and ``all_gather_object`` live in gather.py, below this file and auto.py (which
both use them: auto.py must not import this file, which loads it); they are importable from here too.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from tinyflow.device import array_module, kernels_of, to_host
from tinyflow.dtypes import is_floating_or_complex
from tinyflow.parallel._segments import segment_bounds, segment_elements
from tinyflow.parallel.communicator import Communicator, RankMismatchError, has_native_allreduce
from tinyflow.parallel.gather import GATHER_TAG, all_gather, all_gather_object, raw_array  # noqa: F401
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
# What every ``algorithm=`` accepts (allreduce, DataParallel, tinyflow train --allreduce, the
# benchmarks): auto, the default (one of ring, tree, native per buffer size), or one algorithm.
ALGORITHM_CHOICES = ("auto", *ALGORITHMS)
DEFAULT_ALGORITHM = "auto"
# Below this many bytes a buffer is latency-bound: the size rule sends it down the tree.
SMALL_BUCKET_BYTES = 256 * 1024
OPS = ("sum", "mean")
SIGNATURE_TAG = 301


# Per communicator, the (length, dtype, op, algorithm) signatures every rank has agreed on.
_AGREED: weakref.WeakKeyDictionary[Communicator, set[tuple[int, Any, str, str]]] = weakref.WeakKeyDictionary()


def _is_contiguous(a: Any) -> bool:
    return bool(a.flags.c_contiguous)


def choose_by_size(nbytes: int, comm: Communicator) -> str:
    """The algorithm ``auto`` gives a buffer of ``nbytes`` bytes on a world without a timed cost
    model: a fixed rule, so that nothing is timed (PyTorch's DDP and Horovod start at once, too).
    In order:

    1. ``native`` whenever the transport has its own all-reduce (MPI_Allreduce, ncclAllReduce,
       ``run_local``'s shared-memory sum), at every size: those libraries pick their algorithm
       by size themselves, in compiled code, which is what DDP and Horovod rely on. On the CPU
       host of docs/allreduce.md, MPI's beat tinyflow's Python ring 5x at 4 KB and was the
       measured best up to 16 MB.
    2. ``tree`` for a buffer under ``SMALL_BUCKET_BYTES`` (256 KiB) on 4 or more ranks: such a
       buffer is latency-bound, and the tree sends 2*ceil(log2 N) messages where the ring sends
       2(N-1) (the ring-tree crossover of docs/allreduce.md's cost model is 63-281 KB for
       N = 4-16 on PCIe 3).
    3. ``ring`` otherwise: it sends the fewest bytes, 2(N-1)/N of the buffer per rank, and
       below 4 ranks it sends no more messages than the tree either.

    Every rank gets the same answer (same buffer sizes, same transport), so no rank needs to
    ask the others.
    """
    if has_native_allreduce(comm):
        return "native"
    if nbytes < SMALL_BUCKET_BYTES and comm.size >= 4:
        return "tree"
    return "ring"


def choose_algorithm(nbytes: int, comm: Communicator) -> str:
    """What ``auto`` runs for ``nbytes`` bytes on ``comm``: the timed cost model's choice when the
    world has one (``auto.calibrate`` fitted it), else ``choose_by_size``."""
    if getattr(comm, "allreduce_model", None) is not None:
        from tinyflow.parallel.auto import choose_algorithm as timed_choice  # loaded with the model

        return timed_choice(comm, nbytes)
    return choose_by_size(nbytes, comm)


def allreduce(
    array: Any,
    comm: Communicator,
    algorithm: str = DEFAULT_ALGORITHM,
    op: str = "sum",
    segment_bytes: int | None = None,
) -> Any:
    """Reduce ``array`` over every rank of ``comm`` in place and return it.

    ``algorithm`` is one of ``ALGORITHM_CHOICES`` (auto, ring, tree, naive, native); ``op`` is
    "sum" or "mean" (floating dtypes only). Every rank must call it with the same shape, dtype, algorithm and op.
    """
    if algorithm not in ALGORITHM_CHOICES:
        raise ValueError(
            f"allreduce: unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHM_CHOICES)}"
        )
    if op not in OPS:
        raise ValueError(f"allreduce: unknown op {op!r}; choose 'sum' or 'mean'")
    buf = raw_array(array)
    if op == "mean" and not is_floating_or_complex(buf.dtype):
        raise TypeError(
            f"allreduce(op='mean'): a {buf.dtype} buffer cannot hold a mean; "
            f"cast to a floating dtype or use op='sum'"
        )
    if comm.size > 1:
        agree_on_signature(buf, comm, op, algorithm)
    work = buf if _is_contiguous(buf) else buf.copy()  # algorithms need a flat view
    if algorithm == "auto":
        algorithm = choose_algorithm(work.nbytes, comm) if comm.size > 1 else "ring"
    ALGORITHMS[algorithm](work, comm, segment_bytes=segment_bytes)
    if op == "mean" and comm.size > 1:
        kernels_of(work).reduce_scale(work, 1.0 / comm.size)
    if work is not buf:
        buf[...] = work
    return array


def agree_on_signature(buf: Any, comm: Communicator, op: str, algorithm: str) -> None:
    """Check, once per signature and communicator, that every rank all-reduces a buffer of the
    same length and dtype with the same op and algorithm; raise RankMismatchError on every rank if not.

    The signature travels as five int64 on the buffer's own device (NCCL carries device memory
    only); its bytes are not counted in ``comm.bytes_sent``, which stays the payload's.
    """
    key = (buf.size, buf.dtype, op, algorithm)
    agreed = _AGREED.get(comm)
    if agreed is not None and key in agreed:  # the hot path: one look-up (~0.5 us)
        return
    mine = (int(buf.size), np.dtype(buf.dtype).name, op, algorithm)
    sent, count = comm.bytes_sent, comm.messages_sent
    try:
        encoded = array_module(buf).asarray(_encode_signature(mine))  # on the current device
        everyone = to_host(all_gather(encoded, comm, tag=SIGNATURE_TAG), "allreduce signature")
    finally:
        comm.bytes_sent, comm.messages_sent = sent, count
    signatures = [_decode_signature(row) for row in everyone]
    for rank, theirs in enumerate(signatures[1:], start=1):
        if theirs != signatures[0]:  # every rank sees the same table, so every rank raises this
            raise RankMismatchError(
                f"allreduce: the ranks disagree on the buffer: rank 0 has {_describe_signature(signatures[0])}, "
                f"rank {rank} has {_describe_signature(theirs)}; every rank must all-reduce the same length, "
                f"dtype, op and algorithm in the same order (ranks started with different options, "
                f"e.g. another --batch-size or model, go out of step)",
                rank=comm.rank, peer=rank if comm.rank == 0 else 0)
    _AGREED.setdefault(comm, set()).add(key)


def _encode_signature(signature: tuple[int, str, str, str]) -> np.ndarray:
    """(length, dtype name, op, algorithm) as five int64: the name's ASCII bytes take two."""
    length, dtype, op, algorithm = signature
    name = np.frombuffer(dtype.encode("ascii")[:16].ljust(16), dtype="<i8")
    return np.array([length, *name, OPS.index(op), ALGORITHM_CHOICES.index(algorithm)], dtype=np.int64)


def _decode_signature(row: np.ndarray) -> tuple[int, str, str, str]:
    length, op, algorithm = int(row[0]), int(row[3]), int(row[4])
    name = np.asarray(row[1:3], dtype="<i8").tobytes().decode("ascii", "replace").rstrip()
    op_name = OPS[op] if 0 <= op < len(OPS) else f"#{op}"
    algorithm_name = ALGORITHM_CHOICES[algorithm] if 0 <= algorithm < len(ALGORITHM_CHOICES) else f"#{algorithm}"
    return length, name, op_name, algorithm_name


def _describe_signature(signature: tuple[int, str, str, str]) -> str:
    length, dtype, op, algorithm = signature
    return f"{length:,} x {dtype} (op {op}, algorithm {algorithm})"


def broadcast(array: Any, comm: Communicator, root: int = 0, segment_bytes: int | None = None) -> Any:
    """Copy ``root``'s ``array`` into every rank's ``array`` (in place) down a binomial tree."""
    if not 0 <= root < comm.size:
        raise ValueError(f"broadcast: root {root} is outside a world of size {comm.size}")
    buf = raw_array(array)
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


def agree_on_values(values: dict[str, Any], comm: Communicator, what: str = "the values") -> None:
    """Check that every rank passes the same ``values`` (e.g. a run's options); otherwise raise
    RankMismatchError on every rank, naming the first key that differs and both ranks' values:
    "``what`` differ between ranks: rank 0 has --batch-size 8, rank 1 has --batch-size 16"."""
    everyone = all_gather_object(values, comm)
    reference = everyone[0]
    for rank, theirs in enumerate(everyone[1:], start=1):
        for key in sorted(set(reference) | set(theirs)):
            if reference.get(key) != theirs.get(key):
                raise RankMismatchError(
                    f"{what} differ between ranks: rank 0 has {key} {_show(reference.get(key))}, rank {rank} has "
                    f"{key} {_show(theirs.get(key))}; start every rank with the same {key}",
                    rank=comm.rank, peer=rank if comm.rank == 0 else 0)


def _show(value: Any) -> str:
    return "(not set)" if value is None else repr(value) if isinstance(value, str) else str(value)


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
