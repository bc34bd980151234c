"""The NCCL transport: ring, tree, naive and native all-reduce on GPU buffers across processes
(gpu + mpi tests: needs mpirun and at least two GPUs, since NCCL gives each rank its own). One
GPU runs a world of one. Thread ranks on one GPU: test_local_ranks_on_streams.py; the timeout
logic with a fake NCCL on the CPU: tests/parallel/test_nccl_fake.py."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tinyflow_cuda

pytestmark = [pytest.mark.gpu, pytest.mark.mpi]

WORKER = Path(__file__).with_name("nccl_worker.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not on PATH")
@pytest.mark.parametrize("ranks", [2, 4])
def test_allreduce_algorithms_over_nccl(ranks):
    if tinyflow_cuda.device_count() < ranks:
        pytest.skip(f"needs {ranks} GPUs, this machine has {tinyflow_cuda.device_count()}")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = ["mpirun", "--oversubscribe", "-np", str(ranks), sys.executable, str(WORKER)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count(": OK") == ranks


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not on PATH")
def test_a_stalled_peer_is_a_timeout_naming_it():
    if tinyflow_cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs, this machine has {tinyflow_cuda.device_count()}")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = ["mpirun", "--oversubscribe", "-np", "2", sys.executable, str(WORKER), "--stall"]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "rank 0: OK" in done.stdout


def test_a_world_of_one_joins_reduces_and_closes():
    """The real binding through the host-call thread: the unique id, ncclCommInitRank on the
    rank's GPU, ncclAllReduce on the caller's stream, destroy (a process of its own: MPI)."""
    pytest.importorskip("mpi4py")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(WORKER), "--single"], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "rank 0: OK" in done.stdout


def test_nccl_communicator_rejects_host_buffers():
    """A NumPy buffer is a TypeError that says to move the tensor, not a crash inside NCCL."""
    import numpy as np

    from tinyflow_cuda.nccl import NcclCommunicator

    comm = object.__new__(NcclCommunicator)  # no clique needed to check the buffer
    comm._cp = tinyflow_cuda.array_module(0)
    comm._aborted, comm.device, comm.rank = False, 0, 0
    comm._types = {}
    with pytest.raises(TypeError, match="CuPy arrays"):
        comm._describe(np.zeros(3, np.float32), "send")
