"""DataLoader: seeded order and augmentation, workers equal in-process loading, resume, errors."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tinyflow.data import DataLoader, Dataset, ImageFolder, Subset, TensorDataset, default_collate
from tinyflow.data import transforms as T


class NoisyDataset(Dataset):
    """Sample i is (i + a random draw from the per-sample generator, i): shows augmentation seeds."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return np.array([i, T.current_rng().random()], dtype=np.float64), i


def _epoch(loader: DataLoader, epoch: int, start: int = 0) -> list:
    loader.set_epoch(epoch, start_batch=start)
    return [tuple(np.asarray(f) for f in b) for b in loader]


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(all(np.array_equal(x, y) for x, y in zip(p, q)) for p, q in zip(a, b))


def test_same_seed_same_batches_other_seed_or_epoch_differs() -> None:
    ds = NoisyDataset(23)
    a = _epoch(DataLoader(ds, batch_size=4, shuffle=True, seed=5, as_tensors=False), 0)
    b = _epoch(DataLoader(ds, batch_size=4, shuffle=True, seed=5, as_tensors=False), 0)
    c = _epoch(DataLoader(ds, batch_size=4, shuffle=True, seed=6, as_tensors=False), 0)
    d = _epoch(DataLoader(ds, batch_size=4, shuffle=True, seed=5, as_tensors=False), 1)
    assert _same(a, b)
    assert not _same(a, c) and not _same(a, d)
    labels = np.concatenate([y for _, y in a])
    assert sorted(labels.tolist()) == list(range(23))  # a permutation: every sample once
    assert labels.tolist() != list(range(23))
    assert [len(y) for _, y in a] == [4, 4, 4, 4, 4, 3]


def test_unshuffled_order_and_drop_last() -> None:
    ds = TensorDataset(np.arange(10).reshape(10, 1).astype(np.float32), np.arange(10))
    loader = DataLoader(ds, batch_size=3, drop_last=True, as_tensors=False)
    batches = list(loader)
    assert len(loader) == len(batches) == 3
    np.testing.assert_array_equal(np.concatenate([y for _, y in batches]), np.arange(9))
    assert len(DataLoader(ds, batch_size=3, as_tensors=False)) == 4


def test_iterating_again_advances_the_epoch() -> None:
    ds = NoisyDataset(12)
    loader = DataLoader(ds, batch_size=12, shuffle=True, seed=1, as_tensors=False)
    first, second = next(iter(loader)), next(iter(loader))
    assert loader.epoch == 2
    assert not np.array_equal(first[1], second[1])
    assert _same([first], _epoch(DataLoader(ds, batch_size=12, shuffle=True, seed=1, as_tensors=False), 0))


def test_workers_give_the_same_batches_as_in_process(make_folder, tmp_path: Path) -> None:

    root = make_folder(tmp_path / "f", {"a": 6, "b": 5, "c": 4}, size=(24, 20))
    tf_ = T.Compose([T.RandomResizedCrop(12, scale=(0.3, 1.0)), T.RandomHorizontalFlip(), T.ToTensor()])
    ds = ImageFolder(root, transform=tf_)
    ref = _epoch(DataLoader(ds, batch_size=4, shuffle=True, seed=3, as_tensors=False), 2)
    for workers in (1, 3):
        got = _epoch(DataLoader(ds, batch_size=4, shuffle=True, seed=3, num_workers=workers,
                                prefetch_factor=1, as_tensors=False), 2)
        assert _same(ref, got), f"num_workers={workers} differs from num_workers=0"
    assert ref[0][0].shape == (4, 3, 12, 12) and ref[0][0].dtype == np.float32


def test_resume_mid_epoch_gives_the_remaining_batches() -> None:
    ds = NoisyDataset(30)
    full = _epoch(DataLoader(ds, batch_size=4, shuffle=True, seed=9, as_tensors=False), 3)
    tail = _epoch(DataLoader(ds, batch_size=4, shuffle=True, seed=9, as_tensors=False), 3, start=5)
    assert _same(full[5:], tail)
    tail_w = _epoch(DataLoader(ds, batch_size=4, shuffle=True, seed=9, num_workers=2, as_tensors=False), 3, start=5)
    assert _same(full[5:], tail_w)


def test_early_break_releases_the_workers() -> None:
    ds = NoisyDataset(64)
    loader = DataLoader(ds, batch_size=2, num_workers=2, as_tensors=False)
    for k, _ in enumerate(loader):
        if k == 2:
            break
    assert len(list(loader)) == 32  # a fresh pool serves the next epoch


def test_worker_errors_carry_the_worker_traceback() -> None:
    class Broken(NoisyDataset):
        def __getitem__(self, i: int):
            if i == 3:
                raise KeyError("sample three is missing")
            return super().__getitem__(i)

    from tinyflow.data import DataLoaderWorkerError

    with pytest.raises(DataLoaderWorkerError, match="sample three is missing"):
        list(DataLoader(Broken(8), batch_size=2, num_workers=2, as_tensors=False))
    with pytest.raises(KeyError, match="sample three"):
        list(DataLoader(Broken(8), batch_size=2, as_tensors=False))


class Raises(NoisyDataset):
    """Sample 3 raises ``error`` (the same in a worker as in this process)."""

    def __init__(self, n: int, error: Exception):
        super().__init__(n)
        self.error = error

    def __getitem__(self, i: int):
        if i == 3:
            raise self.error
        return super().__getitem__(i)


class NeedsTwoArguments(Exception):
    def __init__(self, code: int, detail: str):
        super().__init__(code, detail)


@pytest.mark.parametrize("error", [ValueError("sample three is bad"), KeyError("sample three"),
                                   FileNotFoundError(2, "No such file", "three.jpg")])
def test_a_workers_exception_is_raised_again_with_its_type_and_traceback(error: Exception) -> None:
    """As PyTorch: `except ValueError` catches a worker's ValueError; the message says which worker
    and carries the worker's traceback; it is a DataLoaderWorkerError too (tinyflow's commands catch that)."""
    from tinyflow.data import DataLoaderWorkerError

    with pytest.raises(type(error)) as info:
        list(DataLoader(Raises(8, error), batch_size=2, num_workers=2, as_tensors=False))
    exc = info.value
    assert isinstance(exc, DataLoaderWorkerError) and type(exc).__name__ == type(error).__name__
    text = str(exc)
    first, _, rest = text.partition("\n")
    assert first.startswith(f"Caught {type(error).__name__} in DataLoader worker process ")
    assert first.endswith(f"while loading a batch with indices [2, 3]: {error}")
    assert rest.startswith("Original Traceback (most recent call last):")
    assert "in __getitem__\n    raise self.error" in rest and rest.endswith(f"{type(error).__name__}: {error}")
    if isinstance(error, KeyError):
        assert "\\n" not in text  # shown as text, not as the repr KeyError gives its argument


def test_a_workers_exception_that_cannot_be_rebuilt_is_the_loaders_error() -> None:
    from tinyflow.data import DataLoaderWorkerError

    class Local(Exception):  # defined in a function: it does not pickle, so only its name comes back
        pass

    for error in (NeedsTwoArguments(7, "bad header"), Local("local trouble")):
        with pytest.raises(DataLoaderWorkerError) as info:
            list(DataLoader(Raises(8, error), batch_size=2, num_workers=1, as_tensors=False))
        assert type(info.value) is DataLoaderWorkerError
        assert str(info.value).startswith(f"Caught {type(error).__name__} in DataLoader worker process 0")
        assert "Original Traceback" in str(info.value)


def test_a_failing_worker_init_fn_is_named_as_such() -> None:
    """Not "a worker process died (killed by the system, e.g. out of memory)": the worker_init_fn's
    own exception, with its type, the worker's id and the traceback."""
    def init(worker_id: int) -> None:
        if worker_id == 0:
            raise ZeroDivisionError(f"worker {worker_id} cannot start")

    with pytest.raises(ZeroDivisionError) as info:
        list(DataLoader(NoisyDataset(8), batch_size=2, num_workers=1, worker_init_fn=init, as_tensors=False))
    first, _, rest = str(info.value).partition("\n")
    assert first == ("Caught ZeroDivisionError in the worker_init_fn of DataLoader worker process 0: worker 0 "
                     "cannot start")
    assert "in init\n" in rest and "killed" not in str(info.value)


def test_a_worker_that_dies_is_an_error_not_a_hang() -> None:
    import os

    class Dies(NoisyDataset):
        def __getitem__(self, i: int):
            if i == 5:
                os._exit(1)  # what the OOM killer or a segfault in a decoder looks like
            return super().__getitem__(i)

    from tinyflow.data import DataLoaderWorkerError

    with pytest.raises(DataLoaderWorkerError, match=r"worker process died \(pid \d+, exit status 1\)"):
        list(DataLoader(Dies(16), batch_size=2, num_workers=2, as_tensors=False))


def test_collate_of_mismatched_shapes_names_them_and_the_fix() -> None:
    with pytest.raises(ValueError, match=r"different shapes.*Resize"):
        default_collate([(np.zeros((3, 4, 4)), 0), (np.zeros((3, 5, 4)), 1)])


def test_bad_arguments() -> None:
    ds = NoisyDataset(4)
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(ds, batch_size=0)
    with pytest.raises(ValueError, match="TensorDataset.*first dimension"):
        TensorDataset(np.zeros((3, 2)), np.zeros(4))
    with pytest.raises(IndexError, match="out of range"):
        Subset(ds, [0, 9])


def test_batches_are_tinyflow_tensors_with_the_right_dtypes() -> None:
    import tinyflow as tf

    ds = TensorDataset(np.random.default_rng(0).random((5, 2, 3)).astype(np.float32), np.arange(5))
    x, y = next(iter(DataLoader(ds, batch_size=4)))
    assert isinstance(x, tf.Tensor) and isinstance(y, tf.Tensor)
    assert x.shape == (4, 2, 3) and x.dtype == tf.float32 and y.dtype == tf.int64
    np.testing.assert_array_equal(y.numpy(), [0, 1, 2, 3])


def test_default_seed_follows_tinyflow_manual_seed() -> None:
    import tinyflow as tf

    ds = NoisyDataset(20)
    tf.manual_seed(11)
    a = _epoch(DataLoader(ds, batch_size=5, shuffle=True, as_tensors=False), 0)
    tf.manual_seed(11)
    b = _epoch(DataLoader(ds, batch_size=5, shuffle=True, as_tensors=False), 0)
    assert _same(a, b)


class Logged(NoisyDataset):
    """Appends each index it loads to a file, so the test knows what the workers have done."""

    def __init__(self, n: int, log: Path):
        super().__init__(n)
        self.log = str(log)

    def __getitem__(self, i: int):
        with open(self.log, "a") as f:
            f.write(f"{i}\n")
        return super().__getitem__(i)


def _wait_for(condition, timeout: float = 20.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_worker_killed_between_batches_is_the_loaders_error(tmp_path: Path) -> None:
    """SIGKILL a pool worker while every prefetched batch is already done: the next batch comes
    from a finished future and only the submit() of a new one sees the broken pool. That must
    still be the loader's own message, not a bare BrokenProcessPool."""
    import multiprocessing
    import os
    import signal
    import time

    from tinyflow.data import DataLoaderWorkerError

    log = tmp_path / "loaded.txt"
    before = {p.pid for p in multiprocessing.active_children()}
    loader = DataLoader(Logged(40, log), batch_size=2, num_workers=2, prefetch_factor=2, as_tensors=False)
    it = iter(loader)
    next(it)
    # 1 batch delivered + 4 in flight (2 workers x prefetch 2): wait until all 5 were loaded.
    _wait_for(lambda: log.exists() and len(log.read_text().split()) >= 10)
    time.sleep(0.3)  # and their results have reached the main process
    workers = [p for p in multiprocessing.active_children() if p.pid not in before]
    assert len(workers) == 2
    os.kill(workers[0].pid, signal.SIGKILL)
    _wait_for(lambda: not any(p.is_alive() for p in workers))  # the pool noticed and ended the other one
    with pytest.raises(DataLoaderWorkerError, match=r"worker process died \(pid \d+, killed by SIGKILL\)") as info:
        for _ in it:
            pass
    assert "--workers 0" in str(info.value) and "\n" not in str(info.value)
