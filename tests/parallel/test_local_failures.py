"""A failing, silent or departed rank is an error naming it, never a hang (thread transport)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from tinyflow.parallel import CommError, CommTimeoutError, allreduce, run_local


def test_run_local_returns_results_in_rank_order():
    assert run_local(lambda comm: (comm.rank, comm.size), 4) == [(0, 4), (1, 4), (2, 4), (3, 4)]


def test_exception_on_one_rank_aborts_the_others_quickly():
    def fn(comm):
        if comm.rank == 2:
            raise ValueError("bad batch on this rank")
        buf = np.ones(10, np.float32)
        allreduce(buf, comm)  # would wait forever on rank 2 without the abort
        return buf

    start = time.monotonic()
    with pytest.raises(ValueError, match="bad batch") as info:
        run_local(fn, 4, timeout=30)
    # a hang-detection bound, not a speed claim: the alternative is the 30 s timeout
    assert time.monotonic() - start < 20, "the group must abort, not wait for the 30 s timeout"
    assert any("rank 2 of 4" in note for note in getattr(info.value, "__notes__", []))


@pytest.mark.parametrize("algorithm", ["ring", "tree", "naive", "native"])
def test_silent_rank_is_named_within_the_timeout(algorithm):
    def fn(comm):
        if comm.rank == 2:
            time.sleep(3.0)  # stuck in "compute", never joins the all-reduce in time
            return None
        buf = np.ones(10, np.float32)
        allreduce(buf, comm, algorithm=algorithm)
        return buf

    with pytest.raises(CommTimeoutError) as info:
        run_local(fn, 4, timeout=0.5, grace=0.1)
    assert info.value.peer == 2
    assert "rank 2 is" in str(info.value) and "not answering" in str(info.value)


def test_rank_that_returns_early_is_named_at_once():
    def fn(comm):
        if comm.rank == 1:
            return "left"
        buf = np.ones(4, np.float32)
        allreduce(buf, comm, algorithm="ring")
        return buf

    start = time.monotonic()
    with pytest.raises(CommError, match="rank 1 returned from its function"):
        run_local(fn, 3, timeout=30)
    assert time.monotonic() - start < 20  # not the 30 s timeout


def test_different_collectives_are_detected():
    """Below allreduce's signature check (tests/parallel/test_allreduce.py), the transport
    itself notices two ranks in different algorithms by their message tags."""
    from tinyflow.parallel.ring import ring_allreduce
    from tinyflow.parallel.tree import tree_allreduce

    def fn(comm):
        (ring_allreduce if comm.rank == 0 else tree_allreduce)(np.ones(4, np.float32), comm)

    with pytest.raises(CommError, match="different collectives"):
        run_local(fn, 2, timeout=2)


def test_barrier_names_the_missing_rank():
    def fn(comm):
        if comm.rank != 3:
            comm.barrier()

    # rank 3 returns without entering the barrier
    with pytest.raises(CommError, match="rank 3"):
        run_local(fn, 4, timeout=2)
