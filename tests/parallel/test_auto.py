"""The auto all-reduce: its per-world cost model, its choices, and its sums."""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.parallel import DataParallel, allreduce, run_local
from tinyflow.parallel.auto import LADDER, AutoModel, calibrate, candidates_for, choose_algorithm, model_for
from tinyflow.parallel.benchmark import Row, auto_report, run_allreduce_bench
from tinyflow.parallel.communicator import Communicator

# Three regimes by hand: native has the least latency, ring the least time per byte, tree between.
# native < tree below 70 KB (30 + 2n = 100 + n, n in us/KB-ish units), ring < tree above 400 KB.
TRUTH = {"native": (30e-6, 2e-9), "tree": (100e-6, 1e-9), "ring": (300e-6, 0.5e-9)}


def fake_measure(algorithm: str, nbytes: int) -> float:
    alpha, beta = TRUTH[algorithm]
    return alpha + beta * nbytes


def best_by_hand(nbytes: float) -> str:
    return min(TRUTH, key=lambda a: fake_measure(a, nbytes))


def test_auto_chooses_each_algorithm_where_it_wins():
    def fn(comm):
        calibrate(comm, 1 << 30, measure=fake_measure)  # the whole ladder (it stops at 256M)
        sizes = [1, 1000, 4096, 50_000, 69_000, 71_000, 200_000, 399_000, 401_000, 3_000_000, 50 << 20, 1 << 30]
        return [choose_algorithm(comm, n) for n in sizes], sizes

    for choices, sizes in run_local(fn, 3):
        # the truth is a straight line, so the bands reproduce it exactly, between rungs too
        assert choices == [best_by_hand(n) for n in sizes]
    assert choices[0] == "native" and "tree" in choices and choices[-1] == "ring"


def test_model_bands_are_alpha_beta_lines():
    model = AutoModel(4, ("ring", "tree"), sizes=[1000, 2000, 4000],
                      times={"ring": [1.0, 2.0, 2.5], "tree": [0.5, 3.0, 9.0]})
    assert model.band("ring", 1500) == pytest.approx((0.0, 1e-3))  # through (1000, 1) and (2000, 2)
    assert model.predict("ring", 3000) == pytest.approx(2.25)
    assert model.predict("ring", 10) == 1.0  # below the ladder: its foot
    assert model.predict("ring", 8000) == pytest.approx(3.5)  # above: the last band, extended
    assert [model.choose(n) for n in (500, 1200, 2000, 8000)] == ["tree", "tree", "ring", "ring"]
    assert "-> tree" in model.describe()


def test_calibration_grows_with_the_largest_buffer_only():
    def fn(comm):
        calibrate(comm, 10_000, measure=fake_measure)
        first = list(model_for(comm).sizes)
        calibrate(comm, 3 << 20, measure=fake_measure)
        return first, list(model_for(comm).sizes)

    first, later = run_local(fn, 2)[0]
    assert first == list(LADDER[:2])  # 4K, 16K cover 10 KB
    assert later == list(LADDER[:7])  # up to 4M
    assert later[:2] == first


def test_measured_calibration_is_the_same_on_every_rank_and_sums_right():
    lengths = (1, 7, 1000, 5000, 30_001)

    def data(rank: int, length: int) -> np.ndarray:
        return np.random.default_rng([rank, length]).integers(-100, 100, length).astype(np.float32)

    def fn(comm):
        out = []
        assert model_for(comm) is None  # auto times nothing until asked
        calibrate(comm, max(lengths) * 4)
        for length in lengths:
            buf = data(comm.rank, length)
            allreduce(buf, comm, algorithm="auto")
            out.append(buf)
        model = model_for(comm)
        return out, model.sizes, model.times, model.candidates

    results = run_local(fn, 3)
    for i, length in enumerate(lengths):
        expected = sum(data(r, length) for r in range(3))
        for got, *_ in results:
            np.testing.assert_array_equal(got[i], expected)
    _, sizes, times, candidates = results[0]
    assert candidates == ("ring", "tree", "native")  # the thread transport has its own all-reduce
    for _, s, t, _c in results[1:]:
        assert (s, t) == (sizes, times)  # the slowest rank's times: one table, the same choices


def test_transport_without_native_all_reduce():
    assert candidates_for(Communicator(0, 1)) == ("ring", "tree")
    assert choose_algorithm(Communicator(0, 1), 1 << 20) == "ring"  # a world of one sends nothing


def test_data_parallel_auto_calibrates_and_matches_one_big_batch():
    """calibrate=True (opt-in; auto without it is the size rule) chooses per bucket from a model
    timed when the wrapper is built, and still averages exactly."""
    def model() -> nn.Module:
        """The same weights on every call, without the global RNG: ranks are threads that build
        their replicas at the same time, and two seeded builds interleaving their draws would give
        rank 0 (whose weights DataParallel broadcasts) other weights than the reference."""
        net = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3)).double()
        rng = np.random.default_rng(0)
        net.load_state_dict({k: rng.standard_normal(v.shape) * 0.5 for k, v in net.state_dict().items()})
        return net

    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 5))
    y = rng.integers(0, 3, 8)

    def fn(comm):
        net = model()
        dp = DataParallel(net, comm, algorithm="auto", bucket_mb=0.0002, calibrate=True)
        assert dp.algorithm == "auto" and model_for(comm) is not None  # calibrated when built
        part = slice(comm.rank * 4, comm.rank * 4 + 4)
        F.cross_entropy(dp(tf.tensor(x[part])), tf.tensor(y[part])).backward()
        grads = {n: p.grad.numpy().copy() for n, p in net.named_parameters()}
        chosen = list(dp.bucket_algorithms)
        text = repr(dp)
        dp.close()
        return grads, chosen, text

    net = model()
    F.cross_entropy(net(tf.tensor(x)), tf.tensor(y)).backward()
    results = run_local(fn, 2)
    for grads, chosen, text in results:
        assert len(chosen) > 1 and set(chosen) <= {"ring", "tree", "native"}
        assert chosen == results[0][1]
        assert "algorithm=auto(" in text
        for name, p in net.named_parameters():
            np.testing.assert_allclose(grads[name], p.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_bench_rows_name_the_choice_and_report_against_the_best():
    def fn(comm):
        return run_allreduce_bench(comm, ["ring", "native", "auto"], [4096, 16384], iters=2, warmup=1)

    rows = run_local(fn, 2)[0]
    autos = [r for r in rows if r.algorithm == "auto"]
    assert len(autos) == 2 and all(r.correct and r.chosen in ("ring", "tree", "native") for r in autos)
    text, _ = auto_report(rows)
    assert text.count("auto ->") == 2

    def row(size: int, algorithm: str, us: float, chosen: str = "") -> Row:
        return Row(size, size // 4, algorithm, us, 0.0, 0.0, 0, True, chosen)

    fake = [row(4096, "ring", 100), row(4096, "tree", 50), row(4096, "naive", 10), row(4096, "auto", 52, "tree"),
            row(8192, "ring", 100), row(8192, "tree", 80), row(8192, "auto", 90, "tree")]
    text, ok = auto_report(fake)
    assert not ok  # 90 / 80 = 1.125 at 8K; naive is not a candidate, so 4K compares with tree's 50
    assert "auto / best = 1.040 ok" in text and "auto / best = 1.125 OVER 5%" in text
