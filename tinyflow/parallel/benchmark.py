"""nccl-tests-style all-reduce benchmark: time, algbw and busbw per size and algorithm.

algbw = bytes / time (what the application sees); busbw = algbw * 2(N-1)/N, the traffic each
link carries in an optimal all-reduce, so busbw is comparable across world sizes and against
the hardware's link speed (nccl-tests' convention). After ``warmup`` untimed calls, each of
``iters`` rounds times every algorithm in turn (interleaved, starting one algorithm later each
round, so that a load change on a shared host hits all of them alike), each as a block of back-to-back calls lasting about 5 ms (at least
one call) after a barrier; a row's time is the median over rounds of the slowest rank's time
per call.

``auto`` is timed like the others after its cost model has been fitted (once, before any
timing); its rows name the algorithm it picked (``chosen``), and ``auto_report`` compares it
with the best of the other algorithms at each size.
"""
from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from tinyflow.parallel.allreduce import ALGORITHM_CHOICES, all_gather_object, allreduce
from tinyflow.parallel.communicator import Communicator

BLOCK_SECONDS = 0.005  # a timed block of back-to-back calls lasts about this long
MAX_INNER = 64
_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "M": 1024**2, "MB": 1024**2, "G": 1024**3, "GB": 1024**3}


def parse_size(text: str) -> int:
    """'4K' -> 4096, '64M' -> 67108864, '1000' -> 1000 (binary units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?B?)\s*", text.upper())
    if not m:
        raise ValueError(f"bad size {text!r}: use a number with an optional K, M or G suffix, e.g. 64M")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def parse_sizes(spec: str, factor: int = 2) -> list[int]:
    """'4K:256M' -> 4K, 8K, ..., 256M (times ``factor``); '1M,64M' -> [1M, 64M]; '64M' -> [64M]."""
    sizes: list[int] = []
    for part in spec.split(","):
        if ":" in part:
            lo, hi = (parse_size(p) for p in part.split(":", 1))
            if lo <= 0 or hi < lo:
                raise ValueError(f"bad size range {part!r}: need 0 < min <= max")
            size = lo
            while size <= hi:
                sizes.append(size)
                size *= factor
        else:
            sizes.append(parse_size(part))
    return sizes


def human(nbytes: float) -> str:
    for unit, scale in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{int(nbytes)}B"


@dataclass
class Row:
    size: int  # bytes per rank's buffer
    count: int  # elements
    algorithm: str
    time_us: float
    algbw: float  # GB/s (1e9 bytes)
    busbw: float  # GB/s
    bytes_sent: int  # payload bytes the busiest rank sent per all-reduce (0 for native)
    correct: bool
    chosen: str = ""  # for auto: the algorithm its cost model picked at this size
    rounds_us: list[float] = field(default_factory=list)  # the slowest rank's time per call, each round


def run_allreduce_bench(
    comm: Communicator,
    algorithms: Sequence[str],
    sizes: Sequence[int],
    iters: int = 5,
    warmup: int = 1,
    dtype: str = "float32",
) -> list[Row]:
    """Time each algorithm at each size on every rank; every rank returns the same rows."""
    for a in algorithms:
        if a not in ALGORITHM_CHOICES:
            raise ValueError(f"bench: unknown algorithm {a!r}; choose from {', '.join(ALGORITHM_CHOICES)}")
    n = comm.size
    if hasattr(comm, "native_blocking"):
        comm.native_blocking = True  # measure MPI's own blocking MPI_Allreduce, not our polling of it
    dt = np.dtype(dtype)
    rows: list[Row] = []
    if "auto" in algorithms and n > 1:
        from tinyflow.parallel.auto import calibrate

        calibrate(comm, max(sizes))  # fitted once for this world, before anything is timed
    for size in sizes:
        count = max(1, size // dt.itemsize)
        nbytes = count * dt.itemsize
        buf = np.empty(count, dtype=dt)
        checks = {}
        for algorithm in algorithms:
            # correctness first: rank r contributes r + 1, so every element must be N(N+1)/2
            buf.fill(comm.rank + 1)
            comm.reset_counters()
            allreduce(buf, comm, algorithm=algorithm)
            checks[algorithm] = (comm.bytes_sent, bool(np.all(buf == n * (n + 1) / 2)))
        buf.fill(0)  # sums of zeros stay zeros: the same traffic, no overflow however many calls
        warm = []
        for algorithm in algorithms:
            start = time.perf_counter()
            for _ in range(max(1, warmup)):
                allreduce(buf, comm, algorithm=algorithm)
            warm.append((time.perf_counter() - start) / max(1, warmup))
        # calls per timed block: enough to span ~BLOCK_SECONDS, agreed by all ranks
        slowest_warm = max(max(w) for w in all_gather_object(warm, comm))
        inner = int(min(MAX_INNER, max(1, BLOCK_SECONDS / max(slowest_warm, 1e-9))))
        times: dict[str, list[float]] = {a: [] for a in algorithms}
        for i in range(iters):
            k = i % len(algorithms)  # interleaved, in an order rotating each round, so that load
            for algorithm in [*algorithms[k:], *algorithms[:k]]:  # changes hit every algorithm alike
                comm.barrier()
                start = time.perf_counter()
                for _ in range(inner):
                    allreduce(buf, comm, algorithm=algorithm)
                times[algorithm].append((time.perf_counter() - start) / inner)
        stats = all_gather_object((times, checks), comm)
        for algorithm in algorithms:
            per_round = [max(r[0][algorithm][i] for r in stats) for i in range(iters)]  # slowest rank
            slowest = statistics.median(per_round)
            algbw = nbytes / slowest / 1e9
            rows.append(Row(
                size=nbytes, count=count, algorithm=algorithm, time_us=slowest * 1e6,
                algbw=algbw, busbw=busbw(algbw, n),
                bytes_sent=max(r[1][algorithm][0] for r in stats),
                correct=all(r[1][algorithm][1] for r in stats),
                chosen=_chosen(comm, algorithm, nbytes), rounds_us=[t * 1e6 for t in per_round],
            ))
    return rows


def busbw(algbw: float, nproc: int) -> float:
    """Bus bandwidth: algbw * 2(N-1)/N, what each link carries in an optimal all-reduce."""
    return algbw * 2 * (nproc - 1) / nproc if nproc > 1 else algbw


def _chosen(comm: Communicator, algorithm: str, nbytes: int) -> str:
    if algorithm != "auto" or comm.size == 1:
        return ""
    from tinyflow.parallel.auto import choose_algorithm

    return choose_algorithm(comm, nbytes)


def _paired(a: Row, b: Row) -> float:
    """a's time over b's: the median of the per-round ratios when both have them."""
    if a.rounds_us and len(a.rounds_us) == len(b.rounds_us):
        return statistics.median(x / y for x, y in zip(a.rounds_us, b.rounds_us))
    return a.time_us / b.time_us


def auto_report(rows: Sequence[Row], tolerance: float = 0.05) -> tuple[str, bool]:
    """Per size: auto's time against the best other algorithm's (the lowest median); True when
    every size is within ``tolerance`` (auto's time <= (1 + tolerance) x the best).

    Ratios are paired: the median over rounds of the ratio within each round, so that load
    changes between rounds cancel out. Each line also gives the choice's own row against the
    best (``choice / best``): when auto picked the best algorithm that is 1, and what is left of
    ``auto / best`` is the noise of timing the same algorithm twice."""
    by_size: dict[int, dict[str, Row]] = {}
    for r in rows:
        by_size.setdefault(r.size, {})[r.algorithm] = r
    lines, ok = [], True
    for size, group in sorted(by_size.items()):
        auto = group.get("auto")
        others = {a: r for a, r in group.items() if a not in ("auto", "naive")}
        if auto is None or not others:
            continue
        best = min(others.values(), key=lambda r: r.time_us)
        ratio = _paired(auto, best)
        chosen = others.get(auto.chosen)
        choice = "" if chosen is None else f"; choice / best = {_paired(chosen, best):.3f}"
        within = ratio <= 1 + tolerance
        ok &= within
        lines.append(f"{human(size):>6}: auto -> {auto.chosen or '?':6s} {auto.time_us:10.1f} us; best {best.algorithm:6s} "
                     f"{best.time_us:10.1f} us; auto / best = {ratio:.3f} {'ok' if within else 'OVER ' + f'{tolerance:.0%}'}"
                     f"{choice}")
    return "\n".join(lines), ok


def format_table(rows: Sequence[Row], nproc: int, transport: str) -> str:
    """A Markdown table like nccl-tests' output, one row per (size, algorithm)."""
    lines = [
        f"all-reduce, {nproc} ranks, {transport} transport, float32, sum "
        f"(busbw = algbw * 2(N-1)/N; bytes = payload sent by the busiest rank per call; "
        f"native = the transport's own blocking all-reduce)",
        "",
        "| size | count | algorithm | time (us) | algbw (GB/s) | busbw (GB/s) | bytes sent | check |",
        "|---:|---:|:---|---:|---:|---:|---:|:---|",
    ]
    for r in rows:
        sent = "n/a" if r.algorithm == "native" or (r.chosen == "native") else human(r.bytes_sent)
        name = f"auto ({r.chosen})" if r.chosen else r.algorithm
        lines.append(
            f"| {human(r.size)} | {r.count} | {name} | {r.time_us:.1f} | {r.algbw:.3f} | "
            f"{r.busbw:.3f} | {sent} | {'ok' if r.correct else 'WRONG'} |"
        )
    return "\n".join(lines)


def ratios(rows: Sequence[Row], numerator: str, denominator: str) -> dict[int, float]:
    """busbw(numerator) / busbw(denominator) per size where both were measured."""
    by = {(r.size, r.algorithm): r for r in rows}
    return {
        size: by[(size, numerator)].busbw / by[(size, denominator)].busbw
        for size, algo in by
        if algo == numerator and (size, denominator) in by and by[(size, denominator)].busbw > 0
    }


def plot(rows: Sequence[Row], path: str, title: str) -> None:
    """busbw against buffer size, one line per algorithm (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for algorithm in dict.fromkeys(r.algorithm for r in rows):
        pts = sorted((r.size, r.busbw) for r in rows if r.algorithm == algorithm)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=algorithm)
    ax.set_xscale("log", base=2)
    sizes = sorted({r.size for r in rows})
    ax.set_xticks(sizes)
    ax.set_xticklabels([human(s) for s in sizes], rotation=45, fontsize=8)
    ax.set_xlabel("buffer size per rank")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def rows_to_json(rows: Sequence[Row], **meta: object) -> str:
    return json.dumps({**meta, "rows": [asdict(r) for r in rows]}, indent=1)
