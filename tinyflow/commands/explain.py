"""`tinyflow explain MODEL`: one training step of a zoo model, traced, as a page to click through.

The step is the benchmarks' step (tinyflow/bench/workloads.py): the zoo model, a fixed synthetic
batch, cross-entropy and SGD with momentum, under autocast with ``--amp``. After ``--warmup``
untraced steps, one step runs under ``tf.explain()`` (tinyflow/explainer/) and the page is written
to ``--out``. With ``--nproc N`` the step is data-parallel over N thread ranks of this process
(tinyflow/parallel/local.py), rank 0 traced, its all-reduce buckets on the timeline.

If the step raises, the page is still written, the failing node marked, and the command says where
in one line (exit status 1). A bad option, an unknown model or an output that cannot be written is
refused before any work (exit status 2).
"""
from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from typing import Any

from tinyflow.commands.options import (
    Integer,
    KeyValue,
    Parsed,
    device,
    nonnegative_int,
    output_file,
    positive_int,
    unwritable,
)


def _model_name(text: str) -> str:
    """A model of the zoo (tinyflow.models.MODELS), else a ValueError naming the choices."""
    import tinyflow.models as models

    if text not in models.MODELS:
        raise ValueError(f"unknown model {text!r}: choose one of {', '.join(sorted(models.MODELS))}")
    return text


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `explain` command."""
    parser = subparsers.add_parser(
        "explain", help="trace one training step and write it as a page to click through",
        description="Run one training step of MODEL (forward, loss, backward, optimizer step) under the "
        "tracer and write one self-contained HTML page: every Function's forward and backward as a node "
        "grouped by module, with its source, time, shapes, what it kept for backward and the kernels it "
        "called; a timeline of the step and its live memory; a walk through the step file by file.",
    )
    parser.add_argument("model", type=Parsed(_model_name, bad=["", "no-such-model"]),
                        help="a zoo model: alexnet, lstm-lm, resnet20, ... (tinyflow.models)")
    parser.add_argument("--device", type=device, default="cpu", help="cpu or cuda:N (default: %(default)s)")
    parser.add_argument("--amp", choices=("bf16", "fp16"), nargs="?", const="bf16", default=None,
                        help="mixed precision under autocast; --amp alone is bf16 (default: off)")
    parser.add_argument("--batch-size", type=positive_int, default=4, help="examples per step (default: %(default)s)")
    parser.add_argument("--nproc", type=Integer(1, 64), default=1,
                        help="a data-parallel step over N thread ranks of this process, rank 0 traced (default: 1)")
    parser.add_argument("--config", type=KeyValue(), action="append", default=[], metavar="FIELD=VALUE",
                        help="override a field of the model's config (repeatable), e.g. --config hidden_size=64")
    parser.add_argument("--warmup", type=nonnegative_int, default=2,
                        help="untraced steps first, so that the traced one is a steady one (default: %(default)s)")
    parser.add_argument("--no-memory", dest="memory", action="store_false",
                        help="no live-memory curve: on the CPU it comes from tracemalloc, which slows a Python-heavy "
                        "step by up to ~1.5x (the times shown include that); without it the tracer costs a few percent")
    parser.add_argument("--out", type=output_file, default="step.html", help="the page to write (default: %(default)s)")
    parser.set_defaults(func=run)


def _error(message: str) -> None:
    print(f"tinyflow explain: error: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from tinyflow.bench.workloads import parse_overrides, workload
    from tinyflow.recipes.loop import check_amp

    problem = unwritable(args.out, "file")  # the default is not parsed: check it too, before any work
    if problem:
        _error(f"argument --out: {problem}")
        return 2
    try:
        check_amp(args.amp)
        w = workload(args.model, args.batch_size, parse_overrides(args.config))
        w.config()
    except (ValueError, TypeError) as exc:
        _error(str(exc))
        return 2
    meta = {"title": f"{args.model}, one training step", "model": args.model, "device": args.device,
            "batch_size": args.batch_size, "amp": args.amp, "nproc": args.nproc,
            "config": dict(parse_overrides(args.config))}
    started = False
    if args.memory and not args.device.startswith("cuda") and not tracemalloc.is_tracing():
        tracemalloc.start()  # before the model is built: the memory curve then counts its parameters too
        started = True
    try:
        if args.nproc == 1:
            ex, failure = _one_process(args, w, meta)
        else:
            ex, failure = _thread_ranks(args, w, meta)
    finally:
        if started:
            tracemalloc.stop()
    path = ex.save(args.out)
    print(f"tinyflow explain: {ex.summary()}")
    if "untraced_step_s" in ex.meta:
        print(f"tinyflow explain: the step took {(ex.wall[1] - ex.wall[0]) * 1e3:.1f} ms traced, "
              f"{ex.meta['untraced_step_s'] * 1e3:.1f} ms untraced (the last warm-up step)")
    if failure is not None:
        _error(f"the step raised {_where(ex)}{type(failure).__name__}: {failure}; the page shows the step up "
               f"to there, the failing node marked: {path}")
        return 1
    print(f"tinyflow explain: wrote {path} ({path.stat().st_size / 1024:.0f} KiB); open it in a browser")
    return 0


def _where(ex: Any) -> str:
    """``in Function.forward (module, file:line): `` for the node the step failed in, if known."""
    error = ex.error or {}
    node_id = error.get("node")
    if node_id is None:
        return ""
    node = ex.nodes[node_id]
    src = ex.source(node.source_function)
    at = f", {src.path}:{src.line}" if src is not None else ""
    return f"in {node.cls}.{node.kind} ({node.module or 'outside the modules'}{at}): "


def _precision(args: argparse.Namespace) -> str:
    return args.amp or "fp32"


def _one_process(args: argparse.Namespace, w: Any, meta: dict[str, Any]) -> tuple[Any, BaseException | None]:
    """Build the step, run the warm-up steps, trace one: (Explanation, the step's error or None)."""
    from tinyflow.bench.workloads import tinyflow_step
    from tinyflow.explainer import explain

    step = tinyflow_step(w, args.device, _precision(args))
    for _ in range(args.warmup):
        start = time.perf_counter()
        try:
            step.train()
            step.sync()
        except Exception:  # noqa: BLE001 - the traced step below fails at the same place, and shows where
            break
        meta["untraced_step_s"] = time.perf_counter() - start
    ex = explain(model=step.model, device=args.device, memory=args.memory, meta=meta)
    failure = None
    try:
        with ex:
            step.train()
            step.sync()
    except Exception as exc:  # noqa: BLE001 - reported in one line, the page written
        failure = exc
    return ex, failure


def _thread_ranks(args: argparse.Namespace, w: Any, meta: dict[str, Any]) -> tuple[Any, BaseException | None]:
    """The step data-parallel over ``--nproc`` thread ranks (run_local), rank 0 traced, the spans of
    its all-reduce buckets (DataParallel's ChromeTracer) put on the page's timeline."""
    from tinyflow.bench.workloads import tinyflow_step
    from tinyflow.explainer import explain
    from tinyflow.parallel.data_parallel import DataParallel
    from tinyflow.parallel.local import run_local
    from tinyflow.parallel.trace import ChromeTracer

    ex = explain(device=args.device, trace_current_thread=False, memory=args.memory, meta=meta)
    seen: dict[str, Any] = {}

    def rank(comm: Any) -> None:
        tracer = None
        if comm.rank == 0:
            before = time.perf_counter()
            tracer = ChromeTracer(rank=0)
            seen["origin"] = (before + time.perf_counter()) / 2  # its clock's zero, in perf_counter seconds
            seen["tracer"] = tracer
        holder: dict[str, Any] = {}

        def wrap(model: Any) -> Any:
            holder["dp"] = DataParallel(model, comm, tracer=tracer)
            return holder["dp"]

        step = tinyflow_step(w, args.device, _precision(args), wrap=wrap)
        dp = holder["dp"]
        try:
            for _ in range(args.warmup):
                start = time.perf_counter()
                step.train()
                step.sync()
                if comm.rank == 0:
                    ex.meta["untraced_step_s"] = time.perf_counter() - start
            comm.barrier()
            if comm.rank == 0:
                seen["dp"] = dp
                tracer.events.clear()  # only the traced step's spans
                with ex.trace_thread(model=dp.module):
                    step.train()
                    step.sync()
            else:
                step.train()
                step.sync()
        finally:
            dp.close()

    failure = None
    try:
        with ex:
            run_local(rank, args.nproc, device=args.device if args.device.startswith("cuda") else None)
    except Exception as exc:  # noqa: BLE001 - reported in one line, the page written
        failure = exc
    tracer, origin = seen.get("tracer"), seen.get("origin", 0.0)
    if tracer is not None:
        for event in tracer.to_json()["traceEvents"]:
            if event.get("ph") != "X" or event.get("cat") != "comm":
                continue
            start = origin + event["ts"] / 1e6
            ex.add_comm(event["name"], start, start + event["dur"] / 1e6, thread=event.get("tid"),
                        **event.get("args", {}))
    dp = seen.get("dp")
    if dp is not None:
        ex.buckets = [{"index": b.index, "bytes": b.nbytes, "algorithm": dp.bucket_algorithms[b.index],
                       "params": [s.name for s in b.slots]} for b in dp.buckets]
    return ex, failure
