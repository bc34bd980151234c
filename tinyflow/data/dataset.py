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


def random_split(dataset: Dataset[T], fractions: Sequence[float], seed: int = 0) -> list[Subset[T]]:
    """Split ``dataset`` into disjoint random Subsets with the given fractions (seeded)."""
    if abs(sum(fractions) - 1.0) > 1e-6 or any(f < 0 for f in fractions):
        raise ValueError(f"random_split: fractions must be >= 0 and sum to 1, got {list(fractions)}")
    n = len(dataset)
    perm = np.random.default_rng(seed).permutation(n)
    bounds = np.round(np.cumsum([0.0, *fractions]) * n).astype(int)
    return [Subset(dataset, perm[bounds[k] : bounds[k + 1]].tolist()) for k in range(len(fractions))]
