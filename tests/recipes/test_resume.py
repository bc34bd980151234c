"""Resuming with other options (issue 12, item 1): a new --epochs re-times the schedule as if the run
had started with it, an explicit new --lr / --schedule applies from the epoch resumed, the options
left out continue those of the run, the resume line says what changed; fewer epochs than trained
and another optimizer are clear errors; another batch size continues from the same sample."""
from __future__ import annotations

import argparse
import math
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
from tinyflow.recipes.loop import FitOptions, FitResult, Hooks, fit
from tinyflow.recipes.vision import CLASSIFICATION, classification_step, evaluation_sums


class Blobs(Dataset):
    """Four classes of 18-value 'images' (class mean + noise); ``seen`` records each index loaded."""

    def __init__(self, n: int, seed: int = 0):
        means = np.random.default_rng(0).normal(size=(4, 18))
        rng = np.random.default_rng(seed + 1)
        self.y = rng.integers(0, 4, n)
        self.x = (means[self.y] + 0.8 * rng.normal(size=(n, 18))).astype(np.float32)
        self.seen: list[int] = []

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        self.seen.append(i)
        return self.x[i] + 0.1 * T.current_rng().normal(size=18).astype(np.float32), int(self.y[i])


def _fit(ckpt: Path, epochs: int, *, lr: float = 0.1, schedule: str = "cosine", batch_size: int = 8,
         optimizer: str = "sgd", resume: bool = False, init_seed: int = 0, on_step=None,
         data: Blobs | None = None) -> tuple[nn.Module, FitResult]:  # fmt: skip
    tf.manual_seed(init_seed)
    model = nn.Sequential(nn.Linear(18, 16), nn.ReLU(), nn.Linear(16, 4))
    if optimizer == "sgd":
        opt = tf.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    else:
        opt = tf.optim.Adam(model.parameters(), lr=lr)
    sched = tf.optim.CosineAnnealingLR(opt, T_max=epochs) if schedule == "cosine" else None
    train = DataLoader(data if data is not None else Blobs(64), batch_size=batch_size, shuffle=True, seed=3)
    val = DataLoader(Blobs(16, seed=1), batch_size=8, seed=3)
    result = fit(model, train, classification_step, epochs=epochs, optimizer=opt, scheduler=sched,
                 metrics=CLASSIFICATION, evaluate=lambda m: evaluation_sums(m, val),
                 checkpoints=ckpts.Checkpointer(ckpt, {"model_name": "blobs"},
                                                resume=ckpt / "last.ckpt" if resume else None),
                 options=FitOptions(progress=False, log_every=2), hooks=Hooks(on_step=on_step))
    return model, result


def _params(model: nn.Module) -> dict[str, np.ndarray]:
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def _lrs(result: FitResult) -> list[float]:
    return [r["lr"] for r in result.history]


# ----------------------------------------------------------------------------- fit


def test_more_epochs_retime_the_schedule_as_if_the_run_had_started_with_them(tmp_path: Path, capsys) -> None:
    ref_model, ref = _fit(tmp_path / "ref", epochs=3)
    _, one = _fit(tmp_path / "run", epochs=1)  # cosine over 1 epoch: it ends at lr 0
    assert ckpts.load_checkpoint(tmp_path / "run" / "last.ckpt")["optimizer"]["param_groups"][0]["lr"] == 0.0
    model, res = _fit(tmp_path / "run", epochs=3, resume=True, init_seed=7)
    # Epoch 1 has lr 0.1 under either length, so the resumed run is the 3-epoch run exactly.
    assert _lrs(res) == _lrs(ref) == pytest.approx([0.1, 0.075, 0.025])
    for k, v in _params(ref_model).items():
        np.testing.assert_array_equal(_params(model)[k], v, err_msg=k)


def test_a_new_lr_or_schedule_applies_from_the_epoch_resumed(tmp_path: Path) -> None:
    _fit(tmp_path / "a", epochs=2, lr=0.1)
    _, res = _fit(tmp_path / "a", epochs=4, lr=0.02, resume=True)
    assert _lrs(res)[2:] == pytest.approx([0.02 * (1 + math.cos(math.pi * e / 4)) / 2 for e in (2, 3)])
    _fit(tmp_path / "b", epochs=1, lr=0.1)
    _, res = _fit(tmp_path / "b", epochs=3, lr=0.1, schedule="constant", resume=True)
    assert _lrs(res) == pytest.approx([0.1, 0.1, 0.1])


def test_fewer_epochs_than_trained_is_an_error(tmp_path: Path) -> None:
    _fit(tmp_path, epochs=2)
    with pytest.raises(ckpts.ResumeError, match=r"--epochs 2: checkpoint .* has already trained 2 epochs; "
                                                r"pass --epochs 3 or more"):
        _fit(tmp_path, epochs=2, resume=True)
    with pytest.raises(ckpts.ResumeError, match="already trained 2 epochs"):
        _fit(tmp_path, epochs=1, resume=True)


def test_another_optimizer_is_an_error_not_a_key_error(tmp_path: Path) -> None:
    _fit(tmp_path, epochs=1, optimizer="sgd")
    with pytest.raises(ckpts.ResumeError, match=r"was trained with SGD, not Adam.*same --optimizer"):
        _fit(tmp_path, epochs=2, optimizer="adam", resume=True)
    # A checkpoint from before optimizer_name: told apart by its hyper-parameters' names.
    state = ckpts.load_checkpoint(tmp_path / "last.ckpt")
    del state["optimizer_name"]
    ckpts.save_checkpoint(tmp_path / "last.ckpt", {k: v for k, v in state.items() if k != "format"})
    with pytest.raises(ckpts.ResumeError, match="was trained with another optimizer, not Adam"):
        _fit(tmp_path, epochs=2, optimizer="adam", resume=True)


def test_another_batch_size_continues_from_the_same_sample(tmp_path: Path) -> None:
    def ctrl_c_at(where):  # noqa: ANN001, ANN202
        def press(epoch: int, step: int, loss) -> None:  # noqa: ANN001
            if (epoch, step) == where:
                os.kill(os.getpid(), signal.SIGINT)
        return press

    data = Blobs(64)
    _, cut = _fit(tmp_path, epochs=1, batch_size=8, data=data, on_step=ctrl_c_at((0, 3)))
    assert cut.interrupted and cut.step == 3  # 24 samples of the epoch trained
    before = list(data.seen)
    data.seen.clear()
    sizes = []
    _, res = _fit(tmp_path, epochs=1, batch_size=5, data=data, resume=True,
                  on_step=lambda e, s, loss: sizes.append(len(data.seen)))
    after = list(data.seen)
    order = list(DataLoader(Blobs(64), batch_size=64, shuffle=True, seed=3)._batches(0)[0])
    assert before == order[:24] and after == order[24:]  # every sample once: none twice, none left out
    assert sizes[0] == 1  # the partial batch 5 (samples 21-25 at batch size 5) starts at sample 25
    assert res.history[-1]["images_per_s"] > 0 and not res.interrupted


def test_lstm_lm_resumes_under_another_batch_size(tmp_path: Path, capsys) -> None:
    from tinyflow.recipes.language_model import train_language_model
    from tinyflow.recipes.loop import InterruptGuard

    args = argparse.Namespace(epochs=1, batch_size=4, lr=0.01, optimizer="adam", momentum=0.9, weight_decay=0.0,
                              clip=1.0, device="cpu", checkpoint_dir=str(tmp_path), resume=None, seed=0, quiet=True,
                              embedding_dim=8, hidden_size=12, num_layers=1, seq_len=4, log_every=2)  # fmt: skip
    text = "the cat sat on the mat. the dog sat on the log. " * 12
    guard = InterruptGuard()
    out = train_language_model(args, text, "t", progress=False, guard=guard,
                               on_step=lambda e, s, loss: guard.request() if s == 4 else None)
    assert out["interrupted"]
    args.resume, args.batch_size = "auto", 2
    steps = []
    record = train_language_model(args, text, "t", progress=False, on_step=lambda e, s, loss: steps.append(s))
    assert math.isfinite(record["train_loss"])
    assert steps[0] == 4 * 4 // 2 + 1  # 16 stream-segments trained: segment 9 of the 2-stream layout is next
    assert "--batch-size 4 -> 2" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the command line


def _history(run: Path) -> list[dict]:
    return ckpts.load_checkpoint(run / "last.ckpt")["history"]


def test_cli_resume_takes_the_runs_options_and_says_what_changed(tiny: Path, tmp_path: Path, capsys, train) -> None:
    assert train(tiny, tmp_path / "ref", "--epochs", "3", "--lr", "0.05", "--optimizer", "sgd") == 0
    assert train(tiny, tmp_path / "run", "--epochs", "1", "--lr", "0.05", "--optimizer", "sgd") == 0
    capsys.readouterr()
    # The README's command: only --epochs given; lr, optimizer and batch size are the run's own.
    assert train(tiny, tmp_path / "run", "--epochs", "3", "--resume") == 0
    err = capsys.readouterr().err
    resume_line = next(line for line in err.splitlines() if line.startswith("resuming from"))
    assert resume_line.endswith("at epoch 2; the run's own --optimizer sgd, --lr 0.05, --weight-decay 0.0005; "
                                "changed --epochs 1 -> 3: learning rate 0.0375 from here")
    strip = lambda rs: [{k: v for k, v in r.items() if k not in ("time_s", "images_per_s")} for r in rs]  # noqa: E731
    assert strip(_history(tmp_path / "run")) == strip(_history(tmp_path / "ref"))
    assert [r["lr"] for r in _history(tmp_path / "run")] == pytest.approx([0.05, 0.0375, 0.0125])

    # Left out again, --epochs is the run's own (3): nothing left to train is an error.
    assert train(tiny, tmp_path / "run", "--resume") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"tinyflow train: error: --epochs 3: checkpoint '{tmp_path / 'run' / 'last.ckpt'}' has "
                       "already trained 3 epochs; pass --epochs 4 or more to train on (the learning-rate "
                       "schedule then spans the new length)")
    assert train(tiny, tmp_path / "run", "--epochs", "2", "--resume") == 2
    assert "already trained 3 epochs" in capsys.readouterr().err

    assert train(tiny, tmp_path / "run", "--epochs", "5", "--resume", "--lr", "0.01", "--schedule", "constant") == 0
    err = capsys.readouterr().err
    assert ("changed --epochs 3 -> 5, --lr 0.05 -> 0.01, --schedule cosine -> constant: learning rate 0.01 "
            "from here") in err
    assert [r["lr"] for r in _history(tmp_path / "run")][3:] == pytest.approx([0.01, 0.01])


def test_cli_resume_with_another_optimizer_is_one_line(tiny: Path, tmp_path: Path, capsys, train) -> None:
    assert train(tiny, tmp_path, "--epochs", "1", "--optimizer", "sgd") == 0
    capsys.readouterr()
    assert train(tiny, tmp_path, "--epochs", "2", "--optimizer", "adam", "--resume") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"tinyflow train: error: --optimizer adam: checkpoint '{tmp_path / 'last.ckpt'}' was "
                       "trained with --optimizer sgd, whose state cannot carry over to adam; resume with "
                       "--optimizer sgd (or leave it out), or start a new run in another --checkpoint-dir")


def test_cli_resume_of_a_checkpoint_without_options_keeps_its_optimizer_settings(tiny: Path, tmp_path: Path, train) -> None:
    assert train(tiny, tmp_path, "--epochs", "1", "--lr", "0.05", "--optimizer", "sgd", "--momentum", "0.5") == 0
    state = ckpts.load_checkpoint(tmp_path / "last.ckpt")
    old = {k: v for k, v in state.items() if k not in ("format", "options", "optimizer_name")}  # as written before
    ckpts.save_checkpoint(tmp_path / "last.ckpt", old)
    assert train(tiny, tmp_path, "--epochs", "2", "--resume") == 0  # not: adam at its default lr
    resumed = ckpts.load_checkpoint(tmp_path / "last.ckpt")
    recorded = {"optimizer": "sgd", "epochs": 2, "batch_size": 8, "lr": 0.05, "schedule": "cosine", "momentum": 0.5,
                "weight_decay": 5e-4}
    assert {k: resumed["options"][k] for k in recorded} == recorded
    assert [r["lr"] for r in resumed["history"]] == pytest.approx([0.05, 0.025])


def test_an_epoch_finished_before_the_resume_keeps_its_time_and_throughput(tmp_path: Path) -> None:
    """Ctrl-C after the last batch of an epoch, before its record: the resumed process trains no batch
    of it. Its record counts the time trained before the resume (not time_s 0 and the epoch's images
    over a few milliseconds); from a checkpoint that does not record that time, both are unknown (None)."""
    def ctrl_c_at(where):  # noqa: ANN001, ANN202
        def press(epoch: int, step: int, loss) -> None:  # noqa: ANN001
            if (epoch, step) == where:
                os.kill(os.getpid(), signal.SIGINT)
        return press

    for recorded in (True, False):
        run = tmp_path / f"recorded={recorded}"
        _, cut = _fit(run, epochs=1, on_step=ctrl_c_at((0, 8)))  # Blobs(64) in batches of 8: the epoch's last
        assert cut.interrupted and cut.step == 8
        state = ckpts.load_checkpoint(run / "last.ckpt")
        trained_s = state["epoch_time_s"]
        assert trained_s > 0 and state["history"] == []
        if not recorded:  # as an older tinyflow wrote it
            ckpts.save_checkpoint(run / "last.ckpt", {k: v for k, v in state.items()
                                                      if k not in ("format", "epoch_time_s")})
        _, res = _fit(run, epochs=1, resume=True)
        record = res.history[0]
        if recorded:
            assert record["time_s"] >= round(trained_s, 3)
            assert 0 < record["images_per_s"] <= 64 / trained_s + 0.01  # the 64 images took trained_s at least
        else:
            assert record["time_s"] is None and record["images_per_s"] is None
        assert record["epoch"] == 1 and len(res.history) == 1
