"""Train and evaluate image classifiers: the recipe behind `tinyflow train MODEL` and `tinyflow eval`.

Data (``--data``):
- nothing: the embedded synthetic set (generated once and cached, see tinyflow.data.synthetic);
- ``DIR`` with ``DIR/train`` (and ``DIR/val``): class folders of images, or packed folders
  written by `tinyflow data pack`;
- ``DIR`` of class folders (or one packed folder): split 90 / 10 into train / val from the seed.
Images are ``--image-size`` square: random-resized crops and flips for training, a resize and a
centre crop for validation, normalised with the ImageNet mean and std. A class folder without
images is a warning (it keeps its class index), or an error with ``--strict``.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

import tinyflow.nn.functional as F
from tinyflow.data import (
    DataLoader,
    DataLoaderWorkerError,
    Dataset,
    EmptyClassWarning,
    EmptyDatasetError,
    ImageFolder,
    PackedDataset,
    SkippedSample,
    is_packed,
    random_split,
    synthetic,
)
from tinyflow.data import transforms as T
from tinyflow.recipes.checkpoint import (
    RESUMED_OPTIONS,
    Checkpointer,
    CheckpointMismatchError,
    check_world_size,
    load_checkpoint,
    load_model_state,
    options_of,
    resume_options,
    resume_path,
)
from tinyflow.recipes.loop import (
    FitOptions,
    FitResult,
    StepOutput,
    check_amp,
    fit,
    make_optimizer,
    out_of_memory_message,
)
from tinyflow.recipes.metrics import Metrics, topk_counts

R = TypeVar("R")
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


class InputMismatchError(ValueError):
    """Images that do not fit the model (channels or size)."""


# The options of `tinyflow train MODEL` that shaped an image classifier's run, recorded in its
# checkpoints and reconciled on resume (tinyflow.recipes.checkpoint.resume_options; with the number
# of workers, the classes and the model's config, checked by check_resumed_model).
RUN_OPTIONS = (*RESUMED_OPTIONS, "amp", "seed", "data", "image_size", "augment", "crop_scale", "workers")


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


def _open(path: str, strict: bool = False) -> Dataset:
    return PackedDataset(path) if is_packed(path) else ImageFolder(path, strict=strict)


def build_data(data: str | None, image_size: int, seed: int = 0, crop_scale: float = 0.5,
               val_fraction: float = 0.1, synthetic_size: int | None = None, augment: str = "auto",
               strict: bool = False) -> VisionData:  # fmt: skip
    """The datasets for ``--data`` (see the module docstring).

    ``augment="auto"`` pads and crops the synthetic and packed data sets (their images already
    have their final size) and takes random resized crops of anything else. An empty class
    folder is an EmptyClassWarning, or with ``strict`` an EmptyDatasetError.
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
        train = _open(train_dir, strict)
        classes = list(train.classes)
        if os.path.isdir(val_dir):
            val = _open(val_dir, strict)
            if list(val.classes) != classes:
                raise EmptyDatasetError(f"{val_dir!r} has classes {val.classes[:5]} but {train_dir!r} has "
                                        f"{classes[:5]}: train/ and val/ must have the same class folders")
        else:
            train, val = random_split(train, [1 - val_fraction, val_fraction], seed=seed)
    else:
        full = _open(data, strict)
        classes = list(full.classes)
        train, val = random_split(full, [1 - val_fraction, val_fraction], seed=seed)
    return VisionData(_WithTransform(train, train_tf), _WithTransform(val, val_tf) if len(val) else None, classes, source)


def warnings_as_lines(load: Callable[[], R], command: str, show: bool = True) -> R:
    """``load()``, with the EmptyClassWarnings it gives printed as ``tinyflow COMMAND: warning: ...``
    lines (where ``show``) instead of Python's warning format; other warnings pass through."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", EmptyClassWarning)
        result = load()
    for w in caught:
        if issubclass(w.category, EmptyClassWarning):
            if show:
                print(f"tinyflow {command}: warning: {w.message}", file=sys.stderr, flush=True)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return result


def one_line(exc: BaseException) -> str:
    """An error's message on one line: a worker's traceback (DataLoaderWorkerError) is left out."""
    first, _, rest = str(exc).partition("\n")
    return f"{first} (rerun with --workers 0 to see the traceback)" if rest.strip() else first


def _is_split_root(path: str) -> bool:
    """True for DIR/train (+ DIR/val) layouts; False for DIR/<class>/... and packed folders."""
    if is_packed(path):
        return False
    names = {e.name for e in os.scandir(path) if e.is_dir() and not e.name.startswith(".")}
    return "train" in names and names <= {"train", "val", "test"}


# ----------------------------------------------------------------------------- models


def available_models() -> list[str]:
    """The names of the model zoo (tinyflow.models)."""
    from tinyflow import models

    return sorted(models.MODELS)


def build_model(name: str, num_classes: int) -> Any:
    """``tinyflow.models.get_model(name, num_classes=...)``, with the known names in the error."""
    from tinyflow import models

    known = available_models()
    if name not in known:
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


def default_image_size(name: str, fallback: int = 64) -> int:
    """The input side that model ``name``'s preset config asks for (read without building the model)."""
    from tinyflow import models

    if name not in available_models():
        return fallback
    size = getattr(models.get_config(name), "image_size", None)
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


# ----------------------------------------------------------------------------- the step and the metrics


CLASSIFICATION = Metrics(counts=("top1", "top5"), items="images", unit="img", best="top1", higher_is_better=True)


def classification_step(model: Any, batch: tuple[Any, Any]) -> StepOutput:
    """One batch's forward pass: the cross-entropy and the top-1 / top-5 counts, all on the device."""
    x, y = batch
    logits = model(x).float()  # (N, num_classes); the loss is always computed in float32
    counts = topk_counts(logits, y)  # on the device, like the loss: nothing read here
    return StepOutput(F.cross_entropy(logits, y), (counts[0], counts[1]), len(y))


def evaluation_sums(model: Any, loader: Any) -> np.ndarray:
    """CLASSIFICATION's sums over ``loader``, [loss * images, top-1 count, top-5 count, images]
    (eval mode, no grad, float32). They stay on the device until the end: one host read."""
    import tinyflow
    from tinyflow.device import array_module, to_host

    totals: Any = None  # float64 [loss * n, top-1 count, top-5 count] on the device
    count = 0
    was_training = getattr(model, "training", True)
    if hasattr(loader, "set_epoch"):
        loader.set_epoch(0)  # the same batches (and any augmentation) at every evaluation
    model.eval()
    try:
        with tinyflow.no_grad():
            for x, y in loader:
                logits = model(x)  # (N, num_classes)
                loss = F.cross_entropy(logits, y)
                xp = array_module(loss.array)
                counts = topk_counts(logits, y).astype(np.float64)
                row = xp.concatenate([(loss.array.astype(np.float64) * len(y)).reshape(1), counts])  # (3,)
                totals = row if totals is None else totals + row
                count += len(y)
    finally:
        model.train(was_training)
    found = to_host(totals, "evaluate").tolist() if totals is not None else [0.0, 0.0, 0.0]
    return np.array([*found, count], dtype=np.float64)


def evaluate(model: Any, loader: Any, prefix: str = "val") -> dict[str, float]:
    """Mean loss and top-1 / top-5 accuracy of ``model`` over ``loader``: ``{prefix}_loss``, ..."""
    return CLASSIFICATION.summary(evaluation_sums(model, loader), prefix)


# ----------------------------------------------------------------------------- commands


def train_classifier(model: Any, model_name: str, data: VisionData, args: argparse.Namespace, replicas: Any,
                     progress: bool = True, checkpoints: Checkpointer | None = None) -> FitResult:  # fmt: skip
    """Loaders, optimizer and schedule for a built model and its data, then the training loop.

    ``replicas`` (tinyflow.recipes.distributed.Replicas) is this worker's part in a data-parallel
    run: its shard of the data, the DataParallel wrapper, the sums over ranks, rank 0 writing.
    ``checkpoints``: where they go and which to resume from (default: from ``args``).
    """
    import tinyflow.optim as optim

    device = replicas.device(args.device)
    skip_log = None
    if args.checkpoint_dir and not replicas.parallel:  # ranks would write over each other's list
        skip_log = os.path.join(args.checkpoint_dir, "skipped.txt")
        os.makedirs(args.checkpoint_dir, exist_ok=True)
    sampler = replicas.sampler(data.train, shuffle=True, seed=args.seed)  # this worker's shard, or None
    shard = len(sampler) if sampler is not None else len(data.train)
    # The same seed on every rank: augmentation depends on (seed, epoch, sample), not on the rank,
    # so N workers see exactly what one worker of batch N*b would.
    train_loader = DataLoader(data.train, batch_size=args.batch_size, shuffle=sampler is None, sampler=sampler,
                              drop_last=shard > args.batch_size, num_workers=args.workers, seed=args.seed,
                              device=device, skip_log=skip_log, refill_skipped=replicas.parallel)
    val_loader = None
    if data.val is not None:
        val_loader = DataLoader(data.val, batch_size=args.batch_size, sampler=replicas.sampler(data.val, shuffle=False),
                                num_workers=args.workers, seed=args.seed, device=device, skip_log=skip_log,
                                refill_skipped=replicas.parallel)
    model.to(device)
    sample, _ = first_sample(data.train, data.source)
    check_input(model, model_name, tuple(sample.shape), data.source)
    probe_forward(model, model_name, sample, data.source, device)

    steps_log = os.path.join(args.checkpoint_dir, "steps.jsonl") if args.checkpoint_dir else None
    net = replicas.wrap(model, steps_log, args.log_every)  # the model itself in a run of one
    optimizer = make_optimizer(args.optimizer, list(model.parameters()), args.lr, args.momentum, args.weight_decay)
    scheduler = optim.CosineAnnealingLR(optimizer, T_max=max(args.epochs, 1)) if args.schedule == "cosine" else None
    meta = {"model_name": model_name, "model_config": model_config(model), "classes": data.classes,
            "num_classes": len(data.classes), "image_size": args.image_size, "seed": args.seed,
            "options": options_of(args, RUN_OPTIONS), "world_size": replicas.size}
    if replicas.parallel:
        meta.update(allreduce=args.allreduce)
    if checkpoints is None:
        checkpoints = Checkpointer(args.checkpoint_dir, resume=resume_path(args), writer=replicas.writer)
    checkpoints.meta.update(meta)
    try:
        return fit(net, train_loader, classification_step, epochs=args.epochs, optimizer=optimizer,
                   scheduler=scheduler, metrics=CLASSIFICATION,
                   evaluate=(lambda m: evaluation_sums(m, val_loader)) if val_loader is not None else None,
                   checkpoints=checkpoints,
                   options=FitOptions(amp=args.amp, log_every=args.log_every, progress=progress,
                                      allreduce_sum=replicas.allreduce_sum,
                                      cuda_graph=getattr(args, "cuda_graph", False)),
                   hooks=replicas.hooks())
    finally:
        replicas.close()


def check_resumed_model(state: dict[str, Any], model: Any, data: VisionData, path: str | None) -> None:
    """The model and classes of a resumed run must be those of its checkpoint: another class list
    (the data's folders) or model configuration is a CheckpointMismatchError naming both."""
    classes = state.get("classes")
    if classes is not None and list(classes) != list(data.classes):
        raise CheckpointMismatchError(
            f"checkpoint {path!r} was trained on classes {_few(classes)} but {data.source} has classes "
            f"{_few(data.classes)}: resume on data with the same class folders")
    saved, built = state.get("model_config") or {}, model_config(model)
    differ = [k for k in saved if k in built and _plain(saved[k]) != _plain(built[k])]
    if differ:
        k = differ[0]
        raise CheckpointMismatchError(
            f"checkpoint {path!r} holds a model with {k}={saved[k]!r}, but this one has {k}={built[k]!r}: "
            "resume with the model configuration the run was trained with")


def _few(names: Any) -> str:
    names = list(names)
    return str(names[:5])[:-1] + (", ...]" if len(names) > 5 else "]")


def _plain(value: Any) -> Any:
    """Lists and tuples alike (a checkpoint's round trip may turn one into the other)."""
    return list(value) if isinstance(value, (list, tuple)) else value


def run_train(args: argparse.Namespace) -> int:
    """`tinyflow train MODEL` for an image classifier, alone or as one worker of a data-parallel
    run (tinyflow/commands/train.py parses the options, fills their defaults and starts the workers)."""
    import tinyflow
    from tinyflow.parallel.communicator import CommError
    from tinyflow.parallel.world import world
    from tinyflow.recipes.distributed import Replicas
    from tinyflow.serialization import CheckpointWriteError

    replicas = Replicas(world(), algorithm=args.allreduce, trace=args.trace)
    try:
        replicas.check_same_options(args)
        known = available_models()
        if args.model not in known:
            raise ValueError(f"unknown model {args.model!r}: choose one of {', '.join(known)}")
        # The checkpoint directory and the run resumed first: a bad one fails before any data is read.
        checkpoints = Checkpointer(args.checkpoint_dir, {"model_name": args.model}, resume=resume_path(args),
                                   writer=replicas.writer)
        state = checkpoints.resume_state()
        if state is not None:  # its options where the command line leaves them out; no conflicting one
            checkpoints.resumed = resume_options(args, state, checkpoints.resume, RUN_OPTIONS)
            check_world_size(state, replicas.size, checkpoints.resume)
            check_amp(args.amp)  # perhaps the checkpoint's
        data = replicas.rank0_first(lambda: warnings_as_lines(
            lambda: build_data(args.data, args.image_size, seed=args.seed, crop_scale=args.crop_scale,
                               augment=args.augment, strict=getattr(args, "strict", False)),
            "train", show=replicas.writer))
        if replicas.writer:
            workers = (f"; {replicas.size} workers x batch {args.batch_size} = global batch "
                       f"{replicas.size * args.batch_size}; all-reduce {args.allreduce}") if replicas.parallel else ""
            print(f"data: {data.source}: {len(data.train)} train / {len(data.val) if data.val else 0} val images, "
                  f"{len(data.classes)} classes, {args.image_size}x{args.image_size}{workers}", file=sys.stderr, flush=True)
        tinyflow.manual_seed(args.seed)
        model = build_model(args.model, num_classes=len(data.classes))
        if state is not None:
            check_resumed_model(state, model, data, checkpoints.resume)
        result = train_classifier(model, args.model, data, args, replicas, progress=not args.quiet,
                                  checkpoints=checkpoints)
        replicas.report()
    except MemoryError as exc:
        msg = str(exc) if "batch size" in str(exc) else out_of_memory_message(args.batch_size, f"model {args.model}")
        print(f"tinyflow train: error: {msg}", file=sys.stderr)
        return 1
    except (FloatingPointError, CheckpointWriteError, DataLoaderWorkerError) as exc:  # diverged, disk full, worker failed
        print(f"tinyflow train: error: {one_line(exc)}", file=sys.stderr)  # before ValueError: a worker's may be one
        return 1
    except (EmptyDatasetError, InputMismatchError, CheckpointMismatchError, FileNotFoundError, ValueError) as exc:
        print(f"tinyflow train: error: {exc}", file=sys.stderr)
        return 2
    except CommError as exc:
        print(f"tinyflow train: error on rank {replicas.rank}: {exc}", file=sys.stderr, flush=True)
        replicas.abort()
        return 1
    if result.interrupted:
        return 130
    if replicas.writer and result.history:
        last = result.history[-1]
        summary = ", ".join(f"{k} {last[k]:.4f}" for k in ("train_loss", "val_loss", "val_top1", "val_top5") if k in last)
        where = f" on {replicas.size} workers" if replicas.parallel else ""
        print(f"finished {args.model}{where}: {summary}; checkpoints, metrics.jsonl and metrics.png in "
              f"{args.checkpoint_dir}", file=sys.stderr)
    return 0


def run_eval(args: argparse.Namespace) -> int:
    """`tinyflow eval MODEL --checkpoint F [--data DIR]`: loss and top-1/top-5 of a checkpoint."""
    import json

    try:
        state = load_checkpoint(args.checkpoint, args.model)
        image_size = args.image_size or state.get("image_size") or 64
        classes = state.get("classes")
        data = warnings_as_lines(lambda: build_data(args.data, image_size, seed=state.get("seed", 0)), "eval")
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
    except DataLoaderWorkerError as exc:  # before ValueError: a worker's ValueError is both
        print(f"tinyflow eval: error: {one_line(exc)}", file=sys.stderr)
        return 1
    except (EmptyDatasetError, InputMismatchError, CheckpointMismatchError, FileNotFoundError, ValueError) as exc:
        print(f"tinyflow eval: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"model": args.model, "checkpoint": str(Path(args.checkpoint)), "images": len(dataset), **metrics}))
    return 0
