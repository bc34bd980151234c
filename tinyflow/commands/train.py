"""`tinyflow train MODEL`: its options, their defaults, and which recipe runs how.

Image classifiers (alexnet, resnet20, ...) train with tinyflow/recipes/vision.py: in this process,
or with ``--nproc N`` as N workers that this command starts under mpirun (a process that an MPI
launcher started, the user's own ``mpirun -H host1,host2 ...`` included, joins that world
instead). lstm-lm trains with tinyflow/recipes/language_model.py. Options that the two families
share but set differently (learning rate, weight decay, clipping), and those that a resumed run
continues with unless given again (``RESUMED_OPTIONS``: epochs, batch size, optimizer, ...), are
left at None by the parser and filled here once, by ``fill_defaults``. Which options the command
line gave (``args.given``, that a resume reconciles with its checkpoint) the option layer records
(tinyflow/commands/options.py, where every option's check is declared).

Stopping: within the command SIGTERM and SIGUSR1 count as Ctrl-C (tinyflow.recipes.loop); with
``--nproc N`` this process forwards Ctrl-C and SIGTERM to every worker (tinyflow.parallel.launch).
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field

from tinyflow.commands.options import (
    Number,
    device,
    input_path,
    nonnegative_float,
    nonnegative_int,
    output_dir,
    output_file,
    positive_int,
    text,
)
from tinyflow.parallel.allreduce import ALGORITHM_CHOICES, DEFAULT_ALGORITHM
from tinyflow.recipes.checkpoint import RESUMED_OPTIONS
from tinyflow.recipes.loop import DIVERGENCE_FACTOR, DIVERGENCE_FLOOR, LOG_EVERY, check_amp
from tinyflow.recipes.vision import AUGMENTATIONS, default_image_size

LANGUAGE_MODELS = ("lstm-lm",)


@dataclass(frozen=True)
class FamilyDefaults:
    """The defaults of the options that depend on the kind of model."""

    lr: dict[str, float] = field(default_factory=dict)  # per optimizer
    weight_decay: dict[str, float] = field(default_factory=dict)  # per optimizer
    clip: float | None = None  # gradient-norm clipping (language models only)


# The defaults that are the same for every model (filled by fill_defaults, see the module docstring).
COMMON_DEFAULTS = {"epochs": 3, "batch_size": 32, "optimizer": "adam", "schedule": "cosine", "momentum": 0.9}


# Tuned so that `tinyflow train alexnet` (synthetic data, CPU) is clearly above chance after a few
# minutes: AlexNet has no batch norm and plain SGD leaves it on the loss plateau for longer.
IMAGE_DEFAULTS = FamilyDefaults(lr={"sgd": 0.02, "adam": 3e-4}, weight_decay={"sgd": 5e-4, "adam": 0.0})
LANGUAGE_MODEL_DEFAULTS = FamilyDefaults(lr={"sgd": 1.0, "adam": 2e-3}, weight_decay={"sgd": 0.0, "adam": 0.0}, clip=1.0)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `train` command and all its options."""
    parser = subparsers.add_parser(
        "train", help="train a model (alexnet, resnet20, ..., lstm-lm)",
        description="Train MODEL. Without --data, image models train on the embedded synthetic "
        "data set (generated once, then cached); lstm-lm trains on --text or an embedded corpus. "
        "Writes a progress bar, per-epoch metrics (metrics.jsonl, metrics.png) and a checkpoint "
        "each epoch; --resume continues exactly. Ctrl-C or SIGTERM (on every worker of --nproc N) "
        "saves a checkpoint first, then exits with status 130. Training stops with an error when "
        f"the loss becomes NaN or infinite, or diverges: when a step's loss exceeds both "
        f"{DIVERGENCE_FACTOR:g} times the run's first loss and {DIVERGENCE_FLOOR:g}.",
    )
    parser.add_argument("model", type=text, help="model name, e.g. alexnet or lstm-lm")

    training = parser.add_argument_group("training")
    training.add_argument("--epochs", type=positive_int, default=None,
                          help="epochs to train in all, counting those of a run resumed (default: 3; resumed: "
                          "the run's own; a new value re-times the schedule over it)")
    training.add_argument("--batch-size", type=positive_int, default=None,
                          help="examples per step, per worker (default: 32; a run resumed under another one "
                          "goes on from the same sample)")
    training.add_argument("--optimizer", choices=("sgd", "adam"), default=None,
                          help="default: adam (resumed: the run's own; another one is an error)")
    training.add_argument("--lr", type=nonnegative_float, default=None,
                          help="learning rate (default: 3e-4 for adam, 0.02 for sgd; lstm-lm: 2e-3 for adam, 1.0 "
                          "for sgd; resumed: the run's own, or this one from the epoch resumed)")
    training.add_argument("--momentum", type=nonnegative_float, default=None, help="SGD momentum (default: 0.9)")
    training.add_argument("--weight-decay", type=nonnegative_float, default=None,
                          help="L2 penalty (default: 5e-4 for sgd, 0 for adam; lstm-lm: 0)")
    training.add_argument("--schedule", choices=("cosine", "constant"), default=None,
                          help="learning-rate schedule over the epochs, image models (default: cosine)")
    training.add_argument("--amp", choices=("bf16", "fp16"), default=None,
                          help="mixed precision: convolutions, linear layers and matmuls in bf16/fp16; losses, "
                          "softmax and norms in float32; float32 master weights (fp16 adds dynamic loss "
                          "scaling). For GPUs: on the CPU it is no faster than float32")
    training.add_argument("--device", type=device, default="cpu", help="cpu or cuda:N (default: %(default)s)")
    training.add_argument("--seed", type=nonnegative_int, default=0,
                          help="seed of weights, shuffling and augmentation (default: %(default)s)")
    training.add_argument("--checkpoint-dir", type=output_dir, default=None, help="checkpoints, metrics.jsonl and metrics.png "
                          "(default: runs/MODEL)")
    training.add_argument("--resume", type=input_path, nargs="?", const="auto", default=None, metavar="CHECKPOINT",
                          help="continue from CHECKPOINT (default: CHECKPOINT_DIR/last.ckpt) with its options, "
                          "except those given again (--epochs, --lr, --schedule, --batch-size, ...: the resume "
                          "line says what changed)")
    training.add_argument("--quiet", action="store_true", help="no progress bar")
    training.add_argument("--cuda-graph", action="store_true",
                          help="capture the whole training step once as a CUDA graph after 3 eager steps and replay "
                          "it for every later batch: one launch per step instead of hundreds (cuda devices only; "
                          "what cannot be captured runs eagerly and says why)")
    training.add_argument("--log-every", type=positive_int, default=LOG_EVERY, metavar="STEPS",
                          help="steps between progress updates, when the loss and accuracy are read from "
                          "the device (steps in between never wait for it; default: %(default)s)")

    images = parser.add_argument_group("image models")
    images.add_argument("--data", type=input_path, default=None, help="image folder (DIR/train + DIR/val, or DIR/<class>/...) "
                        "or packed folder; default: the embedded synthetic data set")
    images.add_argument("--image-size", type=positive_int, default=None, help="square input side (default: the model's)")
    images.add_argument("--augment", choices=AUGMENTATIONS, default="auto",
                        help="training augmentation: random resized crops, pad-and-crop, or none; auto = "
                        "pad-crop for the synthetic and packed sets, resized-crop otherwise (default: auto)")
    images.add_argument("--crop-scale", type=Number(0.0, 1.0, above=True), default=0.35,
                        help="smallest area fraction of the random resized crops (default: %(default)s)")
    images.add_argument("--workers", type=nonnegative_int, default=min(2, max(0, (os.cpu_count() or 1) - 1)),
                        help="data-loading processes, 0 = in the training process (default: %(default)s)")
    images.add_argument("--strict", action="store_true",
                        help="refuse a class folder without images (default: a warning; the class keeps its index)")

    lm = parser.add_argument_group("language model (lstm-lm)")
    lm.add_argument("--text", type=input_path, default=None, help="training text file (default: an embedded corpus)")
    lm.add_argument("--seq-len", type=positive_int, default=None, help="truncated-BPTT segment length")
    lm.add_argument("--clip", type=nonnegative_float, default=None, help="clip the gradient norm to this value (default: 1.0)")
    lm.add_argument("--level", choices=("char", "word"), default=None, help="tokens: characters or words (default: char)")
    lm.add_argument("--embedding-dim", type=positive_int, default=None, help="embedding size (default: the preset's)")
    lm.add_argument("--hidden-size", type=positive_int, default=None, help="LSTM hidden size (default: the preset's)")
    lm.add_argument("--num-layers", type=positive_int, default=None, help="LSTM layers (default: the preset's)")
    lm.add_argument("--dropout", type=Number(0.0, 1.0), default=None, help="dropout between LSTM layers")
    lm.add_argument("--tie-weights", action="store_true", default=None,
                    help="share the embedding and output weights (needs embedding-dim == hidden-size)")

    dp = parser.add_argument_group("data parallel (image models)")
    dp.add_argument("--nproc", type=positive_int, default=1, help="local worker processes (launched with mpirun)")
    dp.add_argument("--allreduce", choices=ALGORITHM_CHOICES, default=DEFAULT_ALGORITHM,
                    help="all-reduce algorithm for the gradients; auto picks ring, tree or MPI's own per "
                         "bucket size from a cost model timed once at start-up (default: %(default)s)")
    dp.add_argument("--trace", type=output_file, default=None, help="write a Chrome-trace timeline of compute and all-reduce")
    parser.set_defaults(func=run)


def fill_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Fill the options left at None with the defaults of MODEL's family (once, before training).
    ``args.given``: the options the command line gave, as the option layer recorded them (a resumed
    run takes the others from its checkpoint); for ``args`` made by hand, those it sets of RESUMED_OPTIONS."""
    language_model = args.model in LANGUAGE_MODELS
    family = LANGUAGE_MODEL_DEFAULTS if language_model else IMAGE_DEFAULTS
    given = getattr(args, "given", None)
    if given is None:
        given = {name for name in RESUMED_OPTIONS if getattr(args, name, None) is not None}
    args.given = frozenset(given)
    for name, value in COMMON_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.lr is None:
        args.lr = family.lr[args.optimizer]
    if args.weight_decay is None:
        args.weight_decay = family.weight_decay[args.optimizer]
    if args.clip is None:
        args.clip = family.clip
    if args.checkpoint_dir is None:
        args.checkpoint_dir = os.path.join("runs", args.model)
    if args.image_size is None and not language_model:
        args.image_size = default_image_size(args.model)  # from the preset config: no model is built
    return args


def run(args: argparse.Namespace) -> int:
    """Fill the defaults, then run the recipe: here, or as N workers started under mpirun.
    SIGTERM and SIGUSR1 stop it as Ctrl-C does (the training loop saves a checkpoint first)."""
    from tinyflow.recipes.loop import stop_signals_interrupt

    fill_defaults(args)
    if args.cuda_graph and not args.device.startswith("cuda"):
        print(f"tinyflow train: error: --cuda-graph needs a CUDA device (--device cuda:0), not --device {args.device}: "
              "CUDA graphs replay GPU work; leave --cuda-graph out on the CPU", file=sys.stderr)
        return 2
    if args.cuda_graph and args.model in LANGUAGE_MODELS:
        print(f"tinyflow train: note: --cuda-graph: {args.model} runs eagerly (its hidden state carries over from "
              "batch to batch, which the captured step does not hold yet)", file=sys.stderr)
    try:  # a base install has no ml_dtypes for --amp bf16: one line that says how to get it
        check_amp(args.amp)
    except ValueError as exc:
        print(f"tinyflow train: error: {exc}", file=sys.stderr)
        return 2
    with stop_signals_interrupt():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from tinyflow.parallel.world import launched_by_mpi, world

    if args.model in LANGUAGE_MODELS:
        from tinyflow.recipes.language_model import run_train as train_language_model

        if args.nproc > 1:
            print(f"tinyflow train: error: --nproc {args.nproc}: {args.model} trains in one process (data "
                  "parallelism is for the image models); leave --nproc out", file=sys.stderr)
            return 2

        return train_language_model(args)
    if args.nproc > 1 and not launched_by_mpi():
        return _relaunch(args)
    if args.nproc > 1 and world().size != args.nproc:
        print(f"tinyflow train: note: --nproc {args.nproc} but the MPI world has {world().size} workers; "
              f"using {world().size}", file=sys.stderr)
    from tinyflow.recipes.vision import run_train as train_classifier

    return train_classifier(args)


def _relaunch(args: argparse.Namespace) -> int:
    """Run this command line again as ``args.nproc`` workers under mpirun; its exit status."""
    from tinyflow.parallel.launch import mpirun_command, mpirun_env, run_workers

    argv = sys.argv[1:]
    if "train" not in argv:
        print("tinyflow train: error: --nproc relaunches the command line; run it as "
              "`tinyflow train ... --nproc N` (or under your own mpirun)", file=sys.stderr)
        return 2
    try:
        cmd = mpirun_command(args.nproc, [sys.executable, "-m", "tinyflow.cli", *argv])
    except RuntimeError as exc:
        print(f"tinyflow train: error: {exc}", file=sys.stderr)
        return 2
    print(f"launching {args.nproc} workers: {' '.join(cmd[:3])} ...", file=sys.stderr, flush=True)
    return run_workers(cmd, mpirun_env(nproc=args.nproc),
                       stop_message="stopping: every worker saves a checkpoint at its next log point, then exits "
                       "(Ctrl-C again to abort)")
