"""Every all-reduce algorithm equals NumPy's sum, for every world size and awkward length."""
from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyflow.parallel import (
    ALGORITHMS,
    CommError,
    RankMismatchError,
    all_gather,
    all_gather_object,
    allreduce,
    broadcast,
    run_local,
)
from tinyflow.parallel.allreduce import SIGNATURE_TAG, agree_on_values
from tinyflow.parallel.naive import naive_allreduce
from tinyflow.parallel.ring import ring_bytes_sent
from tinyflow.parallel.tree import tree_links

ALGOS = sorted(ALGORITHMS)


def _inputs(world: int, length: int, seed: int) -> list[np.ndarray]:
    """Small integers in float32: every partial sum is exact, so any order gives the same bits."""
    rng = np.random.default_rng(seed)
    return [rng.integers(-1000, 1000, size=length).astype(np.float32) for _ in range(world)]


def _run_allreduce(algorithm: str, inputs: list[np.ndarray], **kw) -> list[np.ndarray]:
    def fn(comm):
        buf = inputs[comm.rank].copy()
        allreduce(buf, comm, algorithm=algorithm, **kw)
        return buf

    return run_local(fn, len(inputs), timeout=20)


@pytest.mark.parametrize("algorithm", ALGOS)
@pytest.mark.parametrize("world", [1, 2, 3, 4, 5, 6, 7])
def test_allreduce_equals_numpy_sum(algorithm, world):
    for length in (0, 1, world - 1, world, world + 1, 2 * world + 3, 97):
        if length < 0:
            continue
        inputs = _inputs(world, length, seed=world * 1000 + length)
        expected = np.sum(inputs, axis=0, dtype=np.float32)
        for rank, out in enumerate(_run_allreduce(algorithm, inputs)):
            np.testing.assert_array_equal(out, expected, err_msg=f"{algorithm} N={world} L={length} rank {rank}")


@settings(max_examples=25, deadline=None)
@given(
    algorithm=st.sampled_from(ALGOS),
    world=st.integers(1, 7),
    length=st.integers(0, 300),
    segment_bytes=st.sampled_from([4, 12, 64, None]),
)
def test_allreduce_segmented_any_length(algorithm, world, length, segment_bytes):
    inputs = _inputs(world, length, seed=length)
    expected = np.sum(inputs, axis=0, dtype=np.float32)
    for out in _run_allreduce(algorithm, inputs, segment_bytes=segment_bytes):
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("algorithm", ALGOS)
def test_allreduce_mean_multidim_and_int(algorithm):
    world = 3
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 5)) for _ in range(world)]  # float64, 2-D

    def fn(comm):
        buf = xs[comm.rank].copy()
        allreduce(buf, comm, algorithm=algorithm, op="mean")
        ints = np.full(7, comm.rank + 1, dtype=np.int64)
        allreduce(ints, comm, algorithm=algorithm)
        return buf, ints

    for buf, ints in run_local(fn, world):
        np.testing.assert_allclose(buf, np.mean(xs, axis=0), rtol=1e-12)
        np.testing.assert_array_equal(ints, np.full(7, 6))


def test_allreduce_non_contiguous_in_place():
    def fn(comm):
        base = np.arange(12, dtype=np.float32).reshape(3, 4) * (comm.rank + 1)
        view = base[:, ::2]  # (3, 2), not contiguous
        allreduce(view, comm, algorithm="ring")
        return base

    a, b = run_local(fn, 2)
    expected = np.arange(12, dtype=np.float32).reshape(3, 4)
    expected[:, ::2] *= 3
    np.testing.assert_array_equal(a[:, ::2], expected[:, ::2])
    np.testing.assert_array_equal(a[:, 1::2], expected[:, 1::2])  # untouched columns
    np.testing.assert_array_equal(b[:, ::2], expected[:, ::2])


def test_allreduce_bad_arguments():
    def fn(comm):
        with pytest.raises(ValueError, match="unknown algorithm 'rign'"):
            allreduce(np.zeros(3, np.float32), comm, algorithm="rign")
        with pytest.raises(ValueError, match="unknown op"):
            allreduce(np.zeros(3, np.float32), comm, op="max")
        with pytest.raises(TypeError, match="int64 buffer cannot hold a mean"):
            allreduce(np.zeros(3, np.int64), comm, op="mean")
        return True

    assert run_local(fn, 2) == [True, True]


@pytest.mark.parametrize("world", [2, 3, 4, 5, 7])
@pytest.mark.parametrize("length", [1, 5, 64, 101])
def test_ring_sends_exactly_2_n_minus_1_over_n(world, length):
    """Per rank: itemsize * (2L - c[(r+1)%N] - c[(r+2)%N]) where c are the chunk lengths
    (first L % N chunks one longer); = 2(N-1)/N * L * itemsize when N divides L, and the total
    over ranks is always 2(N-1) * L * itemsize."""
    inputs = _inputs(world, length, seed=1)

    def fn(comm):
        buf = inputs[comm.rank].copy()
        allreduce(buf, comm, algorithm="ring", segment_bytes=8)  # segmenting must not change bytes
        return comm.bytes_sent

    sent = run_local(fn, world)
    itemsize = 4
    for rank, nbytes in enumerate(sent):
        assert nbytes == ring_bytes_sent(length, itemsize, rank, world)
        if length % world == 0:
            assert nbytes * world == 2 * (world - 1) * length * itemsize
    assert sum(sent) == 2 * (world - 1) * length * itemsize


def test_ring_bytes_formula_by_hand():
    # L = 10, N = 4: chunks (3, 3, 2, 2); rank 0 skips chunks 1 and 2 -> 20 - 3 - 2 = 15 elements
    assert ring_bytes_sent(10, 4, 0, 4) == 4 * 15
    assert ring_bytes_sent(10, 4, 3, 4) == 4 * (20 - 3 - 3)  # skips chunks 0 and 1
    assert ring_bytes_sent(12, 4, 2, 4) == 4 * 18  # divisible: 2 * 3/4 * 12


def test_naive_root_sends_n_minus_1_buffers():
    world, length = 4, 50

    def fn(comm):
        buf = np.ones(length, np.float32)
        allreduce(buf, comm, algorithm="naive")
        return comm.bytes_sent

    sent = run_local(fn, world)
    assert sent[0] == (world - 1) * length * 4
    assert sent[1:] == [length * 4] * (world - 1)


def test_tree_links_form_a_tree():
    for size in range(1, 10):
        for root in range(size):
            parents = {r: tree_links(r, size, root)[0] for r in range(size)}
            assert parents[root] is None
            for r in range(size):  # every rank reaches the root, children agree with parents
                seen, x = set(), r
                while x != root:
                    assert x not in seen
                    seen.add(x)
                    x = parents[x]
                for child in tree_links(r, size, root)[1]:
                    assert parents[child] == r


@pytest.mark.parametrize("world", [1, 2, 3, 5, 6])
def test_broadcast_from_any_root(world):
    for root in range(world):
        def fn(comm, root=root):
            buf = np.full((3, 7), comm.rank, dtype=np.float64)
            broadcast(buf, comm, root=root, segment_bytes=40)
            return buf

        for out in run_local(fn, world):
            np.testing.assert_array_equal(out, np.full((3, 7), root, dtype=np.float64))


@pytest.mark.parametrize("world", [1, 2, 4, 5])
def test_all_gather_and_objects(world):
    def fn(comm):
        arr = np.arange(6, dtype=np.int32).reshape(2, 3) + 10 * comm.rank
        objs = all_gather_object({"rank": comm.rank, "pad": "x" * comm.rank}, comm)
        return all_gather(arr, comm), objs

    for gathered, objs in run_local(fn, world):
        assert gathered.shape == (world, 2, 3)  # (N, *shape)
        for r in range(world):
            np.testing.assert_array_equal(gathered[r], np.arange(6).reshape(2, 3) + 10 * r)
        assert objs == [{"rank": r, "pad": "x" * r} for r in range(world)]


def test_mismatched_lengths_reaching_the_transport_are_a_clear_error():
    """Below allreduce's signature check, the transport itself refuses a message of the wrong size."""
    def fn(comm):
        naive_allreduce(np.zeros(4 + comm.rank, np.float32), comm)

    with pytest.raises(CommError, match="rank 1 sent 5 x float32 but the receive buffer holds 4"):
        run_local(fn, 2, timeout=5)


def _errors_on_every_rank(fn, world: int) -> list[str]:
    """Run ``fn`` on ``world`` thread ranks; each rank returns the RankMismatchError it got."""
    def catching(comm):
        try:
            fn(comm)
        except RankMismatchError as exc:
            return str(exc)
        return None

    return run_local(catching, world, timeout=5)


@pytest.mark.parametrize("algorithm", [*ALGOS, "auto"])
@pytest.mark.parametrize("world", [2, 3, 5])
def test_ranks_that_disagree_on_the_length_fail_on_every_rank(algorithm, world):
    """Issue 12: a wrong sum on rank 0 (or a hang) before; now the same error on every rank."""
    def fn(comm):
        allreduce(np.ones(1000 + (24 if comm.rank == world - 1 else 0), np.float32), comm, algorithm=algorithm)

    messages = _errors_on_every_rank(fn, world)
    assert len(set(messages)) == 1 and messages[0] is not None, messages
    assert (f"rank 0 has 1,000 x float32 (op sum, algorithm {algorithm}), "
            f"rank {world - 1} has 1,024 x float32") in messages[0]


@pytest.mark.parametrize("rank1, expected", [
    (dict(dtype=np.float64), "rank 1 has 8 x float64 (op sum, algorithm ring)"),
    (dict(op="mean"), "rank 1 has 8 x float32 (op mean, algorithm ring)"),
    (dict(algorithm="tree"), "rank 1 has 8 x float32 (op sum, algorithm tree)"),
])
def test_ranks_that_disagree_on_dtype_op_or_algorithm_fail_on_every_rank(rank1, expected):
    def fn(comm):
        mine = rank1 if comm.rank == 1 else {}
        buf = np.ones(8, mine.get("dtype", np.float32))
        allreduce(buf, comm, algorithm=mine.get("algorithm", "ring"), op=mine.get("op", "sum"))

    messages = _errors_on_every_rank(fn, 3)
    assert len(set(messages)) == 1 and messages[0] is not None, messages
    assert "rank 0 has 8 x float32 (op sum, algorithm ring)" in messages[0]
    assert expected in messages[0]


def test_the_signature_is_checked_once_and_not_counted_as_payload():
    """The check is one small all-gather per new signature; the hot path pays nothing after it,
    and ``bytes_sent`` stays exactly the algorithm's own traffic."""
    def fn(comm):
        tags = []
        real = comm.sendrecv

        def counting(sendbuf, dest, recvbuf, source, tag=0):
            tags.append(tag)
            return real(sendbuf, dest, recvbuf, source, tag)

        comm.sendrecv = counting
        a, b = np.ones(100, np.float32), np.ones(7, np.float64)
        for _ in range(3):
            allreduce(a, comm, algorithm="ring")
            allreduce(b, comm, algorithm="ring")
        return tags.count(SIGNATURE_TAG), comm.bytes_sent

    world = 4
    for rank, (checks, sent) in enumerate(run_local(fn, world, timeout=5)):
        assert checks == 2 * (world - 1)  # one all-gather (N-1 steps) per signature, not per call
        assert sent == 3 * (ring_bytes_sent(100, 4, rank, world) + ring_bytes_sent(7, 8, rank, world))


def test_a_rank_that_goes_out_of_step_is_an_error_on_every_rank_not_a_hang():
    """Rank 1 starts a new kind of all-reduce while rank 0 repeats an agreed one: both fail."""
    def fn(comm):
        allreduce(np.ones(16, np.float32), comm)
        try:
            allreduce(np.ones(16 if comm.rank == 0 else 3, np.float32), comm)
        except CommError as exc:
            return type(exc).__name__
        return "finished"

    start = time.monotonic()
    outcomes = run_local(fn, 2, timeout=2)
    assert all(name.endswith("Error") for name in outcomes), outcomes  # e.g. CommError, CommAbortedError
    assert time.monotonic() - start < 10


def test_agree_on_values_names_the_key_and_both_ranks_values_on_every_rank():
    def fn(comm):
        agree_on_values({"--batch-size": 16 if comm.rank == 2 else 8, "model": "alexnet"}, comm, "the options")

    messages = _errors_on_every_rank(fn, 3)
    assert len(set(messages)) == 1 and messages[0] == (
        "the options differ between ranks: rank 0 has --batch-size 8, rank 2 has --batch-size 16; "
        "start every rank with the same --batch-size")
    assert run_local(lambda comm: agree_on_values({"a": 1}, comm), 3) == [None] * 3
