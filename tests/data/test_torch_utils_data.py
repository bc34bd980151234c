"""torch.utils.data as PyTorch programs use it: the import path, random_split by counts,
ConcatDataset, IterableDataset, BatchSampler, the weighted and subset samplers, and
DataLoader's PyTorch arguments (batch_sampler, generator, worker_init_fn, pin_memory, ...)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import tinyflow as tf
from tinyflow.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    IterableDataset,
    SequentialSampler,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    random_split,
)
from tinyflow.utils.data.distributed import DistributedSampler


def _ds(n: int = 10) -> TensorDataset:
    return TensorDataset(np.arange(n, dtype=np.float32).reshape(n, 1), np.arange(n))


def test_the_pytorch_import_paths_reach_tinyflow_data():
    import tinyflow.data as data

    assert tf.utils.data.DataLoader is data.DataLoader and DistributedSampler is data.DistributedSampler


def test_random_split_by_counts_is_disjoint_complete_and_seeded():
    parts = random_split(_ds(10), [7, 3], generator=tf.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [7, 3]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))
    again = random_split(_ds(10), [7, 3], generator=tf.Generator().manual_seed(1))
    assert again[0].indices == parts[0].indices
    with pytest.raises(ValueError, match=r"lengths \[7, 4\] must be >= 0 and sum to the dataset's length 10"):
        random_split(_ds(10), [7, 4])


def test_random_split_fractions_give_the_remainder_to_the_first_parts_as_pytorch():
    torch = pytest.importorskip("torch")
    ds = _ds(11)
    ours = [len(p) for p in random_split(ds, [0.3, 0.3, 0.4], seed=0)]
    theirs = [len(p) for p in torch.utils.data.random_split(range(11), [0.3, 0.3, 0.4])]
    assert ours == theirs


def test_concat_dataset_indexes_across_the_parts():
    cat = ConcatDataset([_ds(3), _ds(4)])
    assert len(cat) == 7 and cat[3][1] == 0 and cat[6][1] == 3 and cat[-1][1] == 3
    with pytest.raises(IndexError, match="index 7 out of range for length 7"):
        cat[7]


class Counting(IterableDataset):
    def __init__(self, n: int):
        self.n = n

    def __iter__(self):
        return iter((np.float32(i), i) for i in range(self.n))


def test_iterable_dataset_is_batched_in_order_with_drop_last():
    got = [y.tolist() for _, y in DataLoader(Counting(7), batch_size=3)]
    assert got == [[0, 1, 2], [3, 4, 5], [6]]
    assert [y.tolist() for _, y in DataLoader(Counting(7), batch_size=3, drop_last=True)] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="IterableDataset takes no sampler"):
        DataLoader(Counting(3), shuffle=True)


def test_batch_sampler_drives_the_loader():
    sampler = BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=False)
    assert list(sampler) == [[0, 1, 2], [3, 4, 5], [6]] and len(sampler) == 3
    loader = DataLoader(_ds(7), batch_sampler=sampler)
    assert len(loader) == 3 and [y.tolist() for _, y in loader] == [[0, 1, 2], [3, 4, 5], [6]]
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        DataLoader(_ds(7), batch_size=4, batch_sampler=sampler)


def test_subset_and_weighted_samplers():
    subset = SubsetRandomSampler([2, 4, 6, 8], seed=3)
    assert sorted(subset) == [2, 4, 6, 8] and len(subset) == 4
    weighted = WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], num_samples=400, seed=0)
    draws = list(weighted)
    assert set(draws) == {1, 3} and 0.65 < draws.count(3) / 400 < 0.85
    with pytest.raises(ValueError, match="cannot draw 3 samples from 4 weights"):
        WeightedRandomSampler([1.0, 1.0, 0.0, 0.0], num_samples=3, replacement=False)


def test_loader_accepts_pytorchs_arguments_and_seeds_from_the_generator():
    a = DataLoader(_ds(10), batch_size=4, shuffle=True, pin_memory=True, persistent_workers=False, timeout=0,
                   generator=tf.Generator().manual_seed(5))
    b = DataLoader(_ds(10), batch_size=4, shuffle=True, generator=tf.Generator().manual_seed(5))
    assert [y.tolist() for _, y in a] == [y.tolist() for _, y in b]
    with pytest.raises(TypeError, match=r"unsupported argument\(s\) \['bogus'\]"):
        DataLoader(_ds(10), bogus=1)


def _record_worker(worker_id: int) -> None:
    os.environ["TINYFLOW_TEST_WORKER_ID"] = str(worker_id)


class WhichWorker(TensorDataset):
    def __getitem__(self, index):
        return np.int64(int(os.environ.get("TINYFLOW_TEST_WORKER_ID", "-1")))


def test_worker_init_fn_runs_in_each_worker_with_its_id():
    loader = DataLoader(WhichWorker(np.zeros(8)), batch_size=2, num_workers=2, worker_init_fn=_record_worker)
    seen = {int(v) for batch in loader for v in batch.tolist()}
    assert seen <= {0, 1} and seen


class _WorkerInfoSample(TensorDataset):
    """Each sample says which worker loaded it and what its WorkerInfo held, as PyTorch's
    documented worker_init_fn / sharding patterns read it."""

    def __getitem__(self, index):
        info = tf.utils.data.get_worker_info()
        return np.array([info.id, info.num_workers, info.seed - info.id, info.dataset is not None], dtype=np.int64)


def _seed_numpy_from_worker_info(worker_id):
    info = tf.utils.data.get_worker_info()  # PyTorch's recipe: seed other libraries per worker
    assert info is not None and info.id == worker_id
    np.random.seed(info.seed % 2**32)


def test_get_worker_info_in_workers_and_none_in_the_main_process():
    assert tf.utils.data.get_worker_info() is None
    loader = DataLoader(_WorkerInfoSample(np.zeros(8)), batch_size=2, num_workers=2, seed=123,
                        worker_init_fn=_seed_numpy_from_worker_info)
    rows = [row for batch in loader for row in batch.tolist()]
    assert {r[0] for r in rows} <= {0, 1} and all(r[1:] == [2, 123, 1] for r in rows)
    assert tf.utils.data.get_worker_info() is None  # still None here after the workers ran


class _ShardedStream(IterableDataset):
    """PyTorch's documented IterableDataset sharding: None means the whole stream."""

    def __iter__(self):
        info = tf.utils.data.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, 10, step))


def test_an_iterable_dataset_sharded_by_worker_info_is_read_whole_once():
    values = [int(v) for batch in DataLoader(_ShardedStream(), batch_size=4, num_workers=2) for v in batch.tolist()]
    assert values == list(range(10))
