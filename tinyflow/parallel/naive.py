"""Naive all-reduce: gather every buffer to rank 0, sum there on the host, send the sum back.

The baseline the seeds blame for poor scaling: rank 0 receives and sends N-1 whole buffers,
so its link carries 2(N-1) buffers per all-reduce while every other rank's link idles most of
the time. Time grows linearly with N, where the ring's stays nearly flat.

Messages travel in the buffer's own memory (device buffers stay device buffers, which NCCL
needs); only rank 0 stages through the host, with ``tinyflow.device.to_host`` / ``move``, to do
the sum there. Transports that carry host memory only (MPI) stage device buffers themselves.
"""
from __future__ import annotations

from typing import Any

from tinyflow.device import array_module, device_of, move, to_host
from tinyflow.parallel.communicator import Communicator

GATHER_TAG = 200
SCATTER_TAG = 201


def naive_allreduce(buf: Any, comm: Communicator, segment_bytes: int | None = None) -> None:
    """Sum ``buf`` over all ranks in place by gathering to rank 0 (``segment_bytes`` unused)."""
    if comm.size == 1:
        return
    flat = buf.reshape(-1)
    if comm.rank != 0:
        comm.send(flat, 0, GATHER_TAG)
        comm.recv(flat, 0, SCATTER_TAG)
        return
    host = to_host(flat)
    total = host.copy() if host is flat else host  # the host sum, in rank order
    incoming = array_module(flat).empty_like(flat)  # where each rank's buffer arrives
    for source in range(1, comm.size):
        comm.recv(incoming, source, GATHER_TAG)
        total += to_host(incoming)
    result = move(total, device_of(flat))  # total itself on the CPU
    for dest in range(1, comm.size):
        comm.send(result, dest, SCATTER_TAG)
    flat[...] = result
