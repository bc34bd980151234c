"""Map-style datasets: anything with ``__len__`` and ``__getitem__(index) -> sample``.

A sample is usually a tuple ``(input, target)`` of NumPy arrays / Python numbers; the
DataLoader stacks samples into batches and turns them into tinyflow tensors.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

import numpy as np

T = TypeVar("T")


class SkippedSample(Exception):
    """Raised by a dataset for a sample that cannot be read (corrupt or missing file).

    The DataLoader catches it, warns once with the path and the reason, logs the file in
    ``loader.skipped`` and goes on with the rest of the batch.
    """

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class Dataset(Generic[T]):
    """Base class of map-style datasets (PyTorch's ``torch.utils.data.Dataset``)."""

    def __getitem__(self, index: int) -> T:
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement __len__")


def _as_array(x: Any) -> np.ndarray:
    """A NumPy view of an array-like or a tinyflow Tensor (whose ``.data`` may live on a GPU)."""
    if hasattr(x, "numpy") and hasattr(x, "data") and not isinstance(x, np.ndarray):
        return x.numpy()
    return np.asarray(x)


class TensorDataset(Dataset[tuple]):
    """Samples are the i-th rows of several arrays (or tensors) with the same first dimension."""

    def __init__(self, *arrays: Any):
        if not arrays:
            raise ValueError("TensorDataset needs at least one array")
        self.arrays = [_as_array(a) for a in arrays]
        n = len(self.arrays[0])
        for k, a in enumerate(self.arrays):
            if a.ndim == 0 or len(a) != n:
                shapes = [tuple(b.shape) for b in self.arrays]
                raise ValueError(
                    f"TensorDataset: every array needs the same first dimension, got shapes {shapes} "
                    f"(array {k} differs)"
                )

    def __getitem__(self, index: int) -> tuple:
        return tuple(a[index] for a in self.arrays)

    def __len__(self) -> int:
        return len(self.arrays[0])


class Subset(Dataset[T]):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset[T], indices: Sequence[int]):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]
        n = len(dataset)
        bad = [i for i in self.indices if not -n <= i < n]
        if bad:
            raise IndexError(f"Subset: indices {bad[:5]} out of range for a dataset of length {n}")

    def __getitem__(self, index: int) -> T:
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


class IterableDataset(Dataset[T]):
    """Base class of iterable-style datasets (``torch.utils.data.IterableDataset``): samples come
    from ``__iter__``, in order; a DataLoader batches them in the main process."""

    def __iter__(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __getitem__(self, index: int) -> T:
        raise TypeError(f"{type(self).__name__} is an IterableDataset: iterate over it instead of indexing")


class ConcatDataset(Dataset[T]):
    """The samples of several datasets one after the other (``torch.utils.data.ConcatDataset``)."""

    def __init__(self, datasets: Sequence[Dataset[T]]):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: needs at least one dataset")
        for k, d in enumerate(self.datasets):
            if isinstance(d, IterableDataset):
                raise TypeError(f"ConcatDataset: dataset {k} is an IterableDataset; only map-style datasets concatenate")
        self.cumulative_sizes = np.cumsum([len(d) for d in self.datasets]).tolist()

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int) -> T:
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"ConcatDataset: index {index} out of range for length {n}")
        index %= n
        k = int(np.searchsorted(self.cumulative_sizes, index, side="right"))
        start = self.cumulative_sizes[k - 1] if k else 0
        return self.datasets[k][index - start]


def random_split(dataset: Dataset[T], lengths: Sequence[float], generator: Any = None,
                 seed: int | None = None) -> list[Subset[T]]:
    """Split ``dataset`` into disjoint random Subsets (``torch.utils.data.random_split``).

    ``lengths`` are sample counts summing to ``len(dataset)``, or fractions summing to 1 (the
    remainder of the rounding goes one by one to the first parts, as PyTorch does). The order
    comes from ``generator`` (a ``tinyflow.Generator``) or ``seed``; with neither, from
    tinyflow's default generator, so ``tf.manual_seed`` fixes it.
    """
    n = len(dataset)
    lengths = list(lengths)
    if lengths and all(isinstance(x, (int, np.integer)) for x in lengths):
        counts = [int(x) for x in lengths]
        if any(c < 0 for c in counts) or sum(counts) != n:
            raise ValueError(f"random_split: lengths {counts} must be >= 0 and sum to the dataset's length {n}")
    else:
        if any(f < 0 for f in lengths) or abs(sum(lengths) - 1.0) > 1e-6:
            raise ValueError(f"random_split: fractions must be >= 0 and sum to 1, got {lengths} "
                             f"(or give sample counts summing to {n})")
        counts = [int(np.floor(n * f)) for f in lengths]
        for k in range(n - sum(counts)):
            counts[k % len(counts)] += 1
    if seed is None:
        from tinyflow import random as tf_random

        seed = int(tf_random.rng(generator).integers(0, 2**63 - 1))  # draws: the generator moves on
    perm = np.random.default_rng(seed).permutation(n)
    bounds = np.cumsum([0, *counts])
    return [Subset(dataset, perm[bounds[k] : bounds[k + 1]].tolist()) for k in range(len(counts))]
