"""An in-process communicator group: one thread per rank, messages through queues.

``run_local(fn, world_size)`` runs ``fn(comm)`` on every rank and returns the results in rank
order. It exists for tests and for studying the algorithms without MPI; the algorithms cannot
tell it from MPI. NumPy releases the GIL in its reductions, so ranks really run side by side.

On a GPU, ``run_local(fn, world_size, device="cuda:0")`` runs each rank thread inside
``Device("cuda:0").stream()``: every rank drives its own CUDA stream on the one device, so ring,
tree and naive all-reduce run on device buffers, with their reductions as device kernels, on a
single GPU (NCCL refuses two ranks on one device). A send copies the buffer on the sender's
stream and marks the copy with an event; the receiver's stream waits for that event before it
reads (``tinyflow.device.handoff`` / ``receive_handoff``), so no thread blocks on a transfer.

Failure handling: if one rank raises, the whole group is aborted (every pending ``recv`` wakes
up with ``CommAbortedError``) and ``run_local`` re-raises the first error, noting its rank. A
rank that stays silent makes its neighbours time out; the error names the rank that is not
waiting on anyone (the stuck one), found by following who-waits-on-whom.
"""
from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from tinyflow.device import Device, array_module, handoff, receive_handoff
from tinyflow.parallel.communicator import (
    BARRIER_TAG,
    CommAbortedError,
    CommError,
    CommTimeoutError,
    Communicator,
    Pending,
    _Deferred,
    blame_chain,
)

T = TypeVar("T")

_ABORT = object()  # pushed into every queue when the group aborts
_LEFT = object()  # pushed into a rank's outgoing queues when its function returns


class LocalGroup:
    """The shared state of one group of thread ranks: a FIFO queue per (source, dest) pair."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"LocalGroup: world size must be >= 1, got {size}")
        self.size = size
        self.queues: dict[tuple[int, int], queue.Queue] = {
            (s, d): queue.Queue() for s in range(size) for d in range(size) if s != d
        }
        self.waiting_on: list[int | None] = [None] * size
        self.status: list[str] = ["running"] * size
        self.failure: tuple[int, BaseException] | None = None
        self.slots: list[Any] = [None] * size  # handoffs shared by native_allreduce
        self._lock = threading.Lock()

    def abort(self, rank: int, exc: BaseException) -> None:
        """Record the first failure and wake every rank blocked in ``recv``."""
        with self._lock:
            self.status[rank] = "failed"
            if self.failure is not None:
                return
            self.failure = (rank, exc)
        for q in self.queues.values():
            q.put(_ABORT)

    def leave(self, rank: int) -> None:
        """Mark ``rank`` finished: a later ``recv`` from it fails at once instead of timing out."""
        with self._lock:
            if self.status[rank] == "running":
                self.status[rank] = "finished"
        for dest in range(self.size):
            if dest != rank:
                self.queues[(rank, dest)].put(_LEFT)


class LocalComm(Communicator):
    """One rank's end of a ``LocalGroup``. Sends copy the buffer, so they never block.

    NumPy and CuPy buffers alike; with CuPy, the copy is ordered on the sender's stream and the
    receiver's stream waits for it (see the module docstring).
    """

    def __init__(self, group: LocalGroup, rank: int, timeout: float | None = None):
        super().__init__(rank, group.size, timeout)
        self.group = group

    def _send(self, buf: Any, dest: int, tag: int) -> None:
        self._raise_if_aborted()
        self.group.queues[(self.rank, dest)].put((tag, handoff(buf)))

    def _recv(self, buf: Any, source: int, tag: int) -> None:
        group = self.group
        self._raise_if_aborted()
        group.waiting_on[self.rank] = source
        try:
            msg = group.queues[(source, self.rank)].get(timeout=self.timeout)
        except queue.Empty:
            raise self._timeout_error(source, tag) from None
        if msg is _ABORT:
            self._raise_if_aborted()
        if msg is _LEFT:
            raise CommError(
                f"rank {self.rank}: rank {source} returned from its function while rank "
                f"{self.rank} was waiting for a message from it (tag {tag}); the ranks ran "
                f"different sequences of collectives",
                rank=self.rank,
                peer=source,
            )
        group.waiting_on[self.rank] = None
        got_tag, data = msg
        if got_tag != tag:
            raise CommError(
                f"rank {self.rank}: expected tag {tag} from rank {source} but got tag {got_tag}; "
                f"the ranks called different collectives",
                rank=self.rank,
                peer=source,
            )
        if data.size != buf.size or data.dtype != buf.dtype:
            raise CommError(
                f"rank {self.rank}: rank {source} sent {data.size} x {data.dtype} but the receive "
                f"buffer holds {buf.size} x {buf.dtype}",
                rank=self.rank,
                peer=source,
            )
        receive_handoff(buf, data)

    def sendrecv(self, sendbuf: Any, dest: int, recvbuf: Any, source: int, tag: int = 0) -> None:
        self.send(sendbuf, dest, tag)
        self.recv(recvbuf, source, tag)

    def start_sendrecv(self, sendbuf: Any, dest: int, recvbuf: Any, source: int, tag: int = 0) -> Pending:
        self.send(sendbuf, dest, tag)  # buffered: done at once
        return _Deferred(lambda: self.recv(recvbuf, source, tag))

    def barrier(self) -> None:
        sent, count = self.bytes_sent, self.messages_sent
        super().barrier()
        self.bytes_sent, self.messages_sent = sent, count  # barrier tokens are not payload

    def native_allreduce(self, buf: Any, op: str = "sum") -> None:
        """Shared-memory all-reduce: every rank sums all ranks' buffers in rank order."""
        if op != "sum":
            raise ValueError(f"native_allreduce: op must be 'sum', got {op!r}")
        group = self.group
        group.slots[self.rank] = handoff(buf)  # a copy that other ranks' streams may read
        self.barrier()  # every buffer is published
        total, part = _empty_like(buf), _empty_like(buf)
        receive_handoff(total, group.slots[0])
        for other in group.slots[1:]:
            receive_handoff(part, other)
            total += part
        self.barrier()  # every rank has taken every buffer before anyone replaces its own
        buf[...] = total
        group.slots[self.rank] = None

    # ---- failure reporting ---------------------------------------------------------------
    def _raise_if_aborted(self) -> None:
        failure = self.group.failure
        if failure is not None:
            rank, exc = failure
            raise CommAbortedError(
                f"rank {self.rank}: collective abandoned because rank {rank} failed: "
                f"{type(exc).__name__}: {exc}",
                rank=self.rank,
                peer=rank,
            )

    def _timeout_error(self, source: int, tag: int) -> CommTimeoutError:
        group = self.group
        waits = {r: group.waiting_on[r] for r in range(group.size) if group.status[r] != "finished"}
        culprit = blame_chain(source, waits)
        what = "barrier" if tag == BARRIER_TAG else f"tag {tag}"
        if culprit == source:
            detail = f"rank {source} is not answering"
        else:
            detail = f"rank {source} is itself waiting; rank {culprit} is the one not answering"
        return CommTimeoutError(
            f"rank {self.rank}: timed out after {self.timeout:g}s waiting for a message from "
            f"rank {source} ({what}); {detail} (stuck, dead, or in a different collective)",
            rank=self.rank,
            peer=culprit,
        )


def run_local(
    fn: Callable[[Communicator], T],
    world_size: int,
    timeout: float | None = None,
    grace: float = 2.0,
    device: str | Device | None = None,
) -> list[T]:
    """Run ``fn(comm)`` on ``world_size`` thread ranks; return the results in rank order.

    If any rank raises, the others are aborted and the first error is re-raised with a note
    naming its rank. Ranks still stuck ``grace`` seconds after a failure are left behind
    (daemon threads) rather than hanging the caller.

    ``device`` (e.g. ``"cuda:0"``) runs each rank inside ``Device(device).stream()``: on a GPU,
    a CUDA stream of its own per rank thread, synchronized before the rank's result is handed
    back; on the CPU nothing changes.
    """
    place = Device(device) if isinstance(device, str) else device
    group = LocalGroup(world_size)
    comms = [LocalComm(group, r, timeout) for r in range(world_size)]
    results: list[Any] = [None] * world_size
    done = [threading.Event() for _ in range(world_size)]

    def worker(rank: int) -> None:
        try:
            with place.stream() if place is not None else contextlib.nullcontext():
                results[rank] = fn(comms[rank])
            group.leave(rank)
        except BaseException as exc:  # noqa: BLE001 - any failure must abort the group
            group.abort(rank, exc)
        finally:
            done[rank].set()

    threads = [
        threading.Thread(target=worker, args=(r,), name=f"tinyflow-rank{r}", daemon=True)
        for r in range(world_size)
    ]
    for t in threads:
        t.start()
    for r in range(world_size):
        while not done[r].wait(0.05):
            if group.failure is not None:
                break
    if group.failure is not None:
        deadline = time.monotonic() + grace
        for r in range(world_size):
            done[r].wait(max(0.0, deadline - time.monotonic()))
        rank, exc = group.failure
        if hasattr(exc, "add_note"):
            exc.add_note(f"(raised on rank {rank} of {world_size} in run_local)")
        raise exc
    return results


def _empty_like(buf: Any) -> Any:
    return array_module(buf).empty(buf.shape, buf.dtype)
