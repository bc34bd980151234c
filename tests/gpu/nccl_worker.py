"""One rank of tests/gpu/test_nccl.py (run under mpirun, one process per GPU; ``--single`` runs
a world of one without mpirun)."""
from __future__ import annotations

import os
import sys

import numpy as np


def stall() -> int:
    """Rank 1 stalls: rank 0's exchange with it must time out naming rank 1, not hang."""
    import time

    import cupy as cp

    from tinyflow.parallel.communicator import CommError, CommTimeoutError
    from tinyflow_cuda.nccl import NcclCommunicator

    comm = NcclCommunicator(timeout=3)
    if comm.rank == 1:
        time.sleep(8)  # never joins the exchange
        try:
            comm.close()
        except CommError:
            pass  # rank 0 gave up on the clique: destroying it may time out too
        print("rank 1: OK", flush=True)
        return 0
    buf = cp.zeros(4, dtype=cp.float32)
    start = time.monotonic()
    try:
        comm.sendrecv(buf, 1, cp.empty_like(buf), 1)
    except CommTimeoutError as exc:
        elapsed = time.monotonic() - start
        ok = exc.peer == 1 and "rank 1" in str(exc) and elapsed < 3 + 5
        print(f"rank 0: {'OK' if ok else 'WRONG ERROR'} after {elapsed:.1f}s: {exc}", flush=True)
        return 0 if ok else 1
    print("rank 0: no timeout", flush=True)
    return 1


def single() -> int:
    """A world of one: joining the clique and ncclAllReduce through the host-call thread."""
    import cupy as cp

    from tinyflow.parallel.allreduce import allreduce
    from tinyflow_cuda.nccl import NcclCommunicator

    comm = NcclCommunicator(timeout=60)
    assert comm.size == 1
    for algorithm in ("ring", "tree", "naive", "native"):
        buf = cp.arange(1000, dtype=cp.float32)
        allreduce(buf, comm, algorithm=algorithm)
        assert bool((buf == cp.arange(1000, dtype=cp.float32)).all()), algorithm
    buf = cp.arange(10, dtype=cp.float64)
    comm.native_allreduce(buf)  # a real ncclAllReduce of one rank, waited for
    assert float(buf[3]) == 3.0
    comm.barrier()
    comm.close()
    print("rank 0: OK", flush=True)
    return 0


def _exit_now(code: int) -> None:
    """Leave without tearing down a clique that a stalled peer left half-connected (a thread
    may still be inside NCCL): finalize MPI, then exit at once."""
    from mpi4py import MPI

    sys.stdout.flush()
    MPI.Finalize()
    os._exit(code)


def main() -> int:
    if "--stall" in sys.argv:
        _exit_now(stall())
    if "--single" in sys.argv:
        return single()
    import cupy as cp

    from tinyflow.parallel.allreduce import allreduce
    from tinyflow_cuda.nccl import NcclCommunicator

    comm = NcclCommunicator(timeout=60)
    rank, size = comm.rank, comm.size
    cp.cuda.Device(comm.device).use()
    for algorithm in ("ring", "tree", "naive", "native"):
        for n in (1, size - 1 if size > 1 else 1, 1000, 1 << 20):
            for dtype in (np.float32, np.float64):
                host = [np.random.default_rng(r * 7 + n).standard_normal(n).astype(dtype)
                        for r in range(size)]
                buf = cp.asarray(host[rank])
                allreduce(buf, comm, algorithm=algorithm, segment_bytes=1 << 16)
                want = np.sum(host, axis=0, dtype=np.float64)
                got = cp.asnumpy(buf)
                tol = 1e-5 if dtype == np.float32 else 1e-12
                if not np.allclose(got, want, rtol=tol, atol=tol):
                    print(f"rank {rank}: {algorithm} n={n} {dtype.__name__} wrong: "
                          f"max err {np.abs(got - want).max()}", flush=True)
                    return 1
    # sendrecv around the ring, and a barrier
    send = cp.full(5, rank, dtype=cp.float32)
    recv = cp.empty(5, dtype=cp.float32)
    comm.sendrecv(send, (rank + 1) % size, recv, (rank - 1) % size)
    assert float(recv[0]) == (rank - 1) % size
    comm.barrier()
    comm.close()
    print(f"rank {rank}: OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
