"""Where a training step's GPU time goes: CUPTI through torch.profiler, in the framework's own process.

torch.profiler's CUDA activity is CUPTI's activity trace of the whole process, so it records every
kernel, copy and memset on the GPU: CuPy's, cuBLAS's and tinyflow's own .cu kernels as well as
PyTorch's. bench_gpu.py --profile builds a workload with its usual builders, runs a few warm-up
steps, times some steps unprofiled, then profiles N steps between two synchronisations and reduces
the trace to

- a kernel table: each kernel (or copy) name, its GPU ms per step, calls per step, share of GPU time;
- the step's GPU-busy fraction: the union of all kernel and copy intervals (on any stream) over the
  wall time of the profiled steps, so overlapping kernels count once and host-bound gaps show.

With --device cpu (a logic check without a GPU) the profiler records CPU activity instead, and the
"kernels" are PyTorch's top-level CPU ops (tinyflow on the CPU records none).

The pieces that need no GPU (union_length, activities, summarize, the tables) take plain numbers
or duck-typed events, so tests/test_bench_gpu_scripts.py checks them on the CPU.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

DEVICE_KINDS = {"kernel": "kernel", "gpu_memcpy": "copy", "gpu_memset": "copy"}


@dataclass(frozen=True)
class Activity:
    """One interval of the trace: a kernel, a copy/memset, or (CPU logic check) a top-level op."""

    name: str
    kind: str  # "kernel" | "copy" | "op"
    start_us: float
    end_us: float


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by the intervals, overlaps counted once: the time the GPU was busy."""
    total = 0.0
    lo = hi = None
    for start, end in sorted(intervals):
        if end < start:
            raise ValueError(f"interval ends before it starts: ({start}, {end})")
        if hi is None or start > hi:  # a gap: close the current run
            if hi is not None:
                total += hi - lo
            lo, hi = start, end
        else:
            hi = max(hi, end)
    if hi is not None:
        total += hi - lo
    return total


def classify(event: Any, on_gpu: bool) -> str | None:
    """"kernel", "copy", "op" or None (leave out) for one torch.profiler FunctionEvent.

    Newer torch names the CUPTI activity (kernel, gpu_memcpy, gpu_memset, gpu_user_annotation,
    cpu_op, ...); older torch only gives the device type, where a user annotation (a
    record_function range drawn on the GPU row, e.g. torch's Optimizer.step) must be left out
    or it would cover the gaps between kernels.
    """
    if getattr(event, "is_user_annotation", False):
        return None
    kind = getattr(event, "activity_type", None)
    if on_gpu:
        if isinstance(kind, str) and kind:
            return DEVICE_KINDS.get(kind)
        if str(getattr(event, "device_type", "")).endswith("CUDA"):
            return "copy" if event.name.startswith(("Memcpy", "Memset")) else "kernel"
        return None
    # CPU logic check: top-level, synchronous CPU ops only (children would count twice)
    if str(getattr(event, "device_type", "")).endswith("CPU") and not getattr(event, "is_async", False) \
            and getattr(event, "cpu_parent", None) is None and kind in (None, "", "cpu_op"):
        return "op"
    return None


def activities(events: Iterable[Any], on_gpu: bool) -> list[Activity]:
    """The trace's intervals worth counting, from torch.profiler's events (prof.events())."""
    out = []
    for e in events:
        kind = classify(e, on_gpu)
        if kind is not None:
            out.append(Activity(e.name, kind, float(e.time_range.start), float(e.time_range.end)))
    return out


def kernel_table(acts: Sequence[Activity], steps: int) -> list[dict[str, Any]]:
    """One row per name, by GPU time: ms per step, calls per step, share of all kernel+copy time."""
    by_name: dict[str, list[float]] = {}
    for a in acts:
        row = by_name.setdefault(a.name, [0.0, 0, a.kind])
        row[0] += a.end_us - a.start_us
        row[1] += 1
    total = sum(r[0] for r in by_name.values()) or 1.0
    rows = [{"name": name, "kind": kind, "ms_per_step": us / steps / 1e3, "calls_per_step": calls / steps,
             "share": us / total} for name, (us, calls, kind) in by_name.items()]
    return sorted(rows, key=lambda r: (-r["ms_per_step"], r["name"]))


def summarize(acts: Sequence[Activity], steps: int, wall_s: float) -> dict[str, Any]:
    """The profiled steps' figures: wall and GPU-busy ms per step, busy fraction, launches per step."""
    busy_us = union_length((a.start_us, a.end_us) for a in acts)
    return {
        "steps": steps,
        "wall_ms": wall_s / steps * 1e3,
        "busy_ms": busy_us / steps / 1e3,
        "busy_fraction": busy_us / (wall_s * 1e6) if wall_s > 0 else 0.0,
        "kernel_ms": sum(a.end_us - a.start_us for a in acts) / steps / 1e3,  # summed, overlaps twice
        "kernels_per_step": sum(a.kind != "copy" for a in acts) / steps,
        "copies_per_step": sum(a.kind == "copy" for a in acts) / steps,
        "rows": kernel_table(acts, steps),
    }


def profile_steps(step: Callable[[], None], sync: Callable[[], None], device: str,
                  warmup: int = 3, steps: int = 5) -> dict[str, Any]:
    """Warm up, time `steps` steps unprofiled, then profile `steps` more; return summarize()'s dict
    with wall_unprofiled_ms added."""
    from torch.profiler import ProfilerActivity, profile

    on_gpu = device.startswith("cuda")
    for _ in range(warmup):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    unprofiled = (time.perf_counter() - start) / steps
    with profile(activities=[ProfilerActivity.CUDA if on_gpu else ProfilerActivity.CPU]) as prof:
        sync()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        wall = time.perf_counter() - start
    return {**summarize(activities(prof.events(), on_gpu), steps, wall),
            "wall_unprofiled_ms": unprofiled * 1e3, "activity": "CUDA (CUPTI)" if on_gpu else "CPU ops"}


# ---- tables -------------------------------------------------------------------------------------
def _calls(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 1e-9 else f"{x:.1f}"


def _md_name(name: str, width: int) -> str:
    short = name if len(name) <= width else name[: width - 3] + "..."
    return "`" + short.replace("`", "'").replace("|", "\\|") + "`"


def cell_title(cell: dict[str, Any]) -> str:
    return f"{cell['workload']} {cell['precision']} {cell['framework']}"


def markdown(record: dict[str, Any], top: int = 15, width: int = 100) -> str:
    """profile.md: one summary row per (workload, precision, framework), then each one's top kernels."""
    cells = record["cells"]
    lines = [f"# Kernel profile: {record['device']}, {record['date']}", "",
             f"{record['steps']} profiled steps after {record['warmup']} warm-up steps, each framework in "
             f"its own process; {cells[0].get('activity', 'CUDA (CUPTI)') if cells else 'CUDA (CUPTI)'} "
             "through torch.profiler (`python bench/gpu/bench_gpu.py --profile`). GPU busy = union of "
             "kernel and copy intervals / wall time of the profiled steps; the profiler's own overhead "
             "is in the profiled wall time (compare the unprofiled column).", "",
             "| workload | precision | framework | wall ms/step (unprofiled) | wall ms/step (profiled) | "
             "GPU-busy ms/step | GPU busy | kernels/step | copies/step | top kernel |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for c in cells:
        if "error" in c:
            first = c["error"].strip().splitlines()[0] if c["error"].strip() else "failed"
            lines.append(f"| {c['workload']} | {c['precision']} | {c['framework']} | failed: "
                         f"{first[:80].replace('|', '/')} | | | | | | |")
            continue
        topname = _md_name(c["rows"][0]["name"], 60) if c["rows"] else ""
        lines.append(f"| {c['workload']} | {c['precision']} | {c['framework']} | {c['wall_unprofiled_ms']:.2f} | "
                     f"{c['wall_ms']:.2f} | {c['busy_ms']:.2f} | {c['busy_fraction']:.0%} | "
                     f"{_calls(c['kernels_per_step'])} | {_calls(c['copies_per_step'])} | {topname} |")
    for c in cells:
        if "error" in c:
            continue
        lines += ["", f"## {cell_title(c)}: {c['busy_ms']:.2f} of {c['wall_ms']:.2f} ms/step busy "
                      f"({c['busy_fraction']:.0%}), {_calls(c['kernels_per_step'])} kernels/step", "",
                  "| kernel | ms/step | calls/step | share of GPU time |", "|---|---:|---:|---:|"]
        if not c["rows"]:
            lines.append("| (none recorded) | | | |")
        for r in c["rows"][:top]:
            lines.append(f"| {_md_name(r['name'], width)} | {r['ms_per_step']:.3f} | {_calls(r['calls_per_step'])} "
                         f"| {r['share']:.1%} |")
        if len(c["rows"]) > top:
            rest = c["rows"][top:]
            lines.append(f"| ({len(rest)} more) | {sum(r['ms_per_step'] for r in rest):.3f} | "
                         f"{_calls(sum(r['calls_per_step'] for r in rest))} | {sum(r['share'] for r in rest):.1%} |")
    return "\n".join(lines) + "\n"


def text_table(cell: dict[str, Any]) -> str:
    """Every kernel of one cell, full names: the per-cell file of --profile-dir."""
    if "error" in cell:
        return f"{cell_title(cell)}: {cell['error']}\n"
    head = (f"{cell_title(cell)}: wall {cell['wall_unprofiled_ms']:.2f} ms/step unprofiled, "
            f"{cell['wall_ms']:.2f} profiled ({cell['steps']} steps); GPU busy {cell['busy_ms']:.2f} ms/step "
            f"({cell['busy_fraction']:.1%}); kernel time summed {cell['kernel_ms']:.2f} ms/step; "
            f"{_calls(cell['kernels_per_step'])} kernels and {_calls(cell['copies_per_step'])} copies per step\n")
    body = "".join(f"{r['ms_per_step']:9.3f} ms/step {_calls(r['calls_per_step']):>7} calls/step "
                   f"{r['share']:6.1%}  {r['kind']:6s} {r['name']}\n" for r in cell["rows"])
    return head + body
