"""The collectives under a real mpirun with 2 and 4 processes (skipped without MPI)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tinyflow.parallel.launch import find_mpirun, mpirun_command, mpirun_env

pytest.importorskip("mpi4py")
if find_mpirun() is None:
    pytest.skip("mpirun not found", allow_module_level=True)

pytestmark = pytest.mark.mpi
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _mpirun(nproc: int, *args: str, timeout: float = 120) -> tuple[int, str, float]:
    cmd = mpirun_command(nproc, [sys.executable, os.path.join(HERE, "mpi_worker.py"), *args])
    env = mpirun_env()
    env["PYTHONPATH"] = os.pathsep.join([ROOT, HERE, env.get("PYTHONPATH", "")])
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


@pytest.mark.parametrize("nproc", [2, 4])
def test_algorithms_under_mpirun(nproc):
    code, out, _ = _mpirun(nproc, "algorithms")
    assert code == 0, out
    for rank in range(nproc):
        assert f"OK {rank} checked 32" in out, out


def test_silent_rank_is_named_under_mpirun():
    code, out, elapsed = _mpirun(4, "silent", "2", "2.0", timeout=60)
    assert code != 0, out
    errors = [line for line in out.splitlines() if line.startswith("ERROR")]
    assert errors, out
    for line in errors:  # every rank that reports names rank 2, not just its neighbour
        assert "CommTimeoutError" in line and "rank 2 is not answering" in line, out
    assert elapsed < 30, f"took {elapsed:.0f}s to surface the silent rank"


def test_killed_rank_is_named_under_mpirun():
    code, out, elapsed = _mpirun(4, "killed", "1", "5.0", timeout=60)
    assert code != 0, out
    # Either our timeout diagnosis or Open MPI's own job abort names the dead rank.
    named = "rank 1 is not answering" in out or "process rank 1" in out
    assert named, out
    assert elapsed < 30, f"took {elapsed:.0f}s to surface the killed rank"


@pytest.mark.parametrize("what,mine,theirs", [("length", "1,000 x float32", "1,024 x float32"),
                                               ("dtype", "1,000 x float32", "1,000 x float64")])
def test_mismatched_buffers_are_an_error_on_every_rank_under_mpirun(what, mine, theirs):
    """Issue 12: a wrong sum on rank 0 or memory corruption inside MPI before; now every rank
    stops with the same line naming both ranks' buffers."""
    code, out, elapsed = _mpirun(3, "mismatch", what, "10.0", timeout=60)
    assert code != 0, out
    errors = [line for line in out.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 3, out
    for line in errors:
        assert "RankMismatchError" in line and f"rank 0 has {mine}" in line and f"rank 1 has {theirs}" in line, out
    assert "OK" not in out
    assert elapsed < 30, out


@pytest.mark.parametrize("algorithm", ["ring", "native"])
def test_dataparallel_under_mpirun(algorithm):
    code, out, _ = _mpirun(2, "dataparallel", algorithm)
    assert code == 0, out
    for rank in range(2):
        assert f"OK {rank} dataparallel {algorithm} matches" in out, out
