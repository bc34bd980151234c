"""Launch budgets: the GPU work of one training step, counted on the strict CuPy stand-in.

A small model on an H100 is launch-bound: every kernel costs 10-30 us of host time, more than the
kernel itself (the first GPU run, ../shared/gpu-runs/h100-2026-11-27/: AlexNet-64 under bf16 launched
1,268 kernels a step against PyTorch's 399 and kept the GPU busy 35% of the time). These tests run
the step that bench/gpu/bench_gpu.py times (``measure_tinyflow``: zero_grad, forward under autocast,
cross-entropy, backward, SGD with momentum), on the stand-in, and count its kernel launches and
memory operations (strict_cupy/launches.py). The counts do not depend on the sizes, so the models run
at tiny sizes; they do depend on every op's implementation, which is the point: a change that falls
back to a per-tap loop, or adds a cast per parameter, fails here.

Each budget is written next to what PyTorch + cuDNN launches for the same step (CUPTI on the H100,
launches.txt of the run above; ``None`` where no GPU run has measured it yet). The stand-in counts one
kernel per CuPy call; CUPTI also sees what a call launches inside cuBLAS or CUB, so the next GPU run
compares the two counts for tinyflow (bench/gpu/kernel_profile.py) and the budgets are recalibrated
from it.
"""
from __future__ import annotations

import argparse
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from cuda_tools import emulator, strict_cupy
from cuda_tools.strict_cupy.launches import Tally, tally

pytestmark = [
    pytest.mark.launch_budget,
    pytest.mark.skipif(emulator.compiler() is None, reason="the stand-in runs kernels through the g++ emulator"),
]

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Budget:
    """At most ``kernels`` launches and ``memops`` memcpy/memset per step; ``pytorch``: PyTorch's
    kernels for the same step (CUPTI, H100, 2026-11-27), None where unmeasured."""

    kernels: int
    memops: int
    pytorch: int | None


BUDGETS: dict[tuple[str, str], Budget] = {
    # measured on the stand-in 2026-11-27 (issue 21): kernels / memops, a few launches of headroom.
    # Before issue 21 (same counting): AlexNet-64 fp32 137 / bf16 686, ResNet-20 947 / 1905.
    ("alexnet-64", "fp32"): Budget(kernels=115, memops=8, pytorch=354),  # measured 111 / 6
    ("alexnet-64", "bf16"): Budget(kernels=160, memops=4, pytorch=399),  # measured 154 / 1
    ("alexnet-224", "fp32"): Budget(kernels=115, memops=8, pytorch=371),  # measured 111 / 6
    ("alexnet-224", "bf16"): Budget(kernels=160, memops=4, pytorch=None),  # measured 154 / 1
    ("resnet-20", "fp32"): Budget(kernels=350, memops=24, pytorch=None),  # measured 339 / 22
    ("resnet-20", "bf16"): Budget(kernels=395, memops=6, pytorch=None),  # measured 385 / 3
    ("lstm-lm", "fp32"): Budget(kernels=72, memops=10, pytorch=3257),  # measured 70 / 8
    ("lstm-lm", "bf16"): Budget(kernels=94, memops=10, pytorch=2823),  # measured 93 / 8 (W_hh cast to bf16 once per call)
}


def _bench_gpu() -> Any:
    """bench/gpu/bench_gpu.py as a module (its measure_tinyflow builds the timed step)."""
    spec = importlib.util.spec_from_file_location("bench_gpu_for_budgets", ROOT / "bench" / "gpu" / "bench_gpu.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _resnet20_step(precision: str) -> Callable[[], None]:
    """bench_gpu.py's step, for ResNet-20 on CIFAR-sized images (not one of its workloads)."""
    import tinyflow as tf
    import tinyflow.nn.functional as F
    from tinyflow.models import get_model

    rng = np.random.default_rng(0)
    model = get_model("resnet20", num_classes=10).to("cuda:0")
    x = tf.tensor(rng.standard_normal((2, 3, 32, 32)).astype(np.float32), device="cuda:0")
    y = tf.tensor(rng.integers(0, 10, 2), device="cuda:0")
    model.train()
    opt = tf.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step() -> None:
        opt.zero_grad()
        with tf.amp.autocast("bf16", enabled=precision == "bf16"):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return step


def step_work(workload: str, precision: str, seq: int | None = None) -> Tally:
    """The GPU work of one training step (after a first, warm-up step) of ``workload``."""
    with strict_cupy.installed():
        if workload == "resnet-20":
            step = _resnet20_step(precision)
        else:
            bench = _bench_gpu()
            args = argparse.Namespace(device="cuda:0", tiny=True, vocab=100)
            if seq is not None:
                sizes = bench.sizes
                bench.sizes = lambda a, w: {**sizes(a, w), "seq": seq}
            step = bench.measure_tinyflow(args, workload, "bf16" if precision == "bf16" else "tf32")
        step()  # the first step creates the optimizer state and caches
        with strict_cupy.record_calls() as calls:
            step()
    return tally(calls)


# The default suite keeps the headline (AlexNet-64 under bf16) and the LSTM LM; the other
# cases (7-15 s each on the emulator) run with `-m slow` or `-m launch_budget`.
DEFAULT_CASES = {("alexnet-64", "bf16"), ("lstm-lm", "fp32"), ("lstm-lm", "bf16")}
CASES = [pytest.param(w, p, id=f"{w}-{p}", marks=[] if (w, p) in DEFAULT_CASES else [pytest.mark.slow])
         for w, p in sorted(BUDGETS)]


@pytest.mark.parametrize(("workload", "precision"), CASES)
def test_training_step_stays_within_its_launch_budget(workload: str, precision: str) -> None:
    budget = BUDGETS[workload, precision]
    work = step_work(workload, precision)
    assert work.kernels <= budget.kernels, (
        f"{workload} {precision}: {work.kernels} kernel launches per training step, budget {budget.kernels} "
        f"(PyTorch: {budget.pytorch or 'unmeasured'}). The calls that launch most:\n{work.table()}")
    assert work.memops <= budget.memops, (
        f"{workload} {precision}: {work.memops} memcpy/memset per step, budget {budget.memops}")
    if budget.pytorch is not None:  # issue 21: no more launches than PyTorch + cuDNN's
        assert budget.kernels <= budget.pytorch, f"{workload} {precision}: the budget exceeds PyTorch's count"


def test_lstm_step_launches_do_not_grow_with_the_sequence_length() -> None:
    """The recurrence runs as whole-sequence kernels: 4 steps and 12 steps launch the same."""
    short, long = step_work("lstm-lm", "fp32", seq=4), step_work("lstm-lm", "fp32", seq=12)
    assert (short.kernels, short.memops) == (long.kernels, long.memops), (
        f"lstm-lm: {short.kernels} kernels at 4 steps, {long.kernels} at 12:\n{long.table()}")
