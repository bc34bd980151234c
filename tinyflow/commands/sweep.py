"""`tinyflow sweep`: separate training runs side by side, one per device slot (tinyflow/recipes/sweep.py).

    tinyflow sweep --grid 'lr=0.01,0.1 batch_size=32,64' resnet20 --epochs 2 --slots 2
    tinyflow sweep sweep.toml --devices cuda:0,cuda:1 --out runs/sweep1

CONFIG.toml or MODEL comes first, then any `tinyflow train` options, passed to every run;
the sweep's own options may stand anywhere.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from tinyflow.commands.options import (
    DeviceList,
    OptionError,
    Parsed,
    RaisingParser,
    output_dir,
    positive_float,
    positive_int,
    text,
    unwritable,
)


def _grid(text: str) -> dict[str, list[Any]]:
    from tinyflow.recipes.sweep import parse_grid

    return parse_grid(text)


def _add_sweep_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grid", type=Parsed(_grid, ("", "lr", "lr=", "lr=0.1,0.1", "lr=1 lr=2")), default=None,
                   help="space-separated OPTION=V1,V2,... lists, one run per combination, e.g. "
                   "'lr=0.01,0.1 batch_size=32,64' (a value given twice is an error: each point runs once)")
    p.add_argument("--slots", type=positive_int, default=None, help="CPU slots: runs side by side, each pinned to "
                   "cores // SLOTS cores with that many threads (default: 1)")
    p.add_argument("--devices", type=DeviceList(), default=None, help="comma list of devices, one run on each at "
                   "a time, e.g. cuda:0,cuda:1")
    p.add_argument("--out", type=output_dir, default=None, help="folder of the runs, the state and the results "
                   "(default: runs/sweep-MODEL); run again with the same --out to resume")
    p.add_argument("--metric", type=text, default=None, help="per-epoch metric to rank by (default: val_top1, or "
                   "val_ppl for lstm-lm)")
    p.add_argument("--mode", choices=("max", "min"), default=None, help="is a higher or lower metric better "
                   "(default: from its name)")
    p.add_argument("--poll", type=positive_float, default=1.0, help="seconds between looks at the runs "
                   "(default: %(default)s)")
    p.add_argument("--dry-run", action="store_true", help="print the runs and their commands, start nothing")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `sweep` command."""
    p = subparsers.add_parser(
        "sweep", help="run a grid of train options as separate runs side by side (one per slot)",
        description="Expand a grid of `tinyflow train` options (from --grid or CONFIG.toml) into runs and "
        "run them side by side, one per slot (a GPU with --devices, or a group of CPU cores with --slots), "
        "queueing the rest. Each run is an ordinary `tinyflow train` with its own checkpoint folder in "
        "OUT; a failed run is reported and the others go on; running the same sweep again resumes it. "
        "Shows a live table, and writes OUT/results.md, OUT/results.json (ranked by the metric) and "
        "OUT/curves.png (every run's validation curve).",
    )
    _add_sweep_options(p)
    p.add_argument("rest", nargs=argparse.REMAINDER, metavar="CONFIG.toml|MODEL [train options]",
                   help="a sweep file, or a model name with --grid; then `tinyflow train` options")
    p.set_defaults(func=run)


def _split(args: argparse.Namespace) -> tuple[argparse.Namespace, str, str | None, list[str]]:
    """Sweep options given after the model count too (checked as those before it: a bad one is an
    OptionError naming it); returns (options, spec, model, train args)."""
    again = RaisingParser(prog="tinyflow sweep", add_help=False)
    _add_sweep_options(again)
    late, rest = again.parse_known_args(args.rest)
    for key in late.given:
        setattr(args, key, getattr(late, key))
    if not rest or rest[0].startswith("-"):
        raise ValueError("give CONFIG.toml or MODEL first (then the train options)")
    spec, rest = rest[0], rest[1:]
    model = None
    if spec.endswith(".toml") and rest and not rest[0].startswith("-"):
        model, rest = rest[0], rest[1:]
    return args, spec, model, rest


def _train_parser() -> RaisingParser:
    """`tinyflow train`'s parser, raising OptionError: each run's command line is checked up front."""
    from tinyflow.commands import train

    root = RaisingParser(prog="tinyflow", add_help=False)
    train.register(root.add_subparsers(dest="command"))
    return root


def _check_runs(model: str, fixed: list[str], runs: list, out: str) -> argparse.Namespace:
    """Every run's `tinyflow train` command line must parse (known options, good values, a writable
    checkpoint folder), and the model must be known: checked before any run starts, where a bad one
    would otherwise fail in every slot. Returns the options the runs share, as parsed."""
    from tinyflow.recipes import sweep as sw
    from tinyflow.commands.train import LANGUAGE_MODELS
    from tinyflow.recipes.vision import available_models

    known = sorted({*available_models(), *LANGUAGE_MODELS})
    if model not in known:
        raise ValueError(f"unknown model {model!r}: choose one of {', '.join(known)}")
    problem = unwritable(out)
    if problem:
        raise ValueError(f"--out: {problem}")
    parser = _train_parser()
    try:
        shared = parser.parse_args(["train", model, *fixed])
    except OptionError as exc:
        raise ValueError(f"the train options: {exc}") from None
    for r in runs:
        try:
            parser.parse_args(["train", model, *fixed, *sw.option_args(r.params), "--checkpoint-dir", r.dir])
        except OptionError as exc:
            raise ValueError(f"run {r.name}: {exc} (as a `tinyflow train` option)") from None
    return shared


def run(args: argparse.Namespace) -> int:
    from tinyflow.recipes import sweep as sw
    from tinyflow.commands.train import COMMON_DEFAULTS

    try:
        args, spec, model, train_args = _split(args)
        if spec.endswith(".toml"):
            cfg = sw.load_config(spec)
            model = model or cfg.model
            if args.grid:
                cfg.grid.update(args.grid)
                sw.check_grid(cfg.grid)
        else:
            cfg = sw.SweepConfig(model=spec, grid=args.grid or {})
            model = spec
        if not model:
            raise ValueError("no model: name it in the sweep file (model = \"...\") or after it")
        if not cfg.grid:
            raise ValueError("nothing to sweep: give --grid 'OPTION=V1,V2 ...' or a [grid] table")
        if args.slots and args.devices:
            raise ValueError("give --slots (CPU) or --devices (GPUs), not both")
        slots = sw.device_slots(args.devices) if args.devices else sw.cpu_slots(args.slots or 1)
        out = args.out or os.path.join("runs", f"sweep-{model}")
        fixed = sw.option_args(cfg.options) + list(train_args)
        runs = [sw.Run(sw.run_name(p), p, os.path.join(out, sw.run_name(p))) for p in sw.expand(cfg.grid)]
        shared = _check_runs(model, fixed, runs, out)
    except (ValueError, OSError) as exc:
        print(f"tinyflow sweep: error: {exc}", file=sys.stderr)
        return 2

    metric, mode = sw.default_metric(model)
    metric = args.metric or cfg.metric or metric
    mode = args.mode or cfg.mode or (sw.metric_mode(metric) if (args.metric or cfg.metric) else mode)
    epochs = None if "epochs" in cfg.grid else (shared.epochs or COMMON_DEFAULTS["epochs"])
    print(f"sweep {model}: {len(runs)} runs on {len(slots)} slot(s) "
          f"({', '.join(f'{s.name} x{s.threads} threads' for s in slots)}); ranking by {metric} ({mode}); "
          f"runs in {out}", file=sys.stderr, flush=True)
    if args.dry_run:
        for r in runs:
            print(f"{r.name}: tinyflow train {model} {' '.join(fixed + sw.option_args(r.params))} "
                  f"--checkpoint-dir {r.dir}")
        return 0

    tty = sys.stdout.isatty()
    shown: list = [None]

    def show(sweep: sw.Sweep) -> None:
        """Print the live table when a run starts, ends or finishes an epoch (redrawn on a terminal)."""
        state = [(r.status, r.epoch) for r in sweep.runs]
        if state == shown[0]:
            return
        shown[0] = state
        table = sw.live_table(sweep)
        print(("\x1b[H\x1b[2J" + table) if tty else table + "\n", flush=True)

    sweep = sw.Sweep(runs, slots, sw.train_launcher(model, fixed), out, metric=metric, mode=mode,
                     poll_seconds=args.poll, on_change=show, epochs=epochs)
    try:
        sweep.run()
    except KeyboardInterrupt:
        print(f"interrupted: run the same command again to resume ({out})", file=sys.stderr)
        return 130
    results = sw.results_table(sweep)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(f"# sweep {model}: ranked by {metric} ({mode})\n\n" + results)
    with open(os.path.join(out, "results.json"), "w") as f:
        f.write(sw.results_json(sweep))
    plotted = sw.plot_curves(sweep, os.path.join(out, "curves.png"))
    print(f"\nresults, ranked by {metric} ({mode} is better):\n\n{results}", flush=True)
    print(f"wrote {os.path.join(out, 'results.md')}, results.json" + (", curves.png" if plotted else ""),
          file=sys.stderr)
    return 1 if any(r.status == "failed" for r in runs) else 0
