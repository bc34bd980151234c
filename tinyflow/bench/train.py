"""`tinyflow bench train MODEL`: training throughput per batch size and worker count.

Every cell (framework, precision, workers, batch) runs in a fresh process: ``python -m
tinyflow.bench.train --worker SPEC`` for one worker, the same under ``mpirun -n N`` for N
data-parallel workers (DataParallel over MPI, ``--allreduce``, auto by default). A worker
builds the model and one fixed random batch in memory, runs ``warmup`` untimed steps, then
``runs`` timed runs of ``steps`` steps (synchronizing the device around each run), and prints
one JSON line. The batch size is per worker (weak scaling, as the articles measure): N workers
process N x batch examples per step; the time of a step is the slowest rank's.

A cell that runs out of memory (MemoryError, CuPy's out-of-memory, the kernel's OOM killer) or
past ``--timeout`` is marked OOM / timeout in the table, and the sweep goes on. With
``--compare torch`` each one-worker cell is also run with the PyTorch twin of the model
(tinyflow.bench.torch_twins) in its own process, alternating with tinyflow, with the same
thread count. ``--rounds R`` measures every cell R times, one round after the other, so that
load changes on a shared machine hit all cells alike.

Throughput is the median over all timed runs (of all rounds), with the spread (slowest and
fastest run); speedup = throughput(N) / throughput(1) at the same batch per worker and
efficiency = speedup / N.

The environment variable TINYFLOW_BENCH_FAKE_OOM=64,128 makes the workers raise MemoryError
at those batch sizes (a test hook: it exercises the OOM path without filling the memory).
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

RESULT_MARK = "TINYFLOW_BENCH_RESULT "
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
PRECISIONS = ("fp32", "bf16", "fp16")


# ---- the arithmetic of the table ---------------------------------------------------------------


def paired_ratio(ours: Cell | None, theirs: Cell | None) -> float | None:
    """Throughput ratio of two cells measured in alternating rounds: the median over rounds of
    the ratio within each round (neighbouring processes see the same load), else of the medians."""
    if ours is None or theirs is None or not ours.ok or not theirs.ok:
        return None
    if len(ours.round_step_s) == len(theirs.round_step_s) > 1:
        return statistics.median(t / o for o, t in zip(ours.round_step_s, theirs.round_step_s))
    return speedup(ours.rate, theirs.rate)


def speedup(rate: float | None, rate_one: float | None) -> float | None:
    """Throughput of N workers over that of one worker at the same batch per worker."""
    if rate is None or not rate_one:
        return None
    return rate / rate_one


def efficiency(speed: float | None, workers: int) -> float | None:
    """Speedup over the ideal (N): 1.0 is perfect linear scaling."""
    return None if speed is None else speed / workers


@dataclass
class Cell:
    """One measured (framework, precision, workers, batch) combination."""

    framework: str
    precision: str
    workers: int
    batch: int
    status: str = "ok"  # ok | oom | timeout | error
    message: str = ""
    items_per_step: int = 0  # all workers together
    unit: str = "images/s"
    step_s: list[float] = field(default_factory=list)  # seconds per step, one per timed run
    forward_s: list[float] = field(default_factory=list)
    fwd_bwd_s: list[float] = field(default_factory=list)
    comm_s: float | None = None  # all-reduce seconds per step (communication thread)
    exposed_s: float | None = None  # the part backward had to wait for
    threads: int | None = None
    params: int | None = None
    algorithms: list[str] = field(default_factory=list)  # per bucket, for DataParallel runs
    round_step_s: list[float] = field(default_factory=list)  # each process's (round's) median step

    @property
    def ok(self) -> bool:
        return self.status == "ok" and bool(self.step_s)

    @property
    def rate(self) -> float | None:
        """Median throughput (items per second, all workers)."""
        return self.items_per_step / statistics.median(self.step_s) if self.ok else None

    @property
    def spread(self) -> tuple[float, float] | None:
        """(slowest, fastest) run's throughput."""
        if not self.ok:
            return None
        return self.items_per_step / max(self.step_s), self.items_per_step / min(self.step_s)

    def merge(self, other: Cell) -> None:
        """Add another round's runs of the same cell (a failure wins)."""
        if not other.ok:
            self.status, self.message = other.status, other.message
            return
        for name in ("step_s", "forward_s", "fwd_bwd_s", "round_step_s"):
            getattr(self, name).extend(getattr(other, name))
        for name in ("items_per_step", "unit", "threads", "params", "algorithms"):
            setattr(self, name, getattr(other, name))
        for name in ("comm_s", "exposed_s"):
            mine, theirs = getattr(self, name), getattr(other, name)
            setattr(self, name, theirs if mine is None else mine if theirs is None else (mine + theirs) / 2)

    def label(self) -> str:
        """What the table shows for a failed cell."""
        return {"oom": "OOM", "timeout": "timeout"}.get(self.status, "failed")


# ---- one cell, in a worker process ---------------------------------------------------------------


def _fake_oom(batch: int) -> None:
    fake = os.environ.get("TINYFLOW_BENCH_FAKE_OOM", "")
    if str(batch) in {s.strip() for s in fake.split(",") if s.strip()}:
        raise MemoryError(f"fake out-of-memory at batch size {batch} (TINYFLOW_BENCH_FAKE_OOM)")


def _timed_runs(fn: Callable[[], None], sync: Callable[[], None], steps: int, runs: int,
                barrier: Callable[[], None] | None = None) -> list[float]:
    """Seconds per step of each of ``runs`` runs of ``steps`` calls (device synchronized)."""
    out = []
    for _ in range(runs):
        if barrier is not None:
            barrier()
        sync()
        start = time.perf_counter()
        for _ in range(steps):
            fn()
        sync()
        out.append((time.perf_counter() - start) / steps)
    return out


def _graphed(train: Callable[[], None], done: int) -> Callable[[], None]:
    """``bench train --cuda-graph``: the step (its batch is fixed) captured as a CUDA graph after
    at least 3 eager steps (``done`` of them ran already); its replay."""
    import tinyflow as tf

    for _ in range(max(0, 3 - done)):
        train()
    g = tf.cuda.CUDAGraph()
    with tf.cuda.graph(g):
        train()
    return g.replay


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Time one cell in this process (under mpirun: this rank's share). Returns the JSON record."""
    from tinyflow.bench.workloads import measure_profile, tinyflow_step, torch_step, workload

    w = workload(spec["model"], spec["batch"], spec.get("overrides"), spec.get("image_size"))
    if spec.get("mode") == "profile":  # step 1 of `bench scaling` (tinyflow.bench.scaling)
        _fake_oom(w.batch)
        return measure_profile(w, spec)
    framework, device, precision = spec["framework"], spec.get("device", "cpu"), spec.get("precision", "fp32")
    steps, runs, warmup = spec.get("steps", 5), spec.get("runs", 3), spec.get("warmup", 2)
    comm, dp = None, None
    if framework == "torch":
        step = torch_step(w, device, precision, threads=spec.get("threads"))
    else:
        from tinyflow.parallel.world import world

        wd = world()
        if wd.size > 1:
            from tinyflow.parallel.data_parallel import DataParallel

            comm = wd.comm
            if device.startswith("cuda"):
                device = wd.device("cuda")

            def wrap(model: Any) -> Any:
                nonlocal dp
                dp = DataParallel(model, comm, algorithm=spec.get("allreduce", "auto"),
                                  bucket_mb=spec.get("bucket_mb", 25.0))
                return dp

            step = tinyflow_step(w, device, precision, wrap=wrap)
        else:
            step = tinyflow_step(w, device, precision)
    _fake_oom(w.batch)
    barrier = comm.barrier if comm is not None else None
    for _ in range(warmup):
        step.train()
    comm_total = exposed_total = 0.0
    train = step.train
    if spec.get("cuda_graph") and framework == "tinyflow" and dp is None:
        train = _graphed(step.train, warmup)
    if dp is not None:
        def train() -> None:
            nonlocal comm_total, exposed_total
            step.train()
            comm_total += dp.last_step.comm_seconds
            exposed_total += dp.last_step.wait_seconds

    step_s = _timed_runs(train, step.sync, steps, runs, barrier)
    forward_s = fwd_bwd_s = []
    if spec.get("breakdown"):
        forward_s = _timed_runs(step.forward, step.sync, steps, runs, barrier)
        fwd_bwd_s = _timed_runs(step.forward_backward, step.sync, steps, runs, barrier)
    world_size = comm.size if comm is not None else 1
    record = {"status": "ok", "step_s": step_s, "forward_s": forward_s, "fwd_bwd_s": fwd_bwd_s,
              "items_per_step": w.items_per_step * world_size, "unit": w.unit, "params": step.params,
              "threads": spec.get("threads")}
    if comm is not None:
        from tinyflow.parallel.allreduce import all_gather_object

        everyone = all_gather_object((step_s, forward_s, fwd_bwd_s, comm_total, exposed_total), comm)
        for i, key in enumerate(("step_s", "forward_s", "fwd_bwd_s")):
            record[key] = [max(r[i][j] for r in everyone) for j in range(len(everyone[0][i]))]
        timed = steps * runs
        record["comm_s"] = max(r[3] for r in everyone) / timed
        record["exposed_s"] = max(r[4] for r in everyone) / timed
        record["algorithms"] = list(dp.bucket_algorithms)
        dp.close()
    return record


def worker_main(spec: dict[str, Any]) -> int:
    """Entry of a worker process: measure, print one result line (rank 0), map failures."""
    from tinyflow.parallel.world import world

    rank = world().rank
    try:
        record = measure(spec)
    except MemoryError as exc:
        record = {"status": "oom", "message": str(exc)[:500]}
    except Exception as exc:  # noqa: BLE001 - reported in the table, the sweep goes on
        record = {"status": "error", "message": f"{type(exc).__name__}: {exc}"[:1000]}
    if rank == 0 or record["status"] != "ok":
        print(RESULT_MARK + json.dumps(record), flush=True)
    if record["status"] != "ok" and world().size > 1:
        world().comm.abort(3)  # the other ranks would wait for this one forever
    return 0 if record["status"] == "ok" else 3


# ---- one cell, from the driver --------------------------------------------------------------------


def worker_env(threads: int, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a worker: BLAS/OpenMP threads pinned, tinyflow importable."""
    env = dict(os.environ if base is None else base)
    for var in THREAD_VARS:
        env[var] = str(threads)
    env.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # OpenBLAS threads sleep right after a GEMM
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH", "")) if p)
    return env


def threads_for(workers: int, threads: int | None = None) -> int:
    """Threads per worker: --threads, else the cores split evenly between the workers."""
    return threads or max(1, (os.cpu_count() or 1) // workers)


def run_cell(spec: dict[str, Any], workers: int, timeout: float) -> dict[str, Any]:
    """Run one cell in a fresh process (under mpirun for several workers); its JSON record."""
    cmd = [sys.executable, "-m", "tinyflow.bench.train", "--worker", json.dumps(spec)]
    env = worker_env(spec["threads"])
    if workers > 1:
        from tinyflow.parallel.launch import mpirun_command, mpirun_env

        cmd = mpirun_command(workers, cmd)
        env = mpirun_env(env, nproc=workers)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        return {"status": "timeout", "message": f"no result within {timeout:.0f} s"}
    for line in reversed(out.splitlines()):
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    text = (out + err).strip()
    if proc.returncode in (-signal.SIGKILL, 137) or "Killed" in text[-300:]:
        return {"status": "oom", "message": "killed (the kernel's out-of-memory killer?)"}
    return {"status": "error", "message": f"exit status {proc.returncode}: {text[-1500:]}"}


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


# ---- the sweep over cells --------------------------------------------------------------------------


@dataclass
class BenchSettings:
    model: str
    batch_sizes: list[int]
    workers: list[int]
    precisions: list[str]
    device: str = "cpu"
    steps: int = 5
    warmup: int = 2
    runs: int = 3
    rounds: int = 1
    compare: list[str] = field(default_factory=list)  # "torch"
    breakdown: bool = False
    allreduce: str = "auto"
    bucket_mb: float = 25.0
    threads: int | None = None
    timeout: float = 600.0
    overrides: dict[str, Any] = field(default_factory=dict)
    image_size: int | None = None
    cuda_graph: bool = False  # tinyflow's one-worker step replayed as a CUDA graph (cuda devices)

    def __post_init__(self) -> None:
        """Refuse settings that no measurement can come from (a negative step count would give a
        negative throughput marked ok, zero steps a division by zero, zero runs a cell failed for no
        reason). `tinyflow bench train` checks its options when it parses them; this guards a
        program's own settings, with the same words."""
        for name, least in (("steps", 1), ("runs", 1), ("rounds", 1), ("warmup", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < least:
                raise ValueError(f"--{name}: must be >= {least}, got {value!r}")
        for name, values in (("batch-sizes", self.batch_sizes), ("nproc", self.workers)):
            if not values or any(not isinstance(v, int) or v < 1 for v in values):
                raise ValueError(f"--{name}: expected a comma list of whole numbers >= 1, got {values!r}")
        for name, values, known in (("precision", self.precisions, PRECISIONS), ("compare", self.compare, ("torch",))):
            unknown = [v for v in values if v not in known]
            if unknown or (name == "precision" and not values):
                raise ValueError(f"--{name}: unknown {unknown or values!r}: choose a comma list of {', '.join(known)}")
        if self.timeout <= 0 or self.bucket_mb <= 0:
            raise ValueError(f"--timeout and --bucket-mb must be > 0, got {self.timeout} and {self.bucket_mb}")

    def spec(self, framework: str, precision: str, workers: int, batch: int) -> dict[str, Any]:
        return {"framework": framework, "model": self.model, "batch": batch, "overrides": self.overrides,
                "image_size": self.image_size, "device": self.device, "precision": precision,
                "steps": self.steps, "runs": self.runs, "warmup": self.warmup, "breakdown": self.breakdown,
                "allreduce": self.allreduce, "bucket_mb": self.bucket_mb,
                "threads": threads_for(workers, self.threads), "cuda_graph": self.cuda_graph}


Runner = Callable[[dict[str, Any], int, float], dict[str, Any]]


def run_bench(settings: BenchSettings, runner: Runner = run_cell,
              progress: Callable[[str], None] | None = None) -> list[Cell]:
    """Measure every cell; failures are recorded in their cell and the sweep goes on.

    Rounds are the outer loop: each round measures every cell once, so slow drifts of a shared
    machine's load spread over all cells instead of hitting a few."""
    cells: dict[tuple, Cell] = {}
    frameworks = ["tinyflow", *settings.compare]
    for _ in range(settings.rounds):
        for precision in settings.precisions:
            for workers in settings.workers:
                for batch in settings.batch_sizes:
                    for framework in frameworks:
                        if framework != "tinyflow" and workers != 1:
                            continue  # the comparison is single-process
                        key = (framework, precision, workers, batch)
                        cell = cells.setdefault(key, Cell(framework, precision, workers, batch))
                        if cell.status != "ok":
                            continue  # failed in an earlier round: do not try again
                        spec = settings.spec(framework, precision, workers, batch)
                        record = runner(spec, workers, settings.timeout)
                        cell.merge(_cell_from(record, key))
                        if progress is not None:
                            progress(_progress_line(cells[key]))
    return list(cells.values())


def _cell_from(record: dict[str, Any], key: tuple) -> Cell:
    framework, precision, workers, batch = key
    cell = Cell(framework, precision, workers, batch, status=record.get("status", "error"),
                message=record.get("message", ""))
    for name in ("items_per_step", "unit", "step_s", "forward_s", "fwd_bwd_s", "comm_s", "exposed_s",
                 "threads", "params", "algorithms"):
        if record.get(name) is not None:
            setattr(cell, name, record[name])
    if cell.step_s:
        cell.round_step_s = [statistics.median(cell.step_s)]
    return cell


def _progress_line(c: Cell) -> str:
    what = f"{c.framework:8s} {c.precision} {c.workers} worker(s) batch {c.batch}"
    if not c.ok:
        return f"{what}: {c.label()} {c.message[:200]}"
    lo, hi = c.spread
    return f"{what}: {c.rate:.1f} {c.unit} ({lo:.1f}-{hi:.1f})"


# ---- reports ------------------------------------------------------------------------------------------


def _fmt_rate(c: Cell | None) -> str:
    if c is None:
        return ""
    if not c.ok:
        return c.label()
    lo, hi = c.spread
    return f"{c.rate:.1f} ({lo:.0f}-{hi:.0f})" if c.rate < 1000 else f"{c.rate:.0f} ({lo:.0f}-{hi:.0f})"


def format_tables(cells: Sequence[Cell], settings: BenchSettings, header: str = "") -> str:
    """The throughput table (and the breakdown table) as Markdown, one section per precision."""
    by = {(c.framework, c.precision, c.workers, c.batch): c for c in cells}
    unit = next((c.unit for c in cells if c.ok), "images/s")
    out = []
    for precision in settings.precisions:
        out.append(f"{header}{settings.model}, {settings.device}, {precision}, batch per worker; {unit} "
                   f"(median of {settings.rounds * settings.runs} runs x {settings.steps} steps; slowest-fastest run)")
        out.append("")
        cols = ["batch"]
        for n in settings.workers:
            cols.append(f"{n} worker{'s' if n > 1 else ''}")
            if n > 1:
                cols += ["speedup", "efficiency"]
        for other in settings.compare:
            cols += [f"{_framework_name(other)}", f"tinyflow / {_framework_name(other)}"
                     + (" (median of per-round ratios)" if settings.rounds > 1 else "")]
        out.append("| " + " | ".join(cols) + " |")
        out.append("|" + "|".join("---:" for _ in cols) + "|")
        for batch in settings.batch_sizes:
            one = by.get(("tinyflow", precision, 1, batch))
            row = [str(batch)]
            for n in settings.workers:
                c = by.get(("tinyflow", precision, n, batch))
                row.append(_fmt_rate(c))
                if n > 1:
                    s = speedup(c.rate if c else None, one.rate if one else None)
                    e = efficiency(s, n)
                    row += ["" if s is None else f"{s:.2f}x", "" if e is None else f"{e:.0%}"]
            for other in settings.compare:
                t = by.get((other, precision, 1, batch))
                row.append(_fmt_rate(t))
                ratio = paired_ratio(one, t)
                row.append("" if ratio is None else f"{ratio:.2f}x")
            out.append("| " + " | ".join(row) + " |")
        out.append("")
        if settings.breakdown:
            out.append(f"per batch, {precision}: forward, forward+backward and the whole step (ms, medians); "
                       "all-reduce per step on the communication thread and the part not hidden behind backward")
            out.append("")
            out.append("| batch | framework | workers | forward (ms) | forward+backward (ms) | step (ms) | "
                       "all-reduce (ms) | exposed (ms) | algorithm per bucket |")
            out.append("|---:|:---|---:|---:|---:|---:|---:|---:|:---|")
            for batch in settings.batch_sizes:
                for framework in ["tinyflow", *settings.compare]:
                    for n in settings.workers:
                        c = by.get((framework, precision, n, batch))
                        if c is None:
                            continue
                        if not c.ok:
                            out.append(f"| {batch} | {framework} | {n} | {c.label()} | | | | | |")
                            continue
                        ms = [_ms(c.forward_s), _ms(c.fwd_bwd_s), _ms(c.step_s),
                              "" if c.comm_s is None else f"{c.comm_s * 1e3:.1f}",
                              "" if c.exposed_s is None else f"{c.exposed_s * 1e3:.1f}"]
                        algos = ",".join(dict.fromkeys(c.algorithms))
                        out.append(f"| {batch} | {framework} | {n} | " + " | ".join(ms) + f" | {algos} |")
            out.append("")
    failed = [c for c in cells if not c.ok and c.message]
    for c in failed:
        out.append(f"- {c.framework} {c.precision} {c.workers} worker(s) batch {c.batch}: {c.label()}: "
                   f"{c.message.strip().splitlines()[-1][:300] if c.message.strip() else ''}")
    return "\n".join(out).rstrip() + "\n"


def _framework_name(name: str) -> str:
    return {"torch": "PyTorch"}.get(name, name)


def _ms(values: Sequence[float]) -> str:
    return f"{statistics.median(values) * 1e3:.1f}" if values else ""


def to_json(cells: Sequence[Cell], settings: BenchSettings, **meta: Any) -> str:
    rows = []
    for c in cells:
        row = asdict(c)
        row["rate"] = c.rate
        row["spread"] = c.spread
        one = next((o for o in cells if (o.framework, o.precision, o.workers, o.batch)
                    == (c.framework, c.precision, 1, c.batch)), None)
        row["speedup"] = speedup(c.rate, one.rate if one else None)
        row["efficiency"] = efficiency(row["speedup"], c.workers)
        rows.append(row)
    return json.dumps({**meta, "settings": asdict(settings), "cells": rows}, indent=1)


def plot(cells: Sequence[Cell], settings: BenchSettings, path: str, title: str | None = None) -> None:
    """Throughput against batch size: one line per worker count (and precision, and framework)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    unit = next((c.unit for c in cells if c.ok), "images/s")
    groups: dict[tuple, list[Cell]] = {}
    for c in cells:
        groups.setdefault((c.framework, c.precision, c.workers), []).append(c)
    for (framework, precision, workers), group in groups.items():
        pts = sorted((c.batch, c.rate) for c in group if c.ok)
        if not pts:
            continue
        label = f"{_framework_name(framework)} {workers} worker{'s' if workers > 1 else ''}"
        if len(settings.precisions) > 1:
            label += f" {precision}"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label,
                linestyle="--" if framework != "tinyflow" else "-")
        for c in group:
            if not c.ok:
                ax.annotate(c.label(), (c.batch, 0), textcoords="offset points", xytext=(0, 5),
                            ha="center", fontsize=8, color="red")
    ax.set_xscale("log", base=2)
    ax.set_xticks(settings.batch_sizes)
    ax.set_xticklabels([str(b) for b in settings.batch_sizes])
    ax.set_xlabel("batch size per worker")
    ax.set_ylabel(unit)
    ax.set_ylim(bottom=0)
    ax.set_title(title or f"tinyflow bench train {settings.model} ({settings.device})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.exit(worker_main(json.loads(sys.argv[2])))
    print("usage: python -m tinyflow.bench.train --worker SPEC_JSON (use `tinyflow bench train`)", file=sys.stderr)
    sys.exit(2)
