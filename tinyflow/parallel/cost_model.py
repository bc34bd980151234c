"""The alpha-beta cost model of all-reduce and of a data-parallel training step.

One all-reduce of ``n`` bytes over ``N`` ranks costs

    t = messages * alpha + link_bytes * beta + reduced_bytes * gamma

where ``alpha`` is the latency of one message, ``beta`` the seconds per byte on the busiest
link (one direction) and ``gamma`` the seconds per byte of reduction. The counts per algorithm
(docs/allreduce.md, "Cost model"):

    ring    2(N-1)            2(N-1)/N n       (N-1)/N n
    tree    2(L+S-1)          2 L n            L n            L = ceil(log2 N), S = segments
    naive   2(N-1)            2(N-1) n         (N-1) n        on the host (host_gamma)
    native  the engine's own: ring counts with its own fitted alpha and beta

A ``Link`` holds alpha, beta and gamma: presets for PCIe 3, NVLink and InfiniBand, or per
algorithm values fitted to measured ``bench allreduce`` rows (``fit_link``/``fit_links``).

A training step overlaps backward with communication: buckets of gradients become ready
during backward (``StepProfile.buckets``: bytes and ready time), a single communication
thread all-reduces them in order, and only what is left after backward ends is exposed
(``simulate_step``). ``predict_scaling`` turns that into throughput, speedup and efficiency
for each worker count (weak scaling: the batch per worker stays fixed).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from tinyflow.parallel.allreduce import ALGORITHMS  # the names it models; defined once there

DEFAULT_SEGMENT_BYTES = 4 * 1024 * 1024  # as tinyflow.parallel._segments


@dataclass(frozen=True)
class Link:
    """What one message and one byte cost: ``alpha`` s/message, ``beta`` s/byte, ``gamma`` s/byte reduced."""

    name: str
    alpha: float
    beta: float
    gamma: float = 0.0
    host_gamma: float = 0.0  # the host's sum in the naive scheme (0: fold it into beta)
    note: str = ""

    @property
    def bandwidth(self) -> float:
        """Bytes per second of one link in one direction (1 / beta)."""
        return 1.0 / self.beta if self.beta > 0 else math.inf


# Presets: per direction, per GPU. The host sum of the naive scheme runs at ~10 GB/s.
LINKS: dict[str, Link] = {
    "pcie3": Link("pcie3", alpha=10e-6, beta=1 / 8e9, gamma=1 / 400e9, host_gamma=1 / 10e9,
                  note="PCIe 3.0 x16 through the host, ~8 GB/s per direction (the seeds' figure)"),
    "nvlink": Link("nvlink", alpha=3e-6, beta=1 / 50e9, gamma=1 / 400e9, host_gamma=1 / 10e9,
                   note="NVLink 2 (V100), 2 links of 25 GB/s per direction in a ring"),
    "ib": Link("ib", alpha=5e-6, beta=1 / 12.5e9, gamma=1 / 400e9, host_gamma=1 / 10e9,
               note="InfiniBand EDR, 100 Gb/s = 12.5 GB/s per direction, one port per GPU"),
}


@dataclass(frozen=True)
class Terms:
    """The counts that multiply alpha, beta and gamma for one all-reduce."""

    messages: float
    link_bytes: float
    reduced_bytes: float
    on_host: bool = False  # the reduction runs on the host (naive)


def log2_ceil(n: int) -> int:
    return max(0, (int(n) - 1).bit_length())


def terms(algorithm: str, world: int, nbytes: float, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> Terms:
    """Messages, bytes over the busiest link and bytes reduced for ``algorithm`` (see the module doc)."""
    n, N = float(nbytes), int(world)
    if N < 1:
        raise ValueError(f"cost model: world size must be >= 1, got {world}")
    if N == 1 or n <= 0:
        return Terms(0.0, 0.0, 0.0)
    if algorithm in ("ring", "native"):
        return Terms(2 * (N - 1), 2 * (N - 1) / N * n, (N - 1) / N * n)
    if algorithm == "tree":
        depth = log2_ceil(N)
        segments = max(1, math.ceil(n / segment_bytes))
        return Terms(2 * (depth + segments - 1), 2 * depth * n, depth * n)
    if algorithm == "naive":
        return Terms(2 * (N - 1), 2 * (N - 1) * n, (N - 1) * n, on_host=True)
    raise ValueError(f"cost model: unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")


def allreduce_time(algorithm: str, world: int, nbytes: float, link: Link,
                   segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> float:
    """Predicted seconds of one all-reduce of ``nbytes`` bytes over ``world`` ranks."""
    t = terms(algorithm, world, nbytes, segment_bytes)
    gamma = link.host_gamma if t.on_host and link.host_gamma else link.gamma
    return t.messages * link.alpha + t.link_bytes * link.beta + t.reduced_bytes * gamma


def crossover_bytes(world: int, link: Link) -> float:
    """The buffer size above which the ring beats the (unsegmented) tree: n* of docs/allreduce.md.

    Setting 2(N-1) a + 2(N-1)/N n b = 2L a + 2L n b gives n* = a (2(N-1) - 2L) / (b (2L - 2(N-1)/N)).
    0 where the ring is never slower (N <= 2: both send the same), inf where it never wins.
    """
    N, L = int(world), log2_ceil(world)
    latency = 2 * (N - 1) - 2 * L  # extra messages of the ring
    bandwidth = 2 * L - 2 * (N - 1) / N  # extra bytes per byte of the tree
    if latency <= 0:
        return 0.0
    if bandwidth <= 0:
        return math.inf
    return link.alpha * latency / (link.beta * bandwidth)


# ---- fitting alpha and beta to measurements ---------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One measured all-reduce: ``seconds`` for ``nbytes`` over ``world`` ranks."""

    algorithm: str
    world: int
    nbytes: int
    seconds: float


def fit_link(samples: Sequence[Sample], name: str = "measured",
             segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> Link:
    """Alpha and beta (gamma folded into beta) that best explain ``samples`` of one algorithm.

    Least squares on the relative error (each sample divided by its time, so 4 KB and 64 MB
    weigh alike), both parameters kept >= 0.
    """
    rows = [s for s in samples if s.world > 1 and s.seconds > 0]
    if not rows:
        raise ValueError("fit_link: no samples with more than one rank")
    A = np.empty((len(rows), 2))
    for i, s in enumerate(rows):
        t = terms(s.algorithm, s.world, s.nbytes, segment_bytes)
        A[i] = (t.messages, t.link_bytes)  # every algorithm reduces half its link bytes: gamma folds into beta
    y = np.array([s.seconds for s in rows])
    w = 1.0 / y
    alpha, beta = _nonnegative_lstsq(A * w[:, None], y * w)
    return Link(name, alpha=alpha, beta=beta)


def _nonnegative_lstsq(A: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """min |A x - y| over x >= 0 for two unknowns (try the free fit, then each one alone)."""
    best: tuple[float, tuple[float, float]] | None = None
    candidates = []
    x, *_ = np.linalg.lstsq(A, y, rcond=None)
    if (x >= 0).all():
        candidates.append((float(x[0]), float(x[1])))
    for j in range(2):
        col = A[:, j]
        denom = float(col @ col)
        value = max(0.0, float(col @ y) / denom) if denom > 0 else 0.0
        candidates.append((value, 0.0) if j == 0 else (0.0, value))
    for cand in candidates:
        err = float(np.sum((A @ np.array(cand) - y) ** 2))
        if best is None or err < best[0]:
            best = (err, cand)
    return best[1]


def fit_links(samples: Iterable[Sample], segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> dict[str, Link]:
    """One fitted Link per algorithm found in ``samples``."""
    by: dict[str, list[Sample]] = {}
    for s in samples:
        by.setdefault(s.algorithm, []).append(s)
    return {a: fit_link(rows, name=f"measured:{a}", segment_bytes=segment_bytes) for a, rows in by.items()}


def samples_from_bench_json(record: dict) -> list[Sample]:
    """Samples from the JSON that `tinyflow bench allreduce --out DIR` writes."""
    world = int(record["nproc"])
    return [Sample(r["algorithm"], world, int(r["size"]), float(r["time_us"]) * 1e-6)
            for r in record["rows"] if r.get("correct", True) and r["algorithm"] in ALGORITHMS]


# ---- a training step: buckets ready during backward, one communication thread ----------------


@dataclass
class StepProfile:
    """One worker's measured step: phase times and when each gradient bucket is ready.

    ``buckets`` are (bytes, seconds after backward started) in the order DataParallel launches
    them (reverse registration order, the order backward produces them).
    """

    forward_s: float
    backward_s: float
    update_s: float
    buckets: list[tuple[int, float]] = field(default_factory=list)
    batch: int = 1  # examples (or tokens) per worker per step
    flops: float = 0.0  # forward + backward floating-point operations per step (0: unknown)

    @property
    def compute_s(self) -> float:
        return self.forward_s + self.backward_s + self.update_s

    @property
    def gradient_bytes(self) -> int:
        return int(sum(b for b, _ in self.buckets))

    def scaled(self, factor: float) -> StepProfile:
        """The same step ``factor`` times slower (workers sharing cores, a faster device, ...)."""
        return replace(self, forward_s=self.forward_s * factor, backward_s=self.backward_s * factor,
                       update_s=self.update_s * factor,
                       buckets=[(b, r * factor) for b, r in self.buckets])


@dataclass
class StepPrediction:
    workers: int
    algorithm: str
    step_s: float
    comm_s: float  # all-reduce time on the communication thread
    exposed_s: float  # the part backward could not hide
    throughput: float  # examples (tokens) per second, all workers together
    speedup: float = 1.0
    efficiency: float = 1.0


def simulate_step(profile: StepProfile, comm_time: Callable[[int], float], overlap: bool = True) -> tuple[float, float, float]:
    """(step seconds, communication seconds, exposed seconds) with buckets reduced in order.

    Bucket k starts when it is ready and the previous one is done; with ``overlap`` only the
    communication still running when backward ends is added to the step, without it all of it.
    """
    end = 0.0
    total = 0.0
    for nbytes, ready in profile.buckets:
        cost = comm_time(nbytes)
        total += cost
        end = max(ready, end) + cost
    exposed = max(0.0, end - profile.backward_s) if overlap else total
    return profile.compute_s + exposed, total, exposed


def predict_scaling(
    profile: StepProfile,
    workers: Sequence[int],
    algorithm: str,
    link: Link | dict[str, Link],
    overlap: bool = True,
    compute_factor: Callable[[int], float] | None = None,
    segment_bytes: int = DEFAULT_SEGMENT_BYTES,
) -> list[StepPrediction]:
    """Weak-scaling prediction for each worker count: step time, throughput, speedup, efficiency.

    ``algorithm`` may be auto (the cheapest of ring, tree and native for each bucket).
    ``link`` is one Link or one per algorithm (fitted); ``compute_factor(N)`` slows the compute
    of N workers (e.g. when they share one host's cores); ``overlap`` may be a function of N.
    """
    def link_of(alg: str) -> Link:
        if isinstance(link, Link):
            return link
        if alg in link:
            return link[alg]
        raise ValueError(f"cost model: no fitted link for {alg!r} (have {', '.join(sorted(link))})")

    def cost_fn(world: int) -> Callable[[int], float]:
        if algorithm == "auto":  # the cheapest of ring, tree and native for each bucket
            choices = [a for a in ("ring", "tree", "native") if isinstance(link, Link) or a in link]
            return lambda n: min(cost_fn_of(a, world)(n) for a in choices)
        return cost_fn_of(algorithm, world)

    def cost_fn_of(alg: str, world: int) -> Callable[[int], float]:
        if alg == "native" and isinstance(link, Link):  # a preset: the engine's best of ring and tree
            return lambda n: min(allreduce_time(a, world, n, link, segment_bytes) for a in ("ring", "tree"))
        lk = link_of(alg)
        return lambda n: allreduce_time(alg, world, n, lk, segment_bytes)

    base = profile.compute_s
    out = []
    for N in workers:
        prof = profile.scaled(compute_factor(N)) if compute_factor is not None else profile
        ov = overlap(N) if callable(overlap) else overlap
        if N == 1:
            step, comm, exposed = prof.compute_s, 0.0, 0.0
        else:
            step, comm, exposed = simulate_step(prof, cost_fn(N), ov)
        speedup = N * base / step
        out.append(StepPrediction(N, algorithm, step, comm, exposed, N * profile.batch / step,
                                  speedup, speedup / N))
    return out


def host_compute_factor(cores: int, threads_1: int | None = None) -> Callable[[int], float]:
    """How much slower each worker computes when N workers share ``cores`` cores of one host.

    Workers get max(1, cores // N) threads each (as ``mpirun_env`` sets), so together they keep
    all cores busy: with perfect thread scaling each worker is ``N * threads / threads_1`` times
    slower than one worker with ``threads_1`` threads, once N exceeds the cores it is N / cores.
    """
    one = threads_1 or cores

    def factor(N: int) -> float:
        threads = max(1, cores // N)
        return max(1.0, one / threads) * max(1.0, N * threads / cores)

    return factor
