"""`tinyflow bench allreduce | train | scaling`: all-reduce bandwidth, training throughput,
and predicted data-parallel scaling.

    tinyflow bench allreduce --nproc 4 --algorithms ring,tree,naive,native,auto --sizes 4K:256M
    tinyflow bench train alexnet --batch-sizes 16,32,64 --nproc 1,2,4 --compare torch --breakdown
    tinyflow bench scaling alexnet --workers 1,2,4,8,16,32,64,128 --link pcie3 --algorithms ring,tree,naive

allreduce: with ``--transport mpi`` (the default) and no MPI world around it, the command
relaunches itself under ``mpirun -n NPROC``; started by a user's own mpirun it measures that
world. ``--transport local`` runs the ranks as threads of one process instead (no MPI needed).
train: see tinyflow/bench/train.py; scaling: see tinyflow/bench/scaling.py.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from tinyflow.commands.options import (
    ChoiceList,
    IntList,
    KeyValue,
    OutputPath,
    Parsed,
    device,
    input_path,
    nonnegative_int,
    output_dir,
    output_file,
    positive_float,
    positive_int,
    text,
)
from tinyflow.parallel.allreduce import ALGORITHM_CHOICES, DEFAULT_ALGORITHM

PRECISIONS = ("fp32", "bf16", "fp16")  # as tinyflow/bench/train.py's (not imported here: it loads on first use)


def _sizes(text: str) -> list[int]:
    """``--sizes``: parse_sizes' bytes, each > 0."""
    from tinyflow.parallel.benchmark import parse_sizes

    sizes = parse_sizes(text)
    if not sizes or min(sizes) <= 0:
        raise ValueError(f"sizes must be > 0 bytes, got {text!r}")
    return sizes


json_output = OutputPath("file", stdout=True)  # a file, or '-' for standard output


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `bench` command and its `allreduce` sub-command."""
    parser = subparsers.add_parser(
        "bench", help="benchmarks: allreduce (busbw per size), train (images/s per batch and workers), "
        "scaling (predicted speedup)",
        description="Benchmarks of tinyflow's building blocks and of whole training steps.",
    )
    sub = parser.add_subparsers(dest="bench_command", metavar="{allreduce,train,scaling}")
    sub.required = True
    ar = sub.add_parser(
        "allreduce", help="all-reduce bandwidth per size and algorithm, like nccl-tests",
        description="Time ring, tree, naive and native all-reduce over N workers for a range of "
        "buffer sizes; print size, time, algbw and busbw (= algbw * 2(N-1)/N), and plot busbw.",
    )
    ar.add_argument("--nproc", type=positive_int, default=4, help="number of workers (default: %(default)s)")
    ar.add_argument("--algorithms", type=ChoiceList(ALGORITHM_CHOICES), default="ring,tree,naive,native",
                    help=f"comma-separated subset of {','.join(ALGORITHM_CHOICES)}; auto (ring, tree or native "
                    "per size from a cost model fitted first) is compared with the best of the others at each "
                    "size (default: %(default)s)")
    ar.add_argument("--sizes", type=Parsed(_sizes, ("", "x", "0", "64M:4K", "4K,")), default="4K:64M",
                    help="MIN:MAX (doubling), a comma list, or one size; K/M/G suffixes (default: %(default)s)")
    ar.add_argument("--iters", type=positive_int, default=5, help="timed iterations per point (default: %(default)s)")
    ar.add_argument("--warmup", type=nonnegative_int, default=1, help="untimed iterations first (default: %(default)s)")
    ar.add_argument("--transport", choices=("mpi", "local"), default="mpi",
                    help="mpi processes or threads of one process (default: %(default)s)")
    ar.add_argument("--out", type=output_dir, default=None, help="folder for the table (.md), raw rows (.json) and plot (.png)")
    ar.add_argument("--plot", type=output_file, default=None, help="PNG path of the busbw plot (default: OUT/allreduce_npN_T.png)")
    ar.add_argument("--timeout", type=positive_float, default=120.0, help="seconds before a silent rank is an error")
    ar.set_defaults(func=run)
    _register_train(sub)
    _register_scaling(sub)


def _model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", type=text, help="a model of the zoo: alexnet, alexnet-224, alexnet-2012, resnet20, resnet56, "
                   "resnet18, fcn-r, lstm-lm")
    p.add_argument("--device", type=device, default="cpu", help="cpu or cuda:N (default: %(default)s)")
    p.add_argument("--config", type=KeyValue(), action="append", default=[], metavar="FIELD=VALUE",
                   help="override a field of the model's config (repeatable), e.g. --config hidden_size=512")
    p.add_argument("--image-size", type=positive_int, default=None, help="square input side (default: the model's)")
    p.add_argument("--steps", type=positive_int, default=5, help="steps per timed run (default: %(default)s)")
    p.add_argument("--warmup", type=nonnegative_int, default=2, help="untimed steps first (default: %(default)s)")
    p.add_argument("--runs", type=positive_int, default=3, help="timed runs per process; the median is reported "
                   "(default: %(default)s)")
    p.add_argument("--bucket-mb", type=positive_float, default=25.0, help="DataParallel bucket size (default: %(default)s)")
    p.add_argument("--timeout", type=positive_float, default=900.0, help="seconds per cell before it is marked "
                   "'timeout' (default: %(default)s)")


def _register_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="training throughput per batch size and worker count (synthetic data in memory)",
        description="Time training steps of MODEL on a fixed random batch (no data loader): warm-up, then "
        "--runs timed runs of --steps steps in a fresh process per cell, median and spread. A table of "
        "images/s (tokens/s for lstm-lm) per batch size (per worker) and worker count, with speedup and "
        "scaling efficiency against one worker; a batch that does not fit is marked OOM, one that runs past "
        "--timeout 'timeout', and the others go on. --compare torch adds the identical PyTorch model (own "
        "process, same threads, alternating rounds) and the ratio.",
    )
    _model_options(p)
    p.add_argument("--batch-sizes", type=IntList(1), default="16,32,64", help="comma list of batch sizes per worker "
                   "(default: %(default)s)")
    p.add_argument("--nproc", type=IntList(1), default="1", help="comma list of worker counts, e.g. 1,2,4 (default: %(default)s)")
    p.add_argument("--precision", type=ChoiceList(PRECISIONS), default="fp32", help="comma list of fp32, bf16, fp16 (autocast; default: "
                   "%(default)s)")
    p.add_argument("--compare", type=ChoiceList(("torch",)), default=[],
                   help="torch: also time the PyTorch twin (one worker)")
    p.add_argument("--rounds", type=positive_int, default=1, help="alternating rounds of fresh processes per cell "
                   "(default: %(default)s)")
    p.add_argument("--breakdown", action="store_true", help="also forward and forward+backward ms per batch, "
                   "and the all-reduce ms per step for several workers")
    p.add_argument("--allreduce", default=DEFAULT_ALGORITHM, choices=ALGORITHM_CHOICES,
                   help="gradient all-reduce of the multi-worker cells (default: %(default)s)")
    p.add_argument("--threads", type=positive_int, default=None, help="threads per worker (default: cores // workers)")
    p.add_argument("--cuda-graph", action="store_true",
                   help="replay tinyflow's one-worker step as a CUDA graph captured after the warm-up (cuda devices; "
                   "PyTorch stays eager; data-parallel cells run eagerly)")
    p.add_argument("--json", type=json_output, default=None, metavar="PATH",
                   help="write every cell as JSON ('-': stdout)")
    p.add_argument("--plot", type=output_file, default=None, metavar="PNG", help="plot throughput against batch size")
    p.add_argument("--out", type=output_dir, default=None, metavar="DIR", help="write the table (.md), JSON and plot there")
    p.set_defaults(func=run_train)


def _register_scaling(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "scaling", help="predicted data-parallel speedup from step time, gradient size and link",
        description="Profile MODEL on one worker (phase times, gradient buckets and when backward makes "
        "them ready, FLOPs), price each bucket's all-reduce with the alpha-beta cost model of each "
        "algorithm on --link, replay the bucket schedule (communication overlaps backward) and print the "
        "predicted speedup and efficiency per worker count. --link measured fits alpha and beta to "
        "`bench allreduce` runs on this host, whose workers share its cores; --validate 1,2,4 measures "
        "those worker counts with `bench train` and prints how far off the prediction is.",
    )
    _model_options(p)
    p.add_argument("--batch-size", type=positive_int, default=64, help="batch per worker (default: %(default)s)")
    p.add_argument("--workers", type=IntList(1), default="1,2,4,8,16,32,64,128", help="comma list (default: %(default)s)")
    p.add_argument("--link", default="pcie3", choices=("pcie3", "nvlink", "ib", "measured"),
                   help="link presets, or measured on this host (default: %(default)s)")
    p.add_argument("--algorithms", type=ChoiceList(ALGORITHM_CHOICES), default="ring,tree,naive",
                   help=f"comma list of {', '.join(ALGORITHM_CHOICES)} (default: %(default)s)")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS)
    p.add_argument("--tflops", type=positive_float, default=None, help="price compute at this sustained TFLOPS instead "
                   "of the time measured here (what a faster device would see)")
    p.add_argument("--validate", type=IntList(1), default=[], help="worker counts to measure under MPI here, e.g. 1,2,4")
    p.add_argument("--rounds", type=positive_int, default=2, help="alternating rounds of the validation runs "
                   "(default: %(default)s)")
    p.add_argument("--allreduce-json", type=input_path, action="append", default=[], metavar="FILE",
                   help="with --link measured: fit to these `bench allreduce --out` JSON files instead of "
                   "measuring (repeatable)")
    p.add_argument("--cores", type=positive_int, default=None, help="cores the workers share with --link measured "
                   "(default: this host's)")
    p.add_argument("--profile-json", type=input_path, default=None, metavar="FILE", help="take the one-worker profile from an "
                   "earlier --json output instead of measuring it again (e.g. to try other links)")
    p.add_argument("--json", type=json_output, default=None, metavar="PATH",
                   help="write the prediction as JSON ('-': stdout)")
    p.add_argument("--plot", type=output_file, default=None, metavar="PNG", help="plot predicted (and measured) speedup")
    p.set_defaults(func=run_scaling)


def _fail(command: str, message: str, code: int = 2) -> int:
    print(f"tinyflow bench {command}: error: {message}", file=sys.stderr)
    return code


def run_train(args: argparse.Namespace) -> int:
    """`tinyflow bench train`: run every cell, print the tables, write JSON / plot. The options were
    checked when parsed (counts >= 1, known precisions, writable outputs); the model is checked here."""
    from tinyflow.bench import train as bt
    from tinyflow.bench.workloads import parse_overrides, workload

    try:
        settings = bt.BenchSettings(
            model=args.model, batch_sizes=args.batch_sizes, workers=args.nproc, precisions=args.precision,
            device=args.device, steps=args.steps, warmup=args.warmup, runs=args.runs, rounds=args.rounds,
            compare=args.compare, breakdown=args.breakdown, allreduce=args.allreduce, bucket_mb=args.bucket_mb,
            threads=args.threads, timeout=args.timeout, overrides=parse_overrides(args.config),
            image_size=args.image_size, cuda_graph=args.cuda_graph)
        workload(settings.model, 1, settings.overrides, settings.image_size)  # an unknown model fails here
    except ValueError as exc:
        return _fail("train", str(exc))
    if args.cuda_graph and not args.device.startswith("cuda"):
        return _fail("train", f"--cuda-graph needs a CUDA device (--device cuda:0), not --device {args.device}")
    if max(settings.workers) > 1:
        from tinyflow.parallel.launch import find_mpirun

        if find_mpirun() is None:
            return _fail("train", "--nproc > 1 needs mpirun: pip install 'tinyflow[mpi]'")
    quiet = args.json == "-"
    cells = bt.run_bench(settings, progress=None if quiet else (lambda line: print(line, file=sys.stderr, flush=True)))
    tables = bt.format_tables(cells, settings)
    meta = {"model": args.model, "date": time.strftime("%Y-%m-%d"), "host": _host()}
    if not quiet:
        print(tables, end="", flush=True)
    stem = f"train_{args.model}_{args.device.replace(':', '')}"
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, stem + ".md"), "w") as f:
            f.write(f"<!-- {meta['host']}; {meta['date']}; tinyflow bench train {' '.join(sys.argv[3:])} -->\n\n"
                    + tables)
    json_path = args.json or (os.path.join(args.out, stem + ".json") if args.out else None)
    if json_path:
        _write(json_path, bt.to_json(cells, settings, **meta))
    plot_path = args.plot or (os.path.join(args.out, stem + ".png") if args.out else None)
    if plot_path:
        _make_parent(plot_path)
        bt.plot(cells, settings, plot_path)
        print(f"wrote {plot_path}", file=sys.stderr)
    return 0 if any(c.ok for c in cells) else 1


def _make_parent(path: str) -> None:
    """Create the folder a file option names (checked writable when the option was parsed)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)


def _write(path: str, text: str) -> None:
    """``text`` to the file ``path``, or to standard output for ``-``."""
    if path == "-":
        print(text)
        return
    _make_parent(path)
    with open(path, "w") as f:
        f.write(text)


def run_scaling(args: argparse.Namespace) -> int:
    """`tinyflow bench scaling`: profile, predict, optionally validate; print the table."""
    from tinyflow.bench import scaling as bs
    from tinyflow.bench.workloads import parse_overrides, workload

    try:
        settings = bs.ScalingSettings(
            model=args.model, batch=args.batch_size, workers=args.workers, link=args.link,
            algorithms=args.algorithms, bucket_mb=args.bucket_mb, device=args.device,
            precision=args.precision, tflops=args.tflops, validate=args.validate,
            allreduce_json=args.allreduce_json, steps=args.steps, warmup=args.warmup, runs=args.runs,
            timeout=args.timeout, overrides=parse_overrides(args.config), image_size=args.image_size,
            rounds=args.rounds)
        if args.cores:
            settings.cores = args.cores
        if args.profile_json:
            with open(args.profile_json) as f:
                settings.profile_record = json.load(f)["profile_record"]
        workload(settings.model, settings.batch, settings.overrides, settings.image_size)
        result = bs.run_scaling(settings, log=lambda line: print(line, file=sys.stderr, flush=True))
    except (ValueError, RuntimeError, OSError, KeyError) as exc:
        return _fail("scaling", str(exc), 1 if isinstance(exc, RuntimeError) else 2)
    print(bs.format_result(result, settings), end="")
    if args.json:
        _write(args.json, bs.to_json(result, settings))
    if args.plot:
        _make_parent(args.plot)
        bs.plot_result(result, settings, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def _host() -> str:
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def _argv(args: argparse.Namespace) -> list[str]:
    """The same `bench allreduce` command line, for the relaunch under mpirun."""
    argv = ["bench", "allreduce", "--nproc", str(args.nproc), "--algorithms", ",".join(args.algorithms),
            "--sizes", ",".join(map(str, args.sizes)), "--iters", str(args.iters), "--warmup", str(args.warmup),
            "--transport", args.transport, "--timeout", str(args.timeout)]
    if args.out:
        argv += ["--out", os.path.abspath(args.out)]
    if args.plot:
        argv += ["--plot", os.path.abspath(args.plot)]
    return argv


def run(args: argparse.Namespace) -> int:
    """Measure, then (rank 0) print the table and write the files."""
    from tinyflow.parallel.benchmark import run_allreduce_bench
    from tinyflow.parallel.world import launched_by_mpi

    # Every option was checked when parsed, before mpirun starts N workers that would each fail alike.
    algorithms, sizes = args.algorithms, args.sizes

    if args.transport == "local":
        from tinyflow.parallel.local import run_local

        def fn(comm):  # noqa: ANN001, ANN202
            return run_allreduce_bench(comm, algorithms, sizes, args.iters, args.warmup)

        rows = run_local(fn, args.nproc, timeout=args.timeout)[0]
        _report(rows, args.nproc, "local", args)
        return 0

    if args.nproc > 1 and not launched_by_mpi():
        from tinyflow.parallel.launch import mpirun_command, mpirun_env

        try:
            cmd = mpirun_command(args.nproc, [sys.executable, "-m", "tinyflow.cli", *_argv(args)])
        except RuntimeError as exc:
            print(f"tinyflow bench allreduce: error: {exc}", file=sys.stderr)
            return 2
        return subprocess.run(cmd, env=mpirun_env(nproc=args.nproc)).returncode

    from tinyflow.parallel.communicator import CommError
    from tinyflow.parallel.mpi import mpi_comm

    comm = mpi_comm(timeout=args.timeout)
    try:
        rows = run_allreduce_bench(comm, algorithms, sizes, args.iters, args.warmup)
    except CommError as exc:
        print(f"tinyflow bench allreduce: error on rank {comm.rank}: {exc}", file=sys.stderr, flush=True)
        comm.abort(1)
        return 1
    if comm.rank == 0:
        _report(rows, comm.size, "mpi", args)
    return 0


def _report(rows: list, nproc: int, transport: str, args: argparse.Namespace) -> None:
    from tinyflow.parallel.benchmark import format_table, plot, ratios, rows_to_json

    table = format_table(rows, nproc, transport)
    print(table, flush=True)
    names = {r.algorithm for r in rows}
    if "auto" in names and len(names - {"auto", "naive"}) > 0:
        from tinyflow.parallel.benchmark import auto_report

        text, ok = auto_report(rows)
        text = ("auto against the best of " + ", ".join(sorted(names - {"auto", "naive"})) + " at each size:\n"
                + text + f"\nauto within 5% of the best at every size: {'yes' if ok else 'NO'}")
        print(text, flush=True)
        table += "\n\n```\n" + text + "\n```"
    for other in ("native", "naive", "tree"):
        if "ring" in names and other in names:
            best = ratios(rows, "ring", other)
            if best:
                largest = max(best)
                print(f"ring / {other} busbw at the largest size: {best[largest]:.2f}x")
    stem = f"allreduce_np{nproc}_{transport}"
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, stem + ".md"), "w") as f:
            f.write(table + "\n")
        with open(os.path.join(args.out, stem + ".json"), "w") as f:
            f.write(rows_to_json(rows, nproc=nproc, transport=transport))
    path = args.plot or (os.path.join(args.out, stem + ".png") if args.out else None)
    if path:
        _make_parent(path)
        plot(rows, path, f"all-reduce busbw, {nproc} ranks ({transport})")
        print(f"wrote {path}", file=sys.stderr)
