"""Training checkpoints: atomic, checked, resumable, written by one process.

- ``save_checkpoint`` / ``load_checkpoint``: atomic (tf.save writes a temporary file then
  os.replace) and checked (a checkpoint of another model is a clear error);
- ``load_model_state``: ``load_state_dict`` with an error naming the checkpoint and the first difference;
- ``rng_state`` / ``set_rng_state``: every random generator a run draws from;
- ``Checkpointer``: one run's checkpoints, last.ckpt and best.ckpt in its directory, the one to
  resume from, and whether this process writes (in a data-parallel run only rank 0 does);
- ``resume_path``: the checkpoint that ``--resume`` names.

What a checkpoint holds is the loop's business (tinyflow.recipes.loop.fit): the model, the
optimizer, the RNG states, the position in the epoch and the epoch's running sums, so that a
resumed run ends with the same parameters as an uninterrupted one.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CheckpointMismatchError", "save_checkpoint", "load_checkpoint", "load_model_state", "rng_state",
           "set_rng_state", "Checkpointer", "resume_path", "LAST", "BEST"]

CHECKPOINT_FORMAT = "tinyflow-train-v1"
LAST = "last.ckpt"
BEST = "best.ckpt"


class CheckpointMismatchError(ValueError):
    """A checkpoint that does not belong to the model being trained or evaluated."""


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Write ``state`` atomically (a temporary file renamed over ``path``)."""
    import tinyflow

    tinyflow.save({"format": CHECKPOINT_FORMAT, **state}, os.fspath(path))


def load_checkpoint(path: str | os.PathLike, model_name: str | None = None) -> dict[str, Any]:
    """Read a training checkpoint; with ``model_name``, refuse one written for another model."""
    import tinyflow

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint {path!r} does not exist")
    state = tinyflow.load(path, map_location="cpu")
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointMismatchError(f"{path!r} is not a tinyflow training checkpoint (written by `tinyflow train`)")
    if model_name is not None and state.get("model_name") != model_name:
        raise CheckpointMismatchError(
            f"checkpoint {path!r} was written for model {state.get('model_name')!r}, not {model_name!r}; "
            f"pass the matching model name or another --checkpoint"
        )
    return state


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
    (``src`` is later replaced by a new file, never written in place, so the link stays valid)."""
    tmp = f"{os.fspath(dst)}.tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


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
        self._resumed: dict[str, Any] | None = None
        if self.directory is not None and writer:
            self.directory.mkdir(parents=True, exist_ok=True)

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
