"""The NCCL transport on the CPU, with stand-ins for cupy and cupy.cuda.nccl: thread ranks run
the real NcclCommunicator over a fake NCCL that moves bytes between NumPy buffers posing as
device buffers. Proves that naive all-reduce sends only device buffers and stages its host sum
through tinyflow.device, and that a stalled peer is a CommTimeoutError naming it within the
deadline, wherever NCCL would hang: inside ncclGroupEnd or ncclRecv on the host, on the GPU,
while joining the clique, or waiting for the unique id. (Real GPUs: tests/gpu/test_nccl.py.)"""
from __future__ import annotations

import ctypes
import queue
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

import tinyflow_cuda
from tinyflow.parallel import CommError, CommTimeoutError, allreduce
from tinyflow.parallel.allreduce import agree_on_signature
from tinyflow_cuda.nccl import NcclCommunicator

TYPES = {0: np.float32, 1: np.float64, 2: np.float16, 3: np.int32, 4: np.int64, 5: np.uint8,
         6: np.int8}


class FakeDeviceArray:
    """A NumPy array posing as a CuPy one: ``data.ptr``, ``device.id``, views, ``get()``."""

    def __init__(self, host: np.ndarray):
        self.host = host
        self.device = SimpleNamespace(id=0)

    size = property(lambda self: self.host.size)
    dtype = property(lambda self: self.host.dtype)
    shape = property(lambda self: self.host.shape)
    nbytes = property(lambda self: self.host.nbytes)
    flags = property(lambda self: self.host.flags)
    data = property(lambda self: SimpleNamespace(ptr=self.host.ctypes.data))

    def reshape(self, *shape):
        return FakeDeviceArray(self.host.reshape(*shape))

    def __getitem__(self, index):
        return FakeDeviceArray(self.host[index])

    def __setitem__(self, index, value):
        if isinstance(value, np.ndarray):
            raise TypeError("a device array takes no host array (as CuPy's setitem)")
        self.host[index] = value.host

    def get(self):
        return self.host.copy()

    def copy(self):
        return FakeDeviceArray(self.host.copy())


class Stream:
    def __init__(self, done: bool = True):
        self.ptr, self.done = 0, done


def fake_cupy(stream: Stream) -> SimpleNamespace:
    return SimpleNamespace(
        ndarray=FakeDeviceArray,
        float32=np.float32,
        zeros=lambda n, dtype: FakeDeviceArray(np.zeros(n, dtype)),
        cuda=SimpleNamespace(Device=lambda i: SimpleNamespace(use=lambda: None),
                             get_current_stream=lambda: stream,
                             runtime=SimpleNamespace(getDeviceCount=lambda: 1)))


class World:
    """What the ranks of one fake NCCL clique share. ``closed`` frees every blocked call."""

    def __init__(self, size: int):
        self.size = size
        self.queues = {(s, d): queue.Queue() for s in range(size) for d in range(size) if s != d}
        self.closed = threading.Event()
        self.cond = threading.Condition()
        self.joined = 0
        self.slots: list = [None] * size
        self.arrived, self.generation, self.sums = 0, 0, {}
        self.aborts: list[int] = []
        self.mpi = {r: queue.Queue() for r in range(size)}
        self.bcast: queue.Queue = queue.Queue()

    def block_until(self, ready) -> None:
        with self.cond:
            while not ready():
                if self.closed.is_set():
                    raise RuntimeError("fake NCCL: the world was closed")
                self.cond.wait(0.05)


class FakeNccl:
    """Stands in for ``cupy.cuda.nccl``: blocking calls that wait for the peers, like NCCL's."""

    NCCL_FLOAT32, NCCL_FLOAT64, NCCL_FLOAT16, NCCL_INT32, NCCL_INT64, NCCL_UINT8, NCCL_INT8 = range(7)
    NCCL_SUM = 0

    def __init__(self, world: World, unique_id=bytes(range(128))):
        self.world = world
        self.unique_id = unique_id
        self._group = threading.local()
        nccl = self

        class NcclCommunicator:
            def __init__(self, size, unique_id, rank):  # blocks until every rank has joined
                assert unique_id == nccl.unique_id
                self.rank, self.world = rank, nccl.world
                with self.world.cond:
                    self.world.joined += 1
                    self.world.cond.notify_all()
                self.world.block_until(lambda: self.world.joined >= size)

            def send(self, ptr, count, dtype, peer, stream):
                nccl._submit(lambda: self._send(ptr, count, dtype, peer))

            def recv(self, ptr, count, dtype, peer, stream):
                nccl._submit(lambda: self._recv(ptr, count, dtype, peer))

            def _send(self, ptr, count, dtype, peer):
                nbytes = count * np.dtype(TYPES[dtype]).itemsize
                self.world.queues[(self.rank, peer)].put(ctypes.string_at(ptr, nbytes))

            def _recv(self, ptr, count, dtype, peer):
                q = self.world.queues[(peer, self.rank)]
                while True:  # as long as the peer sends nothing: "forever"
                    try:
                        data = q.get(timeout=0.05)
                        break
                    except queue.Empty:
                        if self.world.closed.is_set():
                            raise RuntimeError("fake NCCL: the world was closed") from None
                assert len(data) == count * np.dtype(TYPES[dtype]).itemsize
                ctypes.memmove(ptr, data, len(data))

            def allReduce(self, send, recv, count, dtype, op, stream):  # noqa: N802
                world, kind = self.world, TYPES[dtype]
                nbytes = count * np.dtype(kind).itemsize
                mine = np.frombuffer(ctypes.string_at(send, nbytes), kind)
                with world.cond:
                    world.slots[self.rank] = mine
                    world.arrived += 1
                    generation = world.generation
                    if world.arrived == world.size:
                        world.sums[generation] = np.sum(world.slots, axis=0, dtype=kind)
                        world.arrived, world.generation = 0, generation + 1
                        world.cond.notify_all()
                world.block_until(lambda: generation in world.sums)
                ctypes.memmove(recv, world.sums[generation].tobytes(), nbytes)

            def abort(self):
                self.world.aborts.append(self.rank)

            def destroy(self):
                pass

        self.NcclCommunicator = NcclCommunicator

    def get_unique_id(self):
        return self.unique_id

    def _submit(self, op) -> None:
        ops = getattr(self._group, "ops", None)
        if ops is None:
            op()  # outside a group: at once (and blocking, as a lone ncclRecv can)
        else:
            ops.append(op)

    def groupStart(self):  # noqa: N802
        self._group.ops = []

    def groupEnd(self):  # noqa: N802
        ops, self._group.ops = self._group.ops, None
        for op in ops:  # sends are buffered, so running them in order cannot deadlock here
            op()


class FakeMpi:
    """The mpi4py communicator NcclCommunicator uses to share the id: bcast only."""

    def __init__(self, world: World, rank: int):
        self.world, self.rank = world, rank

    def Get_rank(self):  # noqa: N802
        return self.rank

    def Get_size(self):  # noqa: N802
        return self.world.size

    def bcast(self, obj, root=0):
        if self.rank == root:
            for _ in range(self.world.size - 1):
                self.world.bcast.put(obj)
            return obj
        return self.world.bcast.get(timeout=30)


class FakeMpiP2P(FakeMpi):
    """Adds Isend/Irecv, so the unique id travels point to point and polled."""

    def Isend(self, buf, dest, tag):  # noqa: N802
        self.world.mpi[dest].put(buf.copy())
        return SimpleNamespace(Test=lambda: True)

    def Irecv(self, buf, source, tag):  # noqa: N802
        box = self.world.mpi[self.rank]

        def test():
            try:
                buf[...] = box.get_nowait()
            except queue.Empty:
                return False
            return True

        return SimpleNamespace(Test=test)


def run_ranks(world: World, fn, ranks=None, timeout=5.0, stream=None, mpi=FakeMpi, nccl=None):
    """Run ``fn(comm)`` for each rank in ``ranks`` (all by default) on threads; per rank the
    result or the exception. Ranks left out never arrive: they are the stalled peers."""
    nccl = nccl or FakeNccl(world)
    cupy = fake_cupy(stream or Stream())
    ranks = range(world.size) if ranks is None else ranks
    out: dict[int, object] = {}

    def rank_main(r):
        try:
            comm = NcclCommunicator(mpi(world, r), device=0, timeout=timeout, nccl=nccl, cupy=cupy)
            out[r] = fn(comm)
        except BaseException as exc:  # noqa: BLE001 - inspected by the test
            out[r] = exc

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in ranks]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join(timeout + 10)
            assert not t.is_alive(), "a rank hung past its timeout"
    finally:
        world.closed.set()  # frees the fake NCCL calls left blocked by a stalled peer
    return out


@pytest.fixture
def device_arrays(monkeypatch):
    """Route tinyflow.device's backend calls for FakeDeviceArrays, and count the transfers."""
    moves: list[tuple[str, str]] = []
    xp = SimpleNamespace(empty_like=lambda a: FakeDeviceArray(np.empty_like(a.host)),
                         asarray=lambda a: FakeDeviceArray(np.array(a)),  # allreduce's signature check
                         empty=lambda shape, dtype: FakeDeviceArray(np.empty(shape, dtype)))

    def array_module_of(arr):
        assert isinstance(arr, FakeDeviceArray), type(arr)
        return xp

    def to_host(arr):
        moves.append(("to_host", threading.current_thread().name))
        return arr.get()

    def to_device(arr, index):
        moves.append(("to_device", threading.current_thread().name))
        return FakeDeviceArray(np.array(arr))

    monkeypatch.setattr(tinyflow_cuda, "array_module_of", array_module_of)
    monkeypatch.setattr(tinyflow_cuda, "device_index_of", lambda arr: arr.device.id)
    monkeypatch.setattr(tinyflow_cuda, "to_host", to_host)
    monkeypatch.setattr(tinyflow_cuda, "to_device", to_device)
    return moves


def _check(out: dict) -> dict:
    for r, value in out.items():
        if isinstance(value, BaseException):
            raise AssertionError(f"rank {r} failed: {value!r}") from value
    return out


# ---- working cliques ------------------------------------------------------------------------


def test_sendrecv_ring_barrier_and_native_allreduce(device_arrays):
    world = World(3)

    def fn(comm):
        send = FakeDeviceArray(np.full(5, comm.rank, np.float32))
        got = FakeDeviceArray(np.zeros(5, np.float32))
        comm.sendrecv(send, (comm.rank + 1) % 3, got, (comm.rank - 1) % 3)
        comm.barrier()
        total = FakeDeviceArray(np.arange(4, dtype=np.float64) * (comm.rank + 1))
        allreduce(total, comm, algorithm="native")
        comm.close()
        return got.host.copy(), total.host.copy()

    out = _check(run_ranks(world, fn))
    for r in range(3):
        np.testing.assert_array_equal(out[r][0], np.full(5, (r - 1) % 3))
        np.testing.assert_array_equal(out[r][1], np.arange(4) * 6.0)


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_naive_sends_only_device_buffers_and_sums_on_the_host_of_rank_0(device_arrays, world_size):
    world = World(world_size)
    host = [np.arange(10, dtype=np.float64) * (r + 1) + r for r in range(world_size)]

    def fn(comm):
        buf = FakeDeviceArray(host[comm.rank].reshape(2, 5).copy())
        agree_on_signature(buf, comm, "sum", "naive")  # the first allreduce's check, done first
        comm.barrier()
        if comm.rank == 0:
            device_arrays.clear()  # count the transfers of the all-reduce alone
        comm.barrier()
        allreduce(buf, comm, algorithm="naive")  # NcclCommunicator rejects host buffers
        return buf.host.copy(), threading.current_thread().name, comm.bytes_sent

    out = _check(run_ranks(world, fn))
    want = np.sum(host, axis=0).reshape(2, 5)
    for r in range(world_size):
        np.testing.assert_array_equal(out[r][0], want)
    # rank 0 alone stages through tinyflow.device: its buffer and each arriving one to the host,
    # the sum back to the device once; the other ranks' buffers never leave the device
    root = out[0][1]
    assert sorted(device_arrays) == sorted([("to_host", root)] * world_size + [("to_device", root)])
    assert out[0][2] == (world_size - 1) * 80 and all(out[r][2] == 80 for r in range(1, world_size))


def test_unique_id_travels_point_to_point_as_bytes_or_as_the_old_tuple():
    for unique_id in (bytes(range(128)), tuple(range(-64, 64))):
        world = World(3)
        out = _check(run_ranks(world, lambda comm: comm.rank, mpi=FakeMpiP2P,
                               nccl=FakeNccl(world, unique_id)))
        assert out == {0: 0, 1: 1, 2: 2}  # FakeNccl asserts every rank got the same id


def test_host_buffers_are_refused_with_advice():
    world = World(2)

    def refuse(comm):
        with pytest.raises(TypeError, match="CuPy arrays.*move the tensor"):
            comm.send(np.zeros(3, np.float32), 1 - comm.rank)
        return "refused"

    assert _check(run_ranks(world, refuse)) == {0: "refused", 1: "refused"}


# ---- stalled peers --------------------------------------------------------------------------

TIMEOUT = 0.5


def _assert_timeout(exc, peer, elapsed, *words):
    assert isinstance(exc, CommTimeoutError), repr(exc)
    assert exc.peer == peer and exc.rank == 0
    if peer is not None:
        assert f"rank {peer} is not answering" in str(exc)
    for word in words:
        assert word in str(exc)
    # a hang-detection bound, not a speed claim: the alternative is waiting forever
    assert elapsed < TIMEOUT + 5


def test_a_peer_that_never_joins_the_exchange_times_out_inside_group_end():
    """Rank 1 joins the clique but never calls sendrecv: rank 0's ncclGroupEnd blocks in its
    ncclRecv forever; rank 0 must raise a timeout naming rank 1, and abandon the communicator."""
    world = World(2)
    stalled = threading.Event()

    def fn(comm):
        if comm.rank == 1:
            stalled.wait(30)  # "stuck in compute"
            return "stalled"
        buf = FakeDeviceArray(np.ones(4, np.float32))
        start = time.monotonic()
        try:
            comm.sendrecv(buf, 1, FakeDeviceArray(np.empty(4, np.float32)), 1)
        except CommTimeoutError as exc:
            elapsed = time.monotonic() - start
            with pytest.raises(CommError, match="aborted NCCL communicator"):
                comm.send(buf, 1)  # unusable from now on
            comm.close()  # no hang either
            return exc, elapsed
        finally:
            stalled.set()
        return "no timeout"

    out = run_ranks(world, fn, timeout=TIMEOUT)
    exc, elapsed = out[0]
    _assert_timeout(exc, 1, elapsed, "exchanging with ranks 1 and 1", "on the host")
    assert world.aborts == []  # never aborted under the thread stuck inside it


def test_a_lone_recv_from_a_silent_peer_times_out():
    world = World(3)
    done = threading.Event()

    def fn(comm):
        if comm.rank != 0:
            done.wait(30)
            return None
        start = time.monotonic()
        try:
            comm.recv(FakeDeviceArray(np.empty(2, np.float64)), 2, tag=7)
        except CommTimeoutError as exc:
            return exc, time.monotonic() - start
        finally:
            done.set()

    exc, elapsed = run_ranks(world, fn, timeout=TIMEOUT)[0]
    _assert_timeout(exc, 2, elapsed, "from rank 2 (tag 7)")


def test_gpu_work_that_never_finishes_aborts_the_communicator():
    """The host calls return but the stream never drains (the peer's kernel never comes)."""
    world = World(2)

    def fn(comm):
        if comm.rank == 1:
            comm.send(FakeDeviceArray(np.ones(3, np.float32)), 0)
            return None
        start = time.monotonic()
        try:
            comm.recv(FakeDeviceArray(np.empty(3, np.float32)), 1)
        except CommTimeoutError as exc:
            return exc, time.monotonic() - start

    out = run_ranks(world, fn, timeout=TIMEOUT, stream=Stream(done=False))
    exc, elapsed = out[0]
    _assert_timeout(exc, 1, elapsed, "communicator was aborted")
    assert 0 in world.aborts


def test_a_rank_that_never_joins_the_clique_is_a_timeout_not_a_hang():
    world = World(3)
    start = time.monotonic()
    out = run_ranks(world, lambda comm: "joined", ranks=[0, 1], timeout=TIMEOUT)
    elapsed = time.monotonic() - start
    for r in (0, 1):
        exc = out[r]
        assert isinstance(exc, CommTimeoutError), repr(exc)
        assert exc.peer is None and "joining the NCCL communicator of 3 ranks" in str(exc)
    assert elapsed < TIMEOUT + 5


def test_a_rank_0_that_never_sends_the_unique_id_is_named():
    world = World(2)
    start = time.monotonic()
    out = run_ranks(world, lambda comm: "joined", ranks=[1], timeout=TIMEOUT, mpi=FakeMpiP2P)
    exc = out[1]
    assert isinstance(exc, CommTimeoutError), repr(exc)
    assert exc.peer == 0 and exc.rank == 1
    assert "waiting for the NCCL unique id from rank 0" in str(exc)
    assert time.monotonic() - start < TIMEOUT + 5
