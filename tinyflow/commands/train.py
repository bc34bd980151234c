"""`tinyflow train MODEL`: train an image classifier (or, for lstm-lm, a language model)."""
from __future__ import annotations

import argparse
import os

LANGUAGE_MODELS = ("lstm-lm",)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `train` command."""
    parser = subparsers.add_parser(
        "train", help="train a model (alexnet, resnet20, ..., lstm-lm)",
        description="Train MODEL. Without --data, image models train on the embedded synthetic "
        "data set (generated once, then cached); lstm-lm trains on --text or an embedded corpus. "
        "Writes a progress bar, per-epoch metrics (metrics.jsonl, metrics.png) and a checkpoint "
        "each epoch; --resume continues exactly; Ctrl-C saves a checkpoint first.",
    )
    parser.add_argument("model", help="model name, e.g. alexnet or lstm-lm")
    from tinyflow.recipes.vision import add_train_arguments

    add_train_arguments(parser)
    lm = parser.add_argument_group("language model (lstm-lm)")
    lm.add_argument("--text", default=None, help="training text file (default: an embedded corpus)")
    lm.add_argument("--seq-len", type=int, default=None, help="truncated-BPTT segment length")
    lm.add_argument("--clip", type=float, default=None, help="clip the gradient norm to this value")
    lm.add_argument("--level", choices=("char", "word"), default=None, help="tokens: characters or words (default: char)")
    lm.add_argument("--embedding-dim", type=int, default=None, help="embedding size (default: the preset's)")
    lm.add_argument("--hidden-size", type=int, default=None, help="LSTM hidden size (default: the preset's)")
    lm.add_argument("--num-layers", type=int, default=None, help="LSTM layers (default: the preset's)")
    lm.add_argument("--dropout", type=float, default=None, help="dropout between LSTM layers")
    lm.add_argument("--tie-weights", action="store_true", default=None,
                    help="share the embedding and output weights (needs embedding-dim == hidden-size)")
    dp = parser.add_argument_group("data parallel")
    dp.add_argument("--nproc", type=int, default=1, help="local worker processes (launched with mpirun)")
    dp.add_argument("--allreduce", choices=("ring", "tree", "naive", "native"), default="ring",
                    help="all-reduce algorithm for the gradients (default: %(default)s)")
    dp.add_argument("--trace", default=None, help="write a Chrome-trace timeline of compute and all-reduce")
    parser.set_defaults(func=run)


def _in_mpi_world() -> bool:
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"):
        if int(os.environ.get(var, "1") or 1) > 1:
            return True
    return False


def run(args: argparse.Namespace) -> int:
    """Dispatch to the recipe: language model, data-parallel, or single-process image classifier."""
    if args.model in LANGUAGE_MODELS:
        from tinyflow.recipes.language_model import run_train as run_lm

        return run_lm(args)
    if args.nproc > 1 or _in_mpi_world():
        from tinyflow.recipes.distributed import run_train as run_dp

        return run_dp(args)
    from tinyflow.recipes.vision import run_train

    return run_train(args)
