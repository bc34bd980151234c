"""CPU training throughput, tinyflow against PyTorch, each framework alone in its own process.

Workloads: four zoo models (fcn-r batch 64, alexnet-64 batch 64, alexnet-224 batch 16, lstm-lm
2x256 batch 32 seq 32 with SGD and clipping at 0.25) and four real PyTorch programs written once
in bench/programs/ and run by tinyflow unchanged (mnist-cnn, word-lm, lstm-timeseries, char-rnn).

Each (workload, framework, round) runs in a fresh interpreter (``--worker SPEC``) that pins the
BLAS/OpenMP threads (OMP/OPENBLAS/MKL_NUM_THREADS, torch.set_num_threads) before NumPy or PyTorch
loads, builds the model and one fixed random batch, runs ``--warmup`` untimed steps, times
``--steps`` single training steps one by one (wall clock and process CPU time) and reports the
median step, its peak resident memory (ru_maxrss) and one JSON line. A worker imports only its
own framework (a PyTorch worker never loads tinyflow), so its time and memory are its own.
The two frameworks alternate within each of ``--rounds`` rounds, the first one changing from
round to round, so that load changes on a shared machine hit both. Per workload the report gives
each framework's median throughput over the rounds with the spread (slowest..fastest round), the
ratio tinyflow / PyTorch as the median of the per-round ratios (by wall clock, and by CPU time),
and the peak RSS of each with their ratio.

Zoo workloads: tinyflow builds ``tinyflow.models.get_model(name)``, PyTorch its twin from
tinyflow/bench/torch_twins.py, each with its own initial weights (the speed does not depend on
them; tests/test_bench_cpu.py checks that the real programs compute the same loss from the same
weights). The zoo steps are cross-entropy and SGD (momentum 0.9 for fcn-r and the AlexNets;
lr 1.0, truncated BPTT with the state carried and detached, clip_grad_norm_ 0.25 for lstm-lm).

OpenBLAS (NumPy's BLAS) keeps its worker threads spinning for a while after each GEMM; on a
machine with few cores they then steal the cores from tinyflow's own element-wise threads (im2col,
Winograd transforms and pooling ran up to 2x slower right after a GEMM). Every worker therefore
gets ``OPENBLAS_THREAD_TIMEOUT=4`` (spin for 2^4 cycles, then sleep; PyTorch's MKL and OpenMP
ignore it), the setting tinyflow itself applies when it is imported before NumPy. Pass
``--openblas-thread-timeout 0`` to leave the environment as it is.

``--same-process`` measures the old way, both frameworks in one process with their steps
alternating: their thread pools then compete for the cores, and peak RSS is the sum of both;
every line of that report says so.

    python bench/bench_cpu.py                               # everything: 3 rounds x 7 steps, 2 threads
    python bench/bench_cpu.py --short --workloads mnist-cnn # a smoke check (1 round, 2 steps)
    python bench/bench_cpu.py --workloads fcn-r,lstm-lm --json out.json --markdown out.md
    python bench/bench_cpu.py --workloads fcn-r --profile   # cProfile of tinyflow's step
    python bench/bench_cpu.py --workloads lstm-lm --gemms   # tinyflow's GEMMs by shape vs the whole step
"""
from __future__ import annotations

# Nothing here imports NumPy or PyTorch at module level: a worker sizes their thread pools first.
import argparse
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RESULT_MARK = "BENCH_CPU_RESULT "
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
FRAMEWORKS = ("tinyflow", "torch")
NAMES = {"tinyflow": "tinyflow", "torch": "PyTorch"}
SAME_PROCESS_LABEL = "SAME PROCESS (skewed: the two libraries' thread pools compete)"

ZOO = {  # workload -> (zoo model, batch)
    "fcn-r": ("fcn-r", 64),
    "alexnet-64": ("alexnet", 64),
    "alexnet-224": ("alexnet-224", 16),
    "lstm-lm": ("lstm-lm", 32),
}
PROGRAMS = {"mnist-cnn": "mnist_cnn", "word-lm": "word_lm", "lstm-timeseries": "lstm_timeseries",
            "char-rnn": "char_rnn"}  # workload -> module in bench/programs/
WORKLOADS = [*ZOO, *PROGRAMS]
LSTM_LM_LR, LSTM_LM_CLIP = 1.0, 0.25


# ==================================================================================== the worker
def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def import_framework(framework: str, threads: int) -> Any:
    """The framework module, its thread pools sized to ``threads``."""
    if framework == "torch":
        import torch

        torch.set_num_threads(threads)
        return torch
    import tinyflow

    return tinyflow


def _torch_twins() -> Any:
    """tinyflow/bench/torch_twins.py, loaded from its file: importing it as a module of the
    tinyflow package would load tinyflow into the PyTorch worker (its memory, its threads)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_torch_twins", ROOT / "tinyflow/bench/torch_twins.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def zoo_program(fw: Any, framework: str, workload: str, config: dict[str, Any], batch_seed: int = 0) -> Any:
    """A zoo workload as a Program: the zoo model (tinyflow) or its twin (PyTorch), a fixed batch."""
    import types

    import numpy as np
    from programs import Program

    name, batch = ZOO[workload]
    cfg = types.SimpleNamespace(**config)
    if framework == "tinyflow":
        from tinyflow.models import get_model

        model = get_model(name)
    else:
        twins = _torch_twins()
        builder = {"fcn-r": twins.torch_fcn, "lstm-lm": twins.torch_lstm_lm}.get(name, twins.torch_alexnet)
        model = builder(cfg)
    model.train()
    F = fw.nn.functional
    rng = np.random.default_rng(batch_seed)
    if workload == "lstm-lm":
        steps = int(cfg.seq_len)
        stream = rng.integers(0, cfg.vocab_size, (steps + 1, batch)).astype(np.int64)  # (T+1, B)
        x, y = fw.tensor(stream[:-1]), fw.tensor(stream[1:].reshape(-1))  # (T, B), (T*B,)
        opt = fw.optim.SGD(model.parameters(), lr=LSTM_LM_LR)
        state: dict[str, Any] = {"h": None}

        def loss() -> Any:
            logits, state["next"] = model(x, state["h"])  # (T, B, V)
            return F.cross_entropy(logits.reshape(-1, cfg.vocab_size), y)

        def step() -> Any:
            opt.zero_grad()
            out = loss()
            out.backward()
            fw.nn.utils.clip_grad_norm_(model.parameters(), LSTM_LM_CLIP)
            opt.step()
            state["h"] = tuple(s.detach() for s in state.pop("next"))
            return out

        sizes = (f"vocab {cfg.vocab_size}, emb {cfg.embedding_dim}, LSTM {cfg.num_layers}x{cfg.hidden_size}, "
                 f"batch {batch} x seq {steps}, SGD lr {LSTM_LM_LR:g}, clip {LSTM_LM_CLIP}")
        return Program(model, opt, (x, y), loss, step, batch * steps, "tokens/s", sizes)
    if workload == "fcn-r":
        shape, classes = (int(cfg.sizes[0]),), int(cfg.sizes[-1])
        sizes = f"{'-'.join(map(str, cfg.sizes))} {cfg.activation}, batch {batch}, SGD momentum 0.9"
    else:
        shape, classes = (int(cfg.in_channels), int(cfg.image_size), int(cfg.image_size)), int(cfg.num_classes)
        sizes = f"batch {batch} x {'x'.join(map(str, shape))}, {classes} classes, SGD momentum 0.9"
    x = fw.tensor(rng.standard_normal((batch, *shape)).astype(np.float32))  # (N, ...)
    y = fw.tensor(rng.integers(0, classes, batch).astype(np.int64))
    opt = fw.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def loss() -> Any:
        return F.cross_entropy(model(x), y)

    def step() -> Any:
        opt.zero_grad()
        out = loss()
        out.backward()
        opt.step()
        return out

    unit = "examples/s" if workload == "fcn-r" else "images/s"
    return Program(model, opt, (x, y), loss, step, batch, unit, sizes)


def build_program(fw: Any, framework: str, spec: dict[str, Any]) -> Any:
    if spec["workload"] in PROGRAMS:
        import importlib

        return importlib.import_module(f"programs.{PROGRAMS[spec['workload']]}").build(fw)
    return zoo_program(fw, framework, spec["workload"], spec.get("config") or {})


def gemm_floor(framework: str, sizes: list[int], batch: int, steps: int) -> float:
    """Median seconds of just the FCN's GEMMs (forward, weight grads, input grads) into preallocated
    outputs with the framework's BLAS (NumPy's for tinyflow): the floor under its training step."""
    import numpy as np

    rng = np.random.default_rng(1)
    if framework == "torch":
        import torch

        arr, mm = torch.from_numpy, torch.matmul
    else:
        arr, mm = (lambda a: a), np.matmul
    ws = [arr(rng.random((o, i), dtype=np.float32)) for i, o in zip(sizes[:-1], sizes[1:])]  # (out, in)
    acts = [arr(rng.random((batch, n), dtype=np.float32)) for n in sizes]  # (B, n) each
    grads = [arr(np.empty((o, i), np.float32)) for i, o in zip(sizes[:-1], sizes[1:])]

    def gemms() -> None:
        for k, w in enumerate(ws):  # forward: (B, in) @ (in, out)
            mm(acts[k], w.T, out=acts[k + 1])
        for k in reversed(range(len(ws))):  # backward: dW = g.T @ x, dx = g @ W
            mm(acts[k + 1].T, acts[k], out=grads[k])
            if k > 0:
                mm(acts[k + 1], ws[k], out=acts[k])

    gemms()
    times = []
    for _ in range(max(steps, 3)):
        start = time.perf_counter()
        gemms()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _params(model: Any) -> int:
    total = 0
    for p in model.parameters():
        n = 1
        for d in p.shape:
            n *= int(d)
        total += n
    return total


def _time_steps(programs: dict[str, Any], steps: int) -> dict[str, tuple[list[float], list[float], float]]:
    """Time ``steps`` single steps of each program (interleaved when there are several):
    per framework (wall seconds per step, CPU seconds per step, last loss)."""
    out: dict[str, tuple[list[float], list[float], float]] = {fw: ([], [], float("nan")) for fw in programs}
    order = list(programs)
    for i in range(steps):
        for fw in (order if i % 2 == 0 else order[::-1]):
            wall, cpu = time.perf_counter(), time.process_time()
            loss = float(programs[fw].step().item())
            step_s, cpu_s, _ = out[fw]
            step_s.append(time.perf_counter() - wall)
            cpu_s.append(time.process_time() - cpu)
            out[fw] = (step_s, cpu_s, loss)
    return out


def _profile(program: Any, steps: int) -> str:
    """cProfile of ``steps`` training steps: the top entries by own time and by cumulative time."""
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        program.step().item()
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    text.write(f"== cProfile of {steps} tinyflow training steps, sorted by own time ==\n")
    stats.sort_stats("tottime").print_stats(25)
    text.write("== sorted by cumulative time ==\n")
    stats.sort_stats("cumulative").print_stats(30)
    return text.getvalue()


def _gemm_breakdown(program: Any, steps: int) -> str:
    """Where tinyflow's step goes: every ``numpy.matmul`` (tinyflow's GEMMs all go through it)
    timed and grouped by operand shapes and layouts, against the whole step's wall time.

    The GEMMs run in NumPy's BLAS at a rate no Python code can change; what is left of the step
    (element-wise kernels, autograd, the optimizer) is what tinyflow's own code costs.
    """
    import collections

    import numpy as np

    def layout(a: Any) -> str:
        return "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else "strided"

    calls: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0, 0.0])  # seconds, calls, flop
    matmul = np.matmul

    def timed_matmul(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        result = matmul(a, b, *args, **kwargs)
        entry = calls[f"{tuple(a.shape)} {layout(a)} @ {tuple(b.shape)} {layout(b)}"]
        entry[0] += time.perf_counter() - start
        entry[1] += 1
        entry[2] += 2.0 * a.shape[-1] * result.size
        return result

    walls = []
    np.matmul = timed_matmul
    try:
        for _ in range(steps):
            start = time.perf_counter()
            program.step().item()
            walls.append(time.perf_counter() - start)
    finally:
        np.matmul = matmul
    step = statistics.median(walls)
    gemm_s = sum(e[0] for e in calls.values()) / steps
    flop = sum(e[2] for e in calls.values()) / steps
    lines = [f"step {step * 1e3:.1f} ms (median of {steps}); GEMMs {gemm_s * 1e3:.1f} ms a step "
             f"({flop / 1e9:.2f} GFLOP at {flop / gemm_s / 1e9:.1f} GFLOP/s); the rest {(step - gemm_s) * 1e3:.1f} ms",
             f"{'GEMM (shapes, layouts)':56s} {'ms/step':>8s} {'calls':>6s} {'GFLOP/s':>8s}"]
    for name, (sec, n, fl) in sorted(calls.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"{name:56s} {sec / steps * 1e3:8.2f} {n // steps:6d} {fl / sec / 1e9:8.1f}")
    return "\n".join(lines)


def measure(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Run one cell in this process: one record per framework in ``spec["frameworks"]``."""
    threads = int(spec["threads"])
    frameworks = spec["frameworks"]
    modules = {fw: import_framework(fw, threads) for fw in frameworks}  # tinyflow before NumPy
    import numpy as np

    programs = {fw: build_program(modules[fw], fw, spec) for fw in frameworks}
    for _ in range(int(spec["warmup"])):
        for fw in frameworks:
            programs[fw].step().item()
    if spec.get("profile"):
        report = _gemm_breakdown if spec.get("gemms") else _profile
        return [{"status": "ok", "workload": spec["workload"], "framework": frameworks[0],
                 "profile": report(programs[frameworks[0]], int(spec["profile"]))}]
    timed = _time_steps(programs, int(spec["steps"]))
    rss = peak_rss_mb()  # before the GEMM floor allocates its own buffers
    records = []
    for fw in frameworks:
        p, (step_s, cpu_s, loss) = programs[fw], timed[fw]
        record = {
            "status": "ok", "workload": spec["workload"], "framework": fw, "round": spec.get("round", 0),
            "same_process": len(frameworks) > 1, "threads": threads, "pid": os.getpid(),
            "items_per_step": p.items_per_step, "unit": p.unit, "sizes": p.sizes, "params": _params(p.model),
            "warmup": int(spec["warmup"]), "steps": int(spec["steps"]),
            "step_s": step_s, "cpu_s": cpu_s,
            "median_step_s": statistics.median(step_s), "median_cpu_s": statistics.median(cpu_s),
            "items_per_s": p.items_per_step / statistics.median(step_s),
            "last_loss": loss, "peak_rss_mb": rss,
            "loaded": sorted(m for m in ("tinyflow", "torch") if m in sys.modules),
            "env": {v: os.environ.get(v) for v in (*THREAD_VARS, "OPENBLAS_THREAD_TIMEOUT")},
            "numpy": np.__version__, "version": getattr(modules[fw], "__version__", "?"),
        }
        if spec.get("gemm_floor") and spec["workload"] == "fcn-r":
            record["gemm_floor_step_s"] = gemm_floor(fw, [int(s) for s in spec["config"]["sizes"]],
                                                     ZOO["fcn-r"][1], int(spec["steps"]))
        records.append(record)
    return records


def worker_main(spec_json: str) -> int:
    """Entry of ``--worker SPEC``: pin the threads, measure, print one JSON line per framework."""
    spec = json.loads(spec_json)
    for var in THREAD_VARS:  # thread pools are sized when the libraries load: before any import
        os.environ[var] = str(spec["threads"])
    for path in (str(BENCH), str(ROOT)):
        if path not in sys.path:
            sys.path.insert(0, path)
    try:
        records = measure(spec)
    except MemoryError as exc:
        records = [{"status": "oom", "message": f"MemoryError: {exc}"[:500]}]
    except Exception as exc:  # noqa: BLE001 - reported in the table, the other cells go on
        import traceback

        records = [{"status": "error", "message": f"{type(exc).__name__}: {exc}"[:500],
                    "traceback": traceback.format_exc()[-3000:]}]
    for record in records:
        print(RESULT_MARK + json.dumps(record), flush=True)
    return 0 if all(r["status"] == "ok" for r in records) else 3


# ==================================================================================== the driver
def worker_env(threads: int, openblas_thread_timeout: int) -> dict[str, str]:
    env = dict(os.environ)
    for var in THREAD_VARS:
        env[var] = str(threads)
    if openblas_thread_timeout > 0:
        env["OPENBLAS_THREAD_TIMEOUT"] = str(openblas_thread_timeout)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def run_worker(spec: dict[str, Any], env: dict[str, str], timeout: float) -> list[dict[str, Any]]:
    """One cell in a fresh interpreter; its records (a failure is a record with its status)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.communicate()
        return [{"status": "timeout", "message": f"no result within {timeout:.0f} s"}]
    records = [json.loads(line[len(RESULT_MARK):]) for line in out.splitlines() if line.startswith(RESULT_MARK)]
    if records:
        return records
    if proc.returncode in (-signal.SIGKILL, 137) or "Killed" in err[-300:]:
        return [{"status": "oom", "message": "killed (the kernel's out-of-memory killer?)"}]
    return [{"status": "error", "message": f"exit status {proc.returncode}: {(out + err).strip()[-1500:]}"}]


# ---- the arithmetic of the report (records in, numbers out) ------------------------------------------
def ok(record: dict[str, Any] | None) -> bool:
    return record is not None and record.get("status") == "ok" and bool(record.get("step_s"))


def rate(record: dict[str, Any], clock: str = "wall") -> float:
    """Items per second of one process: items per step over its median step (wall or CPU time)."""
    seconds = statistics.median(record["step_s" if clock == "wall" else "cpu_s"])
    return record["items_per_step"] / seconds


def summarize(rounds: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per framework: median throughput over its rounds (processes), spread (slowest, fastest
    round), CPU-time throughput, peak RSS (the largest of its rounds); then tinyflow / PyTorch:
    the median over rounds of the ratio within each round (both processes of a round saw about
    the same machine) by wall clock and by CPU time, and the ratio of the peak RSS."""
    out: dict[str, Any] = {}
    for fw in FRAMEWORKS:
        good = [r for r in rounds.get(fw, []) if ok(r)]
        failed = [r for r in rounds.get(fw, []) if not ok(r)]
        if not good:
            status = failed[0].get("status", "error") if failed else "missing"
            out[fw] = {"status": status, "message": failed[0].get("message", "") if failed else ""}
            continue
        rates = [rate(r) for r in good]
        out[fw] = {"status": "ok", "rounds": len(good), "failed_rounds": len(failed),
                   "items_per_s": statistics.median(rates), "spread": [min(rates), max(rates)],
                   "round_items_per_s": rates,
                   "cpu_items_per_s": statistics.median(rate(r, "cpu") for r in good),
                   "cpu_s_per_step": statistics.median(r["median_cpu_s"] for r in good),
                   "peak_rss_mb": max(r["peak_rss_mb"] for r in good),
                   "unit": good[0]["unit"], "items_per_step": good[0]["items_per_step"]}
        floors = [r["gemm_floor_step_s"] for r in good if r.get("gemm_floor_step_s")]
        if floors:
            out[fw]["gemm_floor_items_per_s"] = good[0]["items_per_step"] / statistics.median(floors)
    pairs = [(a, b) for a, b in zip(rounds.get("tinyflow", []), rounds.get("torch", [])) if ok(a) and ok(b)]
    if pairs:
        out["round_ratios"] = [rate(a) / rate(b) for a, b in pairs]
        out["ratio"] = statistics.median(out["round_ratios"])
        out["cpu_ratio"] = statistics.median(rate(a, "cpu") / rate(b, "cpu") for a, b in pairs)
    if out["tinyflow"]["status"] == "ok" and out["torch"]["status"] == "ok":
        out["rss_ratio"] = out["tinyflow"]["peak_rss_mb"] / out["torch"]["peak_rss_mb"]
    return out


# ---- what is printed ---------------------------------------------------------------------------------
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for dist in ("numpy", "torch"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    init = (ROOT / "tinyflow/__init__.py").read_text()
    out["tinyflow"] = next((line.split("=")[1].strip().strip("\"'") for line in init.splitlines()
                            if line.startswith("__version__")), "?")
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit = ""
    out["tinyflow"] += f" ({commit})" if commit else ""
    return out


def header(args: argparse.Namespace, meta: dict[str, Any]) -> list[str]:
    v = meta["versions"]
    mode = "both frameworks in one process, steps alternating" if args.same_process \
        else "each framework alone in its own process"
    lines = [
        f"CPU training throughput, tinyflow / PyTorch: {mode}",
        f"date {meta['date']}; command: {meta['command']}",
        f"machine: {meta['cpu']}, {meta['cores']} cores; load average (1/5/15 min) at start {meta['load_start']}",
        f"numpy {v['numpy']}, torch {v['torch']}, tinyflow {v['tinyflow']}, Python {v['python']}",
        f"{args.threads} thread(s) each (OMP/OPENBLAS/MKL_NUM_THREADS, torch.set_num_threads); "
        f"OPENBLAS_THREAD_TIMEOUT={meta['openblas_thread_timeout']}",
        f"{args.rounds} round(s), frameworks alternating (the first one changes each round); per process "
        f"{args.warmup} warmup + {args.steps} timed single steps, median step",
    ]
    if args.same_process:
        lines = [f"{SAME_PROCESS_LABEL}: " + line for line in lines]
    return lines


def _num(x: float) -> str:
    return f"{x:.1f}" if x < 1000 else f"{x:.0f}"


def workload_lines(name: str, summary: dict[str, Any], sizes: str, args: argparse.Namespace,
                   cpu: str) -> list[str]:
    """The report of one workload: each framework, then the ratios."""
    tag = f"{SAME_PROCESS_LABEL}: " if args.same_process else ""
    unit = next((summary[fw]["unit"] for fw in FRAMEWORKS if summary[fw]["status"] == "ok"), "items/s")
    lines = [f"{tag}== {name}: {sizes}; {cpu}, {args.threads} thread(s); {unit} =="]
    for fw in FRAMEWORKS:
        s = summary[fw]
        if s["status"] != "ok":
            lines.append(f"{tag}  {NAMES[fw]:8s}  {s['status'].upper()}: {s['message'][:300]}")
            continue
        lo, hi = s["spread"]
        failed = f", {s['failed_rounds']} round(s) failed" if s["failed_rounds"] else ""
        both = " (both frameworks)" if args.same_process else ""
        lines.append(f"{tag}  {NAMES[fw]:8s}  {_num(s['items_per_s']):>9} {unit} (rounds {_num(lo)}..{_num(hi)}){failed}; "
                     f"CPU {s['cpu_s_per_step'] * 1e3:.0f} ms/step; peak RSS {s['peak_rss_mb']:.0f} MB{both}")
    if "ratio" in summary:
        rounds = ", ".join(f"{r:.2f}" for r in summary["round_ratios"])
        rss = f"; peak RSS {summary['rss_ratio']:.2f}x" if "rss_ratio" in summary and not args.same_process else ""
        lines.append(f"{tag}  tinyflow / PyTorch: {summary['ratio']:.2f}x (per round: {rounds}); "
                     f"by CPU time {summary['cpu_ratio']:.2f}x{rss}")
    floors = [(fw, summary[fw]["gemm_floor_items_per_s"]) for fw in FRAMEWORKS
              if summary[fw].get("gemm_floor_items_per_s")]
    if floors:
        parts = []
        for fw, f in floors:
            outside = 1 - summary[fw]["items_per_s"] / f
            said = (f"{NAMES[fw]} spends {outside:.0%} of its step outside GEMM" if outside >= 0 else
                    "slower than the whole step: the machine's load changed during the run")
            parts.append(f"{'NumPy' if fw == 'tinyflow' else 'PyTorch'} {_num(f)} {unit} ({said})")
        lines.append(f"{tag}  GEMMs alone: " + "; ".join(parts))
    return lines


def _cell(summary: dict[str, Any], fw: str, key: str, fmt: str) -> str:
    s = summary[fw]
    if s["status"] != "ok":
        return {"oom": "OOM", "timeout": "timeout"}.get(s["status"], "failed")
    return fmt.format(s[key])


def _rate_cell(summary: dict[str, Any], fw: str) -> str:
    s = summary[fw]
    if s["status"] != "ok":
        return _cell(summary, fw, "", "")
    lo, hi = s["spread"]
    return f"{_num(s['items_per_s'])} ({_num(lo)}..{_num(hi)})"


def markdown(results: list[dict[str, Any]], head: list[str], args: argparse.Namespace) -> str:
    out = [f"# {head[0]}", ""] + [f"- {line}" for line in head[1:]] + [""]
    cols = ["workload", "sizes", "unit", "tinyflow", "PyTorch", "tinyflow / PyTorch", "by CPU time",
            "peak RSS tinyflow (MB)", "peak RSS PyTorch (MB)", "RSS ratio"]
    out += ["| " + " | ".join(cols) + " |", "|" + "|".join(["---"] * 3 + ["---:"] * (len(cols) - 3)) + "|"]
    for r in results:
        s = r["summary"]
        unit = next((s[fw]["unit"] for fw in FRAMEWORKS if s[fw]["status"] == "ok"), "")
        row = [r["workload"], r["sizes"], unit, _rate_cell(s, "tinyflow"), _rate_cell(s, "torch"),
               f"{s['ratio']:.2f}x" if "ratio" in s else "", f"{s['cpu_ratio']:.2f}x" if "cpu_ratio" in s else "",
               _cell(s, "tinyflow", "peak_rss_mb", "{:.0f}"), _cell(s, "torch", "peak_rss_mb", "{:.0f}"),
               f"{s['rss_ratio']:.2f}x" if "rss_ratio" in s and not args.same_process else ""]
        out.append("| " + " | ".join(row) + " |")
    out += ["", "Throughput: median over the rounds of each process's median step (slowest..fastest round); "
            "ratios: median over the rounds of the ratio within each round."]
    if args.same_process:
        out.append(f"**{SAME_PROCESS_LABEL}**: both frameworks ran in one process; peak RSS is their sum.")
    return "\n".join(out) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated, from: " + ", ".join(WORKLOADS))
    p.add_argument("--threads", type=int, default=2, help="BLAS/OpenMP/intra-op threads of each worker")
    p.add_argument("--rounds", type=int, default=3, help="rounds; each runs every framework once, alternating")
    p.add_argument("--steps", type=int, default=7, help="timed single steps per process (median taken)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per worker process before it is killed")
    p.add_argument("--openblas-thread-timeout", type=int, default=4,
                   help="OPENBLAS_THREAD_TIMEOUT for the workers (0: leave the environment's)")
    p.add_argument("--same-process", action="store_true",
                   help="both frameworks in one process, steps alternating (the old way; skewed, labelled)")
    p.add_argument("--no-gemm-floor", action="store_true", help="fcn-r: skip timing its GEMMs alone")
    p.add_argument("--profile", action="store_true", help="cProfile tinyflow's step (no timing, no PyTorch)")
    p.add_argument("--gemms", action="store_true",
                   help="tinyflow's GEMMs by shape (time, GFLOP/s) against its whole step (no PyTorch)")
    p.add_argument("--profile-steps", type=int, default=10)
    p.add_argument("--short", action="store_true", help="smoke check: 1 round, 1 warmup, 2 steps")
    p.add_argument("--json", type=Path, help="write the header, the summaries and every record here")
    p.add_argument("--markdown", type=Path, help="write the table here")
    p.add_argument("--worker", metavar="SPEC", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.short:
        args.rounds, args.warmup, args.steps = 1, 1, 2
    args.workload_list = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in args.workload_list if w not in WORKLOADS]
    if unknown:
        p.error(f"unknown workload(s) {unknown}; choose from {', '.join(WORKLOADS)}")
    return args


def zoo_config(workload: str) -> dict[str, Any] | None:
    """The zoo model's config as plain values (the PyTorch worker builds the twin from it
    without importing tinyflow)."""
    if workload not in ZOO:
        return None
    import dataclasses

    sys.path.insert(0, str(ROOT))
    from tinyflow.models import get_config

    return dataclasses.asdict(get_config(ZOO[workload][0]))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    env = worker_env(args.threads, args.openblas_thread_timeout)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "command": shlex.join(["python", *sys.argv]),
            "cpu": cpu_model(), "cores": os.cpu_count(), "load_start": load_average(), "versions": versions(),
            "threads": args.threads, "rounds": args.rounds, "steps": args.steps, "warmup": args.warmup,
            "openblas_thread_timeout": env.get("OPENBLAS_THREAD_TIMEOUT", "unset"),
            "same_process": args.same_process, "short": args.short}
    if args.profile or args.gemms:
        for w in args.workload_list:
            spec = {"workload": w, "frameworks": ["tinyflow"], "threads": args.threads, "warmup": args.warmup,
                    "steps": 0, "config": zoo_config(w), "profile": args.profile_steps, "gemms": args.gemms}
            record = run_worker(spec, env, args.timeout)[0]
            print(f"== {w} ==\n" + record.get("profile", f"{record['status']}: {record.get('message', '')}"))
        return 0
    head = header(args, meta)
    print("\n".join(head), flush=True)
    results = []
    for w in args.workload_list:
        config = zoo_config(w)
        rounds: dict[str, list[dict[str, Any]]] = {fw: [] for fw in FRAMEWORKS}
        for r in range(args.rounds):
            order = list(FRAMEWORKS) if r % 2 == 0 else list(FRAMEWORKS)[::-1]
            base = {"workload": w, "threads": args.threads, "warmup": args.warmup, "steps": args.steps,
                    "config": config, "round": r, "gemm_floor": not args.no_gemm_floor}
            if args.same_process:
                records = run_worker({**base, "frameworks": order}, env, args.timeout)
                if len(records) == 1 and records[0]["status"] != "ok":
                    records = [dict(records[0], framework=fw) for fw in order]
            else:
                records = [run_worker({**base, "frameworks": [fw]}, env, args.timeout)[0] for fw in order]
            for fw, record in zip(order, records):
                rounds[fw].append(record)
                shown = (f"{_num(rate(record))} {record['unit']}, {record['peak_rss_mb']:.0f} MB" if ok(record)
                         else f"{record['status'].upper()} {record.get('message', '')[:200]}")
                tag = f"{SAME_PROCESS_LABEL}: " if args.same_process else ""
                print(f"{tag}  {w} round {r + 1}/{args.rounds} {NAMES[fw]}: {shown}", flush=True)
        summary = summarize(rounds)
        sizes = next((rec["sizes"] for recs in rounds.values() for rec in recs if ok(rec)),
                     f"batch {ZOO[w][1]}" if w in ZOO else "the program's shapes")
        results.append({"workload": w, "sizes": sizes, "summary": summary, "records": rounds})
        print("\n".join(workload_lines(w, summary, sizes, args, meta["cpu"])), flush=True)
    meta["load_end"] = load_average()
    end = f"load average (1/5/15 min) at end {meta['load_end']}"
    head.append(f"{SAME_PROCESS_LABEL}: {end}" if args.same_process else end)
    print(head[-1])
    if results:
        print("\n" + markdown(results, head, args))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "header": head, "results": results}, indent=1))
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown(results, head, args))
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv:  # before argparse: nothing else to parse, nothing imported yet
        sys.exit(worker_main(sys.argv[sys.argv.index("--worker") + 1]))
    sys.exit(main())
