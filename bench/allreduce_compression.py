"""Gradient compression: bytes each rank sends for one bucket, and the error it leaves.

For a float32 gradient bucket all-reduced over N thread ranks (``run_local``), prints the
payload bytes per rank (counted by the communicator), the ratio to the uncompressed ring, and
the largest deviation of the result from the exact mean. For 1-bit it also runs SGD-like steps
(a fixed direction plus fresh noise) with and without error feedback: with it, the error of
the running sum stays bounded; without it, the error grows with the number of steps.

    python bench/allreduce_compression.py                 # 4 ranks, 25 MB bucket
    python bench/allreduce_compression.py --short         # 1 MB: proves it works
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tinyflow.parallel import allreduce, run_local  # noqa: E402
from tinyflow.parallel.compression import get_compression  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--mb", type=float, default=25.0, help="bucket size in MB")
    parser.add_argument("--steps", type=int, default=64, help="steps of the 1-bit error-feedback run")
    parser.add_argument("--short", action="store_true")
    args = parser.parse_args()
    if args.short:
        args.mb, args.steps = 1.0, 8
    n = int(args.mb * 2**20 / 4)
    grads = [np.random.default_rng(r).standard_normal(n).astype(np.float32) for r in range(args.nproc)]
    exact = np.mean(grads, axis=0)

    def fn(comm):  # noqa: ANN001, ANN202
        out = {}
        for name in ("none", "fp16", "1bit"):
            comp = get_compression(name)
            buf = grads[comm.rank].copy()
            comm.reset_counters()
            start = time.perf_counter()
            if comp is None:
                allreduce(buf, comm)
            else:
                comp.allreduce_sum(buf, comm, key=0)
            out[name] = (comm.bytes_sent, time.perf_counter() - start, np.abs(buf / comm.size - exact).max())
        # SGD-like gradients: a fixed direction plus fresh noise each step, with and without
        # error feedback (clearing the residual each step turns the feedback off)
        rng = np.random.default_rng(100 + comm.rank)
        bias = np.random.default_rng(7).standard_normal(n).astype(np.float32) * 0.1
        with_ef, without_ef = get_compression("1bit"), get_compression("1bit")
        true_sum = np.zeros(n)
        sums = {"feedback": np.zeros(n), "no feedback": np.zeros(n)}
        drift = {"feedback": [], "no feedback": []}
        for _ in range(args.steps):
            g = bias + rng.standard_normal(n).astype(np.float32)
            mean_g = np.empty_like(g)
            mean_g[...] = g
            allreduce(mean_g, comm, op="mean")
            true_sum += mean_g
            without_ef.residuals.clear()
            for name, comp in (("feedback", with_ef), ("no feedback", without_ef)):
                buf = g.copy()
                comp.allreduce_sum(buf, comm, key=1)
                sums[name] += buf / comm.size
                drift[name].append(float(np.abs(sums[name] - true_sum).max()))
        out["drift"] = drift
        return out

    res = run_local(fn, args.nproc)[0]
    base = res["none"][0]
    print(f"{args.nproc} ranks, one {args.mb:g} MB float32 bucket ({n} values)")
    print("| compression | bytes sent per rank | vs ring | time (ms) | max |error| of the mean |")
    print("|:---|---:|---:|---:|---:|")
    for name in ("none", "fp16", "1bit"):
        sent, secs, err = res[name]
        print(f"| {name} | {sent} | {sent / base:.3f} | {secs * 1e3:.1f} | {err:.2e} |")
    print(f"1-bit over {args.steps} steps of gradients = fixed direction + fresh noise:")
    print("max |running sum sent - true running sum| after steps 1, 2, 4, 8, ...")
    for name, values in res["drift"].items():
        picks = [values[i - 1] for i in (1, 2, 4, 8, 16, 32, 64, 128) if i <= len(values)]
        print(f"  {name:12s} " + "  ".join(f"{v:.3f}" for v in picks))

if __name__ == "__main__":
    main()
