"""AlexNet training steps on the CPU: tinyflow against the identical PyTorch model.

Two workloads (issue 3): AlexNet-64 (the 64x64 preset, batch 64) and AlexNet-224
(torchvision's layout, batch 16). A training step is forward, softmax cross-entropy, backward
and an SGD-momentum update, on a fixed random float32 batch. Each framework runs in its own
subprocess, so that its peak resident memory (ru_maxrss) is its own; the two alternate for
``--rounds`` rounds to share the machine's load fairly, and each subprocess reports the median
of ``--repeats`` timed runs of ``--steps`` steps after ``--warmup`` untimed ones. Both use the
same number of threads (BLAS for NumPy, intra-op for PyTorch).

OpenBLAS (NumPy's BLAS) keeps its worker threads spinning for a while after each GEMM; on a
machine with few cores they then steal the cores from tinyflow's own element-wise threads
(im2col, Winograd transforms, pooling run up to 2x slower right after a GEMM). Both subprocesses
therefore get ``OPENBLAS_THREAD_TIMEOUT=4`` (spin for 2^4 cycles, then sleep; PyTorch's MKL and
OpenMP ignore it), the setting we recommend for training with tinyflow on the CPU. Pass
``--openblas-thread-timeout 0`` to leave the environment as it is.

    python bench/bench_alexnet_cpu.py                 # full run, prints the table
    python bench/bench_alexnet_cpu.py --short         # a quick check that everything works
    python bench/bench_alexnet_cpu.py --json bench/results/alexnet_cpu.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = {  # name -> (registry model name, batch size)
    "alexnet-64": ("alexnet", 64),
    "alexnet-224": ("alexnet-224", 16),
}


# ----------------------------------------------------------------------------- the PyTorch twin
def torch_alexnet(torch, cfg):  # noqa: ANN001, ANN201
    """The torch.nn model with exactly the layers of ``models.alexnet.AlexNet(cfg)``."""
    tnn = torch.nn
    c1, c2, c3, c4, c5 = cfg.channels
    g1, g2, g3, g4, g5 = cfg.groups

    def lrn():  # noqa: ANN202
        return [tnn.LocalResponseNorm(cfg.lrn_size, cfg.lrn_alpha, cfg.lrn_beta, cfg.lrn_k)] if cfg.lrn else []

    class TorchAlexNet(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = tnn.Sequential(
                tnn.Conv2d(cfg.in_channels, c1, cfg.conv1_kernel, cfg.conv1_stride, cfg.conv1_padding, groups=g1),
                tnn.ReLU(), *lrn(), tnn.MaxPool2d(3, 2),
                tnn.Conv2d(c1, c2, 5, padding=2, groups=g2), tnn.ReLU(), *lrn(), tnn.MaxPool2d(3, 2),
                tnn.Conv2d(c2, c3, 3, padding=1, groups=g3), tnn.ReLU(),
                tnn.Conv2d(c3, c4, 3, padding=1, groups=g4), tnn.ReLU(),
                tnn.Conv2d(c4, c5, 3, padding=1, groups=g5), tnn.ReLU(), tnn.MaxPool2d(3, 2))
            self.avgpool = tnn.AdaptiveAvgPool2d((cfg.pool_size, cfg.pool_size))
            self.classifier = tnn.Sequential(
                tnn.Dropout(cfg.dropout), tnn.Linear(c5 * cfg.pool_size ** 2, cfg.hidden), tnn.ReLU(),
                tnn.Dropout(cfg.dropout), tnn.Linear(cfg.hidden, cfg.hidden), tnn.ReLU(),
                tnn.Linear(cfg.hidden, cfg.num_classes))

        def forward(self, x):  # noqa: ANN001, ANN202
            return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))

    return TorchAlexNet()


# ----------------------------------------------------------------------------- one measurement
def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def run_worker(framework: str, workload: str, steps: int, warmup: int, repeats: int, threads: int) -> dict:
    """Time training steps of one framework in this process; returns the measurements."""
    import numpy as np

    from tinyflow.models import get_config

    model_name, batch = WORKLOADS[workload]
    cfg = get_config(model_name)
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((batch, cfg.in_channels, cfg.image_size, cfg.image_size)).astype(np.float32)
    y_np = rng.integers(0, cfg.num_classes, batch).astype(np.int64)

    if framework == "tinyflow":
        import tinyflow as tf
        import tinyflow.nn.functional as F
        from tinyflow.models import build

        tf.manual_seed(0)
        model = build(model_name, cfg)
        opt = tf.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x, y = tf.tensor(x_np), tf.tensor(y_np, dtype=tf.int64)

        def step() -> float:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.item()

        n_params = sum(int(np.prod(p.shape)) for p in model.parameters())
        dtypes = sorted({str(p.dtype) for p in model.parameters()})
    else:
        import torch

        torch.set_num_threads(threads)
        torch.manual_seed(0)
        model = torch_alexnet(torch, cfg)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)

        def step() -> float:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.item()

        n_params = sum(p.numel() for p in model.parameters())
        dtypes = sorted({str(p.dtype).replace("torch.", "") for p in model.parameters()})

    for _ in range(warmup):
        step()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            loss = step()
        rates.append(batch * steps / (time.perf_counter() - start))
    return {"framework": framework, "workload": workload, "batch": batch, "params": n_params,
            "dtypes": dtypes, "images_per_s": rates, "median": statistics.median(rates),
            "final_loss": loss, "peak_rss_mb": peak_rss_mb()}


def spawn(framework: str, workload: str, args: argparse.Namespace) -> dict:
    """Run one worker in a fresh interpreter (clean peak RSS, same thread settings)."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(args.threads)
    if args.openblas_thread_timeout > 0:
        env["OPENBLAS_THREAD_TIMEOUT"] = str(args.openblas_thread_timeout)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, __file__, "--worker", framework, "--workloads", workload,
           "--steps", str(args.steps), "--warmup", str(args.warmup), "--repeats", str(args.repeats),
           "--threads", str(args.threads)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{framework} worker for {workload} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- driver
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="alexnet-64,alexnet-224", help="comma-separated: " + ", ".join(WORKLOADS))
    p.add_argument("--steps", type=int, default=5, help="training steps per timed run")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per subprocess (median taken)")
    p.add_argument("--rounds", type=int, default=2, help="alternating tinyflow/PyTorch subprocess pairs")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads for both frameworks")
    p.add_argument("--openblas-thread-timeout", type=int, default=4,
                   help="OPENBLAS_THREAD_TIMEOUT for the workers (0: inherit the environment's)")
    p.add_argument("--short", action="store_true", help="1 round, 1 warmup, 2 repeats of 1 step")
    p.add_argument("--json", type=Path, help="also write the results to this file")
    p.add_argument("--worker", choices=["tinyflow", "torch"], help=argparse.SUPPRESS)
    args = p.parse_args()
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        p.error(f"unknown workload(s) {unknown}; choose from {list(WORKLOADS)}")

    if args.worker:
        print(json.dumps(run_worker(args.worker, workloads[0], args.steps, args.warmup, args.repeats, args.threads)))
        return
    if args.short:
        args.rounds, args.warmup, args.repeats, args.steps = 1, 1, 2, 1

    print(f"AlexNet CPU training steps, {args.threads} thread(s), {platform.processor() or platform.machine()}, "
          f"median of {args.rounds} round(s) x {args.repeats} run(s) x {args.steps} step(s), "
          f"OPENBLAS_THREAD_TIMEOUT={args.openblas_thread_timeout or os.environ.get('OPENBLAS_THREAD_TIMEOUT', 'unset')}")
    header = f"{'workload':<12} {'batch':>5} {'tinyflow img/s':>15} {'PyTorch img/s':>14} {'ratio':>6} " \
             f"{'tinyflow RSS':>13} {'PyTorch RSS':>12}"
    print(header)
    print("-" * len(header))
    results = []
    for w in workloads:
        runs: dict[str, list[dict]] = {"tinyflow": [], "torch": []}
        for _ in range(args.rounds):
            for fw in ("tinyflow", "torch"):
                runs[fw].append(spawn(fw, w, args))
        ours = statistics.median(r for run in runs["tinyflow"] for r in run["images_per_s"])
        theirs = statistics.median(r for run in runs["torch"] for r in run["images_per_s"])
        if runs["tinyflow"][0]["params"] != runs["torch"][0]["params"]:
            raise RuntimeError(f"{w}: the models differ: {runs['tinyflow'][0]['params']} vs "
                               f"{runs['torch'][0]['params']} parameters")
        rss_ours = max(r["peak_rss_mb"] for r in runs["tinyflow"])
        rss_theirs = max(r["peak_rss_mb"] for r in runs["torch"])
        row = {"workload": w, "batch": WORKLOADS[w][1], "params": runs["tinyflow"][0]["params"],
               "tinyflow_images_per_s": ours, "torch_images_per_s": theirs, "ratio": ours / theirs,
               "tinyflow_peak_rss_mb": rss_ours, "torch_peak_rss_mb": rss_theirs,
               "tinyflow_dtypes": runs["tinyflow"][0]["dtypes"], "runs": runs}
        results.append(row)
        print(f"{w:<12} {row['batch']:>5} {ours:>15.1f} {theirs:>14.1f} {ours / theirs:>5.2f}x "
              f"{rss_ours:>10.0f} MB {rss_theirs:>9.0f} MB", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "threads": args.threads, "machine": platform.machine(),
                "openblas_thread_timeout": args.openblas_thread_timeout,
                "python": platform.python_version(), "steps": args.steps, "repeats": args.repeats,
                "rounds": args.rounds, "short": args.short}
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=2))


if __name__ == "__main__":
    main()
