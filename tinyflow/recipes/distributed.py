"""Data-parallel `tinyflow train MODEL --nproc N [--allreduce ALGO] [--trace FILE]`.

Launch: without an MPI world around it, the command relaunches itself as N local workers
under ``mpirun``; started by a user's own ``mpirun -H host1,host2 ... tinyflow train ...``
it joins that world instead (``--nproc`` is then only checked against the world size).

Each worker: takes its device (cpu, or cuda:<local rank>), reads its own shard of the data
(DistributedSampler; ``--batch-size`` is per worker, so the global batch is N times it),
wraps the model in DataParallel (rank 0's weights are broadcast), and trains with the shared
``fit`` loop. Only rank 0 writes checkpoints, metrics and plots; epoch metrics are summed over
ranks. Rank 0 logs each step's time split to CHECKPOINT_DIR/steps.jsonl: ``step_s`` (wall),
``comm_s`` (all-reduce time on the communication thread, mostly hidden behind backward) and
``wait_s`` (communication backward had to wait for: the exposed part), with
``compute_s = step_s - wait_s``; the lines are written every ``--log-every`` steps (the step
losses are read from the device then, not per step). ``--trace FILE`` writes one Chrome trace
with a row per rank.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np


def run_train(args: argparse.Namespace) -> int:
    """Relaunch under mpirun, or (inside the MPI world) train this worker's share."""
    from tinyflow.parallel.world import launched_by_mpi

    if args.nproc > 1 and not launched_by_mpi():
        return _relaunch(args)
    from tinyflow.parallel.communicator import CommError
    from tinyflow.parallel.world import world

    w = world()
    if args.nproc > 1 and w.size != args.nproc:
        print(f"tinyflow train: note: --nproc {args.nproc} but the MPI world has {w.size} workers; "
              f"using {w.size}", file=sys.stderr)
    comm = w.comm
    try:
        return _train_worker(args, w, comm)
    except CommError as exc:
        print(f"tinyflow train: error on rank {w.rank}: {exc}", file=sys.stderr, flush=True)
        if comm is not None:
            comm.abort(1)  # take the whole job down instead of leaving ranks waiting
        return 1


def _relaunch(args: argparse.Namespace) -> int:
    from tinyflow.parallel.launch import mpirun_command, mpirun_env

    argv = sys.argv[1:]
    if "train" not in argv:
        print("tinyflow train: error: --nproc relaunches the command line; run it as "
              "`tinyflow train ... --nproc N` (or under your own mpirun)", file=sys.stderr)
        return 2
    try:
        cmd = mpirun_command(args.nproc, [sys.executable, "-m", "tinyflow.cli", *argv])
    except RuntimeError as exc:
        print(f"tinyflow train: error: {exc}", file=sys.stderr)
        return 2
    print(f"launching {args.nproc} workers: {' '.join(cmd[:3])} ...", file=sys.stderr, flush=True)
    return subprocess.run(cmd, env=mpirun_env(nproc=args.nproc)).returncode


class _StepTimer:
    """Per-step compute/communication split (rank 0 writes it) and the Chrome-trace spans."""

    def __init__(self, dp: Any, rank: int, path: str | None, tracer: Any, flush_every: int = 20):
        self.dp = dp
        self.rank = rank
        self.tracer = tracer
        self.file = open(path, "a") if path else None  # noqa: SIM115 - closed in close()
        self.forward_start = self.forward_end = self.backward_end = None
        self.totals = {"step_s": 0.0, "comm_s": 0.0, "wait_s": 0.0, "steps": 0}
        self.flush_every = max(1, flush_every)
        self.pending: list[tuple[dict[str, Any], Any]] = []  # (record, loss still on the device)

    def pre_forward(self, module: Any, inputs: Any) -> None:
        self.forward_start = time.perf_counter()

    def post_forward(self, module: Any, inputs: Any, output: Any) -> None:
        self.forward_end = time.perf_counter()
        if self.tracer is not None:
            name = "forward" if module.training else "eval forward"
            self.tracer.add(name, self.forward_start, self.forward_end, cat="compute")

    def after_backward(self) -> None:
        self.dp.synchronize()
        self.backward_end = time.perf_counter()
        if self.tracer is not None and self.forward_end is not None:
            self.tracer.add("backward", self.forward_end, self.backward_end, cat="compute")

    def on_step(self, epoch: int, step: int, loss: Any) -> None:
        """Time the step; ``loss`` (a 0-d Tensor on the device) is kept there until the next flush."""
        now = time.perf_counter()
        if self.tracer is not None and self.backward_end is not None:
            self.tracer.add("optimizer step", self.backward_end, now, cat="compute")
        stats = self.dp.last_step
        step_s = now - (self.forward_start or now)
        record = {"epoch": epoch + 1, "step": step, "step_s": round(step_s, 6),
                  "compute_s": round(step_s - stats.wait_seconds, 6), "comm_s": round(stats.comm_seconds, 6),
                  "wait_s": round(stats.wait_seconds, 6), "bytes_sent": stats.bytes_sent}
        self.totals["step_s"] += step_s
        self.totals["comm_s"] += stats.comm_seconds
        self.totals["wait_s"] += stats.wait_seconds
        self.totals["steps"] += 1
        if self.file is not None:
            self.pending.append((record, loss))
            if step % self.flush_every == 0 or len(self.pending) >= self.flush_every:  # with fit's log points
                self.flush()

    def flush(self) -> None:
        """Write the pending lines: their losses come from the device in one host read."""
        if self.file is None or not self.pending:
            return
        import tinyflow

        losses = tinyflow.stack([loss.reshape(1) for _, loss in self.pending]).numpy().reshape(-1).tolist()
        for (record, _), loss in zip(self.pending, losses):
            self.file.write(json.dumps({**record, "loss": round(loss, 6)}) + "\n")
        self.file.flush()
        self.pending.clear()

    def summary(self) -> str:
        t = self.totals
        n = max(t["steps"], 1)
        return (f"per step: {t['step_s'] / n * 1e3:.1f} ms total, {(t['step_s'] - t['wait_s']) / n * 1e3:.1f} ms compute, "
                f"{t['comm_s'] / n * 1e3:.1f} ms all-reduce of which {t['wait_s'] / n * 1e3:.1f} ms not hidden "
                f"behind backward")

    def close(self) -> None:
        if self.file is not None:
            self.flush()
            self.file.close()


def _train_worker(args: argparse.Namespace, w: Any, comm: Any) -> int:
    import tinyflow
    import tinyflow.optim as optim
    from tinyflow.data import DataLoader
    from tinyflow.data.distributed import DistributedSampler
    from tinyflow.parallel.allreduce import all_gather_object, allreduce
    from tinyflow.parallel.data_parallel import DataParallel
    from tinyflow.parallel.trace import ChromeTracer, merge_traces
    from tinyflow.recipes.common import LOG_EVERY, fit, make_optimizer, resume_path
    from tinyflow.recipes.vision import (
        build_data,
        build_model,
        check_input,
        default_image_size,
        fill_defaults,
        model_config,
    )

    rank, size, is_main = w.rank, w.size, w.rank == 0
    fill_defaults(args)
    if args.checkpoint_dir is None:
        args.checkpoint_dir = os.path.join("runs", args.model)
    device = args.device or "cpu"
    if device.startswith("cuda"):
        device = w.device("cuda")
    tinyflow.manual_seed(args.seed)
    probe = build_model(args.model, num_classes=10)
    if args.image_size is None:
        args.image_size = default_image_size(probe)

    def load() -> Any:
        return build_data(args.data, args.image_size, seed=args.seed, crop_scale=args.crop_scale)

    if comm is not None:  # rank 0 first: it may generate and cache the synthetic data set
        saved_timeout, comm.timeout = comm.timeout, max(comm.timeout, 3600.0)
        data = load() if is_main else None
        comm.barrier()
        data = data or load()
        comm.timeout = saved_timeout
    else:
        data = load()
    if is_main:
        print(f"data: {data.source}: {len(data.train)} train / {len(data.val) if data.val else 0} val images, "
              f"{len(data.classes)} classes; {size} workers x batch {args.batch_size} = global batch "
              f"{size * args.batch_size}; all-reduce {args.allreduce}", file=sys.stderr, flush=True)

    tinyflow.manual_seed(args.seed)
    model = build_model(args.model, num_classes=len(data.classes)).to(device)
    workers = getattr(args, "workers", 0)
    train_sampler = DistributedSampler(data.train, size, rank, shuffle=True, seed=args.seed)
    # The same seed on every rank: augmentation depends on (seed, epoch, sample), not on the rank,
    # so N workers see exactly what one worker of batch N*b would.
    train_loader = DataLoader(data.train, batch_size=args.batch_size, sampler=train_sampler,
                              drop_last=len(train_sampler) > args.batch_size, num_workers=workers,
                              seed=args.seed, device=device, refill_skipped=True)
    val_loader = None
    if data.val is not None:
        val_sampler = DistributedSampler(data.val, size, rank, shuffle=False)
        val_loader = DataLoader(data.val, batch_size=args.batch_size, sampler=val_sampler,
                                num_workers=workers, seed=args.seed, device=device, refill_skipped=True)
    sample, _ = data.train[0]
    check_input(model, args.model, tuple(sample.shape), data.source)

    tracer = ChromeTracer(rank=rank) if args.trace else None
    dp = DataParallel(model, comm, algorithm=args.allreduce, tracer=tracer) if comm is not None else model
    optimizer = make_optimizer(args.optimizer, list(model.parameters()), args.lr, args.momentum, args.weight_decay)
    scheduler = optim.CosineAnnealingLR(optimizer, T_max=max(args.epochs, 1)) if args.schedule == "cosine" else None
    meta = {"model_name": args.model, "model_config": model_config(model), "classes": data.classes,
            "num_classes": len(data.classes), "image_size": args.image_size, "seed": args.seed,
            "world_size": size, "allreduce": args.allreduce}

    def allreduce_sum(v: np.ndarray) -> np.ndarray:
        return allreduce(v, comm, algorithm="ring") if comm is not None else v

    fit_kwargs: dict[str, Any] = {}
    timer = None
    if comm is not None:
        if is_main:
            os.makedirs(args.checkpoint_dir, exist_ok=True)
        steps_path = os.path.join(args.checkpoint_dir, "steps.jsonl") if is_main else None
        log_every = getattr(args, "log_every", None) or LOG_EVERY
        timer = _StepTimer(dp, rank, steps_path, tracer, flush_every=log_every)
        dp.register_forward_pre_hook(timer.pre_forward)
        dp.register_forward_hook(timer.post_forward)
        fit_kwargs = {"after_backward": timer.after_backward, "on_step": timer.on_step}
    try:
        result = fit(dp, optimizer, train_loader, val_loader, epochs=args.epochs,
                     checkpoint_dir=args.checkpoint_dir, meta=meta, scheduler=scheduler,
                     resume=resume_path(args), progress=is_main and not getattr(args, "quiet", False),
                     rank=rank, allreduce_sum=allreduce_sum, amp=getattr(args, "amp", None),
                     log_every=getattr(args, "log_every", None) or LOG_EVERY, **fit_kwargs)
    finally:
        if timer is not None:
            timer.close()
    if timer is not None and is_main:
        print(timer.summary(), file=sys.stderr, flush=True)
    if tracer is not None:
        parts = all_gather_object(tracer.to_json(), comm) if comm is not None else [tracer.to_json()]
        if is_main:
            merge_traces(parts, args.trace)
            print(f"wrote trace {args.trace} (open in chrome://tracing or ui.perfetto.dev)", file=sys.stderr)
    if isinstance(dp, DataParallel):
        dp.close()
    if result.interrupted:
        return 130
    if is_main and result.history:
        last = result.history[-1]
        summary = ", ".join(f"{k} {last[k]:.4f}" for k in ("train_loss", "val_loss", "val_top1") if k in last)
        print(f"finished {args.model} on {size} workers: {summary}; files in {args.checkpoint_dir}", file=sys.stderr)
    return 0
