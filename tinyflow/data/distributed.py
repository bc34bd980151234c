"""DistributedSampler: each rank visits its own disjoint shard of the dataset, reshuffled per epoch.

Every rank draws the same permutation from ``numpy.random.default_rng([seed, epoch])`` and
takes every ``num_replicas``-th index starting at its rank, so shards are disjoint and
together cover the dataset. With ``drop_last=False`` the permutation is padded by wrapping
around so every rank gets the same number of samples (ranks must run the same number of
steps, or the all-reduce of the rank with more steps waits forever); with ``drop_last=True``
the tail that does not divide evenly is dropped instead.
"""
from __future__ import annotations

from collections.abc import Iterator, Sized

import numpy as np

from tinyflow.data.sampler import Sampler


class DistributedSampler(Sampler):
    """Indices of shard ``rank`` of ``num_replicas``; defaults come from ``tinyflow.parallel.world()``."""

    def __init__(
        self,
        data: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ):
        if num_replicas is None or rank is None:
            from tinyflow.parallel.world import world

            w = world()
            num_replicas = w.size if num_replicas is None else num_replicas
            rank = w.rank if rank is None else rank
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be >= 1, got {num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: rank {rank} is outside 0..{num_replicas - 1}")
        self.n = len(data)
        if drop_last and self.n < num_replicas:
            raise ValueError(
                f"DistributedSampler: {self.n} samples cannot give each of {num_replicas} ranks one "
                f"with drop_last=True; use drop_last=False or a smaller world"
            )
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = shuffle
        self.seed = int(seed)
        self.drop_last = drop_last
        self.epoch = 0
        if drop_last:
            self.num_samples = self.n // num_replicas
        else:
            self.num_samples = -(-self.n // num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle for ``epoch``: every rank must call it with the same value."""
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(self.n)
        else:
            order = np.arange(self.n)
        if self.total_size > self.n:  # pad by wrapping around (possibly more than once)
            order = np.resize(order, self.total_size)
        order = order[: self.total_size]
        return iter(order[self.rank :: self.num_replicas].tolist())

    def __len__(self) -> int:
        return self.num_samples
