"""What data parallelism adds to a training run: `tinyflow train MODEL --nproc N`.

A data-parallel run is the single-process run (recipes/vision.py over recipes/loop.py's ``fit``)
with these differences, all of them here, in ``Replicas``:

- each worker reads its own shard of the data (``sampler``: DistributedSampler; ``--batch-size``
  is per worker, so the global batch is N times it);
- the model is wrapped in DataParallel (``wrap``): rank 0's weights are broadcast, the gradients
  are all-reduced in buckets during backward, and the loop's ``after_backward`` hook waits for the
  last bucket (``--allreduce`` picks the algorithm);
- the epoch's metric sums and the Ctrl-C votes are added over the ranks (``allreduce_sum``);
- the workers first check that they were started with the same options (``check_same_options``);
- only rank 0 writes files and prints (``writer``). It also logs each step's time split to
  CHECKPOINT_DIR/steps.jsonl (tinyflow.parallel.trace.StepTimer), and ``--trace FILE`` writes one
  Chrome trace with a row per rank.

For a process alone (``world().size == 1``) a Replicas changes nothing: no sampler, the model
itself, no sums. Starting the workers (mpirun) is the command's job: tinyflow/commands/train.py.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from tinyflow.parallel.allreduce import DEFAULT_ALGORITHM
from tinyflow.parallel.world import World
from tinyflow.recipes.loop import Hooks

T = TypeVar("T")

# The options every worker of a run must share (checked once, before any data is read).
AGREED_OPTIONS = ("model", "--data", "--image-size", "--batch-size", "--epochs", "--optimizer", "--lr",
                  "--momentum", "--weight-decay", "--schedule", "--amp", "--seed", "--allreduce", "--resume")


class Replicas:
    """This worker's part in a (possibly one-worker) data-parallel run."""

    def __init__(self, world: World, algorithm: str = DEFAULT_ALGORITHM, trace: str | None = None):
        from tinyflow.parallel.trace import ChromeTracer

        self.world = world
        self.rank, self.size = world.rank, world.size
        self.comm = world.comm if world.size > 1 else None
        self.algorithm = algorithm
        self.trace = trace
        self.tracer = ChromeTracer(rank=self.rank) if trace and self.parallel else None
        self.dp: Any = None  # the DataParallel model, once wrapped
        self.timer: Any = None  # its StepTimer

    @property
    def parallel(self) -> bool:
        return self.comm is not None

    @property
    def writer(self) -> bool:
        """Whether this worker writes checkpoints, logs and plots and prints: rank 0."""
        return self.rank == 0

    def device(self, device: str) -> str:
        """``device`` for this worker: ``cuda`` (any index) becomes cuda:<local rank> in a parallel run."""
        return self.world.device("cuda") if self.parallel and device.startswith("cuda") else device

    def check_same_options(self, args: Any, flags: tuple[str, ...] = AGREED_OPTIONS) -> None:
        """Every worker must run with the same options: one started with another --batch-size
        takes a different number of steps per epoch and falls out of step with the others. A
        difference is a RankMismatchError on every rank naming the flag and both values."""
        if self.comm is None:
            return
        from tinyflow.parallel.allreduce import agree_on_values

        values = {flag: getattr(args, flag.lstrip("-").replace("-", "_"), None) for flag in flags}
        agree_on_values(values, self.comm, "the workers' options")

    def rank0_first(self, load: Callable[[], T]) -> T:
        """``load()`` on rank 0, then on the others: rank 0 may write a cache that they read
        (the synthetic data set is generated once), so they wait for it."""
        if self.comm is None:
            return load()
        saved, self.comm.timeout = self.comm.timeout, max(self.comm.timeout, 3600.0)
        try:
            first = load() if self.writer else None
            self.comm.barrier()
        finally:
            self.comm.timeout = saved
        return first if self.writer else load()

    def sampler(self, dataset: Any, shuffle: bool, seed: int = 0) -> Any:
        """This worker's shard of ``dataset`` (a DistributedSampler), or None alone."""
        if self.comm is None:
            return None
        from tinyflow.data.distributed import DistributedSampler

        return DistributedSampler(dataset, self.size, self.rank, shuffle=shuffle, seed=seed)

    def wrap(self, model: Any, steps_path: str | None, log_every: int) -> Any:
        """DataParallel(model) with a StepTimer hooked in (rank 0 writes ``steps_path``); alone, the model."""
        if self.comm is None:
            return model
        from tinyflow.parallel.data_parallel import DataParallel
        from tinyflow.parallel.trace import StepTimer

        # a training run is long: auto's cost model is worth timing once at start-up
        self.dp = DataParallel(model, self.comm, algorithm=self.algorithm, tracer=self.tracer, calibrate=True)
        if steps_path is not None and self.writer:
            os.makedirs(os.path.dirname(os.path.abspath(steps_path)), exist_ok=True)
        self.timer = StepTimer(self.dp, steps_path if self.writer else None, self.tracer, flush_every=log_every)
        self.dp.register_forward_pre_hook(self.timer.pre_forward)
        self.dp.register_forward_hook(self.timer.post_forward)
        return self.dp

    def hooks(self) -> Hooks:
        """The loop's hooks: finish the all-reduce after backward, time each step."""
        if self.timer is None:
            return Hooks()
        return Hooks(after_backward=self.timer.after_backward, on_step=self.timer.on_step)

    @property
    def allreduce_sum(self) -> Callable[[np.ndarray], np.ndarray] | None:
        """Adds a float64 vector over the ranks (ring all-reduce), or None alone."""
        if self.comm is None:
            return None
        from tinyflow.parallel.allreduce import allreduce

        return lambda v: allreduce(v.copy(), self.comm, algorithm="ring")

    def close(self) -> None:
        """Write the step log's last lines (whether training ended well or not)."""
        if self.timer is not None:
            self.timer.close()

    def report(self) -> None:
        """After training: rank 0 prints the step timing and writes the merged trace; the
        DataParallel communication thread stops; the ranks wait for each other, so that none
        leaves early (under mpirun a rank exiting 130 after Ctrl-C ends those still running)."""
        from tinyflow.parallel.allreduce import all_gather_object
        from tinyflow.parallel.trace import merge_traces

        if self.timer is not None and self.writer:
            print(self.timer.summary(), file=sys.stderr, flush=True)
        if self.tracer is not None:
            parts = all_gather_object(self.tracer.to_json(), self.comm)
            if self.writer:
                merge_traces(parts, self.trace)
                print(f"wrote trace {self.trace} (open in chrome://tracing or ui.perfetto.dev)", file=sys.stderr)
        if self.dp is not None:
            self.dp.close()
        if self.comm is not None:
            self.comm.barrier()

    def abort(self) -> None:
        """Take the whole job down (after a communication error) instead of leaving ranks waiting."""
        if self.comm is not None:
            self.comm.abort(1)
