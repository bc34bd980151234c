"""All-reduce on the CPU: tinyflow's ring against MPI_Allreduce, and ring against naive.

Two measurements, each in one mpirun so both algorithms see the same machine state:

1. 4 MPI processes, 64 MB float32: ring busbw / native (MPI_Allreduce) busbw, target >= 0.9x.
2. 8 MPI processes, 64 MB float32: ring busbw / naive (gather to rank 0) busbw, target >= 2x.

Algorithms alternate inside each run (ring, other, ring, other ...) through ``--repeats``
separate sweeps, and the median ratio is reported, so machine noise hits both sides.

    python bench/allreduce_vs_mpi.py            # full measurement, writes bench/results/allreduce_ratios.md
    python bench/allreduce_vs_mpi.py --short    # 4 MB, 2 iterations: proves the script works
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def measure(nproc: int, algorithms: str, size: str, iters: int, out: str) -> dict[str, float]:
    """busbw (GB/s) per algorithm from one `tinyflow bench allreduce` run under mpirun."""
    cmd = [sys.executable, "-m", "tinyflow.cli", "bench", "allreduce", "--nproc", str(nproc),
           "--algorithms", algorithms, "--sizes", size, "--iters", str(iters), "--out", out]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, f"allreduce_np{nproc}_mpi.json")) as f:
        rows = json.load(f)["rows"]
    bad = [r for r in rows if not r["correct"]]
    if bad:
        raise SystemExit(f"wrong all-reduce result: {bad}")
    return {r["algorithm"]: r["busbw"] for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="64M")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="separate runs; the median ratio is reported")
    parser.add_argument("--short", action="store_true", help="4M, 2 iterations, 1 repeat")
    parser.add_argument("--results", default=os.path.join(HERE, "results", "allreduce_ratios.md"))
    args = parser.parse_args()
    if args.short:
        args.size, args.iters, args.repeats = "4M", 2, 1

    lines = [f"# all-reduce on the CPU, {args.size} float32, median of {args.repeats} runs x {args.iters} iterations", "",
             "| processes | ring busbw (GB/s) | other | other busbw (GB/s) | ratio | target | met |",
             "|---:|---:|:---|---:|---:|---:|:---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for nproc, other, target in ((4, "native", 0.9), (8, "naive", 2.0)):
            runs = []
            for _ in range(args.repeats):
                busbw = measure(nproc, f"ring,{other}", args.size, args.iters, tmp)
                runs.append((busbw["ring"], busbw[other]))
            ratio = statistics.median(r / o for r, o in runs)
            ring = statistics.median(r for r, _ in runs)
            theirs = statistics.median(o for _, o in runs)
            met = "yes" if ratio >= target else "no"
            name = "MPI_Allreduce" if other == "native" else "naive"
            lines.append(f"| {nproc} | {ring:.3f} | {name} | {theirs:.3f} | {ratio:.2f}x | {target}x | {met} |")
            print(f"{nproc} processes: ring {ring:.3f} GB/s vs {name} {theirs:.3f} GB/s busbw -> "
                  f"{ratio:.2f}x (target >= {target}x: {met})", flush=True)
    text = "\n".join(lines) + "\n"
    if not args.short:
        os.makedirs(os.path.dirname(args.results), exist_ok=True)
        with open(args.results, "w") as f:
            f.write(text)
        print(f"wrote {args.results}")
    else:
        print(text)


if __name__ == "__main__":
    main()
