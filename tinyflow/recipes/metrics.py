"""What training measures and where it goes: ``Metrics``, the device-side step log, top-k counts, the
per-epoch log and its plot.

- ``Metrics``: a recipe's description of what its steps measure and what an epoch reports;
- ``StepLog``: per-step values kept on the device and read once per log interval;
- ``topk_counts`` / ``topk_correct``: top-1 / top-5 counts (on the device / as ints);
- ``MetricsLog``: one JSON object per epoch in ``metrics.jsonl`` plus a PNG plot of the curves.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Metrics", "StepLog", "topk_counts", "topk_correct", "MetricsLog", "plot_metrics"]


@dataclass(frozen=True)
class Metrics:
    """What a recipe's steps measure and what an epoch reports.

    Each step gives its batch's mean loss, one value per name in ``counts`` that adds up over the
    epoch (e.g. correct top-1 predictions), and its size in ``items`` (images, tokens). The epoch's
    sums, ``[loss * items, *counts, items]`` (``zero_sums`` names them),, become ``<split>_loss`` (the mean over items),
    ``<split>_<count>`` (per item) and whatever ``derived`` computes from those means (e.g. the
    perplexity). ``best`` names the reported value that picks best.ckpt (from the validation
    split when there is one), ``higher_is_better`` which way.
    """

    counts: tuple[str, ...] = ()
    items: str = "images"  # the record's throughput is "<items>_per_s"
    unit: str = "img"  # the progress bar's is "<unit>/s"
    best: str = "loss"
    higher_is_better: bool = False
    derived: Callable[[dict[str, float]], dict[str, float]] | None = None

    def zero_sums(self) -> dict[str, float]:
        """The sums of an epoch before its first step."""
        return dict.fromkeys(("loss", *self.counts, "count"), 0.0)  # count: the items

    def summary(self, sums: Sequence[float], split: str) -> dict[str, float]:
        """``{"<split>_loss": ..., "<split>_<count>": ..., derived}`` from sums in ``zero_sums`` order."""
        v = np.asarray(sums, dtype=np.float64)
        n = max(v[-1], 1.0)
        means = {"loss": v[0] / n, **{name: value / n for name, value in zip(self.counts, v[1:-1])}}
        if self.derived is not None:
            means.update(self.derived(means))
        return {f"{split}_{k}": value for k, value in means.items()}


# ----------------------------------------------------------------------------- on the device


def _raw(x: Any) -> Any:
    """The array behind a Tensor; NumPy and CuPy arrays as they are; anything else as NumPy."""
    from tinyflow.tensor import Tensor

    if isinstance(x, Tensor):
        return x.array
    return x if isinstance(x, np.ndarray) or hasattr(x, "__cuda_array_interface__") else np.asarray(x)


def topk_counts(logits: Any, targets: Any, ks: Sequence[int] = (1, 5)) -> Any:
    """How many rows have their target among the k largest logits, for each k (capped at C):
    an int64 array (len(ks),) on the logits' device, with no host read and no sort.

    The ranking is that of ``np.argsort(-logits, kind="stable")``: a target is in the top k when
    fewer than k logits come before it, i.e. are larger, or equal at a lower index (a NaN comes
    after everything); so it is one compare-and-count pass over the (N, C) logits.
    """
    from tinyflow.device import array_module

    z, t = _raw(logits), _raw(targets)  # (N, C), (N,)
    xp = array_module(z)
    c = z.shape[1]
    t = t.reshape(-1, 1).astype(np.int64, copy=False)  # (N, 1)
    own = xp.take_along_axis(z, t, axis=1)  # (N, 1): each row's target logit
    before = xp.arange(c)[None, :] < t  # (N, C): columns at a lower index than the target
    ahead = (z > own) | ((z == own) & before)
    if z.dtype.kind in "fc":  # a NaN target logit sorts after every number and earlier NaNs
        ahead |= xp.isnan(own) & (~xp.isnan(z) | before)
    rank = ahead.sum(axis=1)  # (N,): logits ranked before the target
    return xp.stack([(rank < min(k, c)).sum() for k in ks]).astype(np.int64)


def topk_correct(logits: Any, targets: Any, ks: Iterable[int] = (1, 5)) -> dict[int, int]:
    """``topk_counts`` as Python ints ``{k: count}`` (a host read when the logits are on a device)."""
    from tinyflow.device import to_host

    ks = tuple(ks)
    counts = to_host(topk_counts(logits, targets, ks), "topk_correct").tolist()
    return dict(zip(ks, counts))


class StepLog:
    """Per-step values (the loss, correct counts, ...) kept on the device, read once per interval.

    ``add`` writes one step's 0-d values (arrays or Tensors) into row ``n`` of an (every, width)
    float64 buffer on their device: a copy queued on the device, no sync. ``read`` brings the
    rows written since the last read to the host in one transfer. float64 holds a float32 loss
    and any count exactly, so sums made from the rows equal sums made step by step.
    """

    def __init__(self, every: int, width: int):
        if every < 1:
            raise ValueError(f"log interval must be at least 1 step, got {every}")
        self.every, self.width = int(every), int(width)
        self.rows: Any = None  # (every, width) float64, on the device of the first values
        self.n = 0  # rows written since the last read

    def add(self, *values: Any) -> bool:
        """Record one step; True when the buffer is full (time to ``read``)."""
        from tinyflow.device import array_module

        if self.n == self.every:
            raise RuntimeError("StepLog is full: read() it before adding more steps")
        arrays = [_raw(v) for v in values]
        if self.rows is None:
            self.rows = array_module(arrays[0]).zeros((self.every, self.width), dtype=np.float64)
        for j, a in enumerate(arrays):
            self.rows[self.n, j] = a
        self.n += 1
        return self.n == self.every

    def read(self) -> np.ndarray:
        """The rows since the last read, (k, width) float64: one host read (none when k = 0)."""
        from tinyflow.device import to_host

        if self.n == 0:
            return np.zeros((0, self.width))
        rows = np.array(to_host(self.rows[: self.n], "step log"), dtype=np.float64)  # a copy: the buffer is reused
        self.n = 0
        return rows


# ----------------------------------------------------------------------------- on disk


class MetricsLog:
    """Per-epoch records kept in memory, written as JSON lines and plotted after each epoch."""

    def __init__(self, directory: str | os.PathLike | None, name: str = "metrics",
                 records: Sequence[dict[str, Any]] = (), enabled: bool = True):
        self.records: list[dict[str, Any]] = list(records)
        self.enabled = enabled and directory is not None
        self.path = Path(directory) / f"{name}.jsonl" if directory is not None else None
        self.plot_path = Path(directory) / f"{name}.png" if directory is not None else None

    def append(self, record: dict[str, Any], write: bool = True) -> None:
        """Add an epoch's record; with ``write``, rewrite the files (else ``write()`` does later)."""
        self.records.append(record)
        if write:
            self.write()

    def write(self) -> None:
        """Rewrite the JSON lines and the plot from the records; a failed write (a full disk) is
        a CheckpointWriteError naming the file, with no temporary left behind."""
        if not self.enabled:
            return
        from tinyflow.serialization import CheckpointWriteError

        tmp = self.path.with_suffix(".jsonl.tmp")
        target = self.path
        try:
            tmp.write_text("".join(json.dumps(r) + "\n" for r in self.records))
            os.replace(tmp, self.path)
            target = self.plot_path
            plot_metrics(self.records, self.plot_path)
        except OSError as exc:
            for leftover in (tmp, Path(f"{self.plot_path}.tmp.png")):
                with contextlib.suppress(OSError):
                    leftover.unlink()
            raise CheckpointWriteError(exc.errno, f"could not write {str(target)!r} ({exc.strerror or exc}); "
                                       "free some space or pass another --checkpoint-dir") from exc


def plot_metrics(records: Sequence[dict[str, Any]], path: str | os.PathLike) -> None:
    """A PNG with the loss curves (left) and the accuracy / other metric curves (right)."""
    if not records:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    epochs = [r["epoch"] for r in records]
    keys = [k for k in records[-1] if k not in ("epoch", "time_s", "lr", "step") and isinstance(records[-1][k], (int, float))]
    loss_keys = [k for k in keys if "loss" in k]
    other_keys = [k for k in keys if k not in loss_keys and not k.endswith("per_s")]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, group, title in ((axes[0], loss_keys, "loss"), (axes[1], other_keys, "metrics")):
        for k in group:
            ax.plot(epochs, [r.get(k, math.nan) for r in records], marker="o", label=k)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if group:
            ax.legend()
    fig.tight_layout()
    tmp = f"{os.fspath(path)}.tmp.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
