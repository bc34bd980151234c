"""`tinyflow bench allreduce`: nccl-tests-style all-reduce table and busbw plot.

    tinyflow bench allreduce --nproc 4 --algorithms ring,tree,naive,native --sizes 4K:256M

With ``--transport mpi`` (the default) and no MPI world around it, the command relaunches
itself under ``mpirun -n NPROC``; started by a user's own mpirun it measures that world.
``--transport local`` runs the ranks as threads of one process instead (no MPI needed).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `bench` command and its `allreduce` sub-command."""
    parser = subparsers.add_parser(
        "bench", help="benchmarks (allreduce: time, algbw, busbw per size and algorithm)",
        description="Benchmarks of tinyflow's building blocks.",
    )
    sub = parser.add_subparsers(dest="bench_command", metavar="{allreduce}")
    sub.required = True
    ar = sub.add_parser(
        "allreduce", help="all-reduce bandwidth per size and algorithm, like nccl-tests",
        description="Time ring, tree, naive and native all-reduce over N workers for a range of "
        "buffer sizes; print size, time, algbw and busbw (= algbw * 2(N-1)/N), and plot busbw.",
    )
    ar.add_argument("--nproc", type=int, default=4, help="number of workers (default: %(default)s)")
    ar.add_argument("--algorithms", default="ring,tree,naive,native",
                    help="comma-separated subset of ring,tree,naive,native (default: %(default)s)")
    ar.add_argument("--sizes", default="4K:64M",
                    help="MIN:MAX (doubling), a comma list, or one size; K/M/G suffixes (default: %(default)s)")
    ar.add_argument("--iters", type=int, default=5, help="timed iterations per point (default: %(default)s)")
    ar.add_argument("--warmup", type=int, default=1, help="untimed iterations first (default: %(default)s)")
    ar.add_argument("--transport", choices=("mpi", "local"), default="mpi",
                    help="mpi processes or threads of one process (default: %(default)s)")
    ar.add_argument("--out", default=None, help="folder for the table (.md), raw rows (.json) and plot (.png)")
    ar.add_argument("--plot", default=None, help="PNG path of the busbw plot (default: OUT/allreduce_npN_T.png)")
    ar.add_argument("--timeout", type=float, default=120.0, help="seconds before a silent rank is an error")
    parser.set_defaults(func=run)


def _argv(args: argparse.Namespace) -> list[str]:
    """The same `bench allreduce` command line, for the relaunch under mpirun."""
    argv = ["bench", "allreduce", "--nproc", str(args.nproc), "--algorithms", args.algorithms,
            "--sizes", args.sizes, "--iters", str(args.iters), "--warmup", str(args.warmup),
            "--transport", args.transport, "--timeout", str(args.timeout)]
    if args.out:
        argv += ["--out", os.path.abspath(args.out)]
    if args.plot:
        argv += ["--plot", os.path.abspath(args.plot)]
    return argv


def run(args: argparse.Namespace) -> int:
    """Measure, then (rank 0) print the table and write the files."""
    from tinyflow.parallel.benchmark import parse_sizes, run_allreduce_bench
    from tinyflow.parallel.world import launched_by_mpi

    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    try:
        sizes = parse_sizes(args.sizes)
    except ValueError as exc:
        print(f"tinyflow bench allreduce: error: {exc}", file=sys.stderr)
        return 2
    if args.nproc < 1:
        print("tinyflow bench allreduce: error: --nproc must be >= 1", file=sys.stderr)
        return 2

    if args.transport == "local":
        from tinyflow.parallel.local import run_local

        def fn(comm):  # noqa: ANN001, ANN202
            return run_allreduce_bench(comm, algorithms, sizes, args.iters, args.warmup)

        rows = run_local(fn, args.nproc, timeout=args.timeout)[0]
        _report(rows, args.nproc, "local", args)
        return 0

    if args.nproc > 1 and not launched_by_mpi():
        from tinyflow.parallel.launch import mpirun_command, mpirun_env

        try:
            cmd = mpirun_command(args.nproc, [sys.executable, "-m", "tinyflow.cli", *_argv(args)])
        except RuntimeError as exc:
            print(f"tinyflow bench allreduce: error: {exc}", file=sys.stderr)
            return 2
        return subprocess.run(cmd, env=mpirun_env(nproc=args.nproc)).returncode

    from tinyflow.parallel.communicator import CommError
    from tinyflow.parallel.mpi import mpi_comm

    comm = mpi_comm(timeout=args.timeout)
    try:
        rows = run_allreduce_bench(comm, algorithms, sizes, args.iters, args.warmup)
    except CommError as exc:
        print(f"tinyflow bench allreduce: error on rank {comm.rank}: {exc}", file=sys.stderr, flush=True)
        comm.abort(1)
        return 1
    if comm.rank == 0:
        _report(rows, comm.size, "mpi", args)
    return 0


def _report(rows: list, nproc: int, transport: str, args: argparse.Namespace) -> None:
    from tinyflow.parallel.benchmark import format_table, plot, ratios, rows_to_json

    table = format_table(rows, nproc, transport)
    print(table, flush=True)
    names = {r.algorithm for r in rows}
    for other in ("native", "naive", "tree"):
        if "ring" in names and other in names:
            best = ratios(rows, "ring", other)
            if best:
                largest = max(best)
                print(f"ring / {other} busbw at the largest size: {best[largest]:.2f}x")
    stem = f"allreduce_np{nproc}_{transport}"
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, stem + ".md"), "w") as f:
            f.write(table + "\n")
        with open(os.path.join(args.out, stem + ".json"), "w") as f:
            f.write(rows_to_json(rows, nproc=nproc, transport=transport))
    path = args.plot or (os.path.join(args.out, stem + ".png") if args.out else None)
    if path:
        plot(rows, path, f"all-reduce busbw, {nproc} ranks ({transport})")
        print(f"wrote {path}", file=sys.stderr)
