"""Run under mpirun by test_mpi.py: checks collectives over the real MPI transport.

Usage: mpi_worker.py algorithms | silent RANK TIMEOUT | killed RANK TIMEOUT | dataparallel ALGORITHM
Prints one "OK <rank> ..." line per rank on success; on failure prints "ERROR <rank> ..." and
aborts the MPI job.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from tinyflow.parallel import ALGORITHMS, CommError, all_gather_object, allreduce, broadcast, mpi_comm
from tinyflow.parallel.ring import ring_bytes_sent


def check_algorithms(comm) -> str:
    n, rank = comm.size, comm.rank
    checked = 0
    for length in (0, 1, n - 1, n + 1, 3 * n + 2, 1000, 1024 * n + 1, 100_003):  # 1024n+1: one-way last segment
        rng = np.random.default_rng(length)
        all_inputs = rng.integers(-1000, 1000, size=(n, length)).astype(np.float32)
        expected = all_inputs.sum(axis=0, dtype=np.float32)
        for algorithm in ALGORITHMS:
            buf = all_inputs[rank].copy()
            comm.reset_counters()
            allreduce(buf, comm, algorithm=algorithm, segment_bytes=4096)
            if not np.array_equal(buf, expected):
                raise AssertionError(f"{algorithm} L={length}: wrong sum on rank {rank}")
            if algorithm == "ring" and comm.bytes_sent != ring_bytes_sent(length, 4, rank, n):
                raise AssertionError(f"ring L={length}: sent {comm.bytes_sent} bytes")
            checked += 1
    mean = np.full(5, float(rank), np.float64)
    allreduce(mean, comm, op="mean")
    assert np.allclose(mean, (n - 1) / 2), mean
    b = np.full(7, rank, np.int64)
    broadcast(b, comm, root=n - 1)
    assert (b == n - 1).all()
    objs = all_gather_object(("rank", rank), comm)
    assert objs == [("rank", r) for r in range(n)], objs
    comm.barrier()
    return f"checked {checked}"


def silent(comm, silent_rank: int) -> str:
    if comm.rank == silent_rank:
        time.sleep(60)  # never joins; the others must time out and name this rank
        return "woke"
    buf = np.ones(1000, np.float32)
    allreduce(buf, comm, algorithm="ring")
    return "finished?!"


def killed(comm, victim: int) -> str:
    if comm.rank == victim:
        import os
        import signal

        os.kill(os.getpid(), signal.SIGKILL)  # dies without a word, mid-job
    buf = np.ones(1000, np.float32)
    allreduce(buf, comm, algorithm="ring")
    return "finished?!"


def dataparallel(comm, algorithm: str) -> str:
    """N MPI workers of batch b end with the parameters of one worker of batch N*b."""
    from test_data_parallel import STEPS, _data, _mlp, _reference, _train

    from tinyflow.parallel.data_parallel import DataParallel

    n, batch = comm.size, 3
    x, y = _data(n * batch * STEPS)
    model = _mlp(seed=comm.rank)
    dp = DataParallel(model, comm, algorithm=algorithm, bucket_mb=0.0005)
    steps = [(x[(s * n + comm.rank) * batch :][:batch], y[(s * n + comm.rank) * batch :][:batch]) for s in range(STEPS)]
    _train(model, steps, dp=dp)
    dp.close()
    expected = _reference(n, batch)
    for name, value in model.state_dict().items():
        if not np.allclose(value.numpy(), expected[name], rtol=1e-10, atol=1e-12):
            raise AssertionError(f"{name} differs from the one-worker reference on rank {comm.rank}")
    return f"dataparallel {algorithm} matches"


def mismatch(comm, what: str) -> str:
    """Rank 1 all-reduces a buffer of another length or dtype than the others."""
    odd = comm.rank == 1
    if what == "length":
        buf = np.ones(1000 + (24 if odd else 0), np.float32)
    else:
        buf = np.ones(1000, np.float64 if odd else np.float32)
    allreduce(buf, comm, algorithm="ring")
    return "reduced mismatched buffers?!"


def main() -> None:
    mode = sys.argv[1]
    timeout = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
    comm = mpi_comm(timeout=timeout)
    try:
        if mode == "algorithms":
            msg = check_algorithms(comm)
        elif mode == "silent":
            msg = silent(comm, int(sys.argv[2]))
        elif mode == "killed":
            msg = killed(comm, int(sys.argv[2]))
        elif mode == "mismatch":
            msg = mismatch(comm, sys.argv[2])
        elif mode == "dataparallel":
            msg = dataparallel(comm, sys.argv[2])
        else:
            raise SystemExit(f"unknown mode {mode}")
    except (CommError, AssertionError) as exc:
        print(f"ERROR {comm.rank} {type(exc).__name__}: {exc}", flush=True)
        time.sleep(0.5)  # let the other ranks print their diagnosis too
        comm.abort(3)
        return
    print(f"OK {comm.rank} {msg}", flush=True)


if __name__ == "__main__":
    main()
