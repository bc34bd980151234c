"""DistributedSampler: disjoint shards that cover the data, reshuffled from the seed each epoch."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.data.dataset import TensorDataset
from tinyflow.data.distributed import DistributedSampler
from tinyflow.data.loader import DataLoader


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 60), world=st.integers(1, 7), seed=st.integers(0, 5), epoch=st.integers(0, 3))
def test_shards_are_disjoint_and_cover(n, world, seed, epoch):
    shards = []
    for rank in range(world):
        s = DistributedSampler(range(n), num_replicas=world, rank=rank, seed=seed)
        s.set_epoch(epoch)
        shards.append(list(s))
        assert len(shards[-1]) == len(s) == -(-n // world)
    flat = [i for shard in shards for i in shard]
    assert set(flat) == set(range(n))
    if n % world == 0:  # no padding: disjoint
        assert sorted(flat) == list(range(n))
    else:  # padding repeats exactly total_size - n indices
        assert len(flat) - n == world * -(-n // world) - n
    if n >= world:
        dropped = [list(DistributedSampler(range(n), world, r, seed=seed, drop_last=True)) for r in range(world)]
        flat = [i for shard in dropped for i in shard]
        assert len(flat) == len(set(flat)) == (n // world) * world


def test_reshuffled_each_epoch_and_reproducible():
    s = DistributedSampler(range(100), num_replicas=4, rank=1, seed=7)
    s.set_epoch(0)
    e0 = list(s)
    s.set_epoch(1)
    e1 = list(s)
    assert e0 != e1
    s.set_epoch(0)
    assert list(s) == e0
    assert list(DistributedSampler(range(100), 4, 1, seed=8)) != e0
    assert list(DistributedSampler(range(10), 2, 1, shuffle=False)) == [1, 3, 5, 7, 9]


def test_bad_arguments_and_world_default():
    with pytest.raises(ValueError, match="rank 4 is outside 0..3"):
        DistributedSampler(range(10), num_replicas=4, rank=4)
    with pytest.raises(ValueError, match="drop_last=True"):
        DistributedSampler(range(2), num_replicas=4, rank=0, drop_last=True)
    s = DistributedSampler(range(10))  # a single process: the whole dataset
    assert s.num_replicas == 1 and s.rank == 0 and sorted(s) == list(range(10))


def test_with_dataloader():
    ds = TensorDataset(tf.tensor(np.arange(12.0)))
    seen = []
    for rank in range(3):
        loader = DataLoader(ds, batch_size=2, sampler=DistributedSampler(ds, 3, rank, seed=1))
        for (batch,) in loader:
            seen.extend(batch.numpy().tolist())
    assert sorted(seen) == list(np.arange(12.0))


def test_program_driven_set_epoch_is_respected_by_the_loader():
    """PyTorch's idiom: sampler.set_epoch(epoch) before each epoch. The loader must not override it
    with its own counter (resuming at epoch 5 sees epoch 5's order, twice if asked twice)."""
    from tinyflow.utils.data import DataLoader, TensorDataset

    ds = TensorDataset(tf.arange(16))
    sampler = DistributedSampler(ds, num_replicas=2, rank=1, shuffle=True, seed=3)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)

    def order(epoch):
        reference = DistributedSampler(ds, num_replicas=2, rank=1, shuffle=True, seed=3)
        reference.set_epoch(epoch)
        return list(reference)

    for epoch in (5, 5, 6, 2):
        sampler.set_epoch(epoch)
        (batch,) = list(loader)
        assert batch[0].tolist() == order(epoch)
