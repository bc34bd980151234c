"""Thread ranks on streams, proved on the CPU with stand-ins for CUDA (the GPU twins are in
tests/gpu/test_local_ranks_on_streams.py): run_local gives each rank thread a stream of its own
and synchronizes it at exit; a send copies on the sender's stream and records an event there;
a receive makes its own stream wait for that event before reading, and keeps the message alive
until its stream has read it."""
from __future__ import annotations

import contextlib
import itertools
import threading
from types import SimpleNamespace

import numpy as np
import pytest

import tinyflow.parallel.local as local
from tinyflow.device import Device, handoff, receive_handoff
from tinyflow.parallel import allreduce, run_local
from tinyflow_cuda import streams

# ---- a device whose streams only record what happens to them ---------------------------------


class RecordingStream:
    def __init__(self, log: list, name: str):
        self.log, self.name = log, name
        self.thread: str | None = None

    def __enter__(self):
        self.thread = threading.current_thread().name
        RecordingDevice.current.stream = self
        self.log.append(("enter", self.name, self.thread))
        return self

    def __exit__(self, *exc):
        self.log.append(("synchronize", self.name, threading.current_thread().name))
        RecordingDevice.current.stream = None
        return False


class RecordingDevice:
    """Duck-types ``Device``: ``stream()`` returns a new recording stream each time."""

    current = threading.local()

    def __init__(self):
        self.log: list = []
        self.streams: list[RecordingStream] = []
        self._lock = threading.Lock()

    def stream(self) -> RecordingStream:
        with self._lock:
            s = RecordingStream(self.log, f"S{len(self.streams)}")
            self.streams.append(s)
        return s


def test_run_local_gives_every_rank_thread_its_own_stream_and_synchronizes_it():
    device = RecordingDevice()

    def fn(comm):
        stream = getattr(RecordingDevice.current, "stream", None)
        assert stream is not None, "fn must run inside the rank's stream"
        buf = np.full(6, comm.rank + 1.0)
        allreduce(buf, comm, algorithm="ring")
        return stream.name, threading.current_thread().name, buf

    results = run_local(fn, 4, timeout=10, device=device)
    names = [r[0] for r in results]
    assert len(set(names)) == 4  # one stream per rank
    threads = [r[1] for r in results]
    assert len(set(threads)) == 4 and all(t.startswith("tinyflow-rank") for t in threads)
    for stream, thread in zip(names, threads):
        # entered and synchronized by the rank's own thread, entered before synchronized
        events = [e for e in device.log if e[1] == stream]
        assert events == [("enter", stream, thread), ("synchronize", stream, thread)]
    for _, _, buf in results:
        np.testing.assert_array_equal(buf, np.full(6, 10.0))


def test_a_failing_rank_still_leaves_its_stream():
    device = RecordingDevice()

    def fn(comm):
        if comm.rank == 1:
            raise ValueError("boom")
        allreduce(np.ones(3), comm)

    with pytest.raises(ValueError, match="boom"):
        run_local(fn, 3, timeout=10, device=device)
    failing = next(s for s in device.streams if s.thread == "tinyflow-rank1")
    assert ("synchronize", failing.name, "tinyflow-rank1") in device.log


def test_run_local_on_the_cpu_device_is_unchanged():
    def fn(comm):
        buf = np.arange(5.0) * (comm.rank + 1)
        allreduce(buf, comm, algorithm="tree")
        return buf

    got = run_local(fn, 3, device="cpu")
    for buf in got:
        np.testing.assert_array_equal(buf, np.arange(5.0) * 6)


def test_device_stream_is_a_null_context_on_the_cpu_and_tinyflow_cuda_on_a_gpu(monkeypatch):
    assert isinstance(Device("cpu").stream(), contextlib.nullcontext)
    asked = []
    monkeypatch.setattr(streams, "stream_context", lambda index: asked.append(index) or "ctx")
    assert Device("cuda:1").stream() == "ctx"
    assert asked == [1]


# ---- a CuPy stand-in that logs stream and event calls ----------------------------------------


class FakeCuda:
    """Streams, events and devices that log every call, per thread like CuPy's."""

    def __init__(self):
        self.log: list[tuple] = []
        self._local = threading.local()
        self._ids = itertools.count()
        self.null = FakeStream(self, "null", non_blocking=False)
        self.log.clear()

    def next_id(self) -> int:
        return next(self._ids)

    # the cupy.cuda API that tinyflow_cuda.streams uses
    def Device(self, index):  # noqa: N802 - mirrors cupy.cuda.Device
        cuda = self

        @contextlib.contextmanager
        def ctx():
            cuda.log.append(("device", index))
            yield

        return ctx()

    def Stream(self, non_blocking=False):  # noqa: N802
        return FakeStream(self, f"S{self.next_id()}", non_blocking)

    def Event(self, disable_timing=False):  # noqa: N802
        return FakeEvent(f"E{self.next_id()}")

    def get_current_stream(self):
        stack = getattr(self._local, "stack", None)
        return stack[-1] if stack else self.null

    def push(self, stream):
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        self._local.stack.append(stream)

    def pop(self):
        self._local.stack.pop()


class FakeEvent:
    def __init__(self, name):
        self.name, self.done, self.stream = name, False, None


class FakeStream:
    def __init__(self, cuda, name, non_blocking):
        self.cuda, self.name, self.non_blocking = cuda, name, non_blocking
        self.events: list[FakeEvent] = []
        cuda.log.append(("new stream", name, non_blocking))

    def __enter__(self):
        self.cuda.push(self)
        self.cuda.log.append(("use", self.name))
        return self

    def __exit__(self, *exc):
        self.cuda.pop()
        self.cuda.log.append(("leave", self.name))

    def record(self, event):
        event.stream = self
        self.events.append(event)
        self.cuda.log.append(("record", self.name, event.name))
        return event

    def wait_event(self, event):
        self.cuda.log.append(("wait", self.name, event.name))

    def synchronize(self):
        for e in self.events:
            e.done = True
        self.cuda.log.append(("synchronize", self.name))


class FakeDeviceArray:
    """A NumPy array posing as a device array: copies and writes log the stream they run on."""

    def __init__(self, host, cuda):
        self.host, self.cuda = host, cuda
        self.device = SimpleNamespace(id=0)

    size = property(lambda self: self.host.size)
    dtype = property(lambda self: self.host.dtype)
    shape = property(lambda self: self.host.shape)
    nbytes = property(lambda self: self.host.nbytes)

    def copy(self):
        self.cuda.log.append(("copy", self.cuda.get_current_stream().name))
        return FakeDeviceArray(self.host.copy(), self.cuda)

    def reshape(self, *shape):
        return FakeDeviceArray(self.host.reshape(*shape), self.cuda)

    def __setitem__(self, index, value):
        self.cuda.log.append(("write", self.cuda.get_current_stream().name))
        self.host[index] = value.host if isinstance(value, FakeDeviceArray) else value


@pytest.fixture
def cuda(monkeypatch):
    fake = FakeCuda()
    monkeypatch.setattr(streams, "_cupy", lambda: SimpleNamespace(cuda=fake))
    monkeypatch.setattr(streams, "_local", threading.local())  # no kept messages from elsewhere
    return fake


def test_stream_context_makes_a_stream_current_and_synchronizes_it(cuda):
    with streams.stream_context(2) as stream:
        assert cuda.get_current_stream() is stream
    assert cuda.get_current_stream() is cuda.null
    assert cuda.log == [("device", 2), ("new stream", stream.name, False), ("use", stream.name),
                        ("synchronize", stream.name), ("leave", stream.name)]


def test_stream_context_synchronizes_on_an_error_too(cuda):
    with pytest.raises(KeyError):
        with streams.stream_context(0) as stream:
            raise KeyError("x")
    assert ("synchronize", stream.name) in cuda.log


def test_handoff_copies_then_records_and_receive_waits_then_reads(cuda):
    src = FakeDeviceArray(np.arange(6.0), cuda)
    dst = FakeDeviceArray(np.zeros((2, 3)), cuda)
    sender, receiver = cuda.Stream(), cuda.Stream()
    with sender:
        message = handoff(src)  # through tinyflow.device, as LocalComm does
    src.host[:] = -1  # the sender reuses its buffer at once: the message is a private copy
    with receiver:
        receive_handoff(dst, message)
    ready = message.ready.name
    steps = [e for e in cuda.log if e[0] in ("copy", "record", "wait", "write")]
    read = steps[-1][2]
    assert steps == [
        ("copy", sender.name), ("record", sender.name, ready),  # after the producer, on its stream
        ("wait", receiver.name, ready), ("write", receiver.name),  # the reader waits, then reads
        ("record", receiver.name, read),  # and marks its read
    ]
    np.testing.assert_array_equal(dst.host, np.arange(6.0).reshape(2, 3))
    assert message.size == 6 and message.dtype == np.float64


def test_a_received_message_stays_alive_until_the_receiving_stream_has_read_it(cuda):
    src = FakeDeviceArray(np.ones(4), cuda)
    with cuda.Stream() as sender:
        message = handoff(src)
    with streams.stream_context(0) as receiver:
        receive_handoff(FakeDeviceArray(np.zeros(4), cuda), message)
        assert streams.kept_alive() == 1  # the read is only queued
        kept = streams._kept()[0][1]
        assert kept is message.array
    assert streams.kept_alive() == 0  # released once the stream was synchronized
    assert sender is not receiver


def test_local_comm_sends_through_handoff_and_receives_through_receive_handoff(monkeypatch):
    made, taken = [], []

    def spy_handoff(arr):
        message = handoff(arr)
        made.append(id(message))
        return message

    def spy_receive(dst, message):
        taken.append(id(message))
        receive_handoff(dst, message)

    monkeypatch.setattr(local, "handoff", spy_handoff)
    monkeypatch.setattr(local, "receive_handoff", spy_receive)

    def fn(comm):
        buf = np.full(7, float(comm.rank))
        allreduce(buf, comm, algorithm="ring", segment_bytes=16)
        allreduce(buf, comm, algorithm="native")
        return buf

    for buf in run_local(fn, 3, timeout=10):
        np.testing.assert_array_equal(buf, np.full(7, 9.0))
    assert taken and set(taken) <= set(made)  # every message read was made by handoff


def test_thread_ranks_exchange_device_buffers_on_their_own_streams(cuda):
    """run_local with a cuda-like device: each rank on its own stream, every read after a wait
    on the sender's event."""

    class FakeCudaDevice:
        def stream(self):
            return streams.stream_context(0)

    def fn(comm):
        mine = cuda.get_current_stream()
        send = FakeDeviceArray(np.full(3, float(comm.rank)), cuda)
        got = FakeDeviceArray(np.zeros(3), cuda)
        comm.sendrecv(send, (comm.rank + 1) % comm.size, got, (comm.rank - 1) % comm.size)
        return mine.name, got.host.copy()

    results = run_local(fn, 3, timeout=10, device=FakeCudaDevice())
    assert len({name for name, _ in results}) == 3
    for rank, (_, got) in enumerate(results):
        np.testing.assert_array_equal(got, np.full(3, float((rank - 1) % 3)))
    log = list(cuda.log)
    for event in [e[2] for e in log if e[0] == "record"]:
        waits = [i for i, e in enumerate(log) if e[0] == "wait" and e[2] == event]
        recorded = next(i for i, e in enumerate(log) if e[0] == "record" and e[2] == event)
        assert all(i > recorded for i in waits)
    # every stream a rank waited on an event from was not its own (a real cross-stream hand-off)
    owner = {e[2]: e[1] for e in log if e[0] == "record"}
    assert all(owner[e[2]] != e[1] for e in log if e[0] == "wait")
