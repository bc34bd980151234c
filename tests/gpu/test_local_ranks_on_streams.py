"""Thread ranks that share one GPU: ``run_local(fn, n, device="cuda:0")`` gives every rank its
own CUDA stream on the one device, so ring, tree, naive (and the shared-memory native) all-reduce
run on CuPy buffers with a single GPU (NCCL refuses two ranks on one device). The reductions are
device kernels (ring and tree never copy to the host); DataParallel keeps its N-ranks-of-batch-b
equal one-rank-of-batch-N*b guarantee; a silent rank is a timeout naming it. The CPU stand-ins
for the stream and event ordering are in tests/parallel/test_local_streams.py."""
from __future__ import annotations

import time

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
import tinyflow_cuda
from tinyflow.device import count_host_reads
from tinyflow.optim import SGD
from tinyflow.parallel import CommTimeoutError, allreduce, run_local
from tinyflow.parallel.data_parallel import DataParallel

# Where no GPU is, they run on the strict CuPy stand-in: the H100 run found their host-read asserts
# wrong, and CI now sees what they assert.
pytestmark = [pytest.mark.gpu, pytest.mark.cupy_strict]

DEVICE = "cuda:0"


def _keep_stream_busy(cp) -> None:
    """Queue a few milliseconds of GEMMs on the current stream, so that a reader that did not
    wait for this stream's work would see stale data."""
    a = cp.full((1024, 1024), 1.0 / 1024, cp.float32)
    for _ in range(8):
        a = a @ a


@pytest.fixture
def host_copies(monkeypatch):
    """Which threads copied a device array to the host through tinyflow (tinyflow_cuda.to_host)."""
    import threading

    calls: list[str] = []
    real = tinyflow_cuda.to_host

    def spy(arr):
        calls.append(threading.current_thread().name)
        return real(arr)

    monkeypatch.setattr(tinyflow_cuda, "to_host", spy)
    return calls


AGREEMENT = "allreduce signature"  # the one read of a new (length, dtype, op, algorithm): the ranks' agreement


@pytest.mark.parametrize("algorithm", ["ring", "tree", "naive", "native"])
@pytest.mark.parametrize("world", [2, 3, 4])
def test_exact_sum_on_device_buffers_one_stream_per_rank(cp, host_copies, algorithm, world):
    """Every host read is named and placed: a new signature costs each rank exactly one read (the
    agreement, before any data moves); the same signature again costs none on ring, tree and
    native (the training loop's hot path), and on naive only rank 0's staging of the sum."""
    rng = np.random.default_rng(world)
    length = 100_003  # odd: uneven chunks, a one-way last segment
    # integers below 2**22: every partial sum is exact in float32, whatever the order
    host = [rng.integers(-(2**20), 2**20, length).astype(np.float32) for _ in range(world)]
    want = np.sum(np.asarray(host, np.float64), axis=0)

    def fn(comm):
        stream = cp.cuda.get_current_stream()
        _keep_stream_busy(cp)
        bufs = [cp.asarray(host[comm.rank]) for _ in range(2)]
        reads = []
        for buf in bufs:  # the first call agrees on the signature, the second finds it agreed
            with count_host_reads() as seen:
                allreduce(buf, comm, algorithm=algorithm, segment_bytes=16 * 1024)
            reads.append(seen.reasons)
        return stream.ptr, bufs, reads

    results = run_local(fn, world, timeout=60, device=DEVICE)
    streams = [ptr for ptr, _, _ in results]
    assert len(set(streams)) == world and cp.cuda.Stream.null.ptr not in streams
    for rank, (_, bufs, (first, again)) in enumerate(results):
        for buf in bufs:
            assert isinstance(buf, cp.ndarray) and buf.device.id == 0
            np.testing.assert_array_equal(cp.asnumpy(buf), want, err_msg=f"rank {rank}")
        staging = ["to_host"] * world if (algorithm == "naive" and rank == 0) else []
        assert first == [AGREEMENT, *staging], f"rank {rank}, first all-reduce"
        assert again == staging, f"rank {rank}, same signature again"
    # the device-to-host copies behind those reads, by thread: the agreement once per rank, and
    # (naive) rank 0's own buffer and the world - 1 that arrive, in each of the two calls
    expected = sorted([f"tinyflow-rank{r}" for r in range(world)]
                      + (["tinyflow-rank0"] * 2 * world if algorithm == "naive" else []))
    assert sorted(host_copies) == expected


@pytest.mark.parametrize("algorithm", ["ring", "tree", "naive"])
def test_float64_and_multidimensional_buffers(cp, algorithm):
    rng = np.random.default_rng(7)
    host = [rng.standard_normal((33, 17)) for _ in range(3)]

    def fn(comm):
        buf = cp.asarray(host[comm.rank])
        allreduce(buf, comm, algorithm=algorithm, op="mean", segment_bytes=1000)
        return cp.asnumpy(buf)

    for got in run_local(fn, 3, timeout=60, device=DEVICE):
        np.testing.assert_allclose(got, np.mean(host, axis=0), rtol=1e-12, atol=1e-12)


# ---- DataParallel on the GPU -----------------------------------------------------------------

IN, HIDDEN, OUT = 5, 7, 3
STEPS = 4


def _mlp(seed: int) -> nn.Module:
    model = nn.Sequential(nn.Linear(IN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                          nn.Linear(HIDDEN, OUT))
    model.double()
    rng = np.random.default_rng(seed)
    model.load_state_dict({k: rng.standard_normal(v.shape) * 0.5 for k, v in model.state_dict().items()})
    return model.to(DEVICE)


def _data(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(123)
    return rng.standard_normal((n, IN)), rng.integers(0, OUT, size=n)


def _train(model: nn.Module, batches, dp: DataParallel | None = None) -> None:
    net = dp if dp is not None else model
    opt = SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(net(tf.tensor(x, device=DEVICE)), tf.tensor(y, device=DEVICE))
        loss.backward()
        opt.step()


@pytest.mark.parametrize("algorithm", ["ring", "tree", "naive"])
@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("world", [2, 3])
def test_n_gpu_thread_ranks_equal_one_big_batch(cp, algorithm, overlap, world):
    batch = 4
    x, y = _data(world * batch * STEPS)
    reference = _mlp(seed=0)
    _train(reference, [(x[s * world * batch:(s + 1) * world * batch],
                        y[s * world * batch:(s + 1) * world * batch]) for s in range(STEPS)])
    expected = {k: v.numpy() for k, v in reference.state_dict().items()}
    models = [_mlp(seed=rank) for rank in range(world)]  # different: the broadcast fixes that

    def fn(comm):
        model = models[comm.rank]
        dp = DataParallel(model, comm, algorithm=algorithm, overlap=overlap, bucket_mb=0.0005)
        lo = [(s * world + comm.rank) * batch for s in range(STEPS)]
        _train(model, [(x[i:i + batch], y[i:i + batch]) for i in lo], dp=dp)
        dp.close()
        return {k: v.numpy() for k, v in model.state_dict().items()}

    for rank, got in enumerate(run_local(fn, world, timeout=60, device=DEVICE)):
        for name, want in expected.items():
            np.testing.assert_allclose(got[name], want, rtol=1e-9, atol=1e-11,
                                       err_msg=f"rank {rank} {name}")


# ---- a silent rank ---------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["ring", "tree", "naive", "native"])
def test_a_silent_rank_is_named_within_the_timeout_on_device_buffers(cp, algorithm):
    def fn(comm):
        buf = cp.ones(1000, cp.float32)
        if comm.rank == 2:
            time.sleep(3.0)  # stuck in "compute", never joins the all-reduce in time
            return None
        allreduce(buf, comm, algorithm=algorithm)
        return buf

    with pytest.raises(CommTimeoutError) as info:
        run_local(fn, 4, timeout=0.5, grace=0.1, device=DEVICE)
    assert info.value.peer == 2
    assert "rank 2 is" in str(info.value) and "not answering" in str(info.value)
