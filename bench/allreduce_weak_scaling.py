"""Weak scaling of AlexNet-64 data-parallel training on 1, 2 and 4 CPU workers.

Each worker keeps the same batch (weak scaling: the global batch grows with N), trains on random
64x64 images through DataParallel (ring all-reduce, 25 MB buckets, overlap on), and reports the
median step time split into compute and exposed communication. Efficiency = throughput(N) /
(N * throughput(1)); 1.0 is perfect scaling. On a CPU host, workers share the cores, so
efficiency also measures how much the host itself can run in parallel (cores, memory bandwidth).

    python bench/allreduce_weak_scaling.py                 # 1, 2, 4 workers, batch 64, 6 steps
    python bench/allreduce_weak_scaling.py --short         # batch 8, 2 steps: proves it works
    python bench/allreduce_weak_scaling.py --worker ...    # (internal) one worker, under mpirun
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


def worker(batch: int, steps: int, warmup: int, algorithm: str, out: str) -> None:
    """Train ``warmup + steps`` steps on this worker; rank 0 writes the median timings to ``out``."""
    import numpy as np

    import tinyflow as tf
    import tinyflow.nn.functional as F
    from tinyflow.models import get_model
    from tinyflow.optim import SGD
    from tinyflow.parallel import DataParallel, all_gather_object, world

    w = world()
    tf.manual_seed(0)
    model = get_model("alexnet", num_classes=100)
    net = DataParallel(model, w.comm, algorithm=algorithm) if w.size > 1 else model
    opt = SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(w.rank)
    x = tf.tensor(rng.standard_normal((batch, 3, 64, 64)).astype(np.float32))  # (B, 3, 64, 64)
    y = tf.tensor(rng.integers(0, 100, size=batch))
    records = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
        elapsed = time.perf_counter() - start
        if i >= warmup:
            stats = getattr(net, "last_step", None)
            records.append((elapsed, stats.wait_seconds if stats else 0.0, stats.comm_seconds if stats else 0.0))
    everyone = all_gather_object(records, w.comm) if w.size > 1 else [records]
    if w.rank == 0:
        step = statistics.median(max(r[i][0] for r in everyone) for i in range(steps))
        wait = statistics.median(r[i][1] for r in everyone for i in range(steps))
        comm = statistics.median(r[i][2] for r in everyone for i in range(steps))
        with open(out, "w") as f:
            json.dump({"nproc": w.size, "batch": batch, "step_s": step, "wait_s": wait, "comm_s": comm}, f)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nprocs", default="1,2,4")
    parser.add_argument("--batch", type=int, default=64, help="per-worker batch")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--algorithm", default="ring")
    parser.add_argument("--short", action="store_true", help="batch 8, 1 warm-up + 2 steps")
    parser.add_argument("--results", default=os.path.join(HERE, "results", "allreduce_weak_scaling.md"))
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.short:
        args.batch, args.steps, args.warmup = 8, 2, 1
    if args.worker:
        worker(args.batch, args.steps, args.warmup, args.algorithm, args.worker)
        return

    from tinyflow.parallel.launch import mpirun_command, mpirun_env

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(v) for v in args.nprocs.split(",")):
            env = mpirun_env(nproc=n)  # cores // n BLAS threads per worker
            env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
            out = os.path.join(tmp, f"np{n}.json")
            argv = [sys.executable, os.path.abspath(__file__), "--worker", out, "--batch", str(args.batch),
                    "--steps", str(args.steps), "--warmup", str(args.warmup), "--algorithm", args.algorithm]
            cmd = mpirun_command(n, argv) if n > 1 else argv
            subprocess.run(cmd, check=True, env=env)
            with open(out) as f:
                results.append(json.load(f))
            r = results[-1]
            print(f"{n} workers: step {r['step_s'] * 1e3:.0f} ms, exposed comm {r['wait_s'] * 1e3:.0f} ms, "
                  f"all-reduce {r['comm_s'] * 1e3:.0f} ms", flush=True)
    base = results[0]["batch"] / results[0]["step_s"] / results[0]["nproc"]
    lines = [f"# AlexNet-64 weak scaling on CPU workers, batch {args.batch} per worker, {args.algorithm} all-reduce",
             "", f"cores: {os.cpu_count()}; median of {args.steps} steps after {args.warmup} warm-up", "",
             "| workers | global batch | step (ms) | exposed comm (ms) | all-reduce (ms) | images/s | efficiency |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        ips = r["nproc"] * r["batch"] / r["step_s"]
        lines.append(f"| {r['nproc']} | {r['nproc'] * r['batch']} | {r['step_s'] * 1e3:.0f} | {r['wait_s'] * 1e3:.0f} | "
                     f"{r['comm_s'] * 1e3:.0f} | {ips:.1f} | {ips / (r['nproc'] * base):.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.short:
        os.makedirs(os.path.dirname(args.results), exist_ok=True)
        with open(args.results, "w") as f:
            f.write(text)
        print(f"wrote {args.results}")


if __name__ == "__main__":
    main()
