"""The shared training harness: progress bar, metrics log and plot, checkpoints, resume, Ctrl-C.

Pieces that any recipe can use on its own:
- ``save_checkpoint`` / ``load_checkpoint``: atomic (tf.save writes a temp file then os.replace)
  and checked (a checkpoint of another model is a clear error);
- ``rng_state`` / ``set_rng_state``: every random generator a run touches;
- ``MetricsLog``: one JSON object per epoch in ``metrics.jsonl`` plus a PNG plot of the curves;
- ``InterruptGuard``: Ctrl-C sets a flag; the loop saves a checkpoint and stops cleanly;
- ``Progress``: a tqdm bar showing the loss and images (or tokens) per second;
- ``StepLog``: per-step values kept on the device and read once per log interval;
- ``topk_counts`` / ``topk_correct``: top-1 / top-5 counts (on the device / as ints).

And ``fit``, the classification loop built from them. A training step never waits for the
device: the loss and the top-k counts of each step stay there (``StepLog``) and are read to the
host once every ``log_every`` steps, when the progress bar moves, and at the end of the epoch.

Resuming is exact: the checkpoint holds the model, the optimizer (and scheduler), the RNG
states, the epoch, the batch within the epoch and the running sums of the epoch's metrics, and
the DataLoader's batches are a pure function of (seed, epoch, batch index); so a resumed run ends
with the same parameters as an uninterrupted one.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CheckpointMismatchError", "save_checkpoint", "load_checkpoint", "rng_state", "set_rng_state",
    "MetricsLog", "plot_metrics", "InterruptGuard", "Progress", "StepLog", "topk_counts", "topk_correct",
    "FitResult", "fit", "out_of_memory_message", "LOG_EVERY",
]

CHECKPOINT_FORMAT = "tinyflow-train-v1"
LOG_EVERY = 20  # training steps between host reads of the loss and metrics (progress updates)
LAST = "last.ckpt"
BEST = "best.ckpt"


class CheckpointMismatchError(ValueError):
    """A checkpoint that does not belong to the model being trained or evaluated."""


# ----------------------------------------------------------------------------- checkpoints


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Write ``state`` atomically (a temporary file renamed over ``path``)."""
    import tinyflow

    tinyflow.save({"format": CHECKPOINT_FORMAT, **state}, os.fspath(path))


def load_checkpoint(path: str | os.PathLike, model_name: str | None = None) -> dict[str, Any]:
    """Read a training checkpoint; with ``model_name``, refuse one written for another model."""
    import tinyflow

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint {path!r} does not exist")
    state = tinyflow.load(path, map_location="cpu")
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointMismatchError(f"{path!r} is not a tinyflow training checkpoint (written by `tinyflow train`)")
    if model_name is not None and state.get("model_name") != model_name:
        raise CheckpointMismatchError(
            f"checkpoint {path!r} was written for model {state.get('model_name')!r}, not {model_name!r}; "
            f"pass the matching model name or another --checkpoint"
        )
    return state


def load_model_state(model: Any, state_dict: dict[str, Any], path: str) -> None:
    """``model.load_state_dict`` with an error that names the checkpoint and the first difference."""
    own = dict(model.state_dict())
    missing = [k for k in own if k not in state_dict]
    extra = [k for k in state_dict if k not in own]
    if missing or extra:
        raise CheckpointMismatchError(
            f"checkpoint {path!r} does not fit {type(model).__name__}: missing {missing[:3]}, "
            f"unexpected {extra[:3]} (is it a checkpoint of another model or configuration?)"
        )
    for k, v in own.items():
        if tuple(np.shape(state_dict[k])) != tuple(v.shape):
            raise CheckpointMismatchError(
                f"checkpoint {path!r} does not fit {type(model).__name__}: {k} has shape "
                f"{tuple(np.shape(state_dict[k]))} in the checkpoint but {tuple(v.shape)} in the model "
                f"(another number of classes or another model configuration?)"
            )
    model.load_state_dict(state_dict)


def _link_or_copy(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Make ``dst`` a copy of ``src`` atomically; a hard link where the file system allows
    (``src`` is later replaced by a new file, never written in place, so the link stays valid)."""
    tmp = f"{os.fspath(dst)}.tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def rng_state() -> dict[str, Any]:
    """The state of every generator a run draws from: tinyflow's, NumPy's global, Python's."""
    import tinyflow

    return {"tinyflow": tinyflow.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what ``rng_state`` returned (after a round trip through a checkpoint)."""
    import tinyflow

    tinyflow.set_rng_state(state["tinyflow"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), int(pos), int(has_gauss), float(cached)))
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))


def out_of_memory_message(batch_size: int, where: str) -> str:
    return (f"out of memory at batch size {batch_size} ({where}); this batch does not fit in memory: "
            f"try a smaller --batch-size (e.g. {max(1, batch_size // 2)})")


# ----------------------------------------------------------------------------- metrics


class MetricsLog:
    """Per-epoch records kept in memory, written as JSON lines and plotted after each epoch."""

    def __init__(self, directory: str | os.PathLike | None, name: str = "metrics",
                 records: Sequence[dict[str, Any]] = (), enabled: bool = True):
        self.records: list[dict[str, Any]] = list(records)
        self.enabled = enabled and directory is not None
        self.path = Path(directory) / f"{name}.jsonl" if directory is not None else None
        self.plot_path = Path(directory) / f"{name}.png" if directory is not None else None

    def append(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        if not self.enabled:
            return
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in self.records))
        os.replace(tmp, self.path)
        plot_metrics(self.records, self.plot_path)


def plot_metrics(records: Sequence[dict[str, Any]], path: str | os.PathLike) -> None:
    """A PNG with the loss curves (left) and the accuracy / other metric curves (right)."""
    if not records:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    epochs = [r["epoch"] for r in records]
    keys = [k for k in records[-1] if k not in ("epoch", "time_s", "lr", "step") and isinstance(records[-1][k], (int, float))]
    loss_keys = [k for k in keys if "loss" in k]
    other_keys = [k for k in keys if k not in loss_keys and not k.endswith("per_s")]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, group, title in ((axes[0], loss_keys, "loss"), (axes[1], other_keys, "metrics")):
        for k in group:
            ax.plot(epochs, [r.get(k, math.nan) for r in records], marker="o", label=k)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if group:
            ax.legend()
    fig.tight_layout()
    tmp = f"{os.fspath(path)}.tmp.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)


def _raw(x: Any) -> Any:
    """The array behind a Tensor; NumPy and CuPy arrays as they are; anything else as NumPy."""
    from tinyflow.tensor import Tensor

    if isinstance(x, Tensor):
        return x.data
    return x if isinstance(x, np.ndarray) or hasattr(x, "__cuda_array_interface__") else np.asarray(x)


def topk_counts(logits: Any, targets: Any, ks: Sequence[int] = (1, 5)) -> Any:
    """How many rows have their target among the k largest logits, for each k (capped at C):
    an int64 array (len(ks),) on the logits' device, with no host read and no sort.

    The ranking is that of ``np.argsort(-logits, kind="stable")``: a target is in the top k when
    fewer than k logits come before it, i.e. are larger, or equal at a lower index (a NaN comes
    after everything); so it is one compare-and-count pass over the (N, C) logits.
    """
    from tinyflow.device import array_module

    z, t = _raw(logits), _raw(targets)  # (N, C), (N,)
    xp = array_module(z)
    c = z.shape[1]
    t = t.reshape(-1, 1).astype(np.int64, copy=False)  # (N, 1)
    own = xp.take_along_axis(z, t, axis=1)  # (N, 1): each row's target logit
    before = xp.arange(c)[None, :] < t  # (N, C): columns at a lower index than the target
    ahead = (z > own) | ((z == own) & before)
    if z.dtype.kind in "fc":  # a NaN target logit sorts after every number and earlier NaNs
        ahead |= xp.isnan(own) & (~xp.isnan(z) | before)
    rank = ahead.sum(axis=1)  # (N,): logits ranked before the target
    return xp.stack([(rank < min(k, c)).sum() for k in ks]).astype(np.int64)


def topk_correct(logits: Any, targets: Any, ks: Iterable[int] = (1, 5)) -> dict[int, int]:
    """``topk_counts`` as Python ints ``{k: count}`` (a host read when the logits are on a device)."""
    from tinyflow.device import to_host

    ks = tuple(ks)
    counts = to_host(topk_counts(logits, targets, ks), "topk_correct").tolist()
    return dict(zip(ks, counts))


class StepLog:
    """Per-step values (the loss, correct counts, ...) kept on the device, read once per interval.

    ``add`` writes one step's 0-d values (arrays or Tensors) into row ``n`` of an (every, width)
    float64 buffer on their device: a copy queued on the device, no sync. ``read`` brings the
    rows written since the last read to the host in one transfer. float64 holds a float32 loss
    and any count exactly, so sums made from the rows equal sums made step by step.
    """

    def __init__(self, every: int, width: int):
        if every < 1:
            raise ValueError(f"log interval must be at least 1 step, got {every}")
        self.every, self.width = int(every), int(width)
        self.rows: Any = None  # (every, width) float64, on the device of the first values
        self.n = 0  # rows written since the last read

    def add(self, *values: Any) -> bool:
        """Record one step; True when the buffer is full (time to ``read``)."""
        from tinyflow.device import array_module

        if self.n == self.every:
            raise RuntimeError("StepLog is full: read() it before adding more steps")
        arrays = [_raw(v) for v in values]
        if self.rows is None:
            self.rows = array_module(arrays[0]).zeros((self.every, self.width), dtype=np.float64)
        for j, a in enumerate(arrays):
            self.rows[self.n, j] = a
        self.n += 1
        return self.n == self.every

    def read(self) -> np.ndarray:
        """The rows since the last read, (k, width) float64: one host read (none when k = 0)."""
        from tinyflow.device import to_host

        if self.n == 0:
            return np.zeros((0, self.width))
        rows = np.array(to_host(self.rows[: self.n], "step log"), dtype=np.float64)  # a copy: the buffer is reused
        self.n = 0
        return rows


# ----------------------------------------------------------------------------- Ctrl-C and progress


class InterruptGuard:
    """Within the block the first Ctrl-C only sets ``interrupted``; a second one raises at once.

    Only the main thread can receive signals: elsewhere (e.g. ranks run as threads) this is a
    no-op and ``request()`` is the way to stop.
    """

    def __init__(self) -> None:
        self.interrupted = False
        self._previous: Any = None

    def request(self) -> None:
        self.interrupted = True

    def _handler(self, signum: int, frame: Any) -> None:
        if self.interrupted:
            raise KeyboardInterrupt
        self.interrupted = True
        print("\ninterrupted: saving a checkpoint after this step (Ctrl-C again to abort)", file=sys.stderr, flush=True)

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None


class Progress:
    """A tqdm bar over one epoch: running loss and throughput (``unit`` per second)."""

    def __init__(self, total: int, initial: int, desc: str, unit: str = "img", enabled: bool = True):
        self.unit = unit
        self.items = 0
        self.start = time.perf_counter()
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=desc, unit="batch", leave=True,
                            dynamic_ncols=True, file=sys.stderr)

    def update(self, items: int, loss: float, steps: int = 1) -> None:
        """Advance by ``steps`` batches of ``items`` in all; ``loss`` is their mean loss."""
        self.items += items
        if self.bar is not None:
            rate = self.items / max(time.perf_counter() - self.start, 1e-9)
            self.bar.set_postfix({"loss": f"{loss:.4f}", f"{self.unit}/s": f"{rate:.1f}"}, refresh=False)
            self.bar.update(steps)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ----------------------------------------------------------------------------- the loop


@dataclass
class _Sums:
    """Running sums of an epoch (sums, so that ranks can add them with one all-reduce)."""

    loss: float = 0.0
    top1: float = 0.0
    top5: float = 0.0
    count: float = 0.0
    batches: int = 0

    def add(self, loss: float, n: int, correct: dict[int, float]) -> None:
        self.loss += loss * n
        self.top1 += correct[1]
        self.top5 += correct[5]
        self.count += n
        self.batches += 1

    def vector(self) -> np.ndarray:
        return np.array([self.loss, self.top1, self.top5, self.count], dtype=np.float64)

    def means(self, allreduce_sum: Callable[[np.ndarray], np.ndarray] | None, prefix: str) -> dict[str, float]:
        v = self.vector()
        if allreduce_sum is not None:
            v = np.asarray(allreduce_sum(v.copy()), dtype=np.float64)
        n = max(v[3], 1.0)
        return {f"{prefix}_loss": v[0] / n, f"{prefix}_top1": v[1] / n, f"{prefix}_top5": v[2] / n}


@dataclass
class FitResult:
    """What ``fit`` ends with: the per-epoch records and whether it stopped early (Ctrl-C)."""

    history: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    epoch: int = 0
    step: int = 0
    checkpoint: str | None = None


def evaluate(model: Any, loader: Iterable, loss_fn: Callable | None = None,
             allreduce_sum: Callable[[np.ndarray], np.ndarray] | None = None, prefix: str = "val") -> dict[str, float]:
    """Mean loss and top-1 / top-5 accuracy of ``model`` over ``loader`` (eval mode, no grad).

    The sums stay on the device until the end: one host read per evaluation, not per batch.
    """
    import tinyflow
    import tinyflow.nn.functional as F
    from tinyflow.device import array_module, to_host

    loss_fn = loss_fn or F.cross_entropy
    sums = _Sums()
    totals: Any = None  # float64 [sum of loss * n, top-1 count, top-5 count] on the device
    was_training = getattr(model, "training", True)
    if hasattr(loader, "set_epoch"):
        loader.set_epoch(0)  # the same batches (and any augmentation) at every evaluation
    model.eval()
    try:
        with tinyflow.no_grad():
            for x, y in loader:
                logits = model(x)  # (N, num_classes)
                loss = loss_fn(logits, y)
                xp = array_module(loss.data)
                counts = topk_counts(logits, y).astype(np.float64)
                row = xp.concatenate([(loss.data.astype(np.float64) * len(y)).reshape(1), counts])  # (3,)
                totals = row if totals is None else totals + row
                sums.count += len(y)
                sums.batches += 1
    finally:
        model.train(was_training)
    if totals is not None:
        sums.loss, sums.top1, sums.top5 = to_host(totals, "evaluate").tolist()
    return sums.means(allreduce_sum, prefix)


def fit(
    model: Any,
    optimizer: Any,
    train_loader: Any,
    val_loader: Any | None,
    *,
    epochs: int,
    checkpoint_dir: str | os.PathLike | None,
    meta: dict[str, Any] | None = None,
    scheduler: Any = None,
    resume: str | os.PathLike | None = None,
    loss_fn: Callable | None = None,
    progress: bool = True,
    rank: int = 0,
    allreduce_sum: Callable[[np.ndarray], np.ndarray] | None = None,
    after_backward: Callable[[], None] | None = None,
    on_step: Callable[[int, int, Any], None] | None = None,
    guard: InterruptGuard | None = None,
    amp: str | None = None,
    log_every: int = LOG_EVERY,
) -> FitResult:
    """Train a classifier for ``epochs`` epochs; evaluate, log, plot and checkpoint each epoch.

    ``train_loader`` must be a DataLoader (it needs ``set_epoch(epoch, start_batch)``).
    ``meta`` (model name, config, classes, ...) is stored in each checkpoint; ``resume`` is a
    checkpoint to continue from. For data-parallel runs: ``rank`` (only rank 0 writes files and
    shows a bar), ``allreduce_sum`` (sums a float64 vector over ranks, for the metrics) and
    ``after_backward`` (e.g. wait for the gradient all-reduce). ``on_step(epoch, step, loss)``
    is called after each optimizer step with the loss as a 0-d Tensor on the model's device
    (reading it, e.g. ``float(loss)``, is a host sync). ``amp`` ("bf16" or "fp16") runs forward
    in mixed precision (float32 master weights; fp16 adds dynamic loss scaling).

    No step reads the device: the losses and top-k counts are read once every ``log_every``
    steps and at the end of the epoch (a log point: the progress bar moves, the sums grow).
    A non-finite loss is found there too, so it stops training up to ``log_every - 1`` steps
    after the step that produced it, as a GradScaler's ``found_inf`` is only looked at later;
    those steps' updates are applied to the model in memory, but nothing on disk is touched:
    the last checkpoint predates them. Ctrl-C stops after the current step; in a data-parallel
    run (``allreduce_sum``) the ranks agree on stopping at log points only.
    """
    import tinyflow.nn.functional as F
    from tinyflow.amp import GradScaler, autocast

    loss_fn = loss_fn or F.cross_entropy
    meta = dict(meta or {})
    is_main = rank == 0
    ckpt_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
    if ckpt_dir is not None and is_main:
        ckpt_dir.mkdir(parents=True, exist_ok=True)
    batch_size = getattr(train_loader, "batch_size", None)
    scaler = GradScaler(enabled=amp == "fp16")
    steplog = StepLog(log_every, 3)  # per step: loss, top-1 count, top-5 count (on the device)
    sizes: list[int] = []  # the batch size of each step in steplog

    start_epoch, start_step, global_step = 0, 0, 0
    sums = _Sums()
    history: list[dict[str, Any]] = []
    best = -math.inf
    if resume is not None:
        state = load_checkpoint(resume, meta.get("model_name"))
        load_model_state(model, state["model"], os.fspath(resume))
        optimizer.load_state_dict(state["optimizer"])
        if scheduler is not None and state.get("scheduler") is not None:
            scheduler.load_state_dict(state["scheduler"])
        set_rng_state(state["rng"])
        if state.get("scaler") is not None:
            scaler.load_state_dict(state["scaler"])
        start_epoch, start_step, global_step = state["epoch"], state["step"], state["global_step"]
        sums = _Sums(**state["sums"])
        history = list(state["history"])
        best = state.get("best", -math.inf)
        if is_main:
            where = f"epoch {start_epoch + 1}" + (f", batch {start_step + 1}" if start_step else "")
            print(f"resuming from {os.fspath(resume)} at {where}", file=sys.stderr)
    log = MetricsLog(ckpt_dir, records=history, enabled=is_main)

    def checkpoint(epoch: int, step: int, name: str = LAST) -> str | None:
        if ckpt_dir is None or not is_main:
            return None
        path = ckpt_dir / name
        save_checkpoint(path, {
            **meta,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "rng": rng_state(),
            "scaler": scaler.state_dict() if scaler.enabled else None,
            "epoch": epoch, "step": step, "global_step": global_step,
            "sums": sums.__dict__.copy(), "history": log.records, "best": best,
        })
        return str(path)

    result = FitResult(history=log.records)
    guard = guard or InterruptGuard()

    def stop_requested() -> bool:
        """Ctrl-C on any rank stops every rank after the same step: ranks that disagreed would
        wait for each other in the next all-reduce."""
        if allreduce_sum is None:
            return guard.interrupted
        return bool(allreduce_sum(np.array([float(guard.interrupted)]))[0] > 0)

    def log_point(epoch: int, step: int, bar: Progress) -> None:
        """Read the steps since the last log point (one host read) into the sums and the bar."""
        rows = steplog.read()  # (k, 3): loss, top-1, top-5 of each step
        first = step - len(rows)  # steps of this epoch before these
        for i, ((loss_value, top1, top5), n) in enumerate(zip(rows.tolist(), sizes)):
            if not math.isfinite(loss_value):
                bad = first + i + 1
                late = (f" (found at batch {step}: the updates of batches {bad}-{step} are applied in memory; "
                        "the checkpoints on disk predate them)") if bad < step else ""
                raise FloatingPointError(f"the training loss became {loss_value} at epoch {epoch + 1}, batch {bad}: "
                                         f"lower --lr (or check the data){late}")
            sums.add(loss_value, n, {1: top1, 5: top5})
        if len(rows):
            bar.update(sum(sizes), float(rows[:, 0].mean()), steps=len(rows))
        sizes.clear()

    with guard:
        for epoch in range(start_epoch, epochs):
            if stop_requested():  # Ctrl-C came during the last evaluation: its checkpoint is saved
                result.interrupted = True
                return result
            model.train()
            train_loader.set_epoch(epoch, start_batch=start_step)
            bar = Progress(len(train_loader), start_step, f"epoch {epoch + 1}/{epochs}", enabled=progress and is_main)
            t0 = time.perf_counter()
            lr = float(optimizer.param_groups[0]["lr"])
            step = start_step
            n_batches = len(train_loader)
            stopped = False
            try:
                for x, y in train_loader:
                    try:
                        with autocast(amp or "bf16", enabled=amp is not None):
                            logits = model(x)  # (N, num_classes)
                        logits = logits.float()  # the loss is always computed in float32
                        loss = loss_fn(logits, y)
                        optimizer.zero_grad()
                        scaler.scale(loss).backward()
                        if after_backward is not None:
                            after_backward()
                        scaler.step(optimizer)  # = optimizer.step() without fp16
                        scaler.update()
                    except MemoryError as exc:
                        raise MemoryError(out_of_memory_message(batch_size or len(y), f"training step of epoch {epoch + 1}")) from exc
                    counts = topk_counts(logits, y)  # on the device, like the loss: nothing read here
                    full = steplog.add(loss, counts[0], counts[1])
                    sizes.append(len(y))
                    step += 1
                    global_step += 1
                    at_log_point = full or step == n_batches
                    if at_log_point:
                        log_point(epoch, step, bar)
                    if on_step is not None:
                        on_step(epoch, step, loss.detach())
                    if allreduce_sum is None:
                        stopped = guard.interrupted
                    elif at_log_point:  # a collective: every rank reaches the same log points
                        stopped = stop_requested()
                    if stopped:
                        break
                log_point(epoch, step, bar)  # steps after the last log point (Ctrl-C, or a loader shorter than its len)
            finally:
                bar.close()
            if stopped:
                result.checkpoint = checkpoint(epoch, step)
                result.interrupted, result.epoch, result.step = True, epoch, step
                if is_main and result.checkpoint:
                    print(f"saved {result.checkpoint} (epoch {epoch + 1}, batch {step}); "
                          f"continue with --resume", file=sys.stderr)
                return result
            elapsed = time.perf_counter() - t0
            if scheduler is not None:
                scheduler.step()
            record: dict[str, Any] = {"epoch": epoch + 1, **sums.means(allreduce_sum, "train")}
            if val_loader is not None:
                record.update(evaluate(model, val_loader, loss_fn, allreduce_sum))
            record.update({"lr": lr, "time_s": round(elapsed, 3),
                           "images_per_s": round(sums.count / max(elapsed, 1e-9), 2)})
            log.append(record)
            if is_main:
                shown = "  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in record.items())
                print(shown, file=sys.stderr, flush=True)
            sums, start_step = _Sums(), 0
            score = record.get("val_top1", record["train_top1"])
            improved = score > best
            best = max(best, score)
            result.checkpoint = checkpoint(epoch + 1, 0)
            if improved and result.checkpoint is not None:
                _link_or_copy(result.checkpoint, ckpt_dir / BEST)
            result.epoch, result.step = epoch + 1, 0
    return result


def make_optimizer(name: str, params: Any, lr: float, momentum: float, weight_decay: float) -> Any:
    """The optimizer named on the command line (sgd or adam) over ``params``."""
    import tinyflow.optim as optim

    if name == "sgd":
        return optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if name == "adam":
        return optim.Adam(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer {name!r}: choose sgd or adam")


def resume_path(args: argparse.Namespace) -> str | None:
    """The checkpoint --resume points to (``auto``: the last one in --checkpoint-dir), or None."""
    if not getattr(args, "resume", None):
        return None
    if args.resume == "auto":
        if not args.checkpoint_dir:
            raise FileNotFoundError("--resume without a path needs --checkpoint-dir")
        path = os.path.join(args.checkpoint_dir, LAST)
        if not os.path.exists(path):
            raise FileNotFoundError(f"--resume: no checkpoint {path!r} to resume from (train without --resume first)")
        return path
    return args.resume


def fill_defaults(args: argparse.Namespace, defaults: dict[str, Any], lr: dict[str, float],
                  weight_decay: dict[str, float] | None = None) -> argparse.Namespace:
    """Give the options a recipe shares with others (left at None) that recipe's defaults;
    ``lr`` and ``weight_decay`` are per optimizer name."""
    for key, value in defaults.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    if getattr(args, "lr", None) is None:
        args.lr = lr[args.optimizer]
    if weight_decay is not None and getattr(args, "weight_decay", None) is None:
        args.weight_decay = weight_decay[args.optimizer]
    return args
