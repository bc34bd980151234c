"""nccl-tests-style all-reduce benchmark: time, algbw and busbw per size and algorithm.

algbw = bytes / time (what the application sees); busbw = algbw * 2(N-1)/N, the traffic each
link carries in an optimal all-reduce, so busbw is comparable across world sizes and against
the hardware's link speed (nccl-tests' convention). Times are the slowest rank's mean over
``iters`` timed iterations after ``warmup`` untimed ones.
"""
from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from tinyflow.parallel.allreduce import ALGORITHMS, all_gather_object, allreduce
from tinyflow.parallel.communicator import Communicator

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
        if a not in ALGORITHMS:
            raise ValueError(f"bench: unknown algorithm {a!r}; choose from {', '.join(ALGORITHMS)}")
    n = comm.size
    if hasattr(comm, "native_blocking"):
        comm.native_blocking = True  # measure MPI's own blocking MPI_Allreduce, not our polling of it
    dt = np.dtype(dtype)
    rows: list[Row] = []
    for size in sizes:
        count = max(1, size // dt.itemsize)
        buf = np.empty(count, dtype=dt)
        for algorithm in algorithms:
            # correctness first: rank r contributes r + 1, so every element must be N(N+1)/2
            buf.fill(comm.rank + 1)
            comm.reset_counters()
            allreduce(buf, comm, algorithm=algorithm)
            sent = comm.bytes_sent
            correct = bool(np.all(buf == n * (n + 1) / 2))
            buf.fill(1.0 / n)  # keep repeated sums bounded
            for _ in range(warmup):
                allreduce(buf, comm, algorithm=algorithm, op="mean")
            comm.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                allreduce(buf, comm, algorithm=algorithm)
            elapsed = (time.perf_counter() - start) / iters
            stats = all_gather_object((elapsed, sent, correct), comm)
            slowest = max(s[0] for s in stats)
            nbytes = count * dt.itemsize
            algbw = nbytes / slowest / 1e9
            rows.append(Row(
                size=nbytes, count=count, algorithm=algorithm, time_us=slowest * 1e6,
                algbw=algbw, busbw=algbw * 2 * (n - 1) / n if n > 1 else algbw,
                bytes_sent=max(s[1] for s in stats), correct=all(s[2] for s in stats),
            ))
    return rows


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
        sent = "n/a" if r.algorithm == "native" else human(r.bytes_sent)
        lines.append(
            f"| {human(r.size)} | {r.count} | {r.algorithm} | {r.time_us:.1f} | {r.algbw:.3f} | "
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
