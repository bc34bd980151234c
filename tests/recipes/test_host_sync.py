"""No host sync inside a training step: tinyflow.device counts every read of tensor values by the
host (on the CPU too, where a read stands for the sync a GPU would make), and the training loops
read the device only at their log points."""
from __future__ import annotations

import argparse
import threading
from pathlib import Path

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.data import DataLoader, Dataset
from tinyflow.device import (
    HostSyncError,
    check_deferred,
    count_host_reads,
    device_check,
    forbid_host_reads,
    host_reads,
    to_host,
)
from tinyflow.recipes.checkpoint import Checkpointer
from tinyflow.recipes.loop import FitOptions, FitResult, Hooks, fit
from tinyflow.recipes.metrics import topk_correct, topk_counts
from tinyflow.recipes.vision import CLASSIFICATION, classification_step, evaluation_sums

# ----------------------------------------------------------------------------- the counter


def test_every_way_to_read_a_tensor_is_counted() -> None:
    t, v = tf.tensor(2.5), tf.tensor([1, 2, 3])
    reads = [
        ("item", t.item), ("numpy", v.numpy), ("tolist", v.tolist), ("float", lambda: float(t)),
        ("int", lambda: int(tf.tensor(3))), ("index", lambda: [0, 1, 2, 3][tf.tensor(1)]),
        ("bool", lambda: bool(t)), ("repr", lambda: repr(v)), ("__array__", lambda: np.asarray(v)),
        ("to_host", lambda: to_host(v.array)),
    ]
    for why, read in reads:
        before = host_reads()
        with count_host_reads() as seen:
            read()
        assert seen.reasons == [why], why
        assert host_reads() == before + 1, why


def test_ops_forward_backward_and_step_make_no_host_read() -> None:
    tf.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 4 * 4, 5))
    opt = tf.optim.Adam(model.parameters(), lr=1e-3)
    x, y = tf.randn(4, 2, 4, 4), tf.tensor([0, 1, 4, 2])
    with count_host_reads() as seen, forbid_host_reads():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        tf.optim.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        topk_counts(model(x), y)
    assert seen.count == 0


def test_forbid_host_reads_raises_and_names_the_read() -> None:
    t = tf.tensor([1.0])
    with forbid_host_reads(), pytest.raises(HostSyncError, match=r"host read \(item\)"):
        t.item()
    assert t.item() == 1.0  # allowed again after the block


def test_counts_are_per_thread() -> None:
    before = host_reads()
    worker = threading.Thread(target=lambda: tf.tensor(1.0).item())
    worker.start()
    worker.join()
    assert host_reads() == before


# ----------------------------------------------------------------------------- deferred checks


def test_device_check_raises_at_once_on_the_host_and_later_when_deferred() -> None:
    def error(value: int) -> IndexError:
        return IndexError(f"bad id {value}")

    with pytest.raises(IndexError, match="bad id 7"):
        device_check(np.bool_(True), np.int64(7), error, key="test")
    device_check(np.bool_(False), np.int64(7), error, key="test")

    # As on a GPU: no read now; flags of one key are OR-ed and the first bad value is kept.
    with count_host_reads() as seen:
        device_check(np.array(False), np.array(1), error, key="test", defer=True)
        device_check(np.array(True), np.array(5), error, key="test", defer=True)
        device_check(np.array(True), np.array(9), error, key="test", defer=True)
    assert seen.count == 0
    with count_host_reads() as seen, pytest.raises(IndexError, match="bad id 5"):
        tf.tensor(1.0).item()  # the next host read surfaces it
    assert seen.reasons == ["device checks"]
    with count_host_reads() as seen:
        check_deferred()  # nothing pending: no read
        device_check(np.array(False), np.array(0), error, key="test", defer=True)
        check_deferred()
    assert seen.reasons == ["device checks"]


def test_index_errors_keep_their_messages_on_the_cpu() -> None:
    with pytest.raises(IndexError, match=r"embedding: index 4 is out of range for a weight of 4 rows"):
        F.embedding(tf.tensor([0, 4]), tf.randn(4, 2))
    with pytest.raises(IndexError, match=r"embedding: index -1 is out of range"):
        F.embedding(tf.tensor([-1, 4]), tf.randn(4, 2))
    with pytest.raises(IndexError, match=r"target values must be in \[0, 3\) \(or ignore_index=-100\); got 5"):
        F.cross_entropy(tf.randn(3, 3), tf.tensor([0, 5, 7]))
    assert np.isfinite(F.cross_entropy(tf.randn(3, 3), tf.tensor([0, -100, 2])).item())


# ----------------------------------------------------------------------------- top-k on the device


def test_topk_counts_rank_as_a_stable_descending_argsort() -> None:
    rng = np.random.default_rng(0)
    logits = rng.integers(0, 4, size=(200, 7)).astype(np.float32)  # many ties
    logits[rng.random(logits.shape) < 0.1] = np.nan
    targets = rng.integers(0, 7, 200)
    order = np.argsort(-logits, axis=1, kind="stable")
    for k in (1, 2, 5, 7, 9):
        expected = int((order[:, : min(k, 7)] == targets[:, None]).any(axis=1).sum())
        assert topk_correct(logits, targets, ks=(k,)) == {k: expected}, k


# ----------------------------------------------------------------------------- training loops


class Blobs(Dataset):
    def __init__(self, n: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.y = rng.integers(0, 3, n)
        self.x = (self.y[:, None, None, None] + rng.normal(size=(n, 2, 4, 4))).astype(np.float32)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i], int(self.y[i])


def fit_classifier(model: nn.Module, opt, train: DataLoader, val: DataLoader | None, *, epochs: int,  # noqa: ANN001
                   checkpoint_dir: Path | None, log_every: int, on_step=None, resume: Path | None = None  # noqa: ANN001
                   ) -> FitResult:
    """The loop as `tinyflow train` runs it for an image classifier."""
    return fit(model, train, classification_step, epochs=epochs, optimizer=opt, metrics=CLASSIFICATION,
               evaluate=(lambda m: evaluation_sums(m, val)) if val is not None else None,
               checkpoints=Checkpointer(checkpoint_dir, resume=resume),
               options=FitOptions(progress=False, log_every=log_every), hooks=Hooks(on_step=on_step))


class MarkedLoader(DataLoader):
    """Remembers the host-read count when fit starts each epoch."""

    def set_epoch(self, epoch: int, start_batch: int = 0) -> None:
        self.epoch_start_reads = host_reads()
        super().set_epoch(epoch, start_batch)


def test_fit_reads_the_device_only_at_log_points(tmp_path: Path) -> None:
    tf.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16, 3))
    opt = tf.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    train = MarkedLoader(Blobs(40), batch_size=4, shuffle=True, seed=0)  # 10 steps per epoch
    val = DataLoader(Blobs(12, seed=1), batch_size=4, seed=0)
    per_step: dict[tuple[int, int], int] = {}
    last = {"reads": 0}

    def on_step(epoch: int, step: int, loss: tf.Tensor) -> None:
        assert isinstance(loss, tf.Tensor) and loss.ndim == 0  # still on the device: not read
        start = train.epoch_start_reads if step == 1 else last["reads"]
        last["reads"] = host_reads()
        per_step[(epoch, step)] = last["reads"] - start

    result = fit_classifier(model, opt, train, val, epochs=2, checkpoint_dir=tmp_path, on_step=on_step, log_every=4)
    log_points = {4, 8, 10}  # every 4 steps and the end of the epoch
    assert per_step == {(e, s): (1 if s in log_points else 0) for e in range(2) for s in range(1, 11)}
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]


def test_fit_metrics_equal_a_step_by_step_reference() -> None:
    """The sums read at log points equal those a per-step loop would make (exactly)."""

    def run(log_every: int) -> list[dict]:
        tf.manual_seed(0)
        model = nn.Sequential(nn.Flatten(), nn.Linear(32, 8), nn.ReLU(), nn.Linear(8, 3))
        opt = tf.optim.SGD(model.parameters(), lr=0.05)
        train = DataLoader(Blobs(30), batch_size=4, shuffle=True, seed=0)
        res = fit_classifier(model, opt, train, DataLoader(Blobs(12, seed=1), batch_size=5, seed=0), epochs=2,
                             checkpoint_dir=None, log_every=log_every)
        return [{k: v for k, v in r.items() if k not in ("time_s", "images_per_s")} for r in res.history]

    assert run(1) == run(3) == run(100)


def test_fit_stops_on_a_non_finite_loss_at_the_next_log_point(tmp_path: Path) -> None:
    tf.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(32, 3))
    opt = tf.optim.SGD(model.parameters(), lr=0.05)
    train = DataLoader(Blobs(40), batch_size=4, seed=0)
    fit_classifier(model, opt, train, None, epochs=1, checkpoint_dir=tmp_path, log_every=4)
    saved = (tmp_path / "last.ckpt").read_bytes()

    def poison(epoch: int, step: int, loss: tf.Tensor) -> None:
        if step == 5:  # the next step's loss is NaN
            with tf.no_grad():
                model[1].weight.fill_(float("nan"))

    with pytest.raises(FloatingPointError, match=r"became nan at epoch 2, batch 6: lower --lr.*found at batch 8"):
        fit_classifier(model, opt, train, None, epochs=2, checkpoint_dir=tmp_path, log_every=4,
                       resume=tmp_path / "last.ckpt", on_step=poison)
    assert (tmp_path / "last.ckpt").read_bytes() == saved  # nothing on disk touched


def test_lstm_lm_recipe_reads_the_device_only_at_log_points(tmp_path: Path) -> None:
    from tinyflow.recipes.language_model import train_language_model

    args = argparse.Namespace(epochs=1, batch_size=4, lr=0.01, optimizer="adam", momentum=0.9, weight_decay=0.0,
                              clip=1.0, device="cpu", checkpoint_dir=str(tmp_path / "run"), resume=None, seed=0,
                              quiet=True, text=None, embedding_dim=8, hidden_size=12, num_layers=2, seq_len=5,
                              log_every=3)  # fmt: skip
    text = "the cat sat on the mat. the dog sat on the log. " * 12
    per_step: dict[int, int] = {}
    last = {"reads": host_reads()}

    def on_step(epoch: int, step: int, loss: tf.Tensor) -> None:
        now = host_reads()
        per_step[step], last["reads"] = now - last["reads"], now

    record = train_language_model(args, text, "test text", progress=False, on_step=on_step)
    n = len(per_step)
    assert n > 6 and np.isfinite(record["train_loss"])
    assert per_step == {s: (1 if s % 3 == 0 or s == n else 0) for s in range(1, n + 1)}
