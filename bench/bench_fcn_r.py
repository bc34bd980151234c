"""FCN-R of the dlbench study: tinyflow vs PyTorch training throughput on the CPU, same run.

The network is 784-2048-4096-1024-10 with sigmoid activations, batch 64, cross-entropy,
SGD with momentum 0.9. Both frameworks train the identical model (tinyflow's initial weights
are copied into PyTorch) on the same synthetic MNIST-shaped batches, with the same number of
BLAS/OpenMP threads. Runs alternate between the two frameworks so that machine noise hits both;
the median run of each is reported, and the ratio tinyflow / PyTorch (target >= 1.0x: NumPy's
GEMM is as fast as PyTorch's here, so any gap is framework overhead).

    python bench/bench_fcn_r.py                 # full measurement
    python bench/bench_fcn_r.py --short         # a quick check that it works
    python bench/bench_fcn_r.py --profile       # cProfile of tinyflow's training step
"""

from __future__ import annotations

import argparse
import os
import sys


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="BLAS/OpenMP threads for both")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--iters", type=int, default=20, help="training steps per timed run")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per framework (median reported)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before measuring")
    parser.add_argument("--short", action="store_true", help="3 runs of 5 steps: proves the script works")
    parser.add_argument("--profile", action="store_true", help="cProfile tinyflow's step and print the top entries")
    parser.add_argument("--profile-steps", type=int, default=20)
    parser.add_argument("--no-gemm-floor", action="store_true", help="skip timing the GEMMs alone")
    args = parser.parse_args()
    if args.short:
        args.iters, args.runs, args.warmup = 5, 3, 2
    return args


ARGS = parse_args()
# Thread pools are sized when the libraries load: set the environment before importing them.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tinyflow as tf  # noqa: E402
import tinyflow.nn as nn  # noqa: E402
import tinyflow.nn.functional as F  # noqa: E402

torch.set_num_threads(ARGS.threads)

LAYERS = [784, 2048, 4096, 1024, 10]
LR, MOMENTUM = 0.01, 0.9
N_BATCHES = 8  # distinct synthetic batches, cycled


def tinyflow_model() -> nn.Module:
    """FCN-R in tinyflow: Linear + Sigmoid between all layers, logits out."""
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(LAYERS[:-1], LAYERS[1:])):
        layers.append(nn.Linear(fan_in, fan_out))
        if i < len(LAYERS) - 2:
            layers.append(nn.Sigmoid())
    return nn.Sequential(*layers)


def torch_model_like(model: nn.Module) -> torch.nn.Module:
    """The same network in PyTorch, with tinyflow's initial weights copied in."""
    layers: list[torch.nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(LAYERS[:-1], LAYERS[1:])):
        layers.append(torch.nn.Linear(fan_in, fan_out))
        if i < len(LAYERS) - 2:
            layers.append(torch.nn.Sigmoid())
    tmodel = torch.nn.Sequential(*layers)
    state = {
        k: torch.from_numpy(np.array(v.numpy() if hasattr(v, "numpy") else v)) for k, v in model.state_dict().items()
    }
    tmodel.load_state_dict(state)
    return tmodel


def make_batches(batch: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(0)
    xs = [rng.random((batch, LAYERS[0]), dtype=np.float32) for _ in range(N_BATCHES)]  # (B, 784)
    ys = [rng.integers(0, LAYERS[-1], size=batch).astype(np.int64) for _ in range(N_BATCHES)]  # (B,)
    return xs, ys


class TinyflowTrainer:
    def __init__(self, model: nn.Module, xs: list[np.ndarray], ys: list[np.ndarray]) -> None:
        self.model = model
        self.opt = tf.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
        self.xs = [tf.tensor(x) for x in xs]
        self.ys = [tf.tensor(y, dtype=tf.int64) for y in ys]
        self.i = 0

    def step(self) -> float:
        x, y = self.xs[self.i % N_BATCHES], self.ys[self.i % N_BATCHES]
        self.i += 1
        self.opt.zero_grad()
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss


class TorchTrainer:
    def __init__(self, model: torch.nn.Module, xs: list[np.ndarray], ys: list[np.ndarray]) -> None:
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
        self.xs = [torch.from_numpy(x) for x in xs]
        self.ys = [torch.from_numpy(y) for y in ys]
        self.i = 0

    def step(self) -> torch.Tensor:
        x, y = self.xs[self.i % N_BATCHES], self.ys[self.i % N_BATCHES]
        self.i += 1
        self.opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss


def timed_run(trainer, iters: int, batch: int) -> float:
    """Samples per second over ``iters`` training steps."""
    start = time.perf_counter()
    for _ in range(iters):
        trainer.step()
    return iters * batch / (time.perf_counter() - start)


class GemmOnly:
    """Just the step's 11 GEMMs (4 forward, 4 weight grads, 3 input grads) into preallocated
    outputs: the BLAS floor of a training step, without any framework around it."""

    def __init__(self, lib: str, batch: int) -> None:
        rng = np.random.default_rng(1)
        arr = (lambda a: torch.from_numpy(a)) if lib == "torch" else (lambda a: a)
        self.mm = torch.matmul if lib == "torch" else np.matmul
        self.ws = [arr(rng.random((o, i), dtype=np.float32)) for i, o in zip(LAYERS[:-1], LAYERS[1:])]
        self.acts = [arr(rng.random((batch, n), dtype=np.float32)) for n in LAYERS]  # (B, n) each
        self.grads_w = [arr(np.empty_like(np.asarray(w))) for w in self.ws]

    def step(self) -> None:
        mm, ws, acts = self.mm, self.ws, self.acts
        for k, w in enumerate(ws):  # forward: (B, in) @ (in, out)
            mm(acts[k], w.T, out=acts[k + 1])
        for k in reversed(range(len(ws))):  # backward: dW = g.T @ x, dx = g @ W
            g = acts[k + 1]
            mm(g.T, acts[k], out=self.grads_w[k])
            if k > 0:
                mm(g, ws[k], out=acts[k])


def check_same_training(model: nn.Module, xs, ys, steps: int = 3) -> float:
    """Largest relative loss difference over the first steps: both must train the same model."""
    ours = TinyflowTrainer(model, xs, ys)
    theirs = TorchTrainer(torch_model_like(model), xs, ys)
    worst = 0.0
    for _ in range(steps):
        a, b = float(ours.step().item()), float(theirs.step().item())
        worst = max(worst, abs(a - b) / max(abs(b), 1e-12))
    return worst


def profile_tinyflow(trainer: TinyflowTrainer, steps: int) -> None:
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        trainer.step()
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    print(f"\n== cProfile of {steps} tinyflow training steps (sorted by own time) ==")
    stats.sort_stats("tottime").print_stats(25)
    print("== sorted by cumulative time ==")
    stats.sort_stats("cumulative").print_stats(30)


def main() -> None:
    batch = ARGS.batch
    print(f"FCN-R {'-'.join(map(str, LAYERS))}, sigmoid, batch {batch}, SGD lr={LR} momentum={MOMENTUM}")
    print(
        f"threads: OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} "
        f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']} torch.get_num_threads()={torch.get_num_threads()}"
    )
    print(f"numpy {np.__version__}, torch {torch.__version__}, tinyflow {getattr(tf, '__version__', '?')}")
    tf.manual_seed(0)
    xs, ys = make_batches(batch)

    model = tinyflow_model()
    diff = check_same_training(tinyflow_model_copy(model), xs, ys)
    print(f"same model check: max relative loss difference over 3 steps = {diff:.2e}")

    ours = TinyflowTrainer(model, xs, ys)
    theirs = TorchTrainer(torch_model_like(model), xs, ys)
    if ARGS.profile:
        for _ in range(ARGS.warmup):
            ours.step()
        profile_tinyflow(ours, ARGS.profile_steps)
        return

    for _ in range(ARGS.warmup):
        ours.step()
        theirs.step()
    tf_runs, torch_runs = [], []
    for _ in range(ARGS.runs):  # alternate, so that noise on the shared machine hits both
        tf_runs.append(timed_run(ours, ARGS.iters, batch))
        torch_runs.append(timed_run(theirs, ARGS.iters, batch))
    tf_med, torch_med = statistics.median(tf_runs), statistics.median(torch_runs)
    print(f"runs: {ARGS.runs} x {ARGS.iters} steps each (after {ARGS.warmup} warm-up steps)")
    print(f"tinyflow: {tf_med:10.1f} samples/s  (runs: {', '.join(f'{r:.0f}' for r in tf_runs)})")
    print(f"pytorch : {torch_med:10.1f} samples/s  (runs: {', '.join(f'{r:.0f}' for r in torch_runs)})")
    if not ARGS.no_gemm_floor:
        # The BLAS floor of each library: how much of each step is GEMM, how much framework.
        floors = {}
        for lib in ("numpy", "torch"):
            gemm = GemmOnly(lib, batch)
            gemm.step()
            floors[lib] = statistics.median(timed_run(gemm, ARGS.iters, batch) for _ in range(max(3, ARGS.runs // 2)))
        for lib, name, med in (("numpy", "tinyflow", tf_med), ("torch", "pytorch", torch_med)):
            overhead = 1 - med / floors[lib]
            print(
                f"GEMMs alone, {lib:5s}: {floors[lib]:10.1f} samples/s  ({name} spends {overhead:.0%} of its step outside GEMM)"
            )
    print(f"ratio tinyflow/pytorch: {tf_med / torch_med:.3f}x")


def tinyflow_model_copy(model: nn.Module) -> nn.Module:
    """A second tinyflow model with the same weights (the check must not train the timed one)."""
    copy = tinyflow_model()
    copy.load_state_dict(model.state_dict())
    return copy


if __name__ == "__main__":
    main()
