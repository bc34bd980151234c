"""The NCCL transport of the Communicator protocol: ring and tree all-reduce on GPU buffers.

One process per GPU. The NCCL unique id is made by rank 0 and shared over an MPI communicator
(mpi4py), then every rank joins the NCCL clique. Point-to-point messages are ``ncclSend`` /
``ncclRecv`` on the current CuPy stream; ``sendrecv`` puts both in one NCCL group so that a ring
of ranks that all call it cannot deadlock. Because the transfers are queued on the same stream
as the all-reduce algorithms' reductions (``flat[r] += tmp`` in tinyflow/parallel/_segments.py,
or ``tinyflow_cuda.kernels.reduce_add``), the reduction of a received chunk runs on device memory
right after its transfer, with no host copy and no synchronisation in between.

``native_allreduce`` is ``ncclAllReduce``: the yardstick that ring and tree are measured against.

A peer that stops answering must not hang the job: every blocking call waits on the stream
with a deadline and, past it, aborts the NCCL communicator and raises CommTimeoutError.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from tinyflow.parallel.communicator import CommError, CommTimeoutError, Communicator
from tinyflow_cuda import _require

_POLL_SECONDS = 1e-4


def _nccl_types(nccl: Any) -> dict[np.dtype, int]:
    types = {
        np.dtype(np.float32): nccl.NCCL_FLOAT32,
        np.dtype(np.float64): nccl.NCCL_FLOAT64,
        np.dtype(np.float16): nccl.NCCL_FLOAT16,
        np.dtype(np.int32): nccl.NCCL_INT32,
        np.dtype(np.int64): nccl.NCCL_INT64,
        np.dtype(np.uint8): nccl.NCCL_UINT8,
        np.dtype(np.int8): nccl.NCCL_INT8,
    }
    return types


class NcclCommunicator(Communicator):
    """A Communicator over ``cupy.cuda.nccl`` for CuPy buffers on this rank's GPU.

    ``mpi_comm`` is an mpi4py communicator (COMM_WORLD by default) used once, to broadcast the
    NCCL unique id; ``device`` is this rank's GPU (the local rank by default, so that several
    processes on one host take different GPUs).
    """

    def __init__(self, mpi_comm: Any = None, device: int | None = None,
                 timeout: float | None = None) -> None:
        cp = _require()
        from cupy.cuda import nccl  # noqa: PLC0415  (only here: tinyflow_cuda is the CUDA side)

        if mpi_comm is None:
            from mpi4py import MPI  # noqa: PLC0415

            mpi_comm = MPI.COMM_WORLD
        rank, size = mpi_comm.Get_rank(), mpi_comm.Get_size()
        super().__init__(rank, size, timeout)
        self._cp = cp
        self._nccl = nccl
        self._types = _nccl_types(nccl)
        if device is None:
            device = _local_rank(mpi_comm) % cp.cuda.runtime.getDeviceCount()
        self.device = int(device)
        cp.cuda.Device(self.device).use()
        unique_id = nccl.get_unique_id() if rank == 0 else None
        unique_id = mpi_comm.bcast(unique_id, root=0)
        self.comm = nccl.NcclCommunicator(size, unique_id, rank)
        self._aborted = False

    # ---- the protocol ----------------------------------------------------------------------
    def _send(self, buf: Any, dest: int, tag: int) -> None:
        count, dtype = self._describe(buf, "send")
        stream = self._stream()
        self.comm.send(buf.data.ptr, count, dtype, dest, stream.ptr)
        self._wait(stream, dest, f"sending to rank {dest} (tag {tag})")

    def _recv(self, buf: Any, source: int, tag: int) -> None:
        count, dtype = self._describe(buf, "recv")
        stream = self._stream()
        self.comm.recv(buf.data.ptr, count, dtype, source, stream.ptr)
        self._wait(stream, source, f"waiting for a message from rank {source} (tag {tag})")

    def sendrecv(self, sendbuf: Any, dest: int, recvbuf: Any, source: int, tag: int = 0) -> None:
        """ncclSend and ncclRecv in one group (so a ring of sendrecvs cannot deadlock)."""
        self._check_peer(dest, "sendrecv")
        self._check_peer(source, "sendrecv")
        self._count(sendbuf)
        send_count, send_type = self._describe(sendbuf, "sendrecv")
        recv_count, recv_type = self._describe(recvbuf, "sendrecv")
        stream = self._stream()
        self._nccl.groupStart()
        try:
            self.comm.send(sendbuf.data.ptr, send_count, send_type, dest, stream.ptr)
            self.comm.recv(recvbuf.data.ptr, recv_count, recv_type, source, stream.ptr)
        finally:
            self._nccl.groupEnd()
        self._wait(stream, source, f"exchanging with ranks {dest} and {source} (tag {tag})")

    def barrier(self) -> None:
        """An ncclAllReduce of one element, waited for: every rank must have reached it."""
        if self.size == 1:
            return
        token = self._cp.zeros(1, dtype=self._cp.float32)
        stream = self._stream()
        self.comm.allReduce(token.data.ptr, token.data.ptr, 1, self._nccl.NCCL_FLOAT32,
                            self._nccl.NCCL_SUM, stream.ptr)
        self._wait(stream, None, "in a barrier")

    def native_allreduce(self, buf: Any, op: str = "sum") -> None:
        """ncclAllReduce in place on the current stream."""
        if op != "sum":
            raise ValueError(f"native_allreduce: op must be 'sum', got {op!r}")
        count, dtype = self._describe(buf, "native_allreduce")
        stream = self._stream()
        self.comm.allReduce(buf.data.ptr, buf.data.ptr, count, dtype, self._nccl.NCCL_SUM,
                            stream.ptr)
        self._wait(stream, None, "in ncclAllReduce")

    def close(self) -> None:
        """Destroy the NCCL communicator (abort it when a collective failed)."""
        if getattr(self, "comm", None) is None:
            return
        if self._aborted:
            self.comm.abort()
        else:
            self.comm.destroy()
        self.comm = None

    # ---- helpers ---------------------------------------------------------------------------
    def _stream(self) -> Any:
        return self._cp.cuda.get_current_stream()

    def _describe(self, buf: Any, what: str) -> tuple[int, int]:
        if self._aborted:
            raise CommError(f"rank {self.rank}: {what} on an aborted NCCL communicator",
                            rank=self.rank)
        if not isinstance(buf, self._cp.ndarray):
            raise TypeError(f"{what}: NcclCommunicator needs CuPy arrays on cuda:{self.device}, "
                            f"got {type(buf).__name__}; move the tensor with .to('cuda')")
        if not buf.flags.c_contiguous:
            raise ValueError(f"{what}: buffer of shape {buf.shape} must be contiguous")
        if buf.device.id != self.device:
            raise ValueError(f"{what}: buffer is on cuda:{buf.device.id} but this rank's "
                             f"communicator is on cuda:{self.device}")
        dtype = self._types.get(np.dtype(buf.dtype))
        if dtype is None:
            raise TypeError(f"{what}: NCCL cannot carry dtype {buf.dtype}; supported: "
                            f"{sorted(str(t) for t in self._types)}")
        return int(buf.size), dtype

    def _wait(self, stream: Any, peer: int | None, what: str) -> None:
        """Block until ``stream`` is idle, or abort and raise CommTimeoutError at the deadline.

        The deadline makes a dead or stuck peer an error that names it instead of a hang; the
        poll is cheap next to any transfer worth timing.
        """
        deadline = time.monotonic() + self.timeout
        while not stream.done:
            if time.monotonic() > deadline:
                self._aborted = True
                self.comm.abort()
                who = f"rank {peer} is not answering" if peer is not None else \
                    "some rank did not join the collective"
                raise CommTimeoutError(
                    f"rank {self.rank}: timed out after {self.timeout:g}s {what}; {who} "
                    "(stuck, dead, or in a different collective). The NCCL communicator was "
                    "aborted.", rank=self.rank, peer=peer)
            time.sleep(_POLL_SECONDS)


def _local_rank(mpi_comm: Any) -> int:
    """This process's index among the ranks on its host (shared-memory split)."""
    try:
        from mpi4py import MPI  # noqa: PLC0415

        local = mpi_comm.Split_type(MPI.COMM_TYPE_SHARED, key=mpi_comm.Get_rank())
        try:
            return int(local.Get_rank())
        finally:
            local.Free()
    except Exception:  # a communicator without Split_type (tests with a fake one)
        return int(mpi_comm.Get_rank())
