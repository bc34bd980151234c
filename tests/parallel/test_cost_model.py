"""The alpha-beta cost model against values computed by hand, the fit, and the step schedule."""
from __future__ import annotations

import math

import pytest

from tinyflow.parallel.cost_model import (
    LINKS,
    Link,
    Sample,
    StepProfile,
    allreduce_time,
    crossover_bytes,
    fit_link,
    fit_links,
    host_compute_factor,
    predict_scaling,
    simulate_step,
    terms,
)

# 10 us per message, 1 GB/s per link, no reduction cost: easy to compute by hand
LINK = Link("hand", alpha=1e-5, beta=1e-9)
MB = 1_000_000


def test_ring_by_hand():
    # N = 4, n = 1 MB: 2(N-1) = 6 messages, 2(N-1)/N n = 1.5 MB over the busiest link
    assert terms("ring", 4, MB).messages == 6
    assert terms("ring", 4, MB).link_bytes == 1.5 * MB
    assert allreduce_time("ring", 4, MB, LINK) == pytest.approx(6 * 1e-5 + 1.5e-3)


def test_tree_by_hand_unsegmented_and_segmented():
    # N = 4: depth 2, one segment: 2(2 + 1 - 1) = 4 messages, 2 * 2 * n bytes at the root
    assert allreduce_time("tree", 4, MB, LINK) == pytest.approx(4e-5 + 4e-3)
    # N = 8, 10 MB in 4 MiB segments: depth 3, S = 3 -> 2(3 + 3 - 1) = 10 messages, 2 * 3 * n bytes
    t = terms("tree", 8, 10 * MB)
    assert (t.messages, t.link_bytes) == (10, 60 * MB)
    # N = 5 rounds the depth up: ceil(log2 5) = 3
    assert terms("tree", 5, MB).link_bytes == 6 * MB


def test_naive_by_hand_with_host_sum():
    link = Link("host", alpha=1e-5, beta=1e-9, gamma=0.0, host_gamma=1e-10)
    # rank 0: 2(N-1) messages, 2(N-1) n bytes, (N-1) n bytes summed on the host
    assert allreduce_time("naive", 4, MB, link) == pytest.approx(6e-5 + 6e-3 + 3e-4)
    # its bandwidth term grows linearly with N, the ring's stays below 2 n
    assert terms("naive", 64, MB).link_bytes == 126 * MB
    assert terms("ring", 64, MB).link_bytes < 2 * MB


def test_reduction_term_and_world_of_one():
    link = Link("g", alpha=0.0, beta=0.0, gamma=1e-9)
    assert allreduce_time("ring", 4, MB, link) == pytest.approx(0.75e-3)  # (N-1)/N n gamma
    assert allreduce_time("ring", 1, MB, LINK) == 0.0
    assert allreduce_time("tree", 8, 0, LINK) == 0.0
    with pytest.raises(ValueError, match="unknown algorithm 'bogus'"):
        terms("bogus", 4, MB)


def test_crossover_where_ring_and_tree_cost_the_same():
    # N = 8: the ring has 14 - 6 = 8 extra messages, the tree 6 - 1.75 = 4.25 extra bytes per byte
    n_star = crossover_bytes(8, LINK)
    assert n_star == pytest.approx(1e-5 * 8 / (1e-9 * 4.25))
    assert allreduce_time("ring", 8, n_star, LINK) == pytest.approx(allreduce_time("tree", 8, n_star, LINK))
    assert allreduce_time("tree", 8, n_star / 4, LINK) < allreduce_time("ring", 8, n_star / 4, LINK)
    assert allreduce_time("ring", 8, n_star * 4, LINK) < allreduce_time("tree", 8, n_star * 4, LINK)
    assert crossover_bytes(2, LINK) == 0.0  # two ranks: ring and tree send the same
    # the 25 MB buckets of DataParallel are far above n* on every preset link
    assert all(crossover_bytes(64, lk) < 25 * MB / 4 for lk in LINKS.values())


def test_fit_recovers_alpha_and_beta():
    truth = {"ring": Link("r", 3e-4, 1 / 1.2e9), "tree": Link("t", 1e-4, 1 / 0.9e9)}
    samples = [Sample(a, world, size, allreduce_time(a, world, size, lk))
               for a, lk in truth.items() for world in (2, 4) for size in (4096, 65536, 1 << 20, 16 << 20)]
    fitted = fit_links(samples)
    for a, lk in truth.items():
        assert fitted[a].alpha == pytest.approx(lk.alpha, rel=1e-6)
        assert fitted[a].beta == pytest.approx(lk.beta, rel=1e-6)


def test_fit_keeps_parameters_non_negative():
    # times that fall with size would need a negative beta: it is clamped to 0
    samples = [Sample("ring", 4, 1000, 2e-3), Sample("ring", 4, 100_000, 1e-3)]
    lk = fit_link(samples)
    assert lk.alpha >= 0 and lk.beta >= 0
    with pytest.raises(ValueError, match="no samples"):
        fit_link([Sample("ring", 1, 1000, 1e-3)])


def test_bucket_schedule_overlaps_backward():
    # forward 10 ms, backward 30 ms, update 5 ms; buckets ready 10 ms and 25 ms into backward
    profile = StepProfile(0.010, 0.030, 0.005, [(1000, 0.010), (1000, 0.025)])
    step, comm, exposed = simulate_step(profile, lambda n: 0.008)
    # bucket 0: 10 -> 18 ms; bucket 1: 25 -> 33 ms, 3 ms after backward ends
    assert (step, comm, exposed) == pytest.approx((0.048, 0.016, 0.003))
    # bucket 1 ready early: it waits for bucket 0, the thread reduces in order
    early = StepProfile(0.010, 0.030, 0.005, [(1000, 0.010), (1000, 0.011)])
    assert simulate_step(early, lambda n: 0.015)[2] == pytest.approx(0.010)  # ends at 40 ms
    # without overlap every second of communication is exposed
    assert simulate_step(profile, lambda n: 0.008, overlap=False)[0] == pytest.approx(0.061)


def test_predict_scaling_speedup_and_efficiency():
    profile = StepProfile(0.010, 0.030, 0.0, [(25 * MB, 0.030)], batch=64)  # all gradients at the end
    preds = predict_scaling(profile, [1, 2, 4], "ring", LINK)
    assert preds[0].speedup == 1.0 and preds[0].throughput == pytest.approx(64 / 0.040)
    for p in preds[1:]:
        comm = allreduce_time("ring", p.workers, 25 * MB, LINK)
        assert p.step_s == pytest.approx(0.040 + comm)
        assert p.speedup == pytest.approx(p.workers * 0.040 / (0.040 + comm))
        assert p.efficiency == pytest.approx(p.speedup / p.workers)
        assert p.throughput == pytest.approx(p.workers * 64 / p.step_s)
    # naive's rank 0 carries 2(N-1) n: its efficiency falls with N, the ring's hardly
    naive = predict_scaling(profile, [2, 8, 32], "naive", LINKS["pcie3"])
    ring = predict_scaling(profile, [2, 8, 32], "ring", LINKS["pcie3"])
    assert naive[0].efficiency > naive[1].efficiency > naive[2].efficiency
    assert ring[2].efficiency > 3 * naive[2].efficiency
    # auto takes the cheapest algorithm per bucket: never worse than ring or tree
    auto = predict_scaling(profile, [8], "auto", LINKS["pcie3"])[0]
    assert auto.step_s <= min(predict_scaling(profile, [8], a, LINKS["pcie3"])[0].step_s for a in ("ring", "tree"))


def test_more_parameters_per_flop_scale_worse():
    # same compute, 5x the gradient bytes (AlexNet against ResNet): lower efficiency at every N
    light = StepProfile(0.02, 0.04, 0.0, [(10 * MB, 0.02), (10 * MB, 0.04)])
    heavy = StepProfile(0.02, 0.04, 0.0, [(50 * MB, 0.02), (50 * MB, 0.04)])
    for n in (2, 8, 64):
        assert predict_scaling(heavy, [n], "ring", LINKS["pcie3"])[0].efficiency < \
            predict_scaling(light, [n], "ring", LINKS["pcie3"])[0].efficiency


def test_host_compute_factor_for_workers_sharing_cores():
    f = host_compute_factor(cores=2)
    # 1 worker: 2 threads; 2 workers: 1 thread each (2x slower each); 4 workers: 1 thread, 2 per core
    assert [f(1), f(2), f(4)] == [1.0, 2.0, 4.0]
    g = host_compute_factor(cores=16)
    assert g(4) == pytest.approx(4.0) and g(32) == pytest.approx(32.0)
    assert math.isclose(host_compute_factor(cores=8, threads_1=8)(1), 1.0)
