"""tinyflow vs PyTorch training throughput on one GPU, same run, same GPU, identical models.

Workloads (issue 6):
- alexnet-224: torchvision's AlexNet (61.1 M parameters, 1000 classes), batch 128, 224x224
- alexnet-64:  the 64x64 preset (models/alexnet.py AlexNet64Config), batch 256
- lstm-lm:     2-layer LSTM language model, hidden 512, embedding 512, batch 64, 64 steps,
               vocabulary --vocab (10000 by default)
- lstm-lm-b16, lstm-lm-h1024: the same LM at batch 16, and with hidden size 1024 (issue 22: the
               persistent recurrence at small batch, and with W_hh near the on-chip limit)
Precisions (default: tf32 and bf16):
- fp32: float32 GEMMs with TF32 off in both frameworks (CUPY_TF32 unset; torch allow_tf32 off)
- tf32: float32 tensors, TF32 tensor-core GEMMs (CUPY_TF32=1; torch allow_tf32 on)
- bf16: autocast to bfloat16 for GEMMs and convolutions, float32 master weights, in both

One step = forward, cross-entropy, backward, SGD-momentum update. The PyTorch models are the
shared twins of tinyflow.bench.torch_twins (also behind `tinyflow bench train --compare torch`).
PyTorch uses cuDNN; tinyflow
uses cuBLAS GEMMs (im2col) and its own .cu kernels. Each framework runs in its own process, and
the two alternate for --rounds rounds so that clock and thermal drift hit both; each process
times --runs runs of --steps steps between device synchronisations. The median run over all
rounds is reported as images/s (tokens/s for the LM) with the spread (min-max), the ratio
tinyflow / PyTorch (target >= 0.7x), and the peak GPU memory of each (torch's
max_memory_reserved and CuPy's memory-pool high-water mark: the bytes each framework's
allocator took from the driver).

    python bench/gpu/bench_gpu.py                                   # every workload, fp32/tf32/bf16
    python bench/gpu/bench_gpu.py --workload lstm-lm --precision bf16
    python bench/gpu/bench_gpu.py --short                           # proves it works (tiny runs)
    python bench/gpu/bench_gpu.py --short --device cpu --tiny        # logic check without a GPU
    python bench/gpu/bench_gpu.py --json bench/results/gpu-H100-2026-11-21.json --markdown x.md
    python bench/gpu/bench_gpu.py --profile --workload alexnet-64 --markdown profile.md
    python bench/gpu/bench_gpu.py --merge a.json b.json --json all.json --markdown all.md

--profile measures where the time goes instead of throughput (kernel_profile.py beside this file):
for each workload, precision and framework, in its own process, --warmup warm-up steps (at least 3),
then --profile-steps steps under torch.profiler's CUDA activity (CUPTI, which sees CuPy's, cuBLAS's
and tinyflow's kernels as well as PyTorch's): a kernel table (GPU ms per step, calls per step) and
the step's GPU-busy fraction (union of kernel intervals / wall time). --json/--markdown then hold
the profile; --profile-dir also gets every kernel of each cell as a text file.

--child-timeout kills a measurement process that runs longer (a hung kernel costs one cell, the
others still run); the JSON and markdown files are rewritten after every cell, so a run stopped
from outside keeps what it measured. --merge joins the JSON files of several runs (bench or
profile, one kind at a time) into one --json/--markdown.

--cuda-graph (issue 23): tinyflow's step is captured once as a CUDA graph after the warm-up (at
least 3 eager steps) and replayed (tinyflow.cuda.graphs); PyTorch stays eager (cuDNN), the yardstick.
Its cells carry "cuda_graph": true beside workload and precision in the JSON, "(graph)" in markdown.

bench/gpu/run_all.sh runs it after the gpu tests, in one call on a lent GPU, one workload at a time.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # also when loaded by path (tests, profile_steps.py)
    sys.path.insert(0, str(HERE))
import kernel_profile  # noqa: E402  (bench/gpu/kernel_profile.py)

WORKLOADS = ("alexnet-224", "alexnet-64", "lstm-lm", "lstm-lm-b16", "lstm-lm-h1024")
DEFAULT_WORKLOADS = ("alexnet-224", "alexnet-64", "lstm-lm")  # --workload all
PRECISIONS = ("fp32", "tf32", "bf16")
DEFAULT_PRECISIONS = ("tf32", "bf16")  # the "fp32 (TF32 allowed for both sides) and bf16"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", choices=(*WORKLOADS, "all"), default="all")
    p.add_argument("--precision", choices=(*PRECISIONS, "all", "default"), default="default",
                   help="default: tf32 and bf16; all adds strict fp32")
    p.add_argument("--steps", type=int, default=5, help="training steps per timed run")
    p.add_argument("--runs", type=int, default=2, help="timed runs per process")
    p.add_argument("--rounds", type=int, default=2,
                   help="alternating rounds: a tinyflow process, then a PyTorch one, each round")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (compiles kernels)")
    p.add_argument("--vocab", type=int, default=10000, help="LSTM LM vocabulary size")
    p.add_argument("--device", default="cuda:0", help="cuda:N, or cpu for a logic check")
    p.add_argument("--short", action="store_true", help="2 runs of 2 steps: proves the script works")
    p.add_argument("--tiny", action="store_true", help="tiny batches and sizes (with --device cpu)")
    p.add_argument("--json", type=Path, help="also write the results to this JSON file")
    p.add_argument("--markdown", type=Path, help="also write the results as a markdown table")
    p.add_argument("--profile", action="store_true",
                   help="profile instead of timing throughput: kernel table and GPU-busy fraction per cell")
    p.add_argument("--profile-steps", type=int, default=5, help="profiled steps per cell (with --profile)")
    p.add_argument("--profile-dir", type=Path, help="with --profile: every kernel of each cell, one file each")
    p.add_argument("--child-timeout", type=float, default=0,
                   help="seconds before a measurement process is killed and its cell marked failed (0: never)")
    p.add_argument("--merge", type=Path, nargs="+", metavar="JSON",
                   help="join these JSON results (of earlier runs) into --json/--markdown; runs nothing")
    p.add_argument("--cuda-graph", action="store_true",
                   help="tinyflow replays its step as a CUDA graph captured after the warm-up (PyTorch stays eager)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.short:
        args.steps, args.runs, args.warmup, args.rounds = 2, 1, 1, 1
        args.profile_steps = min(args.profile_steps, 2)
    return args


# ---- one (workload, precision) measurement, run in a fresh process -------------------------
def sizes(args: argparse.Namespace, workload: str) -> dict[str, Any]:
    """Batch and model sizes of a workload (scaled down with --tiny)."""
    if workload == "alexnet-224":
        s = {"batch": 128, "image": 224, "preset": "alexnet-224", "classes": 1000}
        return {**s, "batch": 2, "classes": 10} if args.tiny else s
    if workload == "alexnet-64":
        s = {"batch": 256, "image": 64, "preset": "alexnet", "classes": 200}
        return {**s, "batch": 4} if args.tiny else s
    s = {"batch": 64, "seq": 64, "hidden": 512, "embedding": 512, "layers": 2, "vocab": args.vocab}
    if workload == "lstm-lm-b16":
        s["batch"] = 16
    elif workload == "lstm-lm-h1024":
        s["hidden"] = 1024
    return {**s, "batch": 4, "seq": 8, "hidden": 32, "embedding": 32, "vocab": 100} if args.tiny else s


def lm_config(s: dict[str, Any]) -> Any:
    """The LSTM LM config of a workload's sizes (the same for both frameworks)."""
    from tinyflow.models import get_config

    return get_config("lstm-lm", vocab_size=s["vocab"], embedding_dim=s["embedding"],
                      hidden_size=s["hidden"], num_layers=s["layers"], seq_len=s["seq"])


def measure_torch(args: argparse.Namespace, workload: str, precision: str) -> Callable[[], None]:
    """Build the PyTorch model and batch; return one training step."""
    import torch

    from tinyflow.bench.torch_twins import torch_alexnet, torch_lstm_lm

    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.benchmark = True
    device = torch.device(args.device)
    s = sizes(args, workload)
    torch.manual_seed(0)
    if workload.startswith("alexnet"):
        from tinyflow.models import get_config

        model = torch_alexnet(get_config(s["preset"], num_classes=s["classes"])).to(device)
        x = torch.randn(s["batch"], 3, s["image"], s["image"], device=device)
        y = torch.randint(0, s["classes"], (s["batch"],), device=device)
    else:
        model = torch_lstm_lm(lm_config(s)).to(device)
        x = torch.randint(0, s["vocab"], (s["seq"], s["batch"]), device=device)
        y = torch.randint(0, s["vocab"], (s["seq"] * s["batch"],), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    use_bf16 = precision == "bf16"

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16):
            out = model(x)
            if not workload.startswith("alexnet"):
                out = out[0].reshape(-1, s["vocab"])  # (T*B, V): the twin returns (logits, state)
            loss = loss_fn(out, y)
        loss.backward()
        opt.step()

    return step


def measure_tinyflow(args: argparse.Namespace, workload: str, precision: str) -> Callable[[], None]:
    """Build the tinyflow model and batch; return one training step."""
    import numpy as np

    import tinyflow as tf
    import tinyflow.nn.functional as F
    from tinyflow.models import get_model

    s = sizes(args, workload)
    tf.manual_seed(0)
    rng = np.random.default_rng(0)
    if workload.startswith("alexnet"):
        model = get_model(s["preset"], num_classes=s["classes"]).to(args.device)
        x = tf.tensor(rng.standard_normal((s["batch"], 3, s["image"], s["image"])).astype(np.float32),
                      device=args.device)
        y = tf.tensor(rng.integers(0, s["classes"], s["batch"]), device=args.device)

        def forward() -> Any:
            return F.cross_entropy(model(x), y)
    else:
        from tinyflow.models import build

        model = build("lstm-lm", lm_config(s)).to(args.device)
        x = tf.tensor(rng.integers(0, s["vocab"], (s["seq"], s["batch"])), device=args.device)
        y = tf.tensor(rng.integers(0, s["vocab"], s["seq"] * s["batch"]), device=args.device)

        def forward() -> Any:
            logits, _ = model(x)
            return F.cross_entropy(logits.reshape(-1, s["vocab"]), y)

    model.train()
    opt = tf.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step() -> None:
        opt.zero_grad()
        with tf.amp.autocast("bf16", enabled=precision == "bf16"):
            loss = forward()
        loss.backward()
        opt.step()

    return step


def synchronizer(framework: str, device: str) -> Callable[[], None]:
    if not device.startswith("cuda"):
        return lambda: None
    if framework == "torch":
        import torch

        return torch.cuda.synchronize
    import tinyflow_cuda

    return tinyflow_cuda.synchronize


def peak_memory(framework: str, device: str) -> int | None:
    """Bytes the framework's allocator took from the driver at its high-water mark."""
    if not device.startswith("cuda"):
        return None
    if framework == "torch":
        import torch

        return int(torch.cuda.max_memory_reserved())
    import tinyflow_cuda

    return tinyflow_cuda.peak_reserved()


def child(args: argparse.Namespace, framework: str, workload: str, precision: str) -> dict:
    """Time (or with --profile, profile) one framework on one workload in this (fresh) process."""
    if args.profile:  # torch first, as in the H100 runs: its CUDA libraries load before CuPy's
        import torch.profiler  # noqa: F401
    build = measure_torch if framework == "torch" else measure_tinyflow
    step = build(args, workload, precision)
    sync = synchronizer(framework, args.device)
    if framework == "tinyflow" and args.cuda_graph:
        step = graphed(step, warmup=max(args.warmup, 3))
    if args.profile:
        return kernel_profile.profile_steps(step, sync, args.device, warmup=max(args.warmup, 3),
                                            steps=args.profile_steps)
    for _ in range(args.warmup):
        step()
    sync()
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        sync()
        times.append((time.perf_counter() - start) / args.steps)
    return {"step_s": times, "peak_bytes": peak_memory(framework, args.device)}


def graphed(step: Callable[[], None], warmup: int) -> Callable[[], None]:
    """``step`` captured as a CUDA graph after ``warmup`` eager steps: its replay (same batch each
    step, as the eager loop; the learning rate is constant here)."""
    import tinyflow as tf

    for _ in range(warmup):
        step()
    g = tf.cuda.CUDAGraph()
    with tf.cuda.graph(g):
        step()
    return g.replay


# ---- the driver: one fresh process per (framework, workload, precision) ------------------------
def run_child(args: argparse.Namespace, framework: str, workload: str, precision: str) -> dict:
    """Each measurement in its own process, so TF32 settings, memory pools and peaks never leak."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2]) + os.pathsep + env.get("PYTHONPATH", "")
    if precision == "tf32":
        env["CUPY_TF32"] = "1"  # read by CuPy at import: TF32 tensor cores for float32 GEMMs
    else:
        env.pop("CUPY_TF32", None)
    cmd = [sys.executable, __file__, "--child", "--workload", workload, "--precision", precision,
           "--steps", str(args.steps), "--runs", str(args.runs), "--warmup", str(args.warmup),
           "--vocab", str(args.vocab), "--device", args.device, "--json", "-",
           *(["--tiny"] if args.tiny else []), *(["--cuda-graph"] if args.cuda_graph else []),
           *(["--profile", "--profile-steps", str(args.profile_steps)] if args.profile else [])]
    cmd.insert(cmd.index("--child") + 1, framework)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.child_timeout or None)
    except subprocess.TimeoutExpired as exc:  # run() has killed it
        tail = "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                       for x in (exc.stdout, exc.stderr))[-3000:]
        return {"error": f"{framework} {workload} {precision} timed out after {args.child_timeout:g}s "
                         f"(killed):\n{tail}"}
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        return {"error": f"{framework} {workload} {precision} failed:\n{tail}"}
    for line in reversed(done.stdout.strip().splitlines()):  # the last JSON line (libraries may print)
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    return {"error": f"{framework} {workload} {precision}: no JSON result in its output:\n"
                     f"{(done.stdout + done.stderr)[-3000:]}"}


def device_name(device: str) -> str:
    if not device.startswith("cuda"):
        import platform

        return f"cpu ({platform.processor() or platform.machine()})"
    import torch

    return torch.cuda.get_device_name(int(device.split(":")[1]) if ":" in device else 0)


def fmt_bytes(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**30:.2f} GiB"


def _failure(figures: dict | None) -> str:
    """A framework's cell of a failed row: timed out / failed / ok (the other side failed)."""
    if not figures or "error" not in figures:
        return "ok" if figures and figures.get("step_s") else ""
    return "timed out" if "timed out after" in figures["error"].splitlines()[0] else "failed"


def markdown_table(record: dict) -> str:
    """The results as the markdown table that README's benchmark section shows."""
    lines = [f"Training throughput on {record['device']}, {record['date']} "
             f"(median of {record['rounds']} alternating rounds x {record['runs']} runs x "
             f"{record['steps']} steps; `python bench/gpu/bench_gpu.py`)", "",
             "| workload | precision | tinyflow | PyTorch | ratio | peak memory tinyflow / PyTorch |",
             "|---|---|---|---|---|---|"]
    for r in record["results"]:
        precision = r["precision"] + (" (graph)" if r.get("cuda_graph") else "")
        if "ratio" not in r:
            lines.append(f"| {r['workload']} | {precision} | {_failure(r.get('tinyflow'))} | "
                         f"{_failure(r.get('torch'))} | | |")
            continue
        mem = f"{fmt_bytes(r['raw']['tinyflow'].get('peak_bytes'))} / {fmt_bytes(r['raw']['torch'].get('peak_bytes'))}"
        lines.append(f"| {r['workload']} | {precision} | {r['tinyflow']:.1f} {r['unit']} | "
                     f"{r['torch']:.1f} {r['unit']} | {r['ratio']:.2f}x | {mem} |")
    return "\n".join(lines) + "\n"


def write_outputs(args: argparse.Namespace, record: dict, markdown: Callable[[dict], str],
                  quiet: bool = True) -> None:
    """(Re)write --json and --markdown: after every cell, so that a stopped run keeps its cells."""
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=2))
        if not quiet:
            print(f"wrote {args.json}")
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown(record))
        if not quiet:
            print(f"wrote {args.markdown}")


def merge(args: argparse.Namespace) -> int:
    """--merge: join the JSON records of several runs (all bench, or all profile) into one."""
    records = []
    for path in args.merge:
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            print(f"merge: skipping {path}: {type(exc).__name__}: {exc}")
    kinds = {"profile" if "cells" in r else "bench" for r in records}
    if len(kinds) > 1:
        print(f"merge: cannot join bench and profile records ({', '.join(map(str, args.merge))})")
        return 2
    kind = kinds.pop() if kinds else ("profile" if args.profile else "bench")
    key = "cells" if kind == "profile" else "results"
    merged = dict(records[0]) if records else {
        "device": "n/a (no run finished)", "date": str(datetime.date.today()), "steps": 0, "runs": 0,
        "rounds": 0, "warmup": 0}
    merged[key] = [item for r in records for item in r.get(key, [])]
    merged["kind"] = kind
    merged["merged_from"] = [str(p) for p in args.merge]
    write_outputs(args, merged, kernel_profile.markdown if kind == "profile" else markdown_table, quiet=False)
    return 0 if records else 1


def profile_main(args: argparse.Namespace, workloads: tuple[str, ...], precisions: tuple[str, ...]) -> int:
    """--profile: each (workload, precision, framework) profiled in its own process."""
    record = {"kind": "profile", "device": device_name(args.device), "date": str(datetime.date.today()),
              "steps": args.profile_steps, "warmup": max(args.warmup, 3), "cells": []}
    for workload in workloads:
        s = sizes(args, workload)
        print(f"\n{workload}: " + ", ".join(f"{k}={v}" for k, v in s.items()))
        for precision in precisions:
            for framework in ("tinyflow", "torch"):
                graph = {"cuda_graph": True} if args.cuda_graph and framework == "tinyflow" else {}
                cell = {"workload": workload, "precision": precision, **graph, "framework": framework, "sizes": s,
                        **run_child(args, framework, workload, precision)}
                record["cells"].append(cell)
                table = kernel_profile.text_table(cell)
                print("\n".join(table.splitlines()[:12]))  # the headline and the top kernels
                if args.profile_dir:
                    args.profile_dir.mkdir(parents=True, exist_ok=True)
                    (args.profile_dir / f"{workload}-{precision}-{framework}.txt").write_text(table)
                write_outputs(args, record, kernel_profile.markdown)
    write_outputs(args, record, kernel_profile.markdown, quiet=False)
    return 1 if any("error" in c for c in record["cells"]) else 0


def main() -> int:
    if "--child" in sys.argv:  # python bench_gpu.py --child FRAMEWORK ...
        i = sys.argv.index("--child")
        framework = sys.argv.pop(i + 1)
        args = parse_args()
        print(json.dumps(child(args, framework, args.workload, args.precision)))
        return 0
    args = parse_args()
    if args.merge:
        return merge(args)
    workloads = DEFAULT_WORKLOADS if args.workload == "all" else (args.workload,)
    precisions = {"all": PRECISIONS, "default": DEFAULT_PRECISIONS}.get(args.precision, (args.precision,))
    if not args.device.startswith("cuda"):
        precisions = ("fp32",)  # TF32 is a GPU mode; tinyflow's bf16 needs CuPy (ml_dtypes)
    print(f"device: {device_name(args.device)}   date: {datetime.date.today()}   "
          f"steps/run: {args.steps}   runs/process: {args.runs}   rounds: {args.rounds}   "
          f"warmup: {args.warmup}" + (f"   profile: {args.profile_steps} steps" if args.profile else ""))
    if args.profile:
        return profile_main(args, workloads, precisions)
    record = {"kind": "bench", "device": device_name(args.device), "date": str(datetime.date.today()),
              "steps": args.steps, "runs": args.runs, "rounds": args.rounds, "results": []}
    results = record["results"]
    for workload in workloads:
        s = sizes(args, workload)
        print(f"\n{workload}: " + ", ".join(f"{k}={v}" for k, v in s.items()))
        unit = "tokens/s" if workload.startswith("lstm-lm") else "images/s"
        per_step = s["batch"] * s.get("seq", 1)
        for precision in precisions:
            figures: dict[str, dict] = {"tinyflow": {"step_s": []}, "torch": {"step_s": []}}
            for _ in range(args.rounds):  # alternate processes: drift hits both frameworks
                for framework in ("tinyflow", "torch"):
                    got = run_child(args, framework, workload, precision)
                    if "error" in got:
                        figures[framework] = got
                    elif "error" not in figures[framework]:
                        figures[framework]["step_s"] += got["step_s"]
                        figures[framework]["peak_bytes"] = max(
                            figures[framework].get("peak_bytes") or 0, got["peak_bytes"] or 0) or None
            graph = {"cuda_graph": True} if args.cuda_graph else {}
            if any("error" in f for f in figures.values()):
                for f in figures.values():
                    if "error" in f:
                        print(f["error"])
                results.append({"workload": workload, "precision": precision, **graph, **figures})
                write_outputs(args, record, markdown_table)
                continue
            rate = {k: per_step / statistics.median(v["step_s"]) for k, v in figures.items()}
            spread = {k: (per_step / max(v["step_s"]), per_step / min(v["step_s"]))
                      for k, v in figures.items()}
            ratio = rate["tinyflow"] / rate["torch"]
            print(f"  {precision:5s} tinyflow {rate['tinyflow']:10.1f} {unit} "
                  f"({spread['tinyflow'][0]:.0f}-{spread['tinyflow'][1]:.0f})  "
                  f"torch {rate['torch']:10.1f} {unit} "
                  f"({spread['torch'][0]:.0f}-{spread['torch'][1]:.0f})  ratio {ratio:5.2f}x   "
                  f"peak memory tinyflow {fmt_bytes(figures['tinyflow']['peak_bytes'])}  "
                  f"torch {fmt_bytes(figures['torch']['peak_bytes'])}")
            results.append({"workload": workload, "precision": precision, **graph, "sizes": s,
                            "unit": unit, "tinyflow": rate["tinyflow"], "torch": rate["torch"],
                            "spread": spread, "ratio": ratio, "raw": figures})
            write_outputs(args, record, markdown_table)
    print()
    write_outputs(args, record, markdown_table, quiet=False)
    return 1 if any("error" in str(r.get("tinyflow", "")) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
