"""Training checkpoints: atomic, checked, resumable, written by one process.

- ``save_checkpoint`` / ``load_checkpoint``: atomic (tf.save writes a temporary file then
  os.replace) and checked (a checkpoint of another model is a clear error);
- ``load_model_state``: ``load_state_dict`` with an error naming the checkpoint and the first difference;
- ``rng_state`` / ``set_rng_state``: every random generator a run draws from;
- ``Checkpointer``: one run's checkpoints, last.ckpt and best.ckpt in its directory, the one to
  resume from, and whether this process writes (in a data-parallel run only rank 0 does);
- ``resume_path``: the checkpoint that ``--resume`` names;
- ``resume_options``: the command line's options against those the run resumed recorded: what it
  leaves out is taken from the checkpoint, what it changes is listed where it may change (epochs,
  learning rate and schedule, batch size, workers, ...), and another value of one that shaped the
  run (optimizer, precision, seed, data and model settings) is an error naming both.

What a checkpoint holds is the loop's business (tinyflow.recipes.loop.fit): the model, the
optimizer, the RNG states, the position in the epoch and the epoch's running sums, so that a
resumed run ends with the same parameters as an uninterrupted one.
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import os
import random
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CheckpointMismatchError", "ResumeError", "save_checkpoint", "load_checkpoint", "load_model_state",
           "rng_state", "set_rng_state", "Checkpointer", "resume_path", "resume_options", "check_epochs",
           "options_of", "recorded_options", "Resumed", "check_world_size", "RESUMED_OPTIONS", "MAY_CHANGE",
           "LAST", "BEST"]

CHECKPOINT_FORMAT = "tinyflow-train-v1"
LAST = "last.ckpt"
BEST = "best.ckpt"


class CheckpointMismatchError(ValueError):
    """A checkpoint that does not belong to the model being trained or evaluated."""


class ResumeError(ValueError):
    """A checkpoint that cannot go on with the options given: another optimizer, or --epochs not
    beyond what it has trained already."""


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Write ``state`` atomically (a temporary file renamed over ``path``)."""
    import tinyflow

    tinyflow.save({"format": CHECKPOINT_FORMAT, **state}, os.fspath(path))


def load_checkpoint(path: str | os.PathLike, model_name: str | None = None) -> dict[str, Any]:
    """Read a training checkpoint; with ``model_name``, refuse one written for another model."""

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint {path!r} does not exist")
    state = _load(path)
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointMismatchError(f"{path!r} is not a tinyflow training checkpoint (written by `tinyflow train`)")
    if model_name is not None and state.get("model_name") != model_name:
        raise CheckpointMismatchError(
            f"checkpoint {path!r} was written for model {state.get('model_name')!r}, not {model_name!r}; "
            f"pass the matching model name or another --checkpoint"
        )
    return state


def _load(path: str) -> Any:
    """tf.load(path) on the CPU; a file that holds a pickled whole object (tf.save(model)) is a
    CheckpointMismatchError saying what it holds and how to load it (the command line does not
    unpickle: that runs code from the file)."""
    import tinyflow
    from tinyflow.serialization import WeightsOnlyUnpicklingError

    try:
        return tinyflow.load(path, map_location="cpu")
    except WeightsOnlyUnpicklingError as exc:
        what = getattr(exc, "pickled_class", None) or "Python object"
        raise CheckpointMismatchError(
            f"{path!r} holds a pickled {what} (a whole object saved with tf.save(model)), not a checkpoint "
            f"written by `tinyflow train`, and the command line does not unpickle objects (that runs code from "
            f"the file); load it in Python with tinyflow.load({path!r}, weights_only=False) if you trust the "
            "file, or save model.state_dict() instead, which tinyflow.load reads without unpickling"
        ) from None


def load_model_state(model: Any, state_dict: dict[str, Any], path: str) -> None:
    """``model.load_state_dict`` with an error that names the checkpoint and the first difference."""
    own = dict(model.state_dict())
    missing = [k for k in own if k not in state_dict]
    extra = [k for k in state_dict if k not in own]
    if missing or extra:
        raise CheckpointMismatchError(
            f"checkpoint {path!r} does not fit {type(model).__name__}: missing {missing[:3]}, "
            f"unexpected {extra[:3]} (is it a checkpoint of another model or configuration?)"
        )
    for k, v in own.items():
        if tuple(np.shape(state_dict[k])) != tuple(v.shape):
            raise CheckpointMismatchError(
                f"checkpoint {path!r} does not fit {type(model).__name__}: {k} has shape "
                f"{tuple(np.shape(state_dict[k]))} in the checkpoint but {tuple(v.shape)} in the model "
                f"(another number of classes or another model configuration?)"
            )
    model.load_state_dict(state_dict)


def rng_state() -> dict[str, Any]:
    """The state of every generator a run draws from: tinyflow's, NumPy's global, Python's."""
    import tinyflow

    return {"tinyflow": tinyflow.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what ``rng_state`` returned (after a round trip through a checkpoint)."""
    import tinyflow

    tinyflow.set_rng_state(state["tinyflow"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), int(pos), int(has_gauss), float(cached)))
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))


def _link_or_copy(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Make ``dst`` a copy of ``src`` atomically; a hard link where the file system allows
    (``src`` is later replaced by a new file, never written in place, so the link stays valid).

    The temporary is named as tf.save names its own (hidden, tagged with host and pid), so that
    ``clean_stale_temporaries`` removes it if this process is killed here. A failed copy (a full
    disk) is a CheckpointWriteError that leaves the previous ``dst`` as it was."""
    from tinyflow.serialization import CheckpointWriteError, _temporary_name

    dst = os.fspath(dst)
    tmp = os.path.join(os.path.dirname(dst), _temporary_name(os.path.basename(dst)))
    try:
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        kept = "the previous one is unchanged" if os.path.exists(dst) else "it was not written"
        raise CheckpointWriteError(exc.errno, f"could not write {dst!r} as a copy of {os.fspath(src)!r} "
                                   f"({exc.strerror or exc}); {kept}. Free some space or pass another "
                                   "--checkpoint-dir") from exc


class Checkpointer:
    """One run's checkpoints: ``last.ckpt`` (after each epoch, and on Ctrl-C) and ``best.ckpt``.

    ``directory`` None keeps nothing on disk. ``meta`` (model name, config, classes, ...) goes into
    every checkpoint, and its ``model_name`` must match the one resumed from. ``resume`` is a
    checkpoint to continue from. ``writer=False`` (every data-parallel rank but 0) resumes from the
    same file as the others but never writes: ``save`` returns None there.
    """

    def __init__(self, directory: str | os.PathLike | None = None, meta: dict[str, Any] | None = None, *,
                 resume: str | os.PathLike | None = None, writer: bool = True):
        self.directory = Path(directory) if directory is not None else None
        self.meta = dict(meta or {})
        self.resume = os.fspath(resume) if resume is not None else None
        self.writer = writer
        self.resumed = Resumed()  # what the resumed run takes, changes and cannot check, for its resume line
        self._resumed: dict[str, Any] | None = None
        if self.directory is not None and writer:
            self._make_directory()

    def _make_directory(self) -> None:
        """Create the directory (one clear error if it cannot be) and remove the temporaries that
        a save killed half-way left there (saying so)."""
        from tinyflow.commands.options import unwritable
        from tinyflow.serialization import CheckpointWriteError, clean_stale_temporaries

        assert self.directory is not None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file in the way, no permission, a read-only file system
            reason = exc.strerror or str(exc)
            in_the_way = next((p for p in (self.directory, *self.directory.parents) if p.exists()), None)
            if in_the_way is not None and not in_the_way.is_dir():
                reason = f"{str(in_the_way)!r} is a file"
            raise CheckpointWriteError(exc.errno, f"checkpoint directory {str(self.directory)!r} cannot be "
                                       f"created ({reason}); pass another --checkpoint-dir") from exc
        problem = unwritable(self.directory)
        if problem:  # an existing folder: refused now, not at the first save an epoch later
            raise CheckpointWriteError(errno.EACCES, f"checkpoint directory {problem}; pass another --checkpoint-dir")
        removed = clean_stale_temporaries(self.directory)
        if removed:
            names = ", ".join(os.path.basename(p) for p in removed[:3]) + (", ..." if len(removed) > 3 else "")
            print(f"note: removed {len(removed)} temporary file(s) that an interrupted save left in "
                  f"{str(self.directory)!r} ({names})", file=sys.stderr)

    def resume_state(self) -> dict[str, Any] | None:
        """The checkpoint to resume from (read once), or None for a fresh run."""
        if self.resume is not None and self._resumed is None:
            self._resumed = load_checkpoint(self.resume, self.meta.get("model_name"))
        return self._resumed

    def save(self, state: dict[str, Any], name: str = LAST) -> str | None:
        """Write ``meta`` and ``state`` to ``directory/name``; its path, or None where nothing is written."""
        if self.directory is None or not self.writer:
            return None
        path = self.directory / name
        save_checkpoint(path, {**self.meta, **state})
        return str(path)

    def mark_best(self, path: str) -> None:
        """Make ``best.ckpt`` the checkpoint just saved at ``path``."""
        if self.directory is not None and self.writer:
            _link_or_copy(path, self.directory / BEST)


# The options of `tinyflow train` that a checkpoint records (meta["options"]) and a resume
# reconciles with the command line (``resume_options``): those that shaped what the run learned
# (its optimizer, precision, seed, data and model settings) must stay; those in MAY_CHANGE may be
# given again with another value, which the resume line names. Each recipe lists its own (its
# RUN_OPTIONS); these are the ones every recipe has.
RESUMED_OPTIONS = ("optimizer", "epochs", "batch_size", "lr", "schedule", "momentum", "weight_decay")
MAY_CHANGE = frozenset({"epochs", "batch_size", "lr", "schedule", "momentum", "weight_decay", "clip", "workers",
                        "data", "text"})
# Where the data lives may change (its classes or vocabulary are checked against the checkpoint's);
# paths are recorded absolute, so a resume from another working directory is no change.
PATH_OPTIONS = frozenset({"data", "text"})


def options_of(args: argparse.Namespace, names: tuple[str, ...] = RESUMED_OPTIONS) -> dict[str, Any]:
    """The options ``names`` present on ``args``, to record in checkpoints (meta["options"])."""
    return {name: _normal(name, getattr(args, name)) for name in names if hasattr(args, name)}


def _normal(name: str, value: Any) -> Any:
    return os.path.abspath(value) if name in PATH_OPTIONS and isinstance(value, str) else value


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _setting(name: str, value: Any) -> str:
    """How the command line says it: "--lr 0.01", "--tie-weights", "no --amp"."""
    if value is None or value is False:
        return f"no {_flag(name)}"
    return _flag(name) if value is True else f"{_flag(name)} {_shown(value)}"


def trained_so_far(state: dict[str, Any]) -> str:
    """What a checkpoint has trained: "2 epochs", or "2 epochs and 5 batches of epoch 3"."""
    epochs, step = int(state["epoch"]), int(state.get("step", 0))
    done = f"{epochs} epoch{'s' if epochs != 1 else ''}"
    return f"{done} and {step} batch{'es' if step != 1 else ''} of epoch {epochs + 1}" if step else done


def check_epochs(state: dict[str, Any], epochs: int, path: str | None) -> None:
    """Refuse to resume for ``epochs`` when the checkpoint has trained that many or more."""
    if epochs <= int(state["epoch"]):
        raise ResumeError(f"--epochs {epochs}: checkpoint {path!r} has already trained {trained_so_far(state)}; "
                          f"pass --epochs {int(state['epoch']) + 1} or more to train on (the learning-rate "
                          "schedule then spans the new length)")


def _options_of_optimizer(state: dict[str, Any]) -> dict[str, Any]:
    """For a checkpoint written before it recorded its options: those its optimizer state tells."""
    groups = (state.get("optimizer") or {}).get("param_groups") or [{}]
    group = groups[0]
    found: dict[str, Any] = {}
    if "lr" in group:
        found["optimizer"] = "adam" if "betas" in group else "sgd"
        found["lr"] = float(group.get("initial_lr", group["lr"]))
    found.update({k: group[k] for k in ("momentum", "weight_decay") if k in group})
    return found


def recorded_options(state: dict[str, Any]) -> dict[str, Any]:
    """The options a checkpoint records, completed for one written before it recorded them all by
    what its other fields tell (the optimizer's hyper-parameters, the seed, the image size, the
    language model's config, fp16's loss scaler)."""
    found = _options_of_optimizer(state)
    found.update({k: state[k] for k in ("seed", "image_size", "batch_size", "level") if state.get(k) is not None})
    found.update({k: v for k, v in (state.get("model_config") or {}).items()
                  if k in ("seq_len", "embedding_dim", "hidden_size", "num_layers", "dropout", "tie_weights")})
    if state.get("scaler") is not None:  # only fp16 scales the loss
        found["amp"] = "fp16"
    found.update(state.get("options") or {})
    return found


@dataclass
class Resumed:
    """What ``resume_options`` found: the settings taken from the checkpoint ("--amp fp16"), those
    changed ("--lr 0.001 -> 0.01") and the options an older checkpoint does not record."""

    taken: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)


def resume_options(args: argparse.Namespace, state: dict[str, Any], path: str | None,
                   names: tuple[str, ...] = RESUMED_OPTIONS, resolved: dict[str, Any] | None = None) -> Resumed:
    """Reconcile the options ``names`` of the command line with those of the run resumed, on ``args``:

    - one the command line left out takes the checkpoint's value (listed in ``taken`` where that is
      not what this command line would have used: its default, or ``resolved[name]``);
    - one given with another value is a change if it is in MAY_CHANGE (the loop applies it: the
      schedule over the new --epochs, the new --lr from the epoch resumed, the same sample under
      another --batch-size), else a ResumeError naming both values;
    - one the checkpoint does not record (written by an older tinyflow) keeps this command line's
      value and is listed in ``unchecked``.

    ``args.given`` names the options given on the command line (the option layer records it);
    without it every option on ``args`` counts as given. ``--epochs`` not beyond what was trained
    is a ResumeError too.
    """
    saved = recorded_options(state)
    given = getattr(args, "given", None)
    resolved = resolved or {}
    found = Resumed()
    for name in names:
        if not hasattr(args, name):
            continue
        if name not in saved:
            found.unchecked.append(_flag(name))
            continue
        old, new = saved[name], _normal(name, resolved.get(name, getattr(args, name)))
        if given is not None and name not in given:
            setattr(args, name, old)
            if old != new:
                found.taken.append(_setting(name, old))
        elif new != old:
            if name not in MAY_CHANGE:
                raise ResumeError(_conflict(name, old, new, path))
            found.changes.append(f"{_flag(name)} {_shown(old)} -> {_shown(new)}")
    check_epochs(state, args.epochs, path)
    return found


def _conflict(name: str, old: Any, new: Any, path: str | None) -> str:
    """The error for an option given with another value than the run resumed had, naming both."""
    if name == "optimizer":
        return (f"--optimizer {new}: checkpoint {path!r} was trained with --optimizer {old}, whose state cannot "
                f"carry over to {new}; resume with --optimizer {old} (or leave it out), or start a new run in "
                "another --checkpoint-dir")
    keep = f"leave {_flag(name)} out" + (f" (or give {_setting(name, old)})" if old not in (None, False) else "")
    return (f"{_setting(name, new)}: checkpoint {path!r} was trained with {_setting(name, old)}, which shaped "
            f"what it learned and stays for the rest of the run; {keep} to resume it, or start a new run "
            "in another --checkpoint-dir")


def check_world_size(state: dict[str, Any], size: int, path: str | None) -> None:
    """Refuse to resume a run on another number of workers (each one's shard and the global batch
    would change under it); a checkpoint that does not say was trained by one."""
    saved = int(state.get("world_size") or 1)
    if saved != size:
        raise ResumeError(f"checkpoint {path!r} was trained by {saved} worker{'s' if saved != 1 else ''} "
                          f"(--nproc {saved}), this run has {size}: resume it with --nproc {saved}, or start a "
                          "new run in another --checkpoint-dir")


def resume_path(args: argparse.Namespace) -> str | None:
    """The checkpoint --resume points to (``auto``: the last one in --checkpoint-dir), or None."""
    if not getattr(args, "resume", None):
        return None
    if args.resume == "auto":
        if not args.checkpoint_dir:
            raise FileNotFoundError("--resume without a path needs --checkpoint-dir")
        path = os.path.join(args.checkpoint_dir, LAST)
        if not os.path.exists(path):
            raise FileNotFoundError(f"--resume: no checkpoint {path!r} to resume from (train without --resume first)")
        return path
    return args.resume
