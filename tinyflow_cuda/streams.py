"""CUDA streams for thread ranks that share one GPU, and handing buffers from one to another.

``run_local(fn, n, device="cuda:0")`` runs each rank as a thread inside ``stream_context``: the
thread gets a CUDA stream of its own, so N ranks queue their kernels side by side on one device.
Work on two streams is unordered, so ``LocalComm`` passes a buffer between ranks in two steps:

- ``handoff(arr)`` (the sender): copy ``arr`` on the sender's stream, after whatever produced it,
  and record an event after the copy;
- ``receive(dst, message)`` (the receiver): make the receiver's stream wait for that event, copy
  into ``dst`` there, and keep the message alive until that copy has run.

Neither call blocks the host. The keep-alive matters because CuPy's memory pool is
stream-ordered: a freed block goes back to the stream that allocated it (the sender's), which may
reuse it for new work at once, while the receiver's read of it is still queued on another stream.
tinyflow reaches this module only through ``tinyflow.device`` (``Device.stream``, ``handoff``,
``receive_handoff``).
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any


def _cupy() -> ModuleType:
    """The CuPy module (an indirection, so that CPU tests can stand a fake in for it)."""
    import tinyflow_cuda

    return tinyflow_cuda._require()


class Handoff:
    """A private copy of a device array, and the event after which another stream may read it."""

    __slots__ = ("array", "ready")

    def __init__(self, array: Any, ready: Any) -> None:
        self.array = array
        self.ready = ready

    @property
    def size(self) -> int:
        return int(self.array.size)

    @property
    def dtype(self) -> Any:
        return self.array.dtype

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)

    def __repr__(self) -> str:
        return f"Handoff({self.size} x {self.dtype})"


# (event, array) pairs this thread must keep alive until its stream has passed the event
_local = threading.local()


def _kept() -> list[tuple[Any, Any]]:
    kept = getattr(_local, "kept", None)
    if kept is None:
        kept = _local.kept = []
    return kept


def _release_finished() -> None:
    """Drop the kept arrays whose reads have run (an event query each; nothing blocks)."""
    kept = _kept()
    kept[:] = [(event, array) for event, array in kept if not event.done]


def kept_alive() -> int:
    """How many received messages this thread still holds until its stream has read them."""
    return len(_kept())


@contextlib.contextmanager
def stream_context(index: int | None = 0) -> Iterator[Any]:
    """Make device ``index`` and a new stream of it current for this thread inside the block.

    The stream is a *blocking* one (not ``non_blocking=True``): it runs side by side with other
    threads' streams, but stays ordered with the legacy default stream. So work queued on the
    default stream before the block (arrays the main thread prepared) is done before the
    stream's work starts, and a helper thread of this rank that uses the default stream (such as
    DataParallel's communication thread) stays ordered with it. On leaving, the stream is
    synchronized, so that whatever the block returns is ready for any thread and stream.
    """
    cp = _cupy()
    device = 0 if index is None else int(index)
    with cp.cuda.Device(device):
        stream = cp.cuda.Stream(non_blocking=False)
        with stream:
            try:
                yield stream
            except BaseException:
                with contextlib.suppress(Exception):  # never mask the error being raised
                    stream.synchronize()
                    _release_finished()
                raise
            stream.synchronize()
            _release_finished()


def _event(cp: ModuleType) -> Any:
    return cp.cuda.Event(disable_timing=True)


def handoff(arr: Any) -> Handoff:
    """Copy ``arr`` on this thread's current stream and mark the copy with an event."""
    cp = _cupy()
    with cp.cuda.Device(arr.device.id):
        copy = arr.copy()  # queued after the work that produced arr on this stream
        ready = cp.cuda.get_current_stream().record(_event(cp))
    return Handoff(copy, ready)


def receive(dst: Any, message: Handoff) -> None:
    """Copy ``message`` into ``dst`` (same size, any shape) on this thread's current stream.

    The stream first waits for the sender's event, so the copy never reads a half-written
    message; the message's array is kept alive until this stream has read it.
    """
    if not isinstance(message, Handoff):
        raise TypeError(f"receive: expected a Handoff from handoff(), got {type(message).__name__}")
    cp = _cupy()
    with cp.cuda.Device(dst.device.id):
        stream = cp.cuda.get_current_stream()
        stream.wait_event(message.ready)
        dst[...] = message.array.reshape(dst.shape)
        read = stream.record(_event(cp))
    _release_finished()
    _kept().append((read, message.array))
