"""The training loop (recipes/loop.py: fit) and its checkpoints: exact resume (after an epoch or a
Ctrl-C mid-epoch), logs, checkpoints, errors."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
from tinyflow.data import DataLoader, Dataset
from tinyflow.data import transforms as T
from tinyflow.recipes import checkpoint as ckpts
from tinyflow.recipes import metrics
from tinyflow.recipes.loop import FitOptions, FitResult, Hooks, fit
from tinyflow.recipes.vision import CLASSIFICATION, classification_step, evaluation_sums


class NoisyBlobs(Dataset):
    """Four classes of 2x3x3 'images' (class mean + noise) with a random per-sample augmentation."""

    def __init__(self, n: int, seed: int = 0):
        means = np.random.default_rng(0).normal(size=(4, 2, 3, 3))  # the same classes for every split
        rng = np.random.default_rng(seed + 1)
        self.y = rng.integers(0, 4, n)
        self.x = (means[self.y] + 0.8 * rng.normal(size=(n, 2, 3, 3))).astype(np.float32)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        x = self.x[i] + 0.1 * T.current_rng().normal(size=self.x[i].shape).astype(np.float32)
        return x, int(self.y[i])


def _model() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(18, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 4))


def _run(ckpt: Path | None, epochs: int = 3, resume: Path | None = None, init_seed: int = 0, on_step=None,
         workers: int = 0) -> tuple[nn.Module, FitResult]:
    tf.manual_seed(init_seed)
    model = _model()
    opt = tf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    sched = tf.optim.StepLR(opt, step_size=1, gamma=0.7)
    train = DataLoader(NoisyBlobs(70), batch_size=8, shuffle=True, seed=3, num_workers=workers)
    val = DataLoader(NoisyBlobs(24, seed=1), batch_size=8, seed=3)
    result = fit(model, train, classification_step, epochs=epochs, optimizer=opt, scheduler=sched,
                 metrics=CLASSIFICATION, evaluate=lambda m: evaluation_sums(m, val),
                 checkpoints=ckpts.Checkpointer(ckpt, {"model_name": "blobs-mlp"}, resume=resume),
                 options=FitOptions(progress=False), hooks=Hooks(on_step=on_step))
    return model, result


def _params(model: nn.Module) -> dict[str, np.ndarray]:
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def _strip_time(history: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("time_s", "images_per_s")} for r in history]


def test_resume_after_ctrl_c_mid_epoch_equals_the_uninterrupted_run(tmp_path: Path) -> None:
    ref_model, ref = _run(tmp_path / "ref")
    assert not ref.interrupted and len(ref.history) == 3

    def press_ctrl_c(epoch: int, step: int, loss: float) -> None:
        if (epoch, step) == (1, 4):
            os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, handled by the harness

    _, cut = _run(tmp_path / "run", on_step=press_ctrl_c)
    assert cut.interrupted and (cut.epoch, cut.step) == (1, 4) and len(cut.history) == 1
    assert Path(cut.checkpoint).is_file()
    # Resume into a model initialised differently: everything must come from the checkpoint.
    model, res = _run(tmp_path / "run", resume=tmp_path / "run" / "last.ckpt", init_seed=99)
    assert not res.interrupted
    for k, v in _params(ref_model).items():
        np.testing.assert_array_equal(_params(model)[k], v, err_msg=k)
    assert _strip_time(res.history) == _strip_time(ref.history)
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert _strip_time(logged) == _strip_time(ref.history)


def test_resume_after_an_epoch_and_with_workers_equals_uninterrupted(tmp_path: Path) -> None:
    ref_model, ref = _run(tmp_path / "ref", epochs=2)
    _run(tmp_path / "run", epochs=1, workers=2)
    model, res = _run(tmp_path / "run", epochs=2, resume=tmp_path / "run" / "last.ckpt", init_seed=5, workers=2)
    for k, v in _params(ref_model).items():
        np.testing.assert_array_equal(_params(model)[k], v, err_msg=k)
    assert _strip_time(res.history) == _strip_time(ref.history)


def test_training_learns_and_writes_log_plot_and_checkpoints(tmp_path: Path) -> None:
    _, res = _run(tmp_path / "c", epochs=4)
    first, last = res.history[0], res.history[-1]
    assert last["train_loss"] < first["train_loss"]
    assert last["val_top1"] > 0.5  # 4 classes: chance is 0.25
    assert last["val_top5"] == 1.0  # top-5 of 4 classes is always right
    assert [r["lr"] for r in res.history] == pytest.approx([0.1, 0.07, 0.049, 0.0343])
    files = sorted(p.name for p in (tmp_path / "c").iterdir())
    assert files == ["best.ckpt", "last.ckpt", "metrics.jsonl", "metrics.png"]  # no temporary files left
    assert (tmp_path / "c" / "metrics.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    state = ckpts.load_checkpoint(tmp_path / "c" / "last.ckpt", "blobs-mlp")
    assert state["epoch"] == 4 and state["step"] == 0 and len(state["history"]) == 4


def test_checkpoint_of_another_model_is_refused(tmp_path: Path) -> None:
    _run(tmp_path / "c", epochs=1)
    with pytest.raises(ckpts.CheckpointMismatchError, match=r"written for model 'blobs-mlp', not 'alexnet'"):
        ckpts.load_checkpoint(tmp_path / "c" / "last.ckpt", "alexnet")
    state = ckpts.load_checkpoint(tmp_path / "c" / "last.ckpt")
    other = nn.Sequential(nn.Flatten(), nn.Linear(18, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 7))
    with pytest.raises(ckpts.CheckpointMismatchError, match=r"4\.weight has shape \(4, 16\).*\(7, 16\)"):
        ckpts.load_model_state(other, state["model"], "last.ckpt")
    bogus = tmp_path / "bogus.ckpt"
    tf.save({"weights": np.zeros(3)}, str(bogus))
    with pytest.raises(ckpts.CheckpointMismatchError, match="not a tinyflow training checkpoint"):
        ckpts.load_checkpoint(bogus)


def test_out_of_memory_names_the_batch_size(tmp_path: Path) -> None:
    class Hungry(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(18, 4)

        def forward(self, x):  # noqa: ANN001, ANN201
            raise MemoryError("cannot allocate 80 GiB")

    model = Hungry()
    opt = tf.optim.SGD(model.parameters(), lr=0.1)
    train = DataLoader(NoisyBlobs(16), batch_size=8, seed=0)
    with pytest.raises(MemoryError, match=r"batch size 8.*smaller --batch-size \(e\.g\. 4\)"):
        fit(model, train, classification_step, epochs=1, optimizer=opt, options=FitOptions(progress=False))


def test_topk_correct() -> None:
    logits = np.array([[0.1, 0.5, 0.2, 0.0, 0.3, 0.9], [3.0, 2.0, 1.0, 0.0, -1.0, -2.0]])
    assert metrics.topk_correct(logits, np.array([5, 5]), ks=(1, 5)) == {1: 1, 5: 1}
    assert metrics.topk_correct(logits, np.array([1, 4]), ks=(1, 2, 5)) == {1: 0, 2: 1, 5: 2}
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    lg, tg = rng.normal(size=(50, 8)), rng.integers(0, 8, 50)
    top = torch.topk(torch.from_numpy(lg), 3, dim=1).indices.numpy()
    assert metrics.topk_correct(lg, tg, ks=(3,))[3] == int((top == tg[:, None]).any(1).sum())


def _data_parallel_run(tmp_path: Path, ranks: int, resume: bool = False, stop_at: tuple[int, int] | None = None):
    """``fit`` on thread ranks as `tinyflow train --nproc N` runs it: Replicas shard the data, wrap
    the model in DataParallel, add the sums over ranks; rank 0 alone writes."""
    from tinyflow.parallel import run_local, set_world
    from tinyflow.recipes.distributed import Replicas
    from tinyflow.recipes.loop import InterruptGuard

    def mlp() -> nn.Module:  # no dropout: thread ranks share one random generator
        return nn.Sequential(nn.Flatten(), nn.Linear(18, 16), nn.ReLU(), nn.Linear(16, 4))

    tf.manual_seed(0)
    start = _params(mlp())  # drawn here, once: ranks drawing at the same time would interleave

    def worker(comm):  # noqa: ANN001, ANN202
        replicas = Replicas(set_world(comm))
        try:
            model = mlp()
            model.load_state_dict(start)
            opt = tf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            data = NoisyBlobs(64)
            train = DataLoader(data, batch_size=8, sampler=replicas.sampler(data, shuffle=True, seed=3), seed=3)
            val_data = NoisyBlobs(24, seed=1)
            val = DataLoader(val_data, batch_size=8, sampler=replicas.sampler(val_data, shuffle=False), seed=3)
            net = replicas.wrap(model, str(tmp_path / "run" / "steps.jsonl"), log_every=3)
            guard, timer = InterruptGuard(), replicas.hooks()

            def on_step(epoch: int, step: int, loss: tf.Tensor) -> None:
                timer.on_step(epoch, step, loss)
                if (epoch, step) == stop_at and comm.rank == 1:  # Ctrl-C on one rank only
                    guard.request()

            result = fit(net, train, classification_step, epochs=2, optimizer=opt, metrics=CLASSIFICATION,
                         evaluate=lambda m: evaluation_sums(m, val),
                         checkpoints=ckpts.Checkpointer(tmp_path / "run", {"model_name": "blobs-mlp"},
                                                        resume=tmp_path / "run" / "last.ckpt" if resume else None,
                                                        writer=replicas.writer),
                         options=FitOptions(progress=False, log_every=3, allreduce_sum=replicas.allreduce_sum),
                         hooks=Hooks(after_backward=timer.after_backward, on_step=on_step, guard=guard))
            replicas.close()
            replicas.report()
            return result, _params(model)
        finally:
            set_world(None)

    return run_local(worker, ranks, timeout=60)


def test_data_parallel_fit_agrees_on_ctrl_c_writes_once_and_resumes_exactly(tmp_path: Path) -> None:
    (ref, ref_params), (ref1, ref1_params) = _data_parallel_run(tmp_path / "ref", 2)
    assert not ref.interrupted and len(ref.history) == 2
    assert _strip_time(ref.history) == _strip_time(ref1.history)  # metrics summed over the ranks
    for k, v in ref_params.items():
        np.testing.assert_array_equal(ref1_params[k], v, err_msg=k)
    assert sorted(p.name for p in (tmp_path / "ref" / "run").iterdir()) == [
        "best.ckpt", "last.ckpt", "metrics.jsonl", "metrics.png", "steps.jsonl"]
    steps = [json.loads(line) for line in (tmp_path / "ref" / "run" / "steps.jsonl").read_text().splitlines()]
    assert [(s["epoch"], s["step"]) for s in steps] == [(e, s) for e in (1, 2) for s in range(1, 5)]  # rank 0's

    # Rank 1 asks to stop at step 1 of epoch 2: both ranks stop together at the next log point (step 3).
    cut = _data_parallel_run(tmp_path / "cut", 2, stop_at=(1, 1))
    assert [(r.interrupted, r.epoch, r.step) for r, _ in cut] == [(True, 1, 3), (True, 1, 3)]
    assert cut[0][0].checkpoint is not None and cut[1][0].checkpoint is None  # written by rank 0 only
    (res, params), _ = _data_parallel_run(tmp_path / "cut", 2, resume=True)
    for got, want in zip(_strip_time(res.history), _strip_time(ref.history), strict=True):
        assert got == pytest.approx(want, rel=1e-12)  # the sums of both ranks, added in another order
    for k, v in ref_params.items():
        np.testing.assert_array_equal(params[k], v, err_msg=k)
