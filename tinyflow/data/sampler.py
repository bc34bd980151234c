"""Samplers: the order in which a DataLoader visits dataset indices.

The protocol is PyTorch's plus one method: ``__iter__`` yields indices, ``__len__`` counts them,
and ``set_epoch(epoch)`` (optional) makes the order a pure function of (seed, epoch), which is
what lets a resumed run see exactly the batches an uninterrupted one would have seen.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence, Sized

import numpy as np


class Sampler:
    """Base class: yields dataset indices."""

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def set_epoch(self, epoch: int) -> None:
        """Orders that change from epoch to epoch depend on this; the default order does not."""


class SequentialSampler(Sampler):
    """0, 1, ..., len(data) - 1."""

    def __init__(self, data: Sized):
        self.n = len(data)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.n))

    def __len__(self) -> int:
        return self.n


class RandomSampler(Sampler):
    """A permutation of the indices drawn from ``numpy.random.default_rng([seed, epoch])``."""

    def __init__(self, data: Sized, seed: int = 0):
        self.n = len(data)
        self.seed = int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[int]:
        perm = np.random.default_rng([self.seed, self.epoch]).permutation(self.n)
        return iter(perm.tolist())

    def __len__(self) -> int:
        return self.n


class SubsetRandomSampler(Sampler):
    """The given indices in a random order, a new one each epoch (seeded like RandomSampler)."""

    def __init__(self, indices: Sequence[int], seed: int = 0):
        self.indices = [int(i) for i in indices]
        self.seed = int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[int]:
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.indices))
        return iter([self.indices[k] for k in order])

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probability proportional to ``weights``."""

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True, seed: int = 0):
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.size == 0 or (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
            raise ValueError("WeightedRandomSampler: weights must be finite, >= 0, and not all zero")
        if num_samples < 1 or (not replacement and num_samples > int((w > 0).sum())):
            raise ValueError(f"WeightedRandomSampler: cannot draw {num_samples} samples from {w.size} weights "
                             f"(replacement={replacement})")
        self.weights, self.num_samples, self.replacement = w / w.sum(), int(num_samples), bool(replacement)
        self.seed, self.epoch = int(seed), 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[int]:
        rng = np.random.default_rng([self.seed, self.epoch])
        return iter(rng.choice(self.weights.size, self.num_samples, self.replacement, p=self.weights).tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of ``batch_size`` (``torch.utils.data.BatchSampler``)."""

    def __init__(self, sampler: Sampler | Sized, batch_size: int, drop_last: bool):
        if batch_size < 1:
            raise ValueError(f"BatchSampler: batch_size must be >= 1, got {batch_size}")
        self.sampler, self.batch_size, self.drop_last = sampler, int(batch_size), bool(drop_last)

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for i in self.sampler:
            batch.append(int(i))
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
