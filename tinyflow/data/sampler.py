"""Samplers: the order in which a DataLoader visits dataset indices.

The protocol is PyTorch's plus one method: ``__iter__`` yields indices, ``__len__`` counts them,
and ``set_epoch(epoch)`` (optional) makes the order a pure function of (seed, epoch), which is
what lets a resumed run see exactly the batches an uninterrupted one would have seen.
"""
from __future__ import annotations

from collections.abc import Iterator, Sized

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
