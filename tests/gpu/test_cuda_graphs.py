"""CUDA graphs (issue 23): the strict CuPy stand-in's fake capture, ``tinyflow.cuda.graphs`` and the
training loop's ``--cuda-graph``.

On the stand-in a capture runs nothing (outputs poisoned, in-place work deferred) and refuses
host reads and host-to-device copies as CUDA does, so a captured step that would be wrong on a GPU
(a value baked into a kernel argument, a host read, an allocation outside the graph's pool) fails
here. The equality tests are also gpu tests: on a GPU machine they run on cuda:0.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow import cli
from tinyflow.device import HostSyncError
from tinyflow.recipes.graphed_step import GraphedStep

pytestmark = pytest.mark.cupy_strict

DEVICE = "cuda:0"


def _stand_in():
    from cuda_tools.strict_cupy import strict_cupy

    return strict_cupy


# ---- the stand-in's capture -------------------------------------------------------------------
def test_capture_runs_nothing_and_each_replay_runs_the_captured_work() -> None:
    cp = _stand_in()
    a = cp.arange(6.0).reshape(2, 3)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        assert stream.is_capturing()
        b = a * 2  # new memory, poisoned until the first replay
        flat = b.reshape(-1)  # a view stays a view of b
        a += 1  # in place: deferred
        total = flat.sum()
        graph = stream.end_capture()
    assert not stream.is_capturing()
    np.testing.assert_array_equal(a.get(), np.arange(6.0).reshape(2, 3))  # nothing ran
    assert np.isnan(b.get()).all() and np.isnan(total.get())
    graph.launch()
    np.testing.assert_array_equal(b.get(), 2 * np.arange(6.0).reshape(2, 3))
    assert total.item() == 30.0 and flat.get()[5] == 10.0
    graph.launch()  # reads a as the first replay left it
    assert total.item() == 42.0 and a.get()[0, 0] == 2.0
    with stream:  # an allocation is no graph node: what is written there before a launch stays
        stream.begin_capture()
        slot = cp.empty((1,), dtype=cp.float32)
        doubled = slot * 2
        graph = stream.end_capture()
    for value in (5.0, 7.0):
        slot[...] = value  # as Capture.refresh() does, outside the graph
        graph.launch()
        assert doubled.item() == 2 * value


def test_host_reads_and_host_copies_inside_a_capture_raise_and_void_it() -> None:
    cp = _stand_in()
    x = cp.ones(3)
    stream = cp.cuda.Stream(non_blocking=True)
    refused = [lambda: float(x.sum()), lambda: x.get(), lambda: bool(x[0] > 0), lambda: cp.asarray(np.ones(2)),
               lambda: x.set(np.zeros(3)), lambda: x.__setitem__(slice(None), np.zeros(3)), lambda: x[[0, 1]],
               lambda: stream.synchronize()]
    for refuse in refused:
        with stream:
            stream.begin_capture()
            with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="cudaErrorStreamCaptureUnsupported"):
                refuse()
            with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="cudaErrorStreamCaptureInvalidated"):
                stream.end_capture()
    with stream:  # a 0-d host value is a fill kernel in CuPy: allowed, its value baked into the graph
        stream.begin_capture()
        y = cp.asarray(np.float32(2.0)) * x
        graph = stream.end_capture()
    graph.launch()
    np.testing.assert_array_equal(y.get(), [2.0, 2.0, 2.0])
    with pytest.raises(RuntimeError, match="default"):
        cp.cuda.Stream.null.begin_capture()


def test_allocations_during_a_capture_are_attributed_to_the_allocator_in_force() -> None:
    cp = _stand_in()
    pool, default = cp.cuda.MemoryPool(), cp.get_default_memory_pool()
    before = default.captured_bytes
    x = cp.ones((4, 4), dtype=cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    with cp.cuda.using_allocator(pool.malloc), stream:
        stream.begin_capture()
        y = (x @ x).sum(axis=0)  # two new arrays: 64 + 16 bytes
        graph = stream.end_capture()
    assert pool.captured_bytes == 80 and default.captured_bytes == before
    assert [owner for _, owner in graph.recording.allocations] == [pool, pool]
    with stream:
        stream.begin_capture()
        x * 2  # no allocator set: the default pool
        stream.end_capture()
    assert default.captured_bytes == before + 64
    graph.launch()
    np.testing.assert_array_equal(y.get(), np.full(4, 16.0, dtype=np.float32))


# ---- tinyflow.cuda.graphs ---------------------------------------------------------------------
def _mlp() -> tuple[nn.Module, tf.optim.Optimizer]:
    tf.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3)).to(DEVICE)
    return model, tf.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def _batches(n: int, shape: tuple[int, ...] = (5, 6), classes: int = 3, seed: int = 0) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape).astype(np.float32), rng.integers(0, classes, shape[0])) for _ in range(n)]


def test_cuda_graph_api_replays_equal_eager_steps_with_no_host_read_and_only_pool_allocations() -> None:
    from cuda_tools import strict_cupy

    data = _batches(7)

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    eager_model, eager_opt = _mlp()
    eager_losses = [step(eager_model, eager_opt, tf.tensor(x, device=DEVICE), tf.tensor(y, device=DEVICE)).item()
                    for x, y in data]
    model, opt = _mlp()
    for x, y in data[:3]:
        step(model, opt, tf.tensor(x, device=DEVICE), tf.tensor(y, device=DEVICE))
    static_x, static_y = tf.tensor(data[3][0], device=DEVICE), tf.tensor(data[3][1], device=DEVICE)
    default = strict_cupy.strict_cupy.get_default_memory_pool()
    outside, reads = default.captured_bytes, strict_cupy.host_reads()
    g = tf.cuda.CUDAGraph()
    with tf.cuda.graph(g):
        static_loss = step(model, opt, static_x, static_y)
    assert strict_cupy.host_reads() == reads  # the captured step reads nothing on the host
    assert default.captured_bytes == outside and g.pool().captured_bytes > 0  # all from the graph's pool
    assert len(g.capture.slots) >= 2  # at least the dropout seed and the learning rate live on the device
    # the slots come from a pool of their own: a block of the graph's pool could be a temporary that
    # an earlier node writes at replay, after refresh() filled the slot
    slot_bytes = sum(slot.array.nbytes for slot in g.capture.slots)
    assert g._backend.slot_pool.captured_bytes == slot_bytes
    losses = []
    for x, y in data[3:]:
        static_x.array[...] = tf.tensor(x, device=DEVICE).array
        static_y.array[...] = tf.tensor(y, device=DEVICE).array
        g.replay()
        losses.append(static_loss.item())
    assert g.launches == 4
    np.testing.assert_allclose(losses, eager_losses[3:], rtol=1e-6)
    for p, q in zip(eager_model.parameters(), model.parameters()):
        np.testing.assert_allclose(q.numpy(), p.numpy(), rtol=1e-6, atol=1e-7)


def test_graph_block_drops_the_capture_on_an_error_and_says_why() -> None:
    model, _ = _mlp()
    x = tf.tensor(_batches(1)[0][0], device=DEVICE)
    g = tf.cuda.CUDAGraph()
    with pytest.raises(HostSyncError, match="host read"):
        with tf.cuda.graph(g):
            model(x).sum().item()
    with pytest.raises(RuntimeError, match="before a capture ended"):
        g.replay()
    assert not tf.cuda.is_current_stream_capturing()


def test_make_graphed_callables_forward_and_backward_match_eager() -> None:
    tf.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(DEVICE)
    twin = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(DEVICE)
    twin.load_state_dict(model.state_dict())
    sample = tf.tensor(np.zeros((3, 4), np.float32), device=DEVICE, requires_grad=True)
    graphed = tf.cuda.make_graphed_callables(model, (sample,))
    for p in model.parameters():
        p.grad = None
    rng = np.random.default_rng(2)
    for _ in range(2):
        x = rng.standard_normal((3, 4)).astype(np.float32)
        a = tf.tensor(x, device=DEVICE, requires_grad=True)
        b = tf.tensor(x, device=DEVICE, requires_grad=True)
        (graphed(a) ** 2).sum().backward()
        (twin(b) ** 2).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), twin.parameters()):  # two backwards accumulated in both
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="fixed shapes"):
        graphed(tf.tensor(np.zeros((2, 4), np.float32), device=DEVICE))


# ---- the training loop's step -----------------------------------------------------------------
def _tiny_alexnet(dropout: float) -> nn.Module:
    from tinyflow.models import get_model

    tf.manual_seed(0)
    return get_model("alexnet", num_classes=4, channels=(8, 16, 16, 16, 16), hidden=32,
                     dropout=dropout).to(DEVICE)


def _loop_step(model, optimizer, clip: float | None = None):
    """The loop's whole step (zero_grad, forward, loss, backward, clipping, optimizer)."""
    def step(batch, epoch):
        x, y = batch
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        if clip:
            tf.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        return loss
    return step


def _run(make, data, graphed: bool, schedule=None, lines=None):
    """Train on ``data``: eagerly, or through GraphedStep (3 eager, capture, replays); the losses
    (read at the end) and the parameters."""
    model, optimizer = make()
    scheduler = schedule(optimizer) if schedule else None
    step = _loop_step(model, optimizer, clip=1.0)
    runner = GraphedStep(step, tf.Device(DEVICE), (lines if lines is not None else []).append) if graphed else step
    losses = []
    for i, (x, y) in enumerate(data):
        loss = runner((tf.tensor(x, device=DEVICE), tf.tensor(y, device=DEVICE)), 0)
        losses.append(loss.array.copy())  # the graph overwrites its loss at each replay: copy on the device
        if scheduler is not None and i % 2 == 1:
            scheduler.step()  # the lr changes mid-way, between replays
    return [float(v) for v in losses], [p.numpy() for p in model.parameters()], runner


@pytest.mark.gpu
@pytest.mark.parametrize("optimizer", ["sgd-momentum", "adam-steplr"])
def test_replayed_training_steps_equal_eager_steps(optimizer: str) -> None:
    """AlexNet-64 (narrow) with dropout: 3 eager steps, a capture and N replays give the losses and
    parameters of 3 + N eager steps, for SGD with momentum and for Adam under a StepLR schedule."""
    def make():
        model = _tiny_alexnet(dropout=0.5)
        if optimizer == "sgd-momentum":
            return model, tf.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        return model, tf.optim.Adam(model.parameters(), lr=1e-3)

    schedule = (lambda opt: tf.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)) if optimizer != "sgd-momentum" else None
    data = _batches(6, shape=(1, 3, 64, 64), classes=4, seed=3)
    eager_losses, eager_params, _ = _run(make, data, graphed=False, schedule=schedule)
    lines: list[str] = []
    losses, params, runner = _run(make, data, graphed=True, schedule=schedule, lines=lines)
    assert runner.replays == 3 and runner.reason is None and lines == []
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    for p, q in zip(eager_params, params):
        np.testing.assert_allclose(q, p, rtol=1e-5, atol=1e-6)


def test_a_host_read_inside_the_step_falls_back_to_eager_in_one_line() -> None:
    def make():
        return _mlp()

    def reading_step(model, optimizer):
        inner = _loop_step(model, optimizer)

        def step(batch, epoch):
            loss = inner(batch, epoch)
            if loss.item() > 1e9:  # a host read inside the step
                raise AssertionError
            return loss
        return step

    data = _batches(6)
    lines: list[str] = []
    model, opt = make()
    runner = GraphedStep(reading_step(model, opt), tf.Device(DEVICE), lines.append)
    for x, y in data:
        runner((tf.tensor(x, device=DEVICE), tf.tensor(y, device=DEVICE)), 0)
    assert runner.graph is None and runner.replays == 0
    assert len(lines) == 1 and "cannot be captured" in lines[0] and "host read" in lines[0]
    twin, twin_opt = make()
    eager = reading_step(twin, twin_opt)
    for x, y in data:
        eager((tf.tensor(x, device=DEVICE), tf.tensor(y, device=DEVICE)), 0)
    for p, q in zip(model.parameters(), twin.parameters()):  # every batch trained once, capture or not
        np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_a_batch_of_another_shape_runs_eagerly() -> None:
    model, opt = _mlp()
    lines: list[str] = []
    runner = GraphedStep(_loop_step(model, opt), tf.Device(DEVICE), lines.append)
    for x, y in _batches(5) + _batches(1, shape=(3, 6)):
        runner((tf.tensor(x, device=DEVICE), tf.tensor(y, device=DEVICE)), 0)
    assert runner.replays == 2 and runner.eager_batches == 1
    assert lines == ["--cuda-graph: a batch of another shape (the last partial one) runs eagerly"]


def test_data_parallel_steps_run_eagerly_and_say_why() -> None:
    lines: list[str] = []
    GraphedStep(lambda b, e: None, tf.Device(DEVICE), lines.append, data_parallel=True)
    assert len(lines) == 1 and "MPI" in lines[0] and "NCCL" in lines[0]


# ---- the command line -------------------------------------------------------------------------
def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.gpu
@pytest.mark.slow  # two runs of the full AlexNet-64 through the emulator: about 90 s on the stand-in
def test_train_alexnet_with_cuda_graph_matches_the_eager_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture) -> None:
    from tinyflow.data import synthetic

    monkeypatch.setenv("TINYFLOW_HOME", str(tmp_path / "home"))
    data = synthetic.generate(tmp_path / "data", train_per_class=6, val_per_class=1, size=64,
                              classes=("circle", "stripes"))
    common = ["--data", str(data), "--batch-size", "2", "--device", DEVICE, "--quiet", "--workers", "0",
              "--epochs", "1", "--optimizer", "sgd", "--log-every", "2"]
    assert cli.main(["train", "alexnet", *common, "--checkpoint-dir", str(tmp_path / "eager")]) == 0
    assert cli.main(["train", "alexnet", *common, "--checkpoint-dir", str(tmp_path / "graph"), "--cuda-graph"]) == 0
    assert "--cuda-graph: running eagerly" not in capsys.readouterr().err
    eager, graph = _metrics(tmp_path / "eager"), _metrics(tmp_path / "graph")
    for key in ("train_loss", "train_top1", "val_loss", "val_top1"):
        assert graph[0][key] == pytest.approx(eager[0][key], rel=1e-5), key


@pytest.mark.parametrize("model", ["alexnet", "lstm-lm"])
def test_cuda_graph_on_the_cpu_is_one_clear_line(model: str, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["train", model, "--device", "cpu", "--cuda-graph", "--epochs", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--cuda-graph needs a CUDA device" in err[0]


def test_bench_train_cell_with_cuda_graph_replays_the_step() -> None:
    from tinyflow.bench import train as bt

    spec = bt.BenchSettings(model="alexnet", batch_sizes=[2], workers=[1], precisions=["fp32"], device=DEVICE,
                            steps=2, runs=1, warmup=1, cuda_graph=True,
                            overrides={"channels": (8, 16, 16, 16, 16), "hidden": 32, "num_classes": 4}
                            ).spec("tinyflow", "fp32", 1, 2)
    assert spec["cuda_graph"] is True
    record = bt.measure(spec)
    assert record.get("status", "ok") == "ok" and len(record["step_s"]) == 1, record


def test_a_device_check_of_the_first_replay_survives_the_next_replay() -> None:
    """A target out of range in the first replayed step is reported at the next host read even when
    a second replay ran in between (the graph rewrites its own flags at every replay)."""
    logits = tf.tensor(np.zeros((2, 3), np.float32), device=DEVICE)
    target = tf.tensor(np.array([0, 1]), device=DEVICE)
    F.cross_entropy(logits, target).item()  # warm up eagerly
    g = tf.cuda.CUDAGraph()
    with tf.cuda.graph(g):
        loss = F.cross_entropy(logits, target)
    target.array[...] = tf.tensor(np.array([0, 7]), device=DEVICE).array  # class 7 of 3
    g.replay()
    target.array[...] = tf.tensor(np.array([0, 1]), device=DEVICE).array  # fine again
    g.replay()
    with pytest.raises((IndexError, ValueError), match="7"):
        loss.item()


def test_a_failed_capture_leaves_the_grad_scaler_ready_for_the_eager_step() -> None:
    """A capture that fails after unscale_ (here: RMSprop cannot skip an overflowed step on the
    device) must not leave the scaler thinking this step was unscaled: the eager step run instead
    unscales, steps and updates as if no capture had been tried."""
    model, _ = _mlp()
    opt = tf.optim.RMSprop(model.parameters(), lr=1e-3)
    scaler = tf.amp.GradScaler(init_scale=8.0)
    x, y = (tf.tensor(a, device=DEVICE) for a in _batches(1)[0])

    def step():
        opt.zero_grad()
        scaler.scale(F.cross_entropy(model(x), y)).backward()
        scaler.step(opt)
        scaler.update()

    step()  # eager: the scaler's device state exists
    g = tf.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="RMSprop"), tf.cuda.graph(g):
        step()
    before = [p.numpy().copy() for p in model.parameters()]
    step()  # eager again: no "unscale_() was already called", and the parameters move
    assert any(not np.array_equal(p.numpy(), b) for p, b in zip(model.parameters(), before))
    assert scaler.get_scale() == 8.0
