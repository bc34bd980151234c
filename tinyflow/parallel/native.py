"""Native all-reduce: whatever the transport itself provides (MPI_Allreduce, ncclAllReduce).

The yardstick the hand-written algorithms are measured against. Bytes moved inside the
transport's own implementation are invisible to tinyflow, so ``bytes_sent`` does not grow.
"""
from __future__ import annotations

from typing import Any

from tinyflow.parallel.communicator import Communicator


def native_allreduce(buf: Any, comm: Communicator, segment_bytes: int | None = None) -> None:
    """Sum ``buf`` over all ranks in place with the transport's own all-reduce."""
    if comm.size == 1:
        return
    comm.native_allreduce(buf, "sum")
