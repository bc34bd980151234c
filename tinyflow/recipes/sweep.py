"""Experiment sweeps: separate `tinyflow train` runs side by side, one per device slot.

When data parallelism does not pay (a small model, a slow link), the better use of several
devices is several experiments at once. A sweep expands a grid of train options
(``lr=0.01,0.1 batch_size=32,64`` gives 4 runs), then keeps one run going per slot, a GPU or
a group of CPU cores, starting the next queued run as soon as a slot frees up:

- each run is an ordinary ``tinyflow train MODEL ... --checkpoint-dir OUT/RUN`` subprocess
  with its log in OUT/RUN/train.log, so it can be inspected or resumed by hand;
- a CPU slot owns ``cores // slots`` cores: the process is pinned to them (sched_setaffinity)
  and its BLAS/OpenMP thread count set to match, so runs do not fight over the cores;
- a run that fails is reported (exit status and the end of its log) and the others go on;
- the sweep is resumable: OUT/sweep.json records each run; started again with the same OUT,
  finished runs are kept as they are and unfinished ones continue from OUT/RUN/last.ckpt;
- a live table shows each run's status, epoch and best metric (read from OUT/RUN/metrics.jsonl),
  and at the end OUT/results.md and OUT/results.json rank the runs by the metric and
  OUT/curves.png shows every run's validation curve.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

LAST_CHECKPOINT = "last.ckpt"  # what `tinyflow train --resume` continues from
METRICS_FILE = "metrics.jsonl"
DONE_FILE = "sweep_done.json"
STATE_FILE = "sweep.json"
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


# ---- what to run ---------------------------------------------------------------------------------


def _value(text: str) -> Any:
    """'0.1' -> 0.1, '32' -> 32, 'true' -> True, anything else stays a string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()


def parse_grid(text: str) -> dict[str, list[Any]]:
    """``"lr=0.01,0.1 batch_size=32,64"`` -> {"lr": [0.01, 0.1], "batch_size": [32, 64]}.
    An option named twice, or a value given twice for one option, is an error (see ``check_grid``)."""
    grid: dict[str, list[Any]] = {}
    for part in text.split():
        key, sep, values = part.partition("=")
        key = key.strip().lstrip("-").replace("-", "_")
        if not sep or not key or not values:
            raise ValueError(f"bad --grid entry {part!r}: use OPTION=V1,V2,... e.g. lr=0.01,0.1")
        if key in grid:
            raise ValueError(f"--grid names {key} twice: give all its values in one entry, {key}=V1,V2,...")
        grid[key] = [_value(v) for v in values.split(",") if v.strip()]
    if not grid:
        raise ValueError("--grid is empty: give OPTION=V1,V2 ... e.g. 'lr=0.01,0.1 batch_size=32,64'")
    check_grid(grid)
    return grid


def check_grid(grid: dict[str, list[Any]]) -> None:
    """Refuse a grid with a repeated point: a value listed twice for one option (``lr=0.1,0.1``,
    or ``lr=0.1,1e-1``, the same number), or two points whose runs would share one folder
    (``run_name`` maps both to it). Two runs of one point would train in the same checkpoint folder
    at once, and the sweep would report one of them still running after it exited. Refused rather
    than merged: a repeated value is nearly always a typo for another one, and nothing has started."""
    for key, values in grid.items():
        if not values:
            raise ValueError(f"grid option {key} has no values: give {key}=V1,V2,...")
        seen: dict[tuple, Any] = {}
        for value in values:
            same = seen.get(_point_key(value))
            if same is not None:
                twice = f"{same} twice" if str(same) == str(value) else f"{same} and {value} (the same value)"
                raise ValueError(f"grid option {key} lists {twice}: each grid point must be run once; "
                                 "remove the repeat (or give the value you meant)")
            seen[_point_key(value)] = value
    names: dict[str, dict[str, Any]] = {}
    for params in expand(grid):
        name = run_name(params)
        if name in names:
            raise ValueError(f"grid points {names[name]} and {params} would both run in the folder {name!r}: "
                             "give values that differ in more than punctuation")
        names[name] = params


@dataclass
class SweepConfig:
    """What a CONFIG.toml holds: the model, fixed train options, the grid and the metric."""

    model: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    metric: str | None = None
    mode: str | None = None


def load_config(path: str | os.PathLike) -> SweepConfig:
    """Read a sweep file::

        model = "resnet20"
        metric = "val_top1"          # optional; mode = "max" | "min"
        [options]                    # passed to every run
        epochs = 2
        [grid]                       # one run per combination
        lr = [0.01, 0.1]
        batch_size = [32, 64]
    """
    import tomllib

    with open(path, "rb") as f:
        data = tomllib.load(f)
    unknown = sorted(set(data) - {"model", "options", "grid", "metric", "mode"})
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {unknown}; expected model, metric, mode, [options], [grid]")
    grid = {k.replace("-", "_"): (v if isinstance(v, list) else [v]) for k, v in data.get("grid", {}).items()}
    options = {k.replace("-", "_"): v for k, v in data.get("options", {}).items()}
    try:
        check_grid(grid)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return SweepConfig(data.get("model"), options, grid, data.get("metric"), data.get("mode"))


def _point_key(value: Any) -> tuple:
    """What makes two grid values the same option value: numbers by value (1 and 1.0), the rest as they are."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", float(value))
    return (type(value).__name__, str(value))


def expand(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, the first key varying slowest."""
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def option_args(options: dict[str, Any]) -> list[str]:
    """{"batch_size": 32, "quiet": True} -> ["--batch-size", "32", "--quiet"] (False: left out)."""
    argv: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False or value is None:
            continue
        else:
            argv += [flag, str(value)]
    return argv


def run_name(params: dict[str, Any]) -> str:
    """A folder-safe name: ``lr=0.01_batch_size=32``."""
    name = "_".join(f"{k}={v}" for k, v in params.items()) or "run"
    return re.sub(r"[^A-Za-z0-9_.=+-]", "-", name)


# ---- where to run: slots --------------------------------------------------------------------------


@dataclass
class Slot:
    """A device (``--device``) or a group of CPU cores, with the threads its run may use."""

    name: str
    device: str = "cpu"
    threads: int = 1
    cpus: list[int] | None = None  # pin the run to these cores (CPU slots)


def cpu_slots(count: int, cpus: Sequence[int] | None = None) -> list[Slot]:
    """``count`` slots over this process's cores, each with its own share (at least one core)."""
    if count < 1:
        raise ValueError(f"--slots must be >= 1, got {count}")
    if cpus is None:
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    cpus = list(cpus)
    per = max(1, len(cpus) // count)
    slots = []
    for i in range(count):
        mine = [cpus[(i * per + j) % len(cpus)] for j in range(per)]
        label = f"cpu{mine[0]}" if per == 1 else f"cpu{mine[0]}-{mine[-1]}"
        slots.append(Slot(label, "cpu", per, mine))
    return slots


def device_slots(devices: Sequence[str]) -> list[Slot]:
    """One slot per listed device (list a device twice for two runs on it)."""
    cores = os.cpu_count() or 1
    threads = max(1, cores // max(1, len(devices)))
    return [Slot(d, d, threads, None) for d in devices]


# ---- the runs -------------------------------------------------------------------------------------


@dataclass
class Run:
    name: str
    params: dict[str, Any]
    dir: str
    status: str = "queued"  # queued | running | done | failed
    slot: str | None = None
    returncode: int | None = None
    started: float | None = None
    ended: float | None = None
    resumed: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""

    @property
    def epoch(self) -> int:
        return int(self.history[-1].get("epoch", len(self.history))) if self.history else 0

    def best(self, metric: str, mode: str) -> tuple[float | None, int | None]:
        """(best value of ``metric``, its epoch) over the epochs so far."""
        points = [(r[metric], r.get("epoch", i + 1)) for i, r in enumerate(self.history)
                  if isinstance(r.get(metric), (int, float)) and math.isfinite(r[metric])]
        if not points:
            return None, None
        return (max if mode == "max" else min)(points, key=lambda p: p[0])

    def elapsed(self, now: float | None = None) -> float | None:
        if self.started is None:
            return None
        return (self.ended or now or time.time()) - self.started


class Handle(Protocol):
    def poll(self) -> int | None: ...
    def kill(self) -> None: ...


Launcher = Callable[[Run, Slot, bool], Handle]  # (run, slot, resume) -> a started process


def read_history(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The per-epoch records the train command wrote so far (metrics.jsonl), [] if none."""
    path = Path(run_dir) / METRICS_FILE
    try:
        text = path.read_text()
    except OSError:
        return []
    records = []
    for line in text.splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a line being written
    return records


def train_launcher(model: str, train_args: Sequence[str], python: str = sys.executable) -> Launcher:
    """Start ``tinyflow train MODEL TRAIN_ARGS RUN_OPTIONS --checkpoint-dir RUN`` for a run in a slot."""

    def launch(run: Run, slot: Slot, resume: bool) -> Handle:
        os.makedirs(run.dir, exist_ok=True)
        argv = [python, "-m", "tinyflow.cli", "train", model, *train_args, *option_args(run.params),
                "--checkpoint-dir", run.dir, "--quiet"]
        if slot.device != "cpu" or "--device" not in train_args:
            argv += ["--device", slot.device]
        if resume:
            argv.append("--resume")
        env = dict(os.environ)
        for var in THREAD_VARS:
            env[var] = str(slot.threads)
        env.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
        root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        cpus = slot.cpus

        def pin() -> None:  # in the child, before exec
            if cpus and hasattr(os, "sched_setaffinity"):
                os.sched_setaffinity(0, cpus)

        log = open(os.path.join(run.dir, "train.log"), "a")  # noqa: SIM115 - the child owns it
        log.write(f"$ {' '.join(argv)}\n")
        log.flush()
        try:
            return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=pin,
                                    start_new_session=True)
        finally:
            log.close()

    return launch


class Sweep:
    """Run ``runs`` on ``slots``: one run per slot at a time, the rest queued; resumable."""

    def __init__(self, runs: list[Run], slots: list[Slot], launcher: Launcher, out: str | os.PathLike,
                 metric: str = "val_top1", mode: str = "max", poll_seconds: float = 1.0,
                 on_change: Callable[[Sweep], None] | None = None, epochs: int | None = None):
        if not slots:
            raise ValueError("a sweep needs at least one slot")
        for key in ("name", "dir"):
            values = [getattr(r, key) for r in runs]
            repeated = sorted({v for v in values if values.count(v) > 1})
            if repeated:  # two processes in one checkpoint folder, one of them reported as running for good
                raise ValueError(f"a sweep runs each grid point once: the runs' {key}s {repeated} repeat")
        self.runs, self.slots, self.launcher = runs, slots, launcher
        self.out = Path(out)
        self.metric, self.mode = metric, mode
        self.poll_seconds = poll_seconds
        self.on_change = on_change
        self.epochs = epochs
        self.handles: dict[str, tuple[Handle, Slot]] = {}

    # -- state on disk, so that a second `tinyflow sweep` with the same OUT resumes --
    def restore(self) -> None:
        """Mark runs finished in an earlier sweep as done; unfinished ones will resume."""
        for run in self.runs:
            done = Path(run.dir) / DONE_FILE
            if done.exists():
                info = json.loads(done.read_text())
                run.status, run.returncode = "done", info.get("returncode", 0)
                run.started, run.ended = info.get("started"), info.get("ended")
            run.history = read_history(run.dir)

    def save(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        state = {"metric": self.metric, "mode": self.mode, "runs": [asdict(r) for r in self.runs]}
        tmp = self.out / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, self.out / STATE_FILE)

    # -- the scheduling loop --
    def run(self) -> list[Run]:
        """Until every run is done or failed: fill free slots, poll, refresh the table."""
        self.restore()
        self.save()
        try:
            while True:
                changed = self._start_queued()
                changed |= self._poll()
                if changed and self.on_change is not None:
                    self.on_change(self)
                if changed:
                    self.save()
                if not self.handles and not any(r.status == "queued" for r in self.runs):
                    break
                time.sleep(self.poll_seconds)
        except KeyboardInterrupt:
            for handle, _ in self.handles.values():
                handle.kill()
            raise
        finally:
            self.save()
        return self.runs

    def _free_slots(self) -> list[Slot]:
        busy = {slot.name for _, slot in self.handles.values()}
        return [s for s in self.slots if s.name not in busy]

    def _start_queued(self) -> bool:
        changed = False
        for slot in self._free_slots():
            run = next((r for r in self.runs if r.status == "queued"), None)
            if run is None:
                break
            resume = (Path(run.dir) / LAST_CHECKPOINT).exists()
            run.status, run.slot, run.started, run.resumed = "running", slot.name, time.time(), resume
            run.ended, run.returncode, run.error = None, None, ""
            try:
                self.handles[run.name] = (self.launcher(run, slot, resume), slot)
            except OSError as exc:
                run.status, run.error, run.ended = "failed", f"could not start: {exc}", time.time()
            changed = True
        return changed

    def _poll(self) -> bool:
        changed = False
        for name, (handle, _slot) in list(self.handles.items()):
            run = next(r for r in self.runs if r.name == name)
            history = read_history(run.dir)
            if len(history) != len(run.history):
                run.history, changed = history, True
            code = handle.poll()
            if code is None:
                continue
            del self.handles[name]
            run.returncode, run.ended, changed = code, time.time(), True
            run.history = read_history(run.dir)
            if code == 0:
                run.status = "done"
                (Path(run.dir) / DONE_FILE).write_text(json.dumps(
                    {"returncode": 0, "started": run.started, "ended": run.ended}))
            else:
                run.status = "failed"
                run.error = f"exit status {code}: " + _log_tail(run.dir)
        return changed

    # -- reports --
    def ranked(self) -> list[Run]:
        """Finished runs with a metric first, best first; then the rest (failed last)."""
        def key(r: Run) -> tuple:
            best, _ = r.best(self.metric, self.mode)
            missing = best is None
            value = 0.0 if missing else (-best if self.mode == "max" else best)
            return (r.status == "failed", missing, value, r.name)

        return sorted(self.runs, key=key)


def _log_tail(run_dir: str, lines: int = 5) -> str:
    try:
        text = (Path(run_dir) / "train.log").read_text(errors="replace")
    except OSError:
        return "(no log)"
    tail = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(tail)[-800:]


def _fmt(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.4f}" if abs(value) < 1000 else f"{value:.1f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


def live_table(sweep: Sweep) -> str:
    """The runs now: status, slot, epoch, best metric so far, time."""
    total = f"/{sweep.epochs}" if sweep.epochs else ""
    lines = [f"| run | status | slot | epoch | best {sweep.metric} | time |", "|:---|:---|:---|---:|---:|---:|"]
    now = time.time()
    for r in sweep.runs:
        best, _ = r.best(sweep.metric, sweep.mode)
        status = r.status + (" (resumed)" if r.resumed and r.status == "running" else "")
        lines.append(f"| {r.name} | {status} | {r.slot or ''} | {r.epoch}{total} | {_fmt(best)} | "
                     f"{_duration(r.elapsed(now))} |")
    counts = {s: sum(r.status == s for r in sweep.runs) for s in ("running", "queued", "done", "failed")}
    lines.append(", ".join(f"{v} {k}" for k, v in counts.items()))
    return "\n".join(lines)


def results_table(sweep: Sweep) -> str:
    """Markdown: the runs ranked by their best metric, with their options."""
    keys = list(dict.fromkeys(k for r in sweep.runs for k in r.params))
    head = ["rank", "run", *keys, "status", "epochs", f"best {sweep.metric} ({sweep.mode})", "at epoch",
            "final train_loss", "time"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" if i == 0 else ":---" for i in range(len(head))) + "|"]
    for i, r in enumerate(sweep.ranked(), start=1):
        best, at = r.best(sweep.metric, sweep.mode)
        loss = r.history[-1].get("train_loss") if r.history else None
        cells = [str(i), r.name, *(str(r.params.get(k, "")) for k in keys), r.status, str(r.epoch), _fmt(best),
                 "" if at is None else str(at), _fmt(loss), _duration(r.elapsed())]
        lines.append("| " + " | ".join(cells) + " |")
    failed = [r for r in sweep.runs if r.status == "failed"]
    for r in failed:
        lines.append(f"\n- {r.name} failed: {r.error}")
    return "\n".join(lines) + "\n"


def results_json(sweep: Sweep) -> str:
    rows = []
    for i, r in enumerate(sweep.ranked(), start=1):
        best, at = r.best(sweep.metric, sweep.mode)
        rows.append({"rank": i, **asdict(r), "best": best, "best_epoch": at, "elapsed_s": r.elapsed()})
    return json.dumps({"metric": sweep.metric, "mode": sweep.mode, "runs": rows}, indent=1)


def plot_curves(sweep: Sweep, path: str | os.PathLike) -> bool:
    """One PNG: every run's ``metric`` per epoch (its validation curve). False if nothing to plot."""
    curves = []
    for r in sweep.runs:
        pts = [(rec.get("epoch", i + 1), rec[sweep.metric]) for i, rec in enumerate(r.history)
               if isinstance(rec.get(sweep.metric), (int, float))]
        if pts:
            curves.append((r.name, pts))
    if not curves:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name, pts in curves:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(sweep.metric)
    ax.set_title(f"sweep: {sweep.metric} per run ({sweep.mode} is better)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def default_metric(model: str) -> tuple[str, str]:
    """val_top1 (higher is better) for classifiers, val_ppl (lower) for the language model."""
    return ("val_ppl", "min") if model.startswith("lstm") else ("val_top1", "max")


def metric_mode(metric: str) -> str:
    return "min" if any(s in metric for s in ("loss", "ppl", "error", "time")) else "max"
