"""Naive all-reduce: gather every buffer to rank 0, sum there on the host, send the sum back.

The baseline the seeds blame for poor scaling: rank 0 receives and sends N-1 whole buffers,
so its link carries 2(N-1) buffers per all-reduce while every other rank's link idles most of
the time. Time grows linearly with N, where the ring's stays nearly flat.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.device import device_of, move, to_host
from tinyflow.parallel.communicator import Communicator

GATHER_TAG = 200
SCATTER_TAG = 201


def naive_allreduce(buf: Any, comm: Communicator, segment_bytes: int | None = None) -> None:
    """Sum ``buf`` over all ranks in place by gathering to rank 0 (``segment_bytes`` unused)."""
    if comm.size == 1:
        return
    flat = buf.reshape(-1)
    host = to_host(flat)
    if comm.rank == 0:
        total = host.copy()
        incoming = np.empty_like(host)
        for source in range(1, comm.size):
            comm.recv(incoming, source, GATHER_TAG)
            total += incoming
        for dest in range(1, comm.size):
            comm.send(total, dest, SCATTER_TAG)
    else:
        comm.send(host, 0, GATHER_TAG)
        total = np.empty_like(host)
        comm.recv(total, 0, SCATTER_TAG)
    flat[...] = total if host is flat else move(total, device_of(flat))
