"""Train and evaluate image classifiers: the recipe behind `tinyflow train MODEL` and `tinyflow eval`.

Data (``--data``):
- nothing: the embedded synthetic set (generated once and cached, see tinyflow.data.synthetic);
- ``DIR`` with ``DIR/train`` (and ``DIR/val``): class folders of images, or packed folders
  written by `tinyflow data pack`;
- ``DIR`` of class folders (or one packed folder): split 90 / 10 into train / val from the seed.
Images are ``--image-size`` square: random-resized crops and flips for training, a resize and a
centre crop for validation, normalised with the ImageNet mean and std.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tinyflow.data import (
    DataLoader,
    Dataset,
    EmptyDatasetError,
    ImageFolder,
    PackedDataset,
    SkippedSample,
    is_packed,
    random_split,
    synthetic,
)
from tinyflow.data import transforms as T
from tinyflow.recipes.common import (
    LOG_EVERY,
    CheckpointMismatchError,
    evaluate,
    fit,
    load_checkpoint,
    load_model_state,
    make_optimizer,
    out_of_memory_message,
    resume_path,
)
from tinyflow.recipes.common import (
    fill_defaults as common_fill_defaults,
)

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


class InputMismatchError(ValueError):
    """Images that do not fit the model (channels or size)."""


# ----------------------------------------------------------------------------- data


AUGMENTATIONS = ("auto", "pad-crop", "resized-crop", "none")


def image_transform(size: int, train: bool, crop_scale: float = 0.5, augment: str = "resized-crop") -> T.Compose:
    """The pipeline to a normalised (3, size, size) array: for training, a random crop and flip.

    ``augment``: "resized-crop" (ImageNet style: a random area of at least ``crop_scale``, resized),
    "pad-crop" (CIFAR style: pad by size/16 and crop back; no resampling blur, for images that are
    already ``size`` square) or "none". Evaluation resizes the shorter side and centre-crops.
    """
    if augment not in AUGMENTATIONS[1:]:
        raise ValueError(f"unknown augmentation {augment!r}: choose one of {', '.join(AUGMENTATIONS)}")
    head: list = [T.Resize(size), T.CenterCrop(size)]
    if train and augment == "resized-crop":
        head = [T.RandomResizedCrop(size, scale=(crop_scale, 1.0)), T.RandomHorizontalFlip()]
    elif train and augment == "pad-crop":
        head += [T.RandomCrop(size, padding=max(1, size // 16)), T.RandomHorizontalFlip()]
    return T.Compose([*head, T.ToTensor(), T.Normalize(MEAN, STD)])


class _WithTransform(Dataset):
    """A view of a dataset (e.g. a Subset of a PackedDataset) with its own transform."""

    def __init__(self, base: Dataset, transform: Callable[[Any], Any]):
        self.base, self.transform = base, transform

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int) -> tuple:
        img, target = self.base[i]
        return self.transform(img), target


@dataclass
class VisionData:
    """Train and validation datasets plus what the model and checkpoints need to know."""

    train: Dataset
    val: Dataset | None
    classes: list[str]
    source: str


def _open(path: str) -> Dataset:
    return PackedDataset(path) if is_packed(path) else ImageFolder(path)


def build_data(data: str | None, image_size: int, seed: int = 0, crop_scale: float = 0.5,
               val_fraction: float = 0.1, synthetic_size: int | None = None, augment: str = "auto") -> VisionData:
    """The datasets for ``--data`` (see the module docstring).

    ``augment="auto"`` pads and crops the synthetic and packed data sets (their images already
    have their final size) and takes random resized crops of anything else.
    """
    if augment == "auto":
        pre_sized = data is None or is_packed(data) or is_packed(os.path.join(data, "train"))
        augment = "pad-crop" if pre_sized else "resized-crop"
    train_tf = image_transform(image_size, True, crop_scale, augment)
    val_tf = image_transform(image_size, False)
    if data is None:
        root = str(synthetic.default_dataset(size=synthetic_size or max(64, image_size)))
        source = f"synthetic data set {root}"
        data = root
    else:
        source = data
        if not os.path.isdir(data):
            raise FileNotFoundError(f"--data {data!r} does not exist or is not a directory")
    train_dir, val_dir = os.path.join(data, "train"), os.path.join(data, "val")
    if _is_split_root(data):
        train = _open(train_dir)
        classes = list(train.classes)
        if os.path.isdir(val_dir):
            val = _open(val_dir)
            if list(val.classes) != classes:
                raise EmptyDatasetError(f"{val_dir!r} has classes {val.classes[:5]} but {train_dir!r} has "
                                        f"{classes[:5]}: train/ and val/ must have the same class folders")
        else:
            train, val = random_split(train, [1 - val_fraction, val_fraction], seed=seed)
    else:
        full = _open(data)
        classes = list(full.classes)
        train, val = random_split(full, [1 - val_fraction, val_fraction], seed=seed)
    return VisionData(_WithTransform(train, train_tf), _WithTransform(val, val_tf) if len(val) else None, classes, source)


def _is_split_root(path: str) -> bool:
    """True for DIR/train (+ DIR/val) layouts; False for DIR/<class>/... and packed folders."""
    if is_packed(path):
        return False
    names = {e.name for e in os.scandir(path) if e.is_dir() and not e.name.startswith(".")}
    return "train" in names and names <= {"train", "val", "test"}


# ----------------------------------------------------------------------------- models


def _models_module() -> Any:
    try:
        import models
    except ImportError as exc:
        raise RuntimeError(f"cannot import the models package ({exc}); run from the tinyflow checkout "
                           "or install tinyflow") from exc
    return models


def available_models() -> list[str]:
    models = _models_module()
    names = getattr(models, "MODELS", None)
    return sorted(names) if names is not None else []


def build_model(name: str, num_classes: int) -> Any:
    """``models.get_model(name, num_classes=...)``, with the known names in the error."""
    models = _models_module()
    known = available_models()
    if known and name not in known:
        raise ValueError(f"unknown model {name!r}: choose one of {', '.join(known)}")
    return models.get_model(name, num_classes=num_classes)


def model_config(model: Any) -> dict[str, Any]:
    """The model's config dataclass as a dict (stored in checkpoints), or {}."""
    cfg = getattr(model, "config", None) or getattr(model, "cfg", None)
    if cfg is not None and is_dataclass(cfg):
        return {k: v for k, v in asdict(cfg).items() if isinstance(v, (int, float, str, bool, type(None), list, tuple))}
    return {}


def expected_input(model: Any) -> tuple[int | None, int | None]:
    """(channels, image side) that the model's config asks for, where it says."""
    cfg = model_config(model)
    channels = cfg.get("in_channels")
    size = cfg.get("image_size", cfg.get("input_size"))
    if isinstance(size, (list, tuple)):
        size = size[-1]
    return channels, size


def default_image_size(name: str | Any, fallback: int = 64) -> int:
    """The input side that model ``name``'s preset config asks for (without building the model).

    A built model may be passed instead of a name: its config is read.
    """
    if not isinstance(name, str):
        size = expected_input(name)[1]
        return int(size) if size else fallback
    models = _models_module()
    get_config = getattr(models, "get_config", None)
    if get_config is None or name not in available_models():
        return fallback
    size = getattr(get_config(name), "image_size", None)
    if isinstance(size, (list, tuple)):
        size = size[-1]
    return int(size) if size else fallback


def check_input(model: Any, name: str, sample_shape: tuple[int, ...], source: str) -> None:
    """Refuse images whose channels or size the model cannot take, naming both and the data."""
    channels, size = expected_input(model)
    c, h, w = sample_shape
    if channels is not None and c != channels:
        raise InputMismatchError(f"model {name} expects {channels}-channel images but the data in {source} "
                                 f"gives {c} channels (sample shape {sample_shape})")
    if size is not None and (h, w) != (size, size):
        raise InputMismatchError(f"model {name} expects {size}x{size} images but the data in {source} "
                                 f"gives {h}x{w}: pass --image-size {size}")


def first_sample(dataset: Dataset, source: str) -> tuple[Any, Any]:
    """The first readable sample (corrupt files are skipped here too; the loader reports them)."""
    for i in range(min(len(dataset), 1000)):
        try:
            return dataset[i]
        except SkippedSample:
            continue
    raise EmptyDatasetError(f"no readable image among the first {min(len(dataset), 1000)} of {source}")


def probe_forward(model: Any, name: str, sample: np.ndarray, source: str, device: Any = None) -> None:
    """Run one eval-mode forward pass on one sample so a shape mismatch fails early and clearly."""
    import tinyflow

    x = tinyflow.tensor(np.asarray(sample)[None], device=device)  # (1, C, H, W)
    was_training = model.training
    model.eval()
    try:
        with tinyflow.no_grad():
            model(x)
    except MemoryError:
        raise
    except Exception as exc:  # a shape error deep in the model: say which data and shape caused it
        raise InputMismatchError(f"model {name} cannot take images of shape {tuple(x.shape[1:])} "
                                 f"(C, H, W) from {source}: {type(exc).__name__}: {exc}") from exc
    finally:
        model.train(was_training)


# ----------------------------------------------------------------------------- commands


# Defaults tuned so that `tinyflow train alexnet` (synthetic data, CPU) is clearly above chance after a
# few minutes: AlexNet has no batch norm and plain SGD leaves it on the loss plateau for longer.
DEFAULT_LR = {"sgd": 0.02, "adam": 3e-4}
DEFAULTS = {"epochs": 3, "batch_size": 32, "optimizer": "adam"}
DEFAULT_WEIGHT_DECAY = {"sgd": 5e-4, "adam": 0.0}


def fill_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Give the options left at None (shared with other recipes) their image-classifier defaults."""
    return common_fill_defaults(args, DEFAULTS, DEFAULT_LR, DEFAULT_WEIGHT_DECAY)


def train_classifier(model: Any, model_name: str, data: VisionData, args: argparse.Namespace,
                     progress: bool = True, **fit_kwargs: Any) -> Any:
    """Loaders, optimizer, schedule and the fit loop for a built model and data (see run_train)."""
    import tinyflow.optim as optim

    device = getattr(args, "device", "cpu") or "cpu"
    workers = getattr(args, "workers", 0)
    skip_log = os.path.join(args.checkpoint_dir, "skipped.txt") if args.checkpoint_dir else None
    if skip_log:
        os.makedirs(args.checkpoint_dir, exist_ok=True)
    train_loader = DataLoader(data.train, batch_size=args.batch_size, shuffle=True, drop_last=len(data.train) > args.batch_size,
                              num_workers=workers, seed=args.seed, device=device, skip_log=skip_log)
    val_loader = (DataLoader(data.val, batch_size=args.batch_size, num_workers=workers, seed=args.seed,
                             device=device, skip_log=skip_log) if data.val is not None else None)
    model.to(device)
    sample, _ = first_sample(data.train, data.source)
    check_input(model, model_name, tuple(sample.shape), data.source)
    probe_forward(model, model_name, sample, data.source, device)

    fill_defaults(args)
    optimizer = make_optimizer(args.optimizer, list(model.parameters()), args.lr, args.momentum, args.weight_decay)
    scheduler = optim.CosineAnnealingLR(optimizer, T_max=max(args.epochs, 1)) if args.schedule == "cosine" else None
    meta = {"model_name": model_name, "model_config": model_config(model), "classes": data.classes,
            "num_classes": len(data.classes), "image_size": args.image_size, "seed": args.seed}
    resume = resume_path(args)
    return fit(model, optimizer, train_loader, val_loader, epochs=args.epochs, checkpoint_dir=args.checkpoint_dir,
               meta=meta, scheduler=scheduler, resume=resume, progress=progress,
               amp=getattr(args, "amp", None), log_every=getattr(args, "log_every", None) or LOG_EVERY,
               **fit_kwargs)


def run_train(args: argparse.Namespace) -> int:
    """`tinyflow train MODEL`: build the data and model, train, log; returns the exit status."""
    import tinyflow

    fill_defaults(args)
    tinyflow.manual_seed(args.seed)
    if args.checkpoint_dir is None:
        args.checkpoint_dir = os.path.join("runs", args.model)
    try:
        known = available_models()
        if known and args.model not in known:
            raise ValueError(f"unknown model {args.model!r}: choose one of {', '.join(known)}")
        if args.image_size is None:
            args.image_size = default_image_size(args.model)
        data = build_data(args.data, args.image_size, seed=args.seed, crop_scale=args.crop_scale,
                          augment=getattr(args, "augment", "auto"))
        print(f"data: {data.source}: {len(data.train)} train / {len(data.val) if data.val else 0} val images, "
              f"{len(data.classes)} classes, {args.image_size}x{args.image_size}", file=sys.stderr)
        model = build_model(args.model, num_classes=len(data.classes))
        result = train_classifier(model, args.model, data, args, progress=not getattr(args, "quiet", False))
    except MemoryError as exc:
        msg = str(exc) if "batch size" in str(exc) else out_of_memory_message(args.batch_size, f"model {args.model}")
        print(f"tinyflow train: error: {msg}", file=sys.stderr)
        return 1
    except (EmptyDatasetError, InputMismatchError, CheckpointMismatchError, FileNotFoundError, ValueError) as exc:
        print(f"tinyflow train: error: {exc}", file=sys.stderr)
        return 2
    if result.interrupted:
        return 130
    if result.history:
        last = result.history[-1]
        summary = ", ".join(f"{k} {last[k]:.4f}" for k in ("train_loss", "val_loss", "val_top1", "val_top5") if k in last)
        print(f"finished {args.model}: {summary}; checkpoints, metrics.jsonl and metrics.png in {args.checkpoint_dir}",
              file=sys.stderr)
    return 0


def run_eval(args: argparse.Namespace) -> int:
    """`tinyflow eval MODEL --checkpoint F [--data DIR]`: loss and top-1/top-5 of a checkpoint."""
    import json

    try:
        state = load_checkpoint(args.checkpoint, args.model)
        image_size = args.image_size or state.get("image_size") or 64
        classes = state.get("classes")
        data = build_data(args.data, image_size, seed=state.get("seed", 0))
        if classes is not None and list(data.classes) != list(classes):
            raise CheckpointMismatchError(
                f"checkpoint {args.checkpoint!r} was trained on classes {list(classes)[:5]}... but {data.source} "
                f"has classes {list(data.classes)[:5]}...: evaluate on data with the same class folders")
        dataset = data.val if data.val is not None else data.train
        model = build_model(args.model, num_classes=len(data.classes))
        load_model_state(model, state["model"], args.checkpoint)
        model.to(args.device)
        sample, _ = first_sample(dataset, data.source)
        check_input(model, args.model, tuple(sample.shape), data.source)
        probe_forward(model, args.model, sample, data.source, args.device)
        loader = DataLoader(dataset, batch_size=args.batch_size, num_workers=args.workers, seed=0, device=args.device)
        metrics = evaluate(model, loader, prefix="eval")
    except MemoryError:
        print(f"tinyflow eval: error: {out_of_memory_message(args.batch_size, f'evaluating {args.model}')}", file=sys.stderr)
        return 1
    except (EmptyDatasetError, InputMismatchError, CheckpointMismatchError, FileNotFoundError, ValueError) as exc:
        print(f"tinyflow eval: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"model": args.model, "checkpoint": str(Path(args.checkpoint)), "images": len(dataset), **metrics}))
    return 0


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The image-classifier options of `tinyflow train`."""
    parser.add_argument("--data", default=None, help="image folder (DIR/train + DIR/val, or DIR/<class>/...) "
                        "or packed folder; default: the embedded synthetic data set")
    parser.add_argument("--epochs", type=int, default=None, help=f"epochs to train (default: {DEFAULTS['epochs']} for images)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help=f"examples per step (default: {DEFAULTS['batch_size']} for images)")
    parser.add_argument("--lr", type=float, default=None, help="learning rate (default: 3e-4 for adam, 0.02 for sgd)")
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default=None, help="default: adam for images")
    parser.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (default: %(default)s)")
    parser.add_argument("--weight-decay", type=float, default=None, help="L2 penalty (default: 5e-4 for sgd, 0 for adam)")
    parser.add_argument("--schedule", choices=("cosine", "constant"), default="cosine",
                        help="learning-rate schedule over the epochs (default: %(default)s)")
    parser.add_argument("--image-size", type=int, default=None, help="square input side (default: the model's)")
    parser.add_argument("--augment", choices=AUGMENTATIONS, default="auto",
                        help="training augmentation: random resized crops, pad-and-crop, or none; auto = "
                        "pad-crop for the synthetic and packed sets, resized-crop otherwise (default: auto)")
    parser.add_argument("--crop-scale", type=float, default=0.35,
                        help="smallest area fraction of the random resized crops (default: %(default)s)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda:N (default: %(default)s)")
    parser.add_argument("--checkpoint-dir", default=None, help="checkpoints, metrics.jsonl and metrics.png "
                        "(default: runs/MODEL)")
    parser.add_argument("--resume", nargs="?", const="auto", default=None, metavar="CHECKPOINT",
                        help="continue from CHECKPOINT (default: CHECKPOINT_DIR/last.ckpt)")
    parser.add_argument("--seed", type=int, default=0, help="seed of weights, shuffling and augmentation (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=min(2, max(0, (os.cpu_count() or 1) - 1)),
                        help="data-loading processes, 0 = in the training process (default: %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--log-every", type=int, default=None, metavar="STEPS",
                        help="steps between progress updates, when the loss and accuracy are read from "
                             f"the device (steps in between never wait for it; default: {LOG_EVERY})")
    parser.add_argument("--amp", choices=("bf16", "fp16"), default=None,
                        help="mixed precision: convolutions, linear layers and matmuls in bf16/fp16; losses, "
                             "softmax and norms in float32; float32 master weights (fp16 adds dynamic loss "
                             "scaling). For GPUs: on the CPU it is no faster than float32")
