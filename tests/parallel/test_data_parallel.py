"""DataParallel: N workers of batch b train exactly like one worker of batch N*b, and fail loudly."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.optim import SGD
from tinyflow.parallel import CommError, CommTimeoutError, run_local
from tinyflow.parallel.communicator import Communicator
from tinyflow.parallel.allreduce import SMALL_BUCKET_BYTES, choose_by_size
from tinyflow.parallel.data_parallel import DataParallel
from tinyflow.parallel.local import LocalComm, LocalGroup
from tinyflow.parallel.ring import ring_bytes_sent
from tinyflow.parallel.trace import ChromeTracer

IN, HIDDEN, OUT = 5, 7, 3
STEPS = 4


def _mlp(seed: int) -> nn.Module:
    """A tiny float64 MLP whose weights depend only on ``seed`` (no global RNG: thread-safe)."""
    model = nn.Sequential(nn.Linear(IN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUT))
    model.double()
    rng = np.random.default_rng(seed)
    model.load_state_dict({k: rng.standard_normal(v.shape) * 0.5 for k, v in model.state_dict().items()})
    return model


def _data(n_samples: int, seed: int = 123) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n_samples, IN)), rng.integers(0, OUT, size=n_samples)


def _train(model: nn.Module, step_batches, lr: float = 0.1, dp: DataParallel | None = None) -> None:
    net = dp if dp is not None else model
    opt = SGD(model.parameters(), lr=lr, momentum=0.9)
    for x, y in step_batches:
        opt.zero_grad()
        loss = F.cross_entropy(net(tf.tensor(x)), tf.tensor(y))
        loss.backward()
        opt.step()


def _reference(world: int, batch: int) -> dict[str, np.ndarray]:
    x, y = _data(world * batch * STEPS)
    model = _mlp(seed=0)
    steps = [(x[s * world * batch : (s + 1) * world * batch], y[s * world * batch : (s + 1) * world * batch]) for s in range(STEPS)]
    _train(model, steps)
    return {k: v.numpy() for k, v in model.state_dict().items()}


def _distributed(world: int, batch: int, **dp_kwargs) -> list[dict[str, np.ndarray]]:
    x, y = _data(world * batch * STEPS)
    models = [_mlp(seed=rank) for rank in range(world)]  # ranks start different: broadcast fixes that

    def fn(comm):
        model = models[comm.rank]
        dp = DataParallel(model, comm, **dp_kwargs)
        steps = []
        for s in range(STEPS):
            lo = (s * world + comm.rank) * batch
            steps.append((x[lo : lo + batch], y[lo : lo + batch]))
        _train(model, steps, dp=dp)
        dp.close()
        return {k: v.numpy() for k, v in model.state_dict().items()}

    return run_local(fn, world, timeout=30)


@pytest.mark.parametrize("algorithm", ["ring", "tree", "naive", "native"])
@pytest.mark.parametrize("world", [2, 3])
def test_n_workers_equal_one_big_batch(algorithm, world):
    batch = 4
    expected = _reference(world, batch)
    for rank, got in enumerate(_distributed(world, batch, algorithm=algorithm, bucket_mb=0.0005)):
        for name in expected:
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-10, atol=1e-12, err_msg=f"rank {rank} {name}")


@pytest.mark.parametrize("overlap", [True, False])
def test_one_bucket_or_many_with_and_without_overlap(overlap):
    expected = _reference(4, 2)
    for bucket_mb in (25.0, 1e-6):  # one bucket for all, or one bucket per parameter
        for got in _distributed(4, 2, bucket_mb=bucket_mb, overlap=overlap):
            for name in expected:
                np.testing.assert_allclose(got[name], expected[name], rtol=1e-10, atol=1e-12)


def test_fp16_compression_trains_close_to_exact():
    expected = _reference(2, 4)
    for got in _distributed(2, 4, compression="fp16"):
        for name in expected:
            np.testing.assert_allclose(got[name], expected[name], rtol=0, atol=5e-3)


def test_onebit_compression_keeps_replicas_identical():
    results = _distributed(3, 4, compression="1bit")
    for got in results[1:]:
        for name in got:
            np.testing.assert_array_equal(got[name], results[0][name])


def test_bucket_layout_and_bytes_per_step():
    world = 3

    def fn(comm):
        model = _mlp(seed=comm.rank)
        dp = DataParallel(model, comm, algorithm="ring", bucket_mb=(HIDDEN * HIDDEN + HIDDEN) * 8 / 2**20)
        x, y = _data(4, seed=comm.rank)
        F.cross_entropy(dp(tf.tensor(x)), tf.tensor(y)).backward()
        layout = [[s.name for s in b.slots] for b in dp.buckets]
        sizes = [b.flat.size for b in dp.buckets]
        stats = dp.last_step
        dp.close()
        return layout, sizes, stats

    for rank, (layout, sizes, stats) in enumerate(run_local(fn, world)):
        # reverse registration order; a bucket (capacity 56 float64) closes when the next
        # parameter would overflow it: 3 + 21 + 7 = 31 | 49 + 7 = 56 | 35
        assert layout == [["4.bias", "4.weight", "2.bias"], ["2.weight", "0.bias"], ["0.weight"]]
        assert stats.buckets == 3 and stats.comm_seconds > 0
        assert stats.bytes_sent == sum(ring_bytes_sent(n, 8, rank, world) for n in sizes)


def test_mismatched_models_name_the_difference_and_rank():
    def fn(comm):
        hidden = HIDDEN if comm.rank != 2 else HIDDEN + 1
        model = nn.Sequential(nn.Linear(IN, hidden), nn.ReLU(), nn.Linear(hidden, OUT))
        DataParallel(model, comm)

    with pytest.raises(CommError, match=r"parameter '0.weight' is \(8, 5\) float32 on rank 2 but \(7, 5\) float32 on rank 0"):
        run_local(fn, 3, timeout=10)

    def fn2(comm):
        layers = [nn.Linear(IN, OUT)] + ([nn.ReLU(), nn.Linear(OUT, OUT)] if comm.rank == 0 else [])
        DataParallel(nn.Sequential(*layers), comm)

    with pytest.raises(CommError, match="parameter '2.weight' exists only on rank 0"):
        run_local(fn2, 2, timeout=10)


def test_silent_rank_during_training_is_named():
    def fn(comm):
        model = _mlp(seed=0)
        dp = DataParallel(model, comm, timeout=1.0)
        assert comm.timeout == 1.0
        x, y = _data(4)
        if comm.rank == 1:
            time.sleep(5)  # this rank hangs before its backward
        F.cross_entropy(dp(tf.tensor(x)), tf.tensor(y)).backward()

    with pytest.raises(CommTimeoutError, match="rank 1 is"):
        run_local(fn, 3, grace=0.1)


def test_unused_parameter_needs_synchronize_and_gets_zero_grad():
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nn.Linear(IN, OUT)
            self.unused = nn.Linear(IN, OUT)

        def forward(self, x):
            return self.used(x)

    def fn(comm):
        model = Branchy()
        dp = DataParallel(model, comm)
        x, y = _data(4, seed=comm.rank)
        x = x.astype(np.float32)  # the model's dtype (linear refuses a mix, as torch)
        F.cross_entropy(dp(tf.tensor(x)), tf.tensor(y)).backward()
        with pytest.raises(RuntimeError, match="call dp.synchronize"):
            dp(tf.tensor(x))
        dp.synchronize()
        grads = {n: p.grad.numpy() for n, p in model.named_parameters()}
        dp.close()
        return grads

    g0, g1 = run_local(fn, 2)
    for name in g0:
        np.testing.assert_array_equal(g0[name], g1[name])
    assert not g0["unused.weight"].any() and g0["used.weight"].any()


def test_no_sync_accumulates_then_averages():
    world = 2

    def fn(comm):
        model = _mlp(seed=0)
        dp = DataParallel(model, comm)
        x, y = _data(8, seed=comm.rank)
        with dp.no_sync():
            F.cross_entropy(dp(tf.tensor(x[:4])), tf.tensor(y[:4])).backward()
        local_first = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
        F.cross_entropy(dp(tf.tensor(x[4:])), tf.tensor(y[4:])).backward()
        dp.close()
        return local_first, {n: p.grad.numpy() for n, p in model.named_parameters()}

    (first0, avg0), (first1, avg1) = run_local(fn, world)
    # the reference: sum of both micro-batch gradients on each rank, averaged over ranks
    ref = {}
    for rank in range(world):
        model = _mlp(seed=0)
        x, y = _data(8, seed=rank)
        F.cross_entropy(model(tf.tensor(x[:4])), tf.tensor(y[:4])).backward()
        F.cross_entropy(model(tf.tensor(x[4:])), tf.tensor(y[4:])).backward()
        for n, p in model.named_parameters():
            ref[n] = ref.get(n, 0) + p.grad.numpy() / world
    assert any(not np.allclose(first0[n], first1[n]) for n in first0), "no_sync must not communicate"
    for n in ref:
        np.testing.assert_allclose(avg0[n], ref[n], rtol=1e-10)
        np.testing.assert_allclose(avg1[n], ref[n], rtol=1e-10)


def test_trace_records_compute_and_allreduce(tmp_path):
    def fn(comm):
        tracer = ChromeTracer(rank=comm.rank)
        model = _mlp(seed=0)
        dp = DataParallel(model, comm, bucket_mb=1e-6, tracer=tracer)
        x, y = _data(4)
        with tracer.span("forward+backward"):
            F.cross_entropy(dp(tf.tensor(x)), tf.tensor(y)).backward()
        dp.close()
        tracer.save(str(tmp_path / f"trace{comm.rank}.json"))
        return tracer.to_json()

    import json

    for rank, trace in enumerate(run_local(fn, 2)):
        names = [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"]
        assert "forward+backward" in names
        assert sum(n.startswith("allreduce bucket") for n in names) == 6
        assert all(e["pid"] == rank for e in trace["traceEvents"])
        assert json.loads((tmp_path / f"trace{rank}.json").read_text()) == trace


def test_single_worker_is_a_plain_model():
    def fn(comm):
        model = _mlp(seed=0)
        dp = DataParallel(model, comm)
        x, y = _data(4)
        F.cross_entropy(dp(tf.tensor(x)), tf.tensor(y)).backward()
        return {n: p.grad.numpy() for n, p in model.named_parameters()}, list(dp.state_dict())

    (grads, keys), = run_local(fn, 1)
    model = _mlp(seed=0)
    x, y = _data(4)
    F.cross_entropy(model(tf.tensor(x)), tf.tensor(y)).backward()
    for n, p in model.named_parameters():
        np.testing.assert_array_equal(grads[n], p.grad.numpy())
    assert keys == list(model.state_dict())  # no 'module.' prefix in checkpoints


def test_batchnorm_statistics_follow_rank_0():
    """Each rank sees its own shard; rank 0's running statistics are copied to all at each forward."""

    def fn(comm):
        tf.manual_seed(0)
        net = nn.Sequential(nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3))
        dp = DataParallel(net, comm)
        rng = np.random.default_rng(comm.rank)  # a different shard per rank
        for _ in range(2):
            x = tf.tensor(rng.standard_normal((4, 2, 3, 3)).astype(np.float32) + comm.rank)
            dp(x).sum().backward()
        # The same last batch everywhere: after the broadcast every rank updates the same statistics.
        dp(tf.tensor(np.random.default_rng(9).standard_normal((4, 2, 3, 3)).astype(np.float32)))
        return net[1].running_mean.numpy().copy()

    means = run_local(fn, 3)
    for m in means[1:]:
        np.testing.assert_array_equal(m, means[0])


# ---- the default algorithm: a size rule, nothing timed ---------------------------------------


class _NoNativeComm(LocalComm):
    """A thread rank whose transport has no all-reduce of its own (as a plain TCP transport)."""

    native_allreduce = Communicator.native_allreduce


def test_size_rule():
    """native where the transport has one; else tree for small buckets on >= 4 ranks, ring otherwise."""
    small, large = SMALL_BUCKET_BYTES - 1, SMALL_BUCKET_BYTES
    assert [choose_by_size(n, Communicator(0, 4)) for n in (1, small, large, 1 << 30)] == ["tree", "tree", "ring", "ring"]
    assert [choose_by_size(n, Communicator(0, 16)) for n in (small, large)] == ["tree", "ring"]
    for world in (2, 3):  # the ring sends no more messages than the tree here, and fewer bytes
        assert [choose_by_size(n, Communicator(0, world)) for n in (1, small, large)] == ["ring"] * 3
    assert [choose_by_size(n, LocalComm(LocalGroup(4), 0)) for n in (1, 1 << 30)] == ["native", "native"]


def test_default_picks_by_bucket_size_and_averages():
    """A small (bias) bucket and a large (weight) bucket get tree and ring on 4 ranks of a transport
    without a native all-reduce, native on the thread transport; the gradients are the mean either way."""
    world = 4
    x = np.random.default_rng(0).standard_normal((world * 2, 400)).astype(np.float32)

    def fn(comm):
        results = {}
        for name, c in (("plain", _NoNativeComm(comm.group, comm.rank, comm.timeout)), ("native", comm)):
            layer = nn.Linear(400, 200)  # weight 320,000 bytes, bias 800 bytes
            dp = DataParallel(layer, c, bucket_mb=SMALL_BUCKET_BYTES / 2**20)
            dp(tf.tensor(x[comm.rank * 2 : comm.rank * 2 + 2])).sum().backward()
            results[name] = (dp.algorithm, [b.nbytes for b in dp.buckets], list(dp.bucket_algorithms),
                             repr(dp), layer.weight.grad.numpy().copy())
            dp.close()
        return results

    expected = x.reshape(world, 2, 400).sum(axis=1).mean(axis=0)  # d(sum(xW^T+b))/dW[j] = sum of x rows
    for results in run_local(fn, world):
        algorithm, sizes, chosen, text, grad = results["plain"]
        assert algorithm == "auto" and sizes == [800, 320_000]  # bias first (reverse registration order)
        assert chosen == ["tree", "ring"] and "algorithm=auto(tree,ring)" in text
        np.testing.assert_allclose(grad, np.broadcast_to(expected, (200, 400)), rtol=1e-5, atol=1e-6)
        _, _, chosen, _, grad = results["native"]
        assert chosen == ["native", "native"]
        np.testing.assert_allclose(grad, np.broadcast_to(expected, (200, 400)), rtol=1e-5, atol=1e-6)


_IMPORTS_PROBE = """
import sys
import numpy as np
import tinyflow as tf
import tinyflow.nn as nn
from tinyflow.parallel import DataParallel, run_local

CALIBRATION = ("tinyflow.parallel.auto", "tinyflow.parallel.cost_model", "tinyflow.parallel.benchmark")

def step(**options):
    def fn(comm):
        layer = nn.Linear(3, 2)
        dp = DataParallel(layer, comm, **options)
        dp(tf.tensor(np.ones((2, 3), dtype=np.float32))).sum().backward()
        dp.close()
        return dp.algorithm
    return run_local(fn, 2)[0]

print(step(), sorted(m for m in CALIBRATION if m in sys.modules))
print(step(algorithm="auto"), sorted(m for m in CALIBRATION if m in sys.modules))
print(step(calibrate=True), sorted(m for m in CALIBRATION if m in sys.modules))
"""


def test_default_loads_no_calibration_and_auto_still_calibrates():
    """A plain DataParallel (build and one step; auto is the default) imports none of the timing
    modules; calibrate=True does."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", _IMPORTS_PROBE], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == ["auto []", "auto []", "auto ['tinyflow.parallel.auto']"]


def test_default_never_times_anything(monkeypatch):
    """In this process (where other tests may have loaded auto already): the default never calls
    the calibration, even through allreduce."""
    import tinyflow.parallel.auto as auto

    def refuse(*args, **kwargs):
        raise AssertionError("a plain DataParallel must not time the all-reduce candidates")

    monkeypatch.setattr(auto, "calibrate", refuse)
    monkeypatch.setattr(auto, "algorithm_function", refuse)
    expected = _reference(3, 2)
    for got in _distributed(3, 2, bucket_mb=1e-6):  # one bucket per parameter
        for name in expected:
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="choose one of auto, ring, tree, naive, native"):
        run_local(lambda comm: DataParallel(_mlp(0), comm, algorithm="fastest"), 1)
