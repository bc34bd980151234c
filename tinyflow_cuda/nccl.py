"""The NCCL transport of the Communicator protocol: ring and tree all-reduce on GPU buffers.

One process per GPU. The NCCL unique id is made by rank 0 and sent to every rank over an MPI
communicator (mpi4py), then every rank joins the NCCL clique. Point-to-point messages are
``ncclSend`` / ``ncclRecv`` on the current CuPy stream; ``sendrecv`` puts both in one NCCL group
so that a ring of ranks that all call it cannot deadlock. Because the transfers are queued on
the same stream as the all-reduce algorithms' reductions (``tinyflow_cuda.kernels.reduce_add``
in tinyflow/parallel/_segments.py), the reduction of a received chunk runs on device memory
right after its transfer, with no host copy and no synchronisation in between. Buffers must be
CuPy arrays on this rank's GPU; algorithms that sum on the host (naive) stage through
``tinyflow.device`` themselves and send device buffers.

``native_allreduce`` is ``ncclAllReduce``: the yardstick that ring and tree are measured against.

A peer that stops answering must not hang the job. CuPy's binding only makes *blocking* NCCL
communicators (its ``NcclConfig`` has no ``blocking`` field), and a blocking communicator can
hold the calling thread inside ``ncclCommInitRank``, or inside ``ncclGroupEnd`` / ``ncclSend`` /
``ncclRecv`` while it connects to a peer for the first time (NCCL connects lazily), until that
peer turns up. So every NCCL host call runs on a thread of its own (``_HostCalls``) while the
rank waits for it against its deadline, and the queued GPU work is then polled against the same
deadline. Past it the rank raises ``CommTimeoutError`` naming the peer. The communicator is
aborted (``ncclCommAbort``) when no host call is inside NCCL; when one is stuck there, it is
abandoned with its thread instead, since aborting a blocking communicator under a thread that is
inside it can free memory that thread still uses. Either way it is unusable afterwards.
"""
from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tinyflow.parallel.communicator import CONTROL_TAG, CommError, CommTimeoutError, Communicator
from tinyflow_cuda import _require

_POLL_SECONDS = 1e-4
_UID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES
_UID_TAG = CONTROL_TAG + 7  # the MPI tag of the unique id message


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


class _Job:
    """One host call for ``_HostCalls``: the function, and its result or error once done."""

    __slots__ = ("fn", "done", "result", "error")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self, setup_error: BaseException | None) -> None:
        try:
            if setup_error is not None:
                raise setup_error
            self.result = self.fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting rank
            self.error = exc
        finally:
            self.done.set()


class _HostCalls:
    """A thread that makes one communicator's NCCL host calls, one at a time, in order.

    NCCL groups are per thread, so a whole group (groupStart .. groupEnd) is one call. The rank
    waits for each call with a timeout; a call that does not return in time leaves this thread
    ``stuck`` (inside NCCL), and the rank raises instead of hanging with it.
    """

    def __init__(self, name: str, setup: Callable[[], None]) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._setup = setup
        self.stuck = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        setup_error: BaseException | None = None
        try:
            self._setup()  # e.g. make this rank's GPU current in this thread
        except BaseException as exc:  # noqa: BLE001 - reported by every call
            setup_error = exc
        while True:
            job = self._jobs.get()
            if job is None:
                return
            job.run(setup_error)

    def call(self, fn: Callable[[], Any], timeout: float) -> tuple[bool, Any]:
        """Run ``fn()`` on the thread: ``(True, result)``, or ``(False, None)`` if it did not
        return within ``timeout`` seconds. An error raised by ``fn`` is raised here."""
        if self.stuck:
            raise CommError("an earlier NCCL call is still stuck; the communicator is unusable")
        job = _Job(fn)
        self._jobs.put(job)
        if not job.done.wait(max(timeout, 0.0)):
            self.stuck = True
            return False, None
        if job.error is not None:
            raise job.error
        return True, job.result

    def stop(self) -> None:
        """Let the thread end (a stuck one ends with the process: it is a daemon)."""
        if not self.stuck:
            self._jobs.put(None)


class NcclCommunicator(Communicator):
    """A Communicator over ``cupy.cuda.nccl`` for CuPy buffers on this rank's GPU.

    ``mpi_comm`` is an mpi4py communicator (COMM_WORLD by default) used once, to send the NCCL
    unique id; ``device`` is this rank's GPU (the local rank by default, so that several
    processes on one host take different GPUs); ``timeout`` bounds every wait, joining the clique
    included. ``nccl`` and ``cupy`` stand in for ``cupy.cuda.nccl`` and ``cupy`` in tests.
    """

    def __init__(self, mpi_comm: Any = None, device: int | None = None,
                 timeout: float | None = None, *, nccl: Any = None, cupy: Any = None) -> None:
        cp = _require() if cupy is None else cupy
        if nccl is None:
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
        self.comm: Any = None
        self._aborted = False
        self._calls = _HostCalls(f"tinyflow-nccl-rank{rank}",
                                 lambda: cp.cuda.Device(self.device).use())
        try:
            deadline = time.monotonic() + self.timeout
            unique_id = _share_unique_id(mpi_comm, nccl, rank, size, deadline, self.timeout)
            self.comm = self._host_call(
                lambda: nccl.NcclCommunicator(size, unique_id, rank), deadline, None,
                f"joining the NCCL communicator of {size} ranks")
        except BaseException:
            self._aborted = True
            self._calls.stop()
            raise

    # ---- the protocol ----------------------------------------------------------------------
    def _send(self, buf: Any, dest: int, tag: int) -> None:
        count, dtype = self._describe(buf, "send")
        self._run(lambda stream: self.comm.send(buf.data.ptr, count, dtype, dest, stream), dest,
                  f"sending to rank {dest} (tag {tag})")

    def _recv(self, buf: Any, source: int, tag: int) -> None:
        count, dtype = self._describe(buf, "recv")
        self._run(lambda stream: self.comm.recv(buf.data.ptr, count, dtype, source, stream),
                  source, f"waiting for a message from rank {source} (tag {tag})")

    def sendrecv(self, sendbuf: Any, dest: int, recvbuf: Any, source: int, tag: int = 0) -> None:
        """ncclSend and ncclRecv in one group (so a ring of sendrecvs cannot deadlock)."""
        self._check_peer(dest, "sendrecv")
        self._check_peer(source, "sendrecv")
        self._count(sendbuf)
        send_count, send_type = self._describe(sendbuf, "sendrecv")
        recv_count, recv_type = self._describe(recvbuf, "sendrecv")
        nccl = self._nccl

        def group(stream: int) -> None:
            nccl.groupStart()
            try:
                self.comm.send(sendbuf.data.ptr, send_count, send_type, dest, stream)
                self.comm.recv(recvbuf.data.ptr, recv_count, recv_type, source, stream)
            finally:
                nccl.groupEnd()

        self._run(group, source, f"exchanging with ranks {dest} and {source} (tag {tag})")

    def barrier(self) -> None:
        """An ncclAllReduce of one element, waited for: every rank must have reached it."""
        if self.size == 1:
            return
        token, nccl = self._cp.zeros(1, dtype=self._cp.float32), self._nccl
        self._run(lambda stream: self.comm.allReduce(token.data.ptr, token.data.ptr, 1,
                                                     nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream),
                  None, "in a barrier")

    def native_allreduce(self, buf: Any, op: str = "sum") -> None:
        """ncclAllReduce in place on the current stream."""
        if op != "sum":
            raise ValueError(f"native_allreduce: op must be 'sum', got {op!r}")
        count, dtype = self._describe(buf, "native_allreduce")
        nccl = self._nccl
        self._run(lambda stream: self.comm.allReduce(buf.data.ptr, buf.data.ptr, count, dtype,
                                                     nccl.NCCL_SUM, stream),
                  None, "in ncclAllReduce")

    def close(self) -> None:
        """Destroy the NCCL communicator (abort it when a collective failed)."""
        comm, self.comm = self.comm, None
        try:
            if comm is None or self._calls.stuck:
                return
            if self._aborted:
                comm.abort()
                return
            done, _ = self._calls.call(comm.destroy, self.timeout)  # waits for queued work
            if not done:
                raise self._timeout_error(None, "destroying the NCCL communicator",
                                          "its last operations never finished")
        finally:
            self._calls.stop()

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

    def _run(self, enqueue: Callable[[int], None], peer: int | None, what: str) -> None:
        """Queue NCCL work on the current stream and wait until the stream has done it.

        One deadline covers both halves: the host call (which can block while NCCL connects to
        ``peer``) and the GPU work (which waits for ``peer`` to send or receive). ``enqueue``
        refers to the buffers themselves, not their pointers, so that a call stuck past the
        deadline keeps them alive should NCCL ever get to queue the transfer.
        """
        deadline = time.monotonic() + self.timeout
        stream = self._stream()
        ptr = stream.ptr
        self._host_call(lambda: enqueue(ptr), deadline, peer, what)
        self._wait(stream, deadline, peer, what)

    def _host_call(self, fn: Callable[[], Any], deadline: float, peer: int | None,
                   what: str) -> Any:
        """``fn()`` on the host-call thread; a timeout naming ``peer`` if it outlives ``deadline``."""
        done, result = self._calls.call(fn, deadline - time.monotonic())
        if not done:
            self._aborted = True  # a call is stuck inside NCCL: the communicator is unusable
            raise self._timeout_error(peer, what, "NCCL kept this rank waiting on the host "
                                      "(connecting, or joining the clique); the communicator "
                                      "was abandoned")
        return result

    def _wait(self, stream: Any, deadline: float, peer: int | None, what: str) -> None:
        """Block until ``stream`` is idle, or abort and raise CommTimeoutError at the deadline.

        The poll is cheap next to any transfer worth timing.
        """
        while not stream.done:
            if time.monotonic() > deadline:
                self._abort()
                raise self._timeout_error(peer, what, "the NCCL communicator was aborted")
            time.sleep(_POLL_SECONDS)

    def _abort(self) -> None:
        """ncclCommAbort, from this thread: no host call is inside NCCL now (else: abandon)."""
        self._aborted = True
        comm, self.comm = self.comm, None
        if comm is not None and not self._calls.stuck:
            comm.abort()
        self._calls.stop()

    def _timeout_error(self, peer: int | None, what: str, how: str) -> CommTimeoutError:
        who = (f"rank {peer} is not answering" if peer is not None
               else "some rank did not join the collective")
        return CommTimeoutError(
            f"rank {self.rank}: timed out after {self.timeout:g}s {what}; {who} (stuck, dead, "
            f"or in a different collective). {how[0].upper()}{how[1:]}.",
            rank=self.rank, peer=peer)


def _share_unique_id(mpi_comm: Any, nccl: Any, rank: int, size: int, deadline: float,
                     timeout: float) -> Any:
    """Rank 0 makes the NCCL unique id and sends it to every rank over MPI.

    Point to point, polled against the deadline, so that a rank 0 that never gets here is a
    timeout naming it rather than a hang in MPI_Bcast. The id is bytes in CuPy 14 (a tuple of
    signed chars before); a leading byte says which. A communicator without ``Irecv`` (a test's
    stand-in) uses its ``bcast``.
    """
    if not hasattr(mpi_comm, "Irecv"):
        return mpi_comm.bcast(nccl.get_unique_id() if rank == 0 else None, root=0)
    buf = np.zeros(1 + _UID_BYTES, np.uint8)
    if rank == 0:
        unique_id = nccl.get_unique_id()
        is_bytes = isinstance(unique_id, bytes)
        raw = unique_id if is_bytes else bytes(c & 0xFF for c in unique_id)
        buf[0] = is_bytes
        buf[1:] = np.frombuffer(raw, np.uint8)
        pending = {r: mpi_comm.Isend(buf, r, _UID_TAG) for r in range(1, size)}
    else:
        pending = {0: mpi_comm.Irecv(buf, 0, _UID_TAG)}
    while pending:
        pending = {r: req for r, req in pending.items() if not req.Test()}
        if pending and time.monotonic() > deadline:
            peer = min(pending)
            what = ("sending the NCCL unique id" if rank == 0
                    else "waiting for the NCCL unique id from rank 0")
            raise CommTimeoutError(
                f"rank {rank}: timed out after {timeout:g}s {what} (over MPI); rank {peer} is "
                "not answering (stuck, dead, or not started)", rank=rank, peer=peer)
        if pending:
            time.sleep(1e-3)
    if rank == 0:
        return unique_id
    raw = buf[1:].tobytes()
    return raw if buf[0] else tuple(int(c) for c in buf[1:].view(np.int8))


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
