"""`tinyflow bench scaling MODEL`: predicted data-parallel speedup from a cost model, and a check.

1. Profile one worker (a fresh process, all cores): forward, backward and update seconds at
   the batch per worker, the gradient bytes of each DataParallel bucket and when in backward
   each bucket is ready, and the FLOPs of a step.
2. Price each bucket's all-reduce with the alpha-beta model of each algorithm
   (tinyflow.parallel.cost_model) on a link: a preset (pcie3, nvlink, ib) or ``measured``
   (alpha and beta fitted per algorithm to ``bench allreduce`` runs on this host).
3. Replay the bucket schedule: one communication thread reduces the buckets in order as they
   become ready, overlapping backward; what is left when backward ends is exposed. Speedup
   of N workers = N x step(1) / step(N) (weak scaling, batch per worker fixed).

With a preset link every worker has a device of its own (``--tflops`` replaces the measured
compute time by FLOPs / rate, to ask what a faster device would see). With ``--link measured``
the workers are processes of this host: they split its cores (``cores // N`` threads each, so
each computes more slowly, profiled at those thread counts), and when no core is left over
the communication cannot overlap backward. ``--validate 1,2,4`` then runs `bench train` with
those worker counts and prints the measured speedup beside the prediction.
"""
from __future__ import annotations

import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tinyflow.bench.workloads import measure_profile  # noqa: F401  (step 1; its home is workloads.py)
from tinyflow.parallel.allreduce import ALGORITHMS
from tinyflow.parallel.cost_model import (
    LINKS,
    Link,
    StepPrediction,
    StepProfile,
    fit_links,
    predict_scaling,
    samples_from_bench_json,
)

# ---- step 1: the profile ------------------------------------------------------------------------
# measure_profile (imported above) runs inside a worker process that tinyflow.bench.train starts;
# it lives in workloads.py so that train.py, which this file builds on, need not import this file.


def profile_from(record: dict[str, Any]) -> StepProfile:
    return StepProfile(record["forward_s"], record["backward_s"], record["update_s"],
                       [(int(n), float(r)) for n, r in record["buckets"]], batch=record["items_per_step"],
                       flops=record.get("flops", 0.0))


# ---- step 2: links ----------------------------------------------------------------------------------


def measured_links(files: Sequence[str], worlds: Sequence[int] = (2, 4), sizes: str = "16K:64M",
                   log: Callable[[str], None] = print) -> tuple[dict[str, Link], list[str]]:
    """Per-algorithm links fitted to `bench allreduce` JSON files (run here first when none given)."""
    paths = list(files)
    if not paths:
        out = tempfile.mkdtemp(prefix="tinyflow-allreduce-")
        for n in worlds:
            log(f"measuring the links: tinyflow bench allreduce --nproc {n} --sizes {sizes} ...")
            cmd = [sys.executable, "-m", "tinyflow.cli", "bench", "allreduce", "--nproc", str(n),
                   "--algorithms", "ring,tree,naive,native", "--sizes", sizes, "--iters", "3", "--out", out]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"bench allreduce --nproc {n} failed:\n{(done.stdout + done.stderr)[-2000:]}")
        paths = sorted(glob.glob(os.path.join(out, "allreduce_np*_mpi.json")))
    samples = []
    for path in paths:
        with open(path) as f:
            samples += samples_from_bench_json(json.load(f))
    return fit_links(samples), paths


# ---- steps 3 and 4: predictions and the check ---------------------------------------------------


@dataclass
class ScalingSettings:
    model: str
    batch: int
    workers: list[int]
    link: str = "pcie3"
    algorithms: list[str] = field(default_factory=lambda: ["ring", "tree", "naive"])
    bucket_mb: float = 25.0
    device: str = "cpu"
    precision: str = "fp32"
    tflops: float | None = None  # compute at this sustained rate instead of the measured time
    validate: list[int] = field(default_factory=list)
    allreduce_json: list[str] = field(default_factory=list)
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    steps: int = 5
    warmup: int = 2
    runs: int = 3
    rounds: int = 2  # validation: alternating rounds over every (algorithm, workers) run
    timeout: float = 900.0
    overrides: dict[str, Any] = field(default_factory=dict)
    image_size: int | None = None
    profile_record: dict[str, Any] | None = None  # a profile from an earlier --json: not measured again


@dataclass
class ScalingResult:
    profile: StepProfile
    params: int
    unit: str
    links: dict[str, Link]
    predictions: dict[str, list[StepPrediction]]
    measured: dict[tuple[str, int], float | None] = field(default_factory=dict)  # (algorithm, N) -> speedup
    checks: list[Any] = field(default_factory=list)  # Check per validated (algorithm, N)
    validated_base_s: float | None = None  # the one-worker step measured with the validation runs
    compute_scale: float = 1.0
    notes: list[str] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)  # the profile as measured (unscaled)


def _profile_spec(s: ScalingSettings, threads: int) -> dict[str, Any]:
    return {"mode": "profile", "framework": "tinyflow", "model": s.model, "batch": s.batch,
            "overrides": s.overrides, "image_size": s.image_size, "device": s.device, "precision": s.precision,
            "steps": s.steps, "warmup": s.warmup, "bucket_mb": s.bucket_mb, "threads": threads}


def run_scaling(s: ScalingSettings, runner: Callable[..., dict[str, Any]] | None = None,
                log: Callable[[str], None] = print) -> ScalingResult:
    """Profile, predict every algorithm at every worker count, and (``validate``) measure."""
    from tinyflow.bench.train import run_cell

    runner = runner or run_cell
    shared_host = s.link == "measured"
    record = s.profile_record or runner(_profile_spec(s, s.cores), 1, s.timeout)
    if record.get("status") != "ok":
        raise RuntimeError(f"profiling {s.model} at batch {s.batch} failed: {record.get('status')}: "
                           f"{record.get('message', '')}")
    profile = profile_from(record)
    notes: list[str] = []
    compute_scale = 1.0
    if s.tflops:
        if not profile.flops:
            raise ValueError(f"--tflops: no FLOPs counted for {s.model}")
        compute_scale = profile.flops / (s.tflops * 1e12) / profile.compute_s
        profile = profile.scaled(compute_scale)
        notes.append(f"compute scaled to {s.tflops:g} TFLOPS sustained: {profile.compute_s * 1e3:.1f} ms per step")

    compute_factor = None
    overlap: Any = True
    if shared_host:
        links, paths = measured_links(s.allreduce_json, log=log)
        notes.append("link: alpha and beta fitted per algorithm to " + ", ".join(paths))
        # one worker's step at each thread count the workers get, in alternating rounds (with the
        # first profile): how much slower a worker computes on its share of the cores
        samples: dict[int, list[float]] = {s.cores: [profile.compute_s]}
        threads = sorted({max(1, s.cores // n) for n in s.workers} | {s.cores}, reverse=True)
        for r in range(s.rounds):
            for t in threads:
                if r == 0 and t == s.cores:
                    continue  # measured above
                rec = runner(_profile_spec(s, t), 1, s.timeout)
                if rec.get("status") == "ok":
                    samples.setdefault(t, []).append(profile_from(rec).compute_s * compute_scale)
        per_threads = {t: statistics.median(v) for t, v in samples.items()}
        one = per_threads[s.cores]
        profile = profile.scaled(one / profile.compute_s)

        def compute_factor(n: int) -> float:
            t = max(1, s.cores // n)
            slower = per_threads.get(t, one * s.cores / t) / one
            return slower * max(1.0, n * t / s.cores)

        def overlap(n: int) -> bool:
            return n * max(1, s.cores // n) < s.cores  # a core left for the communication thread

        notes.append(f"host: {s.cores} cores shared by the workers (cores // N threads each); "
                     + ", ".join(f"{t} thread{'s' if t > 1 else ''}: {v * 1e3:.0f} ms/step"
                                 for t, v in sorted(per_threads.items())))
    else:
        if s.link not in LINKS:
            raise ValueError(f"unknown link {s.link!r}: choose one of {', '.join(LINKS)} or measured")
        links = {a: LINKS[s.link] for a in ALGORITHMS}

    predictions = {}
    for algorithm in s.algorithms:
        link: Link | dict[str, Link] = links if shared_host else LINKS[s.link]
        predictions[algorithm] = predict_scaling(profile, s.workers, algorithm, link, overlap=overlap,
                                                 compute_factor=compute_factor)
    result = ScalingResult(profile, record.get("params", 0), record.get("unit", "images/s"), links,
                           predictions, compute_scale=compute_scale, notes=notes, record=record)

    if s.validate:
        validate(result, s, runner, links if shared_host else LINKS[s.link], overlap, compute_factor, log)
    return result


def validate(result: ScalingResult, s: ScalingSettings, runner: Callable[..., dict[str, Any]],
             link: Link | dict[str, Link], overlap: Any, compute_factor: Any, log: Callable[[str], None]) -> None:
    """Measure N workers under MPI (`bench train` cells), in alternating rounds, and predict again
    from the one-worker step measured in those same rounds (the load of a shared machine moves)."""
    from tinyflow.bench.train import BenchSettings, Cell, _cell_from

    counts = sorted(set([1, *s.validate]))
    shared_host = s.link == "measured"
    # one worker on the thread count that each of N workers gets: measured with the others, in
    # the same rounds, so that the compute prediction sees the same machine as the measurements
    threads = sorted({max(1, s.cores // n) for n in counts} - {s.cores}) if shared_host else []
    plan = [(s.algorithms[0], 1, None), *(("threads", 1, t) for t in threads),
            *((a, n, None) for a in s.algorithms for n in counts if n > 1)]
    cells: dict[tuple[str, int], Cell] = {}
    for r in range(s.rounds):
        for algorithm, n, t in plan:
            key = (algorithm, t or n)
            cell = cells.setdefault(key, Cell("tinyflow", s.precision, n, s.batch))
            if cell.status != "ok":
                continue
            bench = BenchSettings(model=s.model, batch_sizes=[s.batch], workers=[n], precisions=[s.precision],
                                  device=s.device, steps=s.steps, warmup=s.warmup, runs=s.runs,
                                  allreduce=algorithm if algorithm != "threads" else "ring", bucket_mb=s.bucket_mb,
                                  timeout=s.timeout, overrides=s.overrides, image_size=s.image_size, threads=t)
            what = f"1 worker on {t} thread(s)" if t else f"{algorithm} at {n} worker{'s' if n > 1 else ''}"
            log(f"round {r + 1}/{s.rounds}: {what} ...")
            cell.merge(_cell_from(runner(bench.spec("tinyflow", s.precision, n, s.batch), n, s.timeout),
                                  ("tinyflow", s.precision, n, s.batch)))
    for (algorithm, n), cell in cells.items():
        if not cell.ok:
            result.notes.append(f"validation: {algorithm} at {n} worker(s): {cell.label()}: {cell.message[-500:]}")
    one = cells.get((s.algorithms[0], 1))
    if one is None or not one.ok:
        result.notes.append("validation: the one-worker run failed")
        return
    base = statistics.median(one.step_s)
    result.validated_base_s = base
    profile = result.profile.scaled(base / result.profile.compute_s)
    per_thread = {t: statistics.median(c.step_s) for (a, t), c in cells.items() if a == "threads" and c.ok}
    if shared_host and per_thread:
        result.notes.append("validation: one worker per step, " + ", ".join(
            f"{t} thread{'s' if t > 1 else ''}: {v * 1e3:.0f} ms" for t, v in sorted({**per_thread, s.cores: base}.items())))

        def compute_factor(n: int) -> float:  # noqa: F811 - measured with the validation runs
            t = max(1, s.cores // n)
            slower = per_thread.get(t, base) / base if t != s.cores else 1.0
            return slower * max(1.0, n * t / s.cores)
    for algorithm in s.algorithms:
        preds = {p.workers: p for p in predict_scaling(profile, counts, algorithm, link, overlap=overlap,
                                                       compute_factor=compute_factor)}
        for n in counts[1:]:
            cell = cells.get((algorithm, n))
            measured = n * base / statistics.median(cell.step_s) if cell is not None and cell.ok else None
            result.measured[(algorithm, n)] = measured
            result.checks.append(Check(algorithm, n, preds[n].speedup, measured, preds[n].exposed_s,
                                       cell.exposed_s if cell is not None and cell.ok else None,
                                       preds[n].step_s, statistics.median(cell.step_s) if cell and cell.ok else None))


@dataclass
class Check:
    """One validated point: predicted against measured speedup, exposed communication and step."""

    algorithm: str
    workers: int
    predicted: float
    measured: float | None
    predicted_exposed_s: float
    measured_exposed_s: float | None
    predicted_step_s: float
    measured_step_s: float | None


def format_result(r: ScalingResult, s: ScalingSettings) -> str:
    p = r.profile
    grad_mb = p.gradient_bytes / 1e6
    flops = p.flops / max(p.batch, 1)
    lines = [f"bench scaling {s.model}: batch {s.batch} per worker, {s.device}, {s.precision}",
             f"  one worker: step {p.compute_s * 1e3:.1f} ms (forward {p.forward_s * 1e3:.1f}, backward "
             f"{p.backward_s * 1e3:.1f}, update {p.update_s * 1e3:.1f}); {r.params / 1e6:.2f} M parameters = "
             f"{grad_mb:.1f} MB of gradients in {len(p.buckets)} bucket(s) of <= {s.bucket_mb:g} MB",
             f"  {flops / 1e9:.3f} GFLOP per {'token' if r.unit == 'tokens/s' else 'example'} (forward + backward), "
             f"{p.flops / 1e9:.1f} GFLOP per step: {p.gradient_bytes / max(p.flops, 1) * 1e3:.3f} MB of gradients to "
             f"all-reduce per GFLOP of work"]
    if s.link != "measured":
        lk = LINKS[s.link]
        lines.append(f"  link {s.link}: alpha {lk.alpha * 1e6:.1f} us, {lk.bandwidth / 1e9:.1f} GB/s per direction, "
                     f"host sum {1 / lk.host_gamma / 1e9:.0f} GB/s ({lk.note})")
    else:
        for a, lk in sorted(r.links.items()):
            lines.append(f"  fitted {a:6s}: alpha {lk.alpha * 1e6:8.1f} us, 1/beta {lk.bandwidth / 1e9:6.2f} GB/s")
    lines += [f"  {note}" for note in r.notes]
    lines.append("")
    header = ["workers"]
    for a in s.algorithms:
        header += [f"{a} speedup", f"{a} efficiency", f"{a} exposed (ms)"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---:" for _ in header) + "|")
    for i, n in enumerate(s.workers):
        row = [str(n)]
        for a in s.algorithms:
            pr = r.predictions[a][i]
            row += [f"{pr.speedup:.2f}x", f"{pr.efficiency:.0%}", f"{pr.exposed_s * 1e3:.1f}"]
        lines.append("| " + " | ".join(row) + " |")
    if r.checks:
        lines += ["", f"prediction against measured MPI runs on this host ({s.rounds} alternating rounds; the "
                  f"prediction re-based on the one-worker step measured in them, "
                  f"{(r.validated_base_s or 0) * 1e3:.0f} ms):", "",
                  "| workers | algorithm | predicted speedup | measured | off by | predicted step (ms) | measured | "
                  "predicted exposed comm (ms) | measured |",
                  "|---:|:---|---:|---:|---:|---:|---:|---:|---:|"]
        errors = []
        for c in r.checks:
            if c.measured is None:
                lines.append(f"| {c.workers} | {c.algorithm} | {c.predicted:.2f}x | failed | | | | | |")
                continue
            err = c.predicted / c.measured - 1
            errors.append(abs(err))
            exposed = "" if c.measured_exposed_s is None else f"{c.measured_exposed_s * 1e3:.0f}"
            lines.append(f"| {c.workers} | {c.algorithm} | {c.predicted:.2f}x | {c.measured:.2f}x | {err:+.0%} | "
                         f"{c.predicted_step_s * 1e3:.0f} | {c.measured_step_s * 1e3:.0f} | "
                         f"{c.predicted_exposed_s * 1e3:.0f} | {exposed} |")
        if errors:
            lines.append("")
            lines.append(f"speedup prediction off by {statistics.mean(errors):.0%} on average, "
                         f"{max(errors):.0%} at worst")
    return "\n".join(lines) + "\n"


def _predict_at(r: ScalingResult, s: ScalingSettings, algorithm: str, n: int) -> list[StepPrediction]:
    return [pr for pr in r.predictions.get(algorithm, []) if pr.workers == n]


def plot_result(r: ScalingResult, s: ScalingSettings, path: str) -> None:
    """Predicted speedup against workers, one line per algorithm; measured points as markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(s.workers, s.workers, color="grey", linestyle=":", label="linear")
    for a in s.algorithms:
        line, = ax.plot(s.workers, [pr.speedup for pr in r.predictions[a]], marker="o", label=f"{a} (predicted)")
        pts = sorted((n, v) for (alg, n), v in r.measured.items() if alg == a and v)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="x", linestyle="none", markersize=10,
                    color=line.get_color(), label=f"{a} (measured)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(s.workers)
    ax.set_xticklabels([str(n) for n in s.workers])
    ax.set_xlabel("workers")
    ax.set_ylabel("speedup over one worker")
    ax.set_title(f"{s.model}, batch {s.batch}/worker, link {s.link}" + (f", {s.tflops:g} TFLOPS" if s.tflops else ""))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def to_json(r: ScalingResult, s: ScalingSettings) -> str:
    from dataclasses import asdict

    return json.dumps({
        "settings": {k: v for k, v in asdict(s).items() if k != "profile_record"},
        "profile": asdict(r.profile), "params": r.params, "unit": r.unit, "profile_record": r.record,
        "links": {a: asdict(lk) for a, lk in r.links.items()},
        "predictions": {a: [asdict(p) for p in ps] for a, ps in r.predictions.items()},
        "measured": [{"algorithm": a, "workers": n, "speedup": v} for (a, n), v in r.measured.items()],
        "checks": [asdict(c) for c in r.checks], "validated_base_s": r.validated_base_s,
        "notes": r.notes,
    }, indent=1)
