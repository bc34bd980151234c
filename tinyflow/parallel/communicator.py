"""The Communicator protocol that every all-reduce algorithm is written against.

A transport (threads in one process, MPI processes, NCCL on GPUs) supplies seven things:
``rank``, ``size``, ``send``, ``recv``, ``sendrecv``, ``start_sendrecv`` (the same, returning a
pending handle so a reduction can overlap the next transfer) and ``barrier``. Algorithms only
ever use these, so ring, tree and naive run unchanged on every transport. Each communicator also counts
the bytes it sends (``bytes_sent``) and turns a peer that stops answering into a
``CommTimeoutError`` that names the peer, never a hang.
"""
from __future__ import annotations

import os
from typing import Any

DEFAULT_TIMEOUT = float(os.environ.get("TINYFLOW_COMM_TIMEOUT", "60"))

# Tags at or above this value are reserved for the transports' own control messages.
BARRIER_TAG = 31_000
CONTROL_TAG = 32_000


class CommError(RuntimeError):
    """A collective could not complete: a peer failed, left, or sent the wrong message."""

    def __init__(self, message: str, rank: int | None = None, peer: int | None = None):
        super().__init__(message)
        self.rank = rank
        self.peer = peer


class CommTimeoutError(CommError, TimeoutError):
    """A peer sent nothing within the communicator's timeout; ``peer`` is the rank blamed."""


class RankMismatchError(CommError):
    """The ranks called a collective with different arguments (length, dtype, op, algorithm,
    options), or went out of step; raised on every rank with the same message."""


class CommAbortedError(CommError):
    """Another rank of the group failed, so this rank's collective was abandoned."""


class Communicator:
    """Point-to-point messaging between ``size`` ranks, plus a barrier.

    Buffers are contiguous arrays (NumPy, or CuPy where the transport supports it). ``recv``
    fills a preallocated buffer of the right size and dtype. ``sendrecv`` sends and receives at
    once, so a ring of ranks that all call it cannot deadlock. Subclasses implement
    ``_send``/``_recv``/``sendrecv``; the base class counts bytes and supplies the barrier.
    """

    rank: int
    size: int
    timeout: float
    bytes_sent: int

    def __init__(self, rank: int, size: int, timeout: float | None = None):
        if not 0 <= rank < size:
            raise ValueError(f"Communicator: rank {rank} is outside a world of size {size}")
        self.rank = rank
        self.size = size
        self.timeout = DEFAULT_TIMEOUT if timeout is None else float(timeout)
        self.bytes_sent = 0
        self.messages_sent = 0

    # ---- the protocol --------------------------------------------------------------------
    def send(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Send the contiguous array ``buf`` to rank ``dest``."""
        self._check_peer(dest, "send")
        self._count(buf)
        self._send(buf, dest, tag)

    def recv(self, buf: Any, source: int, tag: int = 0) -> None:
        """Receive a message from rank ``source`` into ``buf`` (same size and dtype as sent)."""
        self._check_peer(source, "recv")
        self._recv(buf, source, tag)

    def sendrecv(self, sendbuf: Any, dest: int, recvbuf: Any, source: int, tag: int = 0) -> None:
        """Send ``sendbuf`` to ``dest`` while receiving from ``source`` into ``recvbuf``."""
        raise NotImplementedError

    def start_sendrecv(self, sendbuf: Any, dest: int, recvbuf: Any, source: int, tag: int = 0) -> Pending:
        """Begin a ``sendrecv``; ``.wait()`` on the result completes it.

        Lets an algorithm reduce segment k while segment k+1 is in flight. Transports that can
        (MPI, threads) override it; this default simply does the whole exchange now.
        """
        self.sendrecv(sendbuf, dest, recvbuf, source, tag)
        return Pending()

    def barrier(self) -> None:
        """Wait until every rank has reached the barrier (dissemination barrier, log2 N rounds).

        Written over send/recv so that a rank that never arrives is a timeout naming it.
        """
        if self.size == 1:
            return
        token = _token_like()
        got = _token_like()
        distance = 1
        while distance < self.size:
            dest = (self.rank + distance) % self.size
            source = (self.rank - distance) % self.size
            self.sendrecv(token, dest, got, source, tag=BARRIER_TAG)
            distance *= 2

    def native_allreduce(self, buf: Any, op: str = "sum") -> None:
        """The transport's own all-reduce (MPI_Allreduce, ncclAllReduce), summing in place."""
        raise NotImplementedError(f"{type(self).__name__} has no native all-reduce")

    # ---- helpers for subclasses ----------------------------------------------------------
    def _send(self, buf: Any, dest: int, tag: int) -> None:
        raise NotImplementedError

    def _recv(self, buf: Any, source: int, tag: int) -> None:
        raise NotImplementedError

    def _count(self, buf: Any) -> None:
        self.bytes_sent += int(buf.nbytes)
        self.messages_sent += 1

    def _check_peer(self, peer: int, what: str) -> None:
        if not 0 <= peer < self.size:
            raise ValueError(f"{what}: rank {peer} is outside a world of size {self.size}")
        if peer == self.rank:
            raise ValueError(f"{what}: rank {self.rank} cannot message itself")

    def reset_counters(self) -> None:
        """Zero ``bytes_sent`` and ``messages_sent`` (e.g. before measuring one collective)."""
        self.bytes_sent = 0
        self.messages_sent = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(rank={self.rank}, size={self.size}, timeout={self.timeout})"


def has_native_allreduce(comm: Communicator) -> bool:
    """True when ``comm``'s transport brings its own all-reduce (MPI_Allreduce, ncclAllReduce,
    the thread group's shared-memory sum): its class overrides ``native_allreduce``."""
    return type(comm).native_allreduce is not Communicator.native_allreduce


class Pending:
    """A started exchange; ``wait()`` blocks until it is complete (this base one already is)."""

    def wait(self) -> None:
        return None


class _Deferred(Pending):
    """An exchange that finishes by calling ``fn()`` when waited on."""

    def __init__(self, fn: Any):
        self._fn = fn

    def wait(self) -> None:
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()


def _token_like() -> Any:
    import numpy as np

    return np.zeros(1, dtype=np.uint8)


def blame_chain(first: int, waiting_on: dict[int, int | None]) -> int:
    """Follow "rank a waits on rank b" links from ``first`` to the rank that waits on nobody.

    When every rank of a ring waits on its left neighbour and one rank is stuck in compute,
    only the stuck rank waits on nobody: that is the rank to name in the timeout error.
    Ranks missing from ``waiting_on`` (no answer) are taken as the culprit at once.
    """
    seen = {first}
    rank = first
    while rank in waiting_on and waiting_on[rank] is not None:
        nxt = waiting_on[rank]
        if nxt in seen:  # a cycle of waits: a deadlock, name where we started
            return first
        seen.add(nxt)
        rank = nxt
    return rank
