"""`tinyflow eval MODEL --checkpoint F [--data DIR]`: loss and top-1/top-5 accuracy of a checkpoint."""
from __future__ import annotations

import argparse

from tinyflow.commands.options import device, input_path, nonnegative_int, positive_int, text


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `eval` command."""
    parser = subparsers.add_parser(
        "eval", help="evaluate a trained image classifier checkpoint",
        description="Evaluate MODEL from CHECKPOINT on --data (its val/ split when it has one; "
        "default: the synthetic data set's val split). Prints one JSON line with the loss and the "
        "top-1 / top-5 accuracy.",
    )
    parser.add_argument("model", type=text, help="model name the checkpoint was trained as, e.g. alexnet")
    parser.add_argument("--checkpoint", type=input_path, required=True, help="a checkpoint written by `tinyflow train`")
    parser.add_argument("--data", type=input_path, default=None, help="image folder or packed folder (default: synthetic)")
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--image-size", type=positive_int, default=None, help="default: the checkpoint's")
    parser.add_argument("--device", type=device, default="cpu")
    parser.add_argument("--workers", type=nonnegative_int, default=0)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tinyflow.recipes.vision import run_eval

    return run_eval(args)
