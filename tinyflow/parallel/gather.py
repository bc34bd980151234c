"""All-gather: every rank's array (``all_gather``) or picklable object (``all_gather_object``).

A file of its own, below allreduce.py and auto.py, because both need it: ``allreduce`` checks
that the ranks agree on a buffer with one small all-gather, and auto.py's calibration gathers
each rank's timings so that every rank holds the same table. allreduce.py (the entry points,
which load auto.py for ``algorithm="auto"``) re-exports both names, where they have always been.
"""
from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from tinyflow.device import array_module
from tinyflow.parallel.communicator import Communicator

GATHER_TAG = 300

__all__ = ["GATHER_TAG", "all_gather", "all_gather_object", "raw_array"]


def raw_array(array: Any) -> Any:
    """The raw ndarray behind a Tensor (or the array itself)."""
    raw = getattr(array, "array", None)
    if raw is not None and hasattr(raw, "dtype") and not isinstance(array, np.ndarray):
        return raw
    return array


def all_gather(array: Any, comm: Communicator, tag: int = GATHER_TAG) -> Any:
    """Gather every rank's ``array`` (same shape everywhere) into a new (size, *shape) array.

    Ring all-gather: N-1 steps, each rank passing along the block it received last.
    """
    buf = raw_array(array)
    xp = array_module(buf)
    out = xp.empty((comm.size, *buf.shape), dtype=buf.dtype)  # (N, *shape)
    out[comm.rank] = buf
    n, rank = comm.size, comm.rank
    for step in range(n - 1):
        send, recv = (rank - step) % n, (rank - step - 1) % n
        comm.sendrecv(out[send], (rank + 1) % n, out[recv], (rank - 1) % n, tag)
    return out


def all_gather_object(obj: Any, comm: Communicator) -> list[Any]:
    """Gather one picklable object from every rank; every rank gets the list in rank order."""
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    lengths = all_gather(np.array([payload.size], dtype=np.int64), comm)[:, 0]
    padded = np.zeros(int(lengths.max()), dtype=np.uint8)
    padded[: payload.size] = payload
    gathered = all_gather(padded, comm)  # (N, max_len)
    return [pickle.loads(gathered[r, : int(lengths[r])].tobytes()) for r in range(comm.size)]
