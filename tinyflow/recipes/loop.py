"""The one training loop, ``fit``: every recipe of `tinyflow train` runs it, data-parallel runs included.

A recipe gives what differs: the step (a forward pass from a batch to the loss and the counts it
measures), the ``Metrics`` (what an epoch reports, which checkpoint is best), the evaluation and a
``Checkpointer``. The loop does the rest: backward (with loss scaling under fp16), gradient
clipping, the optimizer and the schedule, the progress bar, the per-epoch record (metrics.jsonl
and its plot), checkpoints and exact resume, Ctrl-C.

No step waits for the device: the loss and counts of each step stay there (``StepLog``) and are
read once every ``log_every`` steps and at the end of the epoch. At such a log point the progress
bar moves, the epoch's sums grow, and a loss that is not finite, or has grown far beyond the
run's first loss (``DIVERGENCE_FACTOR``), stops the run with an error.

Resuming is exact: a checkpoint holds the model, the optimizer, the RNG states, the epoch, the
batch within the epoch and the epoch's running sums, and the loader's batches are a pure function
of (seed, epoch, batch index); so a resumed run ends with the same parameters as an uninterrupted
one. A run resumed with other settings takes them as if it had started with them: the optimizer
and schedule that the recipe built (its learning rate, the schedule over the new number of
epochs) are fast-forwarded to the epoch resumed, only the optimizer's buffers come from the
checkpoint; under another batch size the epoch goes on from the same sample.

``--cuda-graph`` (``FitOptions.cuda_graph``): after a few eager steps the whole step is captured
once as a CUDA graph and replayed for every later batch of the same shape
(tinyflow/recipes/graphed_step.py); what cannot be captured runs eagerly and says why in one line.

Stopping: Ctrl-C, SIGTERM and SIGUSR1 (what `tinyflow train --nproc N` sends every worker for a
Ctrl-C or SIGTERM) stop after the current step with a checkpoint to resume from; a second one
aborts at once.

A data-parallel run is this loop over a DataParallel model: ``FitOptions.allreduce_sum`` adds
the epoch's sums over the ranks, the ranks agree at log points on whether to stop (a stop request
or a bad loss on any rank), and only the process whose Checkpointer writes (rank 0) writes files
and prints.
"""
from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinyflow.recipes.checkpoint import (
    Checkpointer,
    ResumeError,
    check_epochs,
    load_model_state,
    rng_state,
    set_rng_state,
)
from tinyflow.recipes.metrics import Metrics, MetricsLog, StepLog

__all__ = ["fit", "StepOutput", "FitOptions", "Hooks", "FitResult", "InterruptGuard", "Progress",
           "TrainingDivergedError", "make_optimizer", "check_amp", "out_of_memory_message", "stop_signals_interrupt",
           "LOG_EVERY", "DIVERGENCE_FACTOR", "DIVERGENCE_FLOOR", "STOP_SIGNALS"]

LOG_EVERY = 20  # training steps between host reads of the loss and metrics (progress updates)
# Divergence: a step's loss above both DIVERGENCE_FACTOR times the run's first loss and
# DIVERGENCE_FLOOR (a cross-entropy of 100 gives the right class a probability of e^-100).
DIVERGENCE_FACTOR = 1e3
DIVERGENCE_FLOOR = 100.0
# The signals that ask a run to stop with a checkpoint: Ctrl-C, SIGTERM (schedulers, `kill`) and
# SIGUSR1, which `tinyflow train --nproc N` sends mpirun for either (mpirun forwards it to every rank).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGUSR1") if hasattr(signal, name))


class TrainingDivergedError(FloatingPointError):
    """The training loss became NaN or infinite, or grew far beyond its first value."""


@dataclass
class StepOutput:
    """What a step function returns: the loss to train on and what the step measured."""

    loss: Any  # 0-d float32 Tensor: the batch's mean loss; backward starts here
    counts: Sequence[Any] = ()  # 0-d values on the device, one per Metrics.counts (e.g. correct top-1)
    items: int = 1  # the batch's size in Metrics.items (images, tokens): its weight in the epoch's loss


@dataclass(frozen=True)
class FitOptions:
    """How the loop runs, whatever the model."""

    amp: str | None = None  # "bf16" | "fp16": the step under autocast (float32 master weights; fp16 scales the loss)
    clip: float | None = None  # clip the gradient norm to this (after unscaling); None or 0: no clipping
    log_every: int = LOG_EVERY  # steps between reads of the step log (log points)
    progress: bool = True  # a progress bar (on the writing process)
    allreduce_sum: Callable[[np.ndarray], np.ndarray] | None = None  # data parallel: a float64 vector summed over ranks
    divergence: float | None = DIVERGENCE_FACTOR  # stop when a loss exceeds this times the first (and the floor); None: never
    cuda_graph: bool = False  # capture the step once as a CUDA graph and replay it (a cuda device only)


@dataclass(frozen=True)
class Hooks:
    """Calls the loop makes: ``after_backward()`` (e.g. finish the gradient all-reduce),
    ``on_step(epoch, step, loss)`` after each optimizer step with the loss as a 0-d Tensor still on
    the device (reading it is a host sync), and the Ctrl-C ``guard`` (one of its own if None)."""

    after_backward: Callable[[], None] | None = None
    on_step: Callable[[int, int, Any], None] | None = None
    guard: InterruptGuard | None = None


@dataclass
class FitResult:
    """What ``fit`` ends with: the per-epoch records and whether it stopped early (Ctrl-C)."""

    history: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    epoch: int = 0
    step: int = 0
    checkpoint: str | None = None


def fit(model: Any, train_loader: Any, step_fn: Callable[[Any, Any], StepOutput], *, epochs: int,
        optimizer: Any, scheduler: Any = None, metrics: Metrics = Metrics(),
        evaluate: Callable[[Any], np.ndarray] | None = None, checkpoints: Checkpointer | None = None,
        options: FitOptions = FitOptions(), hooks: Hooks = Hooks()) -> FitResult:  # fmt: skip
    """Train ``model`` for ``epochs`` epochs; after each, evaluate, log, plot and checkpoint.

    ``train_loader`` yields batches and has ``set_epoch(epoch, start_batch)`` (a DataLoader); one
    with ``state_dict()`` / ``load_state_dict(state)`` also keeps its mid-epoch state in the
    checkpoints (the language model's hidden state); one with a ``batch_size`` is resumed under
    another batch size from the same sample (``set_epoch(epoch, start_sample=...)`` when that is
    not a batch boundary). ``step_fn(model, batch)`` is the forward pass
    to a ``StepOutput``; the loop runs it under autocast (``options.amp``), then backward, clipping
    and the optimizer. ``evaluate(model)`` gives the validation sums ``[loss * items, *counts,
    items]`` (float64) that ``metrics`` turns into the ``val_`` values. ``checkpoints`` says where
    checkpoints go, which to resume from and whether this process writes (None: no files).

    A non-finite loss, or one above both ``options.divergence`` times the run's first loss and
    DIVERGENCE_FLOOR, is found at the next log point and raises TrainingDivergedError: up to
    ``log_every - 1`` steps after the step that produced it, whose updates are applied to the model
    in memory, but nothing on disk is touched: the last checkpoint predates them. Ctrl-C (or
    SIGTERM, SIGUSR1) stops after the current step, saving a checkpoint to resume from; with
    ``allreduce_sum`` the ranks agree on stopping, and on a bad loss, at log points only.

    Resuming (``checkpoints.resume``) with ``epochs`` not beyond the checkpoint's epoch, or with
    another optimizer class, is a ResumeError. The optimizer's hyper-parameters and the schedule
    are those given here, not the checkpoint's (see the module docstring).
    """
    loop = _Loop(model, train_loader, step_fn, optimizer, scheduler, metrics, evaluate,
                 checkpoints or Checkpointer(), options, hooks)
    return loop.run(epochs)


@dataclass
class _Loop:
    """One ``fit`` call: what it was given, where it is (epoch, step), the epoch's sums, the logs."""

    model: Any
    loader: Any
    step_fn: Callable[[Any, Any], StepOutput]
    optimizer: Any
    scheduler: Any
    metrics: Metrics
    evaluate: Callable[[Any], np.ndarray] | None
    checkpoints: Checkpointer
    options: FitOptions
    hooks: Hooks

    def __post_init__(self) -> None:
        from tinyflow.amp.autocast_mode import autocast
        from tinyflow.amp.grad_scaler import GradScaler

        self.writer = self.checkpoints.writer  # files and printing: rank 0 of a data-parallel run
        self.guard = self.hooks.guard or InterruptGuard()
        self.guard.announce = self.writer
        self.scaler = GradScaler(enabled=self.options.amp == "fp16")
        # Every step runs under this: with amp off a disabled autocast (a float32 step, even
        # inside an outer autocast block), which needs no ml_dtypes; --amp bf16 without
        # ml_dtypes fails here, before the first step, saying how to install it.
        self.autocast = autocast(self.options.amp, enabled=self.options.amp is not None)
        self.epoch, self.step, self.global_step = 0, 0, 0  # the step: batches done in this epoch
        self.sums = self.metrics.zero_sums()
        self.best = -math.inf if self.metrics.higher_is_better else math.inf
        self.steplog = StepLog(self.options.log_every, 1 + len(self.metrics.counts))  # per step: loss, counts
        self.sizes: list[int] = []  # the items of each step in the step log
        self.log = MetricsLog(self.checkpoints.directory, enabled=self.writer)
        self.first_loss: float | None = None  # the run's first training loss: the divergence test's reference
        self.start_sample: int | None = None  # resumed under another batch size: where the epoch goes on
        # The epoch's training seconds before this process took it up (resumed mid-epoch; None: a
        # checkpoint that does not say) and its items then: the record's time and throughput count both.
        self.earlier_s: float | None = 0.0
        self.earlier_items = 0.0
        self.epoch_start = time.perf_counter()
        self.graphed = self.graphed_step() if self.options.cuda_graph else None

    def graphed_step(self) -> Any:
        """The step under ``--cuda-graph`` (tinyflow/recipes/graphed_step.py)."""
        from tinyflow.recipes.graphed_step import GraphedStep, say_on_stderr

        params = list(self.model.parameters())
        if not params:
            raise ValueError("--cuda-graph: the model has no parameters to train")
        data_parallel = self.options.allreduce_sum is not None or self.hooks.after_backward is not None
        return GraphedStep(self.train_step, params[0].device, say_on_stderr(self.writer), data_parallel=data_parallel)

    def run(self, epochs: int) -> FitResult:
        """Resume if asked, then train epoch after epoch; stop early on Ctrl-C."""
        self.resume(epochs)
        result = FitResult(history=self.log.records)
        with self.guard:
            for epoch in range(self.epoch, epochs):
                if self.stop_requested():  # Ctrl-C came during the last evaluation: its checkpoint is saved
                    result.interrupted = True
                    return result
                self.epoch_start = time.perf_counter()
                lr = float(self.optimizer.param_groups[0]["lr"])
                if self.train_epoch(epoch, epochs):  # stopped by Ctrl-C: save where it is
                    result.checkpoint = self.checkpoint(epoch, self.epoch_seconds())
                    if self.options.allreduce_sum is not None:  # no rank exits before rank 0 has saved
                        self.reduce([0.0])
                    result.interrupted, result.epoch, result.step = True, epoch, self.step
                    if self.writer and result.checkpoint:
                        print(f"saved {result.checkpoint} (epoch {epoch + 1}, batch {self.step}); "
                              f"continue with --resume", file=sys.stderr)
                    return result
                timing = self.epoch_timing()
                if self.scheduler is not None:
                    self.scheduler.step()
                record: dict[str, Any] = {"epoch": epoch + 1, **self.metrics.summary(self.reduce(self.sums.values()), "train")}
                if self.evaluate is not None:
                    record.update(self.metrics.summary(self.reduce(self.evaluate(self.model)), "val"))
                record.update({"lr": lr, "time_s": timing[0], f"{self.metrics.items}_per_s": timing[1]})
                result.checkpoint = self.end_epoch(epoch, record)
                result.epoch, result.step = epoch + 1, 0
        return result

    def epoch_seconds(self) -> float | None:
        """The epoch's training seconds so far, over every process that trained it (None: unknown)."""
        if self.earlier_s is None:
            return None
        return self.earlier_s + time.perf_counter() - self.epoch_start

    def epoch_timing(self) -> tuple[float | None, float | None]:
        """The finished epoch's record of (seconds, items per second). An epoch resumed from a
        checkpoint counts the time trained before the resume; from one that does not record that
        time, the throughput is this process's share and the epoch's time is unknown (None), never
        a time of 0 s or a rate of the whole epoch's items over a few seconds."""
        now = time.perf_counter() - self.epoch_start
        count = self.sums["count"]
        total = self.epoch_seconds()
        if total is None:
            items = count - self.earlier_items
            rate = round(items / now, 2) if items > 0 and now > 0 else None
            seconds = None
        else:
            seconds, rate = round(total, 3), (round(count / total, 2) if total > 0 else None)
        self.earlier_s, self.earlier_items = 0.0, 0.0  # the next epoch starts here
        return seconds, rate

    def train_epoch(self, epoch: int, epochs: int) -> bool:
        """The steps of one epoch (from ``self.step`` on, when resuming); True when Ctrl-C stopped it."""
        self.model.train()
        if self.start_sample is None:
            self.loader.set_epoch(epoch, start_batch=self.step)
        else:  # resumed under another batch size, mid-batch: the first batch is a partial one
            self.loader.set_epoch(epoch, start_sample=self.start_sample)
            self.start_sample = None
        n_batches = len(self.loader)
        bar = Progress(n_batches, self.step, f"epoch {epoch + 1}/{epochs}", self.metrics.unit,
                       enabled=self.options.progress and self.writer)
        stopped = False
        # No NumPy overflow / invalid-value warnings from the steps of a diverging run: the log
        # point finds the bad loss and says so in one line.
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                for batch in self.loader:
                    out = self.train_step(batch, epoch) if self.graphed is None else self.graphed(batch, epoch)
                    full = self.steplog.add(out.loss, *out.counts)  # stays on the device: nothing read here
                    self.sizes.append(out.items)
                    self.step += 1
                    self.global_step += 1
                    at_log_point = full or self.step == n_batches
                    problem = self.log_point(epoch, bar) if at_log_point else None
                    if self.hooks.on_step is not None:
                        self.hooks.on_step(epoch, self.step, out.loss.detach())
                    if self.options.allreduce_sum is None:
                        if problem:
                            raise TrainingDivergedError(problem)
                        stopped = self.guard.interrupted
                    elif at_log_point:  # a collective: every rank reaches the same log points
                        stopped, bad = self.agree(self.guard.interrupted, problem is not None)
                        if bad:
                            raise TrainingDivergedError(problem or f"training stopped at epoch {epoch + 1}, batch "
                                                        f"{self.step}: another rank's loss diverged (see its error)")
                    if stopped:
                        break
                problem = self.log_point(epoch, bar)  # steps after the last log point (Ctrl-C, or a loader shorter than its len)
                if problem:
                    raise TrainingDivergedError(problem)
        finally:
            bar.close()
        return stopped

    def train_step(self, batch: Any, epoch: int) -> StepOutput:
        """Forward (the recipe's step, under autocast), backward, clipping, optimizer: no host read."""
        from tinyflow.optim import clip_grad_norm_

        clip = self.options.clip
        try:
            with self.autocast:
                out = self.step_fn(self.model, batch)
            self.optimizer.zero_grad()
            self.scaler.scale(out.loss).backward()
            if self.hooks.after_backward is not None:
                self.hooks.after_backward()
            if clip is not None and clip > 0:
                self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the scaled ones
                clip_grad_norm_(self.model.parameters(), clip)
            self.scaler.step(self.optimizer)  # = optimizer.step() without fp16
            self.scaler.update()
        except MemoryError as exc:
            batch_size = getattr(self.loader, "batch_size", 1)
            raise MemoryError(out_of_memory_message(batch_size, f"training step of epoch {epoch + 1}")) from exc
        return out

    def resume(self, epochs: int) -> None:
        """Continue from the Checkpointer's resume checkpoint, if it has one, for ``epochs`` in all."""
        state = self.checkpoints.resume_state()
        if state is None:
            return
        path = self.checkpoints.resume
        check_epochs(state, epochs, path)
        load_model_state(self.model, state["model"], path)
        self.load_optimizer(state, path)
        self.epoch, self.step, self.global_step = state["epoch"], state["step"], state.get("global_step", 0)
        if self.scheduler is not None:  # the schedule built (new length, new lr), at the epoch resumed
            for _ in range(self.epoch):
                self.scheduler.step()
        set_rng_state(state["rng"])
        self.resume_scaler(state, path)
        if hasattr(self.loader, "load_state_dict"):
            self.loader.load_state_dict(state)
        sample = self.resume_batch_size(state)
        if self.writer:  # the sums saved are those of all ranks: one rank carries them on
            self.sums.update({k: float(v) for k, v in state["sums"].items() if k in self.sums})
        self.earlier_s = state.get("epoch_time_s", 0.0 if not self.step else None)
        self.earlier_items = self.sums["count"]
        self.best = state.get("best", self.best)
        self.first_loss = state.get("first_loss")
        self.log.records[:] = state["history"]
        if self.writer:
            self.say_resumed(path, sample)

    def say_resumed(self, path: str | None, sample: int | None) -> None:
        """The resume line: where, the settings taken from the checkpoint, what changed; and a note
        naming what an older checkpoint does not record (so could not be checked)."""
        resumed = self.checkpoints.resumed
        where = f"epoch {self.epoch + 1}" + (f", batch {self.step + 1}" if self.step or sample else "")
        if sample:
            where += f" (sample {sample + 1} of the epoch)"
        taken = f"; the run's own {', '.join(resumed.taken)}" if resumed.taken else ""
        changes = (f"; changed {', '.join(resumed.changes)}: learning rate "
                   f"{float(self.optimizer.param_groups[0]['lr']):.4g} from here") if resumed.changes else ""
        print(f"resuming from {path} at {where}{taken}{changes}", file=sys.stderr)
        if resumed.unchecked:
            print(f"note: {path} was written before checkpoints recorded {', '.join(resumed.unchecked)}: "
                  "this command line's values are used, unchecked against the run's", file=sys.stderr)

    def resume_scaler(self, state: dict[str, Any], path: str | None) -> None:
        """fp16's loss scale goes on from the checkpoint's; a run of another precision than the
        checkpoint's is a ResumeError (its scaler state would be dropped, or be missing)."""
        saved = state.get("amp", "fp16" if state.get("scaler") is not None else self.options.amp)
        if saved != self.options.amp:
            shown = lambda amp: f"amp={amp!r}" if amp else "no amp (float32)"  # noqa: E731
            raise ResumeError(f"checkpoint {path!r} was trained with {shown(saved)}, this run has "
                              f"{shown(self.options.amp)}: resume with the same precision (--amp)")
        if state.get("scaler") is not None:
            self.scaler.load_state_dict(state["scaler"])

    def load_optimizer(self, state: dict[str, Any], path: str | None) -> None:
        """The optimizer's buffers (momentum, Adam's moments) from the checkpoint; its hyper-parameters
        (lr, momentum, weight decay, ...) stay those it was built with."""
        saved = state["optimizer"]
        ours = type(self.optimizer).__name__
        theirs = state.get("optimizer_name")
        if theirs is None:  # a checkpoint that does not name it: tell by the hyper-parameters' names
            keys = [sorted(set(g) - {"params", "initial_lr"}) for g in saved.get("param_groups", [])]
            if keys != [sorted(set(g) - {"params", "initial_lr"}) for g in self.optimizer.param_groups]:
                theirs = "another optimizer"
        if theirs is not None and theirs != ours:
            raise ResumeError(f"checkpoint {path!r} was trained with {theirs}, not {ours}: its optimizer state "
                              f"cannot carry over; resume with the same --optimizer, or start a new run in "
                              "another --checkpoint-dir")
        built = [{k: v for k, v in g.items() if k != "params"} for g in self.optimizer.param_groups]
        self.optimizer.load_state_dict(saved)
        for group, hyper in zip(self.optimizer.param_groups, built):
            group.update(hyper)

    def resume_batch_size(self, state: dict[str, Any]) -> int | None:
        """Resumed mid-epoch under another batch size: go on from the same sample of the epoch's
        order (the position ``step * old batch size``); that position, or None."""
        old, new = state.get("batch_size"), getattr(self.loader, "batch_size", None)
        if not self.step or not old or not new or old == new:
            return None
        position = self.step * int(old)
        self.step = position // int(new)
        if position % int(new):
            self.start_sample = position
        return position

    def checkpoint(self, epoch: int, seconds: float | None = 0.0) -> str | None:
        """Save last.ckpt at ``epoch`` (and this run's step in it, after ``seconds`` of the epoch's
        training); its path, or None. Every rank calls it: the epoch's sums so far are added over the ranks."""
        sums = dict(zip(self.sums, self.reduce(self.sums.values()).tolist()))
        return self.checkpoints.save({
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "rng": rng_state(),
            "scaler": self.scaler.state_dict() if self.scaler.enabled else None, "amp": self.options.amp,
            "epoch_time_s": seconds,
            "optimizer_name": type(self.optimizer).__name__,
            "batch_size": getattr(self.loader, "batch_size", None),
            "epoch": epoch, "step": self.step, "global_step": self.global_step,
            "sums": sums, "history": self.log.records, "best": self.best, "first_loss": self.first_loss,
            **(self.loader.state_dict() if hasattr(self.loader, "state_dict") else {}),
        })  # fmt: skip

    def reduce(self, sums: Any) -> np.ndarray:
        """``sums`` as float64, added over the ranks of a data-parallel run."""
        v = np.array(list(sums), dtype=np.float64)
        if self.options.allreduce_sum is not None:
            v = np.asarray(self.options.allreduce_sum(v), dtype=np.float64)
        return v

    def stop_requested(self) -> bool:
        """Ctrl-C on any rank stops every rank after the same step: ranks that disagreed would
        wait for each other in the next all-reduce."""
        return self.agree(self.guard.interrupted)[0]

    def agree(self, *flags: bool) -> list[bool]:
        """Each flag, true on any rank (one all-reduce); alone, the flags themselves."""
        if self.options.allreduce_sum is None:
            return [bool(f) for f in flags]
        votes = self.options.allreduce_sum(np.array([float(f) for f in flags], dtype=np.float64))
        return [bool(v > 0) for v in votes]

    def log_point(self, epoch: int, bar: Progress) -> str | None:
        """Read the steps since the last log point (one host read) into the sums and the bar.
        A loss that is not finite or has diverged: the error message (the steps before it counted)."""
        rows = self.steplog.read()  # (k, 1 + counts): each step's loss and counts
        first = self.step - len(rows)  # steps of this epoch before these
        for i, (row, n) in enumerate(zip(rows.tolist(), self.sizes)):
            loss = row[0]
            if self.first_loss is None and math.isfinite(loss):
                self.first_loss = loss
            problem = self.bad_loss(loss)
            if problem:
                bad = first + i + 1
                late = (f" (found at batch {self.step}: the updates of batches {bad}-{self.step} are applied in "
                        "memory; the checkpoints on disk predate them)") if bad < self.step else ""
                advice = "lower --lr or --clip" if self.options.clip else "lower --lr (or check the data)"
                self.sizes.clear()
                return f"the training loss {problem} at epoch {epoch + 1}, batch {bad}: {advice}{late}"
            self.sums["loss"] += loss * n
            for name, value in zip(self.metrics.counts, row[1:]):
                self.sums[name] += value
            self.sums["count"] += n
        if len(rows):
            bar.update(sum(self.sizes), float(rows[:, 0].mean()), steps=len(rows))
        self.sizes.clear()
        return None

    def bad_loss(self, loss: float) -> str | None:
        """What is wrong with a step's loss ("became nan", "grew to 1e+19, ..."), or None."""
        if not math.isfinite(loss):
            return f"became {loss}"
        factor, first = self.options.divergence, self.first_loss
        if factor is not None and first is not None and loss > max(factor * abs(first), DIVERGENCE_FLOOR):
            return f"grew to {loss:.3g} (over {factor:g} times its first value, {first:.3g}: the run diverged)"
        return None

    def end_epoch(self, epoch: int, record: dict[str, Any]) -> str | None:
        """Log the epoch's record, start the next epoch's sums, save last.ckpt (and best.ckpt);
        the checkpoint is written before the metrics files, which a resume rewrites from it."""
        self.log.append(record, write=False)
        if self.writer:
            shown = "  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in record.items())
            print(shown, file=sys.stderr, flush=True)
        self.sums, self.step = self.metrics.zero_sums(), 0
        name = self.metrics.best
        score = record.get(f"val_{name}", record[f"train_{name}"])
        improved = score > self.best if self.metrics.higher_is_better else score < self.best
        if improved:
            self.best = score
        path = self.checkpoint(epoch + 1)
        if improved and path is not None:
            self.checkpoints.mark_best(path)
        self.log.write()
        return path


# ----------------------------------------------------------------------------- Ctrl-C and progress


class InterruptGuard:
    """Within the block the first stop request (Ctrl-C, SIGTERM, SIGUSR1: ``STOP_SIGNALS``) only
    sets ``interrupted``; a second one raises KeyboardInterrupt at once.

    Only the main thread can receive signals: elsewhere (e.g. ranks run as threads) this is a
    no-op and ``request()`` is the way to stop. ``announce``: say so on stderr (the loop leaves
    it on for the writing process only).
    """

    def __init__(self) -> None:
        self.interrupted = False
        self.announce = True
        self._previous: dict[int, Any] = {}

    def request(self) -> None:
        self.interrupted = True

    def _handler(self, signum: int, frame: Any) -> None:
        if self.interrupted:
            raise KeyboardInterrupt
        self.interrupted = True
        if self.announce:
            what = "interrupted" if signum == signal.SIGINT else f"stop requested ({signal.Signals(signum).name})"
            print(f"\n{what}: saving a checkpoint, then stopping (Ctrl-C again to abort)", file=sys.stderr, flush=True)

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._handler) for sig in STOP_SIGNALS}
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous = {}


def _raise_keyboard_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """Within the block SIGTERM and SIGUSR1 raise KeyboardInterrupt, as Ctrl-C does: a command
    stopped before (or after) its training loop ends as if by Ctrl-C (exit status 130), where
    the default would kill it (SIGTERM) or end it unexplained (SIGUSR1). ``fit``'s guard takes
    over inside. Only in the main thread; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise_keyboard_interrupt) for sig in STOP_SIGNALS if sig != signal.SIGINT}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


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


# ----------------------------------------------------------------------------- what recipes give the loop


def check_amp(amp: str | None) -> None:
    """A ValueError, saying how to get it, where ``amp`` cannot run here (bf16 on a base install
    without ml_dtypes); checked before training, also when a resumed run takes --amp from its checkpoint."""
    if amp == "bf16":
        from tinyflow import amp as tf_amp

        try:
            tf_amp.autocast("bf16")
        except TypeError as exc:
            raise ValueError(f"--amp bf16: {exc}") from None


def make_optimizer(name: str, params: Any, lr: float, momentum: float, weight_decay: float) -> Any:
    """The optimizer named on the command line (sgd or adam) over ``params``."""
    import tinyflow.optim as optim

    if name == "sgd":
        return optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if name == "adam":
        return optim.Adam(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer {name!r}: choose sgd or adam")


def out_of_memory_message(batch_size: int, where: str) -> str:
    return (f"out of memory at batch size {batch_size} ({where}); this batch does not fit in memory: "
            f"try a smaller --batch-size (e.g. {max(1, batch_size // 2)})")
