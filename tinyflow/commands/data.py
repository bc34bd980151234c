"""`tinyflow data pack SRC DST --size S` and `tinyflow data synthetic`: prepare image data sets."""
from __future__ import annotations

import argparse
import os
import sys
import time

from tinyflow.commands.options import input_path, nonnegative_int, output_dir, positive_int


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `data` command and its sub-commands."""
    parser = subparsers.add_parser(
        "data", help="prepare image data sets (pack a folder, generate the synthetic default)",
        description="Prepare image data sets for `tinyflow train`.",
    )
    sub = parser.add_subparsers(dest="data_command", metavar="{pack,synthetic}")
    sub.required = True

    pack = sub.add_parser(
        "pack", help="decode an image folder once into a memory-mapped uint8 array",
        description="Decode SRC (SRC/<class>/*.jpg, or SRC/train and SRC/val of those) into DST: "
        "images.npy (N, S, S, 3) uint8 memory-mapped, labels.npy and meta.json, so that training "
        "epochs skip JPEG decoding. Each image is resized (shorter side S) and centre-cropped.",
    )
    pack.add_argument("src", type=input_path, help="image folder: SRC/<class>/<image>, or SRC/train + SRC/val")
    pack.add_argument("dst", type=output_dir, help="output folder (must not exist or be empty)")
    pack.add_argument("--size", type=positive_int, required=True, help="side S of the stored square images")
    pack.add_argument("--workers", type=nonnegative_int, default=min(4, os.cpu_count() or 1),
                      help="decoding processes (default: %(default)s)")

    synth = sub.add_parser(
        "synthetic", help="generate (once) the synthetic default data set and print its folder",
        description="Generate the embedded synthetic ImageNet-layout data set used by "
        "`tinyflow train` without --data, and print where it is cached.",
    )
    synth.add_argument("--size", type=positive_int, default=64, help="image side (default: %(default)s)")
    synth.add_argument("--train-per-class", type=positive_int, default=300)
    synth.add_argument("--val-per-class", type=nonnegative_int, default=60)
    synth.add_argument("--seed", type=nonnegative_int, default=0)
    synth.add_argument("--out", type=output_dir, default=None, help="cache folder (default: $TINYFLOW_HOME/datasets "
                       "or $XDG_CACHE_HOME/tinyflow/datasets or ~/.cache/tinyflow/datasets)")
    parser.set_defaults(func=run)


def _progress(done: int, total: int) -> None:
    if done == total or done % 500 == 0:
        print(f"\r  {done}/{total} images", end="\n" if done == total else "", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Run `tinyflow data ...`; returns the exit status."""
    from tinyflow.data import EmptyDatasetError, pack_folder, synthetic
    from tinyflow.recipes.vision import warnings_as_lines

    if args.data_command == "synthetic":
        root = synthetic.default_dataset(args.train_per_class, args.val_per_class, args.size, args.seed, root=args.out)
        print(root)
        return 0

    src, dst = args.src, args.dst
    splits = [s for s in ("train", "val") if os.path.isdir(os.path.join(src, s))]
    jobs = [(os.path.join(src, s), os.path.join(dst, s)) for s in splits] or [(src, dst)]
    try:
        for job_src, job_dst in jobs:
            start = time.perf_counter()
            print(f"packing {job_src} -> {job_dst} at {args.size}x{args.size}", file=sys.stderr)
            meta = warnings_as_lines(lambda s=job_src, d=job_dst: pack_folder(s, d, args.size, workers=args.workers,
                                                                              progress=_progress), "data pack")
            skipped = len(meta["skipped"])
            print(f"  {meta['count']} images in {len(meta['classes'])} classes, {skipped} skipped, "
                  f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
    except (EmptyDatasetError, FileNotFoundError, FileExistsError, ValueError) as exc:
        print(f"tinyflow data pack: error: {exc}", file=sys.stderr)
        return 2
    return 0
