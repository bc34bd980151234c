"""DataLoader: batches of a map-style dataset, shuffled from a seed, prefetched by worker processes.

Determinism. The order of epoch ``e`` is a permutation drawn from ``(seed, e)``, and random
transforms of sample ``i`` in epoch ``e`` draw from a generator seeded with ``(seed, e, i)``
(see transforms.sample_rng). So batches depend on nothing else: not on the number of
workers, not on which worker loaded a sample, and not on whether the run was interrupted and
resumed at batch ``k`` (``set_epoch(e, start_batch=k)``).

Workers. With ``num_workers > 0`` a pool of processes decodes and collates whole batches
(so JPEG decoding overlaps the training step in the main process); at most
``num_workers * prefetch_factor`` batches are in flight and they are handed out in order.
An exception raised in a worker (by the dataset, the collate_fn or the worker_init_fn) is raised
again in the caller with its own type where that can be rebuilt, as PyTorch does, and with the
worker's traceback in its message; a worker that dies is a DataLoaderWorkerError saying how.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import multiprocessing
import numbers
import pickle
import signal
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np

from tinyflow.data.dataset import Dataset, IterableDataset, SkippedSample
from tinyflow.data.sampler import RandomSampler, Sampler, SequentialSampler
from tinyflow.data.transforms import sample_rng

__all__ = ["DataLoader", "default_collate", "SkippedSampleWarning", "DataLoaderWorkerError", "WorkerInfo", "get_worker_info"]


class SkippedSampleWarning(UserWarning):
    """A sample that could not be read was skipped (the path and reason are in the message)."""


class DataLoaderWorkerError(RuntimeError):
    """A DataLoader worker failed: it died, or raised an exception.

    An exception raised in a worker reaches the caller as its own type where that type can be
    rebuilt from a message (PyTorch re-raises ``exc_type(message)`` too): as an instance of a class
    derived from both that type and this one and named as that type, so ``except ValueError`` and
    ``except DataLoaderWorkerError`` both catch it (a RuntimeError comes as this class). Its message is "Caught ValueError in DataLoader
    worker process 0 while loading ...: <the message>", then "Original Traceback (most recent call
    last): ..." (the worker's). A type that cannot be rebuilt (it needs other arguments, or does not
    pickle) comes as this class itself, with the same message."""


class _KeyErrorMessage(str):
    """A KeyError's str() is the repr of its argument: this one shows the message as it is (PyTorch's KeyErrorMessage)."""

    def __repr__(self) -> str:
        return self


@functools.cache
def _worker_error_class(exc_type: type) -> type:
    """``exc_type`` and DataLoaderWorkerError in one class, named as ``exc_type`` (whose ``__init__``
    and ``__str__`` it keeps). RuntimeError and its bases: DataLoaderWorkerError itself is one."""
    if issubclass(exc_type, DataLoaderWorkerError) or issubclass(DataLoaderWorkerError, exc_type):
        return DataLoaderWorkerError if issubclass(DataLoaderWorkerError, exc_type) else exc_type
    return type(exc_type.__name__, (exc_type, DataLoaderWorkerError),
                {"__module__": exc_type.__module__, "__qualname__": exc_type.__qualname__,
                 "__doc__": f"{exc_type.__name__} raised in a DataLoader worker (see DataLoaderWorkerError)."})


class _WorkerFailure(Exception):
    """An exception raised in a worker, on its way to the caller: its type (None where the type does
    not pickle) and the message with the worker's traceback. ``rebuilt()`` is what the caller gets."""

    def __init__(self, exc_type: type | None, message: str):
        super().__init__(exc_type, message)
        self.exc_type, self.message = exc_type, message

    def rebuilt(self) -> DataLoaderWorkerError:
        """The worker's exception type (and DataLoaderWorkerError) with the message, where it can be
        built from the message alone and shows it; else a DataLoaderWorkerError with the message."""
        if self.exc_type is not None and issubclass(self.exc_type, Exception):
            message = _KeyErrorMessage(self.message) if issubclass(self.exc_type, KeyError) else self.message
            try:
                exc = _worker_error_class(self.exc_type)(message)
                if str(exc) == self.message:
                    return exc
            except Exception:  # noqa: BLE001 - a type built otherwise: the loader's own error carries the message
                pass
        return DataLoaderWorkerError(self.message)


def _worker_failure(exc: Exception, where: str) -> _WorkerFailure:
    """``exc``, raised in a worker (``where``: "DataLoader worker process 0 while loading ..."), as it
    travels to the caller, with the traceback being handled."""
    exc_type: type | None = type(exc)
    try:
        pickle.dumps(exc_type)
    except Exception:  # noqa: BLE001 - a class defined inside a function, ...: sent by name only
        exc_type = None
    first = str(exc).partition("\n")[0] if not isinstance(exc, KeyError) else str(exc)
    head = f"Caught {type(exc).__name__} in {where}" + (f": {first}" if first else "")
    return _WorkerFailure(exc_type, f"{head}\nOriginal {traceback.format_exc().rstrip()}")


def default_collate(samples: Sequence[Any]) -> Any:
    """Stack a list of samples field by field into NumPy arrays (numbers -> int64/float32)."""
    first = samples[0]
    if isinstance(first, tuple) or isinstance(first, list):
        if any(len(s) != len(first) for s in samples):
            raise ValueError(f"collate: samples have different numbers of fields: {[len(s) for s in samples][:8]}")
        return tuple(default_collate([s[k] for s in samples]) for k in range(len(first)))
    if isinstance(first, dict):
        return {key: default_collate([s[key] for s in samples]) for key in first}
    if isinstance(first, (bool, np.bool_)):
        return np.asarray(samples, dtype=np.bool_)
    if isinstance(first, numbers.Integral):
        return np.asarray(samples, dtype=np.int64)
    if isinstance(first, numbers.Real):
        return np.asarray(samples, dtype=np.float32)
    if isinstance(first, str):
        return list(samples)
    arrays = [s.numpy() if hasattr(s, "numpy") and not isinstance(s, np.ndarray) else np.asarray(s) for s in samples]
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise ValueError(
            f"collate: cannot stack samples of different shapes {sorted(shapes)[:4]} into one batch; "
            "give the dataset a transform that makes every sample the same size "
            "(e.g. transforms.Resize(S) then transforms.CenterCrop(S))"
        )
    return np.stack(arrays)


def _load_batch(
    dataset: Dataset, collate_fn: Callable, indices: Sequence[int], seed: int, epoch: int,
    refill: bool = False,
) -> tuple[Any, list[tuple[str, str]]]:
    """Load and collate one batch; corrupt samples are returned as (path, reason) and left out,
    or with ``refill`` replaced by the next readable sample (i+1, i+2, ...) so the batch keeps
    its size."""
    samples, skipped = [], []
    n = len(dataset)
    for i in indices:
        for k in range(n if refill else 1):
            j = (int(i) + k) % n
            with sample_rng(np.random.default_rng([seed, epoch, j])):
                try:
                    samples.append(dataset[j])
                    break
                except SkippedSample as exc:
                    skipped.append((exc.path, exc.reason))
    return (collate_fn(samples) if samples else None), skipped


# Per-worker state, set once by the pool initializer (inherited through fork, no pickling): the
# dataset and collate_fn, this worker's id (0, 1, ... in the order the workers start) and what its
# worker_init_fn raised, if it did.
_worker_state: tuple[Dataset, Callable] | None = None
_worker_id = 0
_init_failure: _WorkerFailure | None = None
_worker_info: WorkerInfo | None = None


class WorkerInfo:
    """What ``get_worker_info()`` returns in a DataLoader worker (``torch.utils.data``'s): ``id``
    (0 .. num_workers - 1), ``num_workers``, ``seed`` (the loader's seed + id, for a worker_init_fn
    that seeds other libraries) and ``dataset`` (this process's copy)."""

    def __init__(self, id: int, num_workers: int, seed: int, dataset: Dataset) -> None:  # noqa: A002
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self) -> str:
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, dataset={self.dataset!r})"


def get_worker_info() -> WorkerInfo | None:
    """In a DataLoader worker process: that worker's WorkerInfo; elsewhere None (as in PyTorch).
    An IterableDataset is read in the main process, so its ``__iter__`` sees None: the whole stream."""
    return _worker_info


def _worker_init(dataset: Dataset, collate_fn: Callable, worker_init_fn: Callable[[int], None] | None = None,
                 counter: Any = None, num_workers: int = 1, seed: int = 0) -> None:
    """The pool's initializer. A worker_init_fn that raises does not end the worker (the pool would
    see a worker that died, as if killed): its exception comes back with the worker's first batch."""
    global _worker_state, _worker_id, _init_failure, _worker_info
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's business
    if hasattr(signal, "SIGUSR1"):
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # so is the stop request mpirun forwards (tinyflow train --nproc)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the training loop's handler: the pool ends its workers with it
    _worker_state = (dataset, collate_fn)
    if counter is not None:
        with counter.get_lock():
            _worker_id, counter.value = counter.value, counter.value + 1
    _worker_info = WorkerInfo(_worker_id, num_workers, seed + _worker_id, dataset)
    if worker_init_fn is not None:
        try:
            worker_init_fn(_worker_id)
        except Exception as exc:  # noqa: BLE001 - sent to the caller with the first batch
            _init_failure = _worker_failure(exc, f"the worker_init_fn of DataLoader worker process {_worker_id}")


def _worker_load(indices: Sequence[int], seed: int, epoch: int, refill: bool) -> tuple[Any, list[tuple[str, str]]]:
    assert _worker_state is not None
    if _init_failure is not None:
        raise _init_failure
    dataset, collate_fn = _worker_state
    try:
        return _load_batch(dataset, collate_fn, indices, seed, epoch, refill)
    except Exception as exc:  # raised again in the caller, as its own type, with this traceback
        shown = f"{list(indices)[:8]}" if len(indices) <= 8 else f"{list(indices)[:8]}"[:-1] + ", ...]"
        raise _worker_failure(exc, f"DataLoader worker process {_worker_id} while loading a batch with "
                                   f"indices {shown}") from None


@contextlib.contextmanager
def _worker_deaths(epoch: int, workers: dict[int, Any]) -> Iterator[None]:
    """Turn BrokenProcessPool (a worker process died) into the loader's own error, naming how; an
    exception a worker raised comes out as the worker raised it (``_WorkerFailure.rebuilt``)."""
    try:
        yield
    except _WorkerFailure as failure:  # an exception raised in a worker: its own type again
        raise failure.rebuilt() from None
    except BrokenProcessPool:
        raise DataLoaderWorkerError(
            f"a DataLoader worker process died{_how_workers_died(workers)} while loading epoch {epoch + 1} "
            "(killed by the system, e.g. out of memory, or crashed in native code); rerun with --workers 0 "
            "to load in this process and see the error"
        ) from None


def _how_workers_died(workers: dict[int, Any]) -> str:
    """' (pid 123, killed by SIGKILL)' for the first worker that ended other than by the pool's
    own SIGTERM (which the pool sends to the survivors once one has died), else ''."""
    deadline = time.monotonic() + 2.0
    for proc in workers.values():  # the dead one may not be reaped yet; the pool ends the others
        proc.join(max(0.0, deadline - time.monotonic()))
    for pid, proc in workers.items():
        code = proc.exitcode
        if code is None or code == 0 or code == -signal.SIGTERM:
            continue
        if code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exit status {code}"
        return f" (pid {pid}, {how})"
    return ""


def _default_seed() -> int:
    """A base seed drawn from tinyflow's default generator, so that tf.manual_seed fixes it."""
    from tinyflow import random as tf_random

    return int(tf_random.rng().integers(0, 2**31 - 1))


class DataLoader:
    """Iterate over ``dataset`` in batches of tinyflow tensors (``torch.utils.data.DataLoader``).

    PyTorch's arguments: batch_size; shuffle (a seeded permutation per epoch) or an explicit
    ``sampler`` (e.g. DistributedSampler), or a ``batch_sampler`` that yields whole batches of
    indices; num_workers (0 = load in this process); collate_fn (samples -> arrays or tensors);
    drop_last; worker_init_fn (called with the worker's id in each worker process);
    multiprocessing_context; generator (a tinyflow.Generator the seed is drawn from);
    prefetch_factor (batches in flight per worker). Accepted for PyTorch programs and without
    effect here: pin_memory, timeout, persistent_workers (a pool lives for one epoch).
    tinyflow's own: seed (None draws one from ``generator`` or tinyflow's global generator);
    device (where batches go); as_tensors (False yields the NumPy arrays); skip_log (a file
    that lists skipped samples); refill_skipped. An IterableDataset is read in order, in this
    process, and batched as it comes.
    """

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int | None = 1,
        shuffle: bool | None = False,
        sampler: Sampler | None = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Callable[[list], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: str | None = None,
        generator: Any = None,
        *,
        prefetch_factor: int | None = 2,
        persistent_workers: bool = False,
        seed: int | None = None,
        device: Any = None,
        as_tensors: bool = True,
        skip_log: str | None = None,
        refill_skipped: bool = False,
        **unsupported: Any,
    ):
        if unsupported:
            raise TypeError(f"DataLoader: unsupported argument(s) {sorted(unsupported)}")
        if batch_sampler is not None:
            if batch_size not in (1, None) or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = getattr(batch_sampler, "batch_size", 1)
        if not isinstance(batch_size, numbers.Integral) or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be a positive int, got {batch_size!r}")
        if num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be >= 0, got {num_workers}")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: give either shuffle=True or a sampler, not both")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.batch_sampler = batch_sampler
        self.drop_last = drop_last
        self.num_workers = int(num_workers)
        self.prefetch_factor = max(1, int(prefetch_factor or 2))
        self.collate_fn = collate_fn or default_collate
        self.worker_init_fn = worker_init_fn
        self.pin_memory, self.timeout, self.persistent_workers = pin_memory, timeout, persistent_workers
        if seed is None and generator is not None:
            from tinyflow import random as tf_random

            seed = int(tf_random.rng(generator).integers(0, 2**31 - 1))
        self.seed = _default_seed() if seed is None else int(seed)
        self.iterable = isinstance(dataset, IterableDataset)
        if self.iterable and (sampler is not None or batch_sampler is not None or shuffle):
            raise ValueError("DataLoader: an IterableDataset takes no sampler, batch_sampler or shuffle "
                             "(it decides its own order)")
        if sampler is None and not self.iterable:
            sampler = RandomSampler(dataset, seed=self.seed) if shuffle else SequentialSampler(dataset)
        self.sampler = sampler
        self.device = device
        self.as_tensors = as_tensors
        self.skip_log = skip_log
        # Data-parallel ranks must take the same number of steps of the same size: there a
        # skipped sample is replaced by the next readable one instead of shrinking the batch.
        self.refill_skipped = refill_skipped
        if multiprocessing_context is None:
            methods = multiprocessing.get_all_start_methods()
            multiprocessing_context = "fork" if "fork" in methods else "spawn"
        self.multiprocessing_context = multiprocessing_context
        self.skipped: list[tuple[str, str]] = []  # (path, reason) of every sample skipped so far
        self._reported: set[str] = set()
        self._epoch = 0
        self._epoch_given = 0  # the sampler epoch this loader set last (samplers start at 0)
        self._program_sets_epoch = False  # see _drive_epoch
        self._start_batch = 0
        self._skip = 0  # samples of the first batch to leave out (set_epoch's start_sample)

    # ------------------------------------------------------------------ epochs

    @property
    def epoch(self) -> int:
        """The epoch that the next iteration will run."""
        return self._epoch

    def set_epoch(self, epoch: int, start_batch: int = 0, start_sample: int | None = None) -> None:
        """Make the next iteration epoch ``epoch``, beginning at batch ``start_batch`` (for resume),
        or at position ``start_sample`` of the epoch's order: the batch holding it comes without the
        samples before it (resuming with another batch size continues from the same sample)."""
        self._epoch = int(epoch)
        self._start_batch, self._skip = int(start_batch), 0
        if start_sample is not None:
            self._start_batch, self._skip = divmod(int(start_sample), self.batch_size)

    def _drive_epoch(self, sampler: Any, epoch: int) -> None:
        """Give ``sampler`` this loader's epoch (tinyflow's samplers take their order from it),
        unless the program sets the sampler's epoch itself, as PyTorch programs do with
        ``DistributedSampler.set_epoch(epoch)``: once the sampler's ``epoch`` differs from what the
        loader last gave it, the loader leaves it alone for good (PyTorch's loader never sets it)."""
        if not hasattr(sampler, "set_epoch") or self._program_sets_epoch:
            return
        current = getattr(sampler, "epoch", None)
        if current is not None and current != self._epoch_given:
            self._program_sets_epoch = True
            return
        sampler.set_epoch(epoch)
        self._epoch_given = getattr(sampler, "epoch", epoch)

    def _batches(self, epoch: int) -> list[list[int]]:
        if self.batch_sampler is not None:
            self._drive_epoch(self.batch_sampler, epoch)
            return [[int(i) for i in batch] for batch in self.batch_sampler]
        self._drive_epoch(self.sampler, epoch)
        batches, current = [], []
        for i in self.sampler:
            current.append(int(i))
            if len(current) == self.batch_size:
                batches.append(current)
                current = []
        if current and not self.drop_last:
            batches.append(current)
        return batches

    def __len__(self) -> int:
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        if self.iterable:
            raise TypeError("DataLoader: the length of an IterableDataset's loader is not known")
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    # ------------------------------------------------------------------ iteration

    def __iter__(self) -> Iterator[Any]:
        """The batches of the next epoch (then the epoch counter moves on by one)."""
        epoch, start, skip = self._epoch, self._start_batch, self._skip
        self._epoch, self._start_batch, self._skip = epoch + 1, 0, 0
        if self.iterable:
            return self._iter_iterable()
        batches = self._batches(epoch)[start:]
        if skip and batches:
            batches[0] = batches[0][skip:]
        if self.num_workers == 0:
            return self._iter_inline(batches, epoch)
        return self._iter_workers(batches, epoch)

    def _iter_iterable(self) -> Iterator[Any]:
        samples: list[Any] = []
        for sample in self.dataset:
            samples.append(sample)
            if len(samples) == self.batch_size:
                yield from self._deliver(self.collate_fn(samples), [])
                samples = []
        if samples and not self.drop_last:
            yield from self._deliver(self.collate_fn(samples), [])

    def _iter_inline(self, batches: list[list[int]], epoch: int) -> Iterator[Any]:
        for indices in batches:
            batch, skipped = _load_batch(self.dataset, self.collate_fn, indices, self.seed, epoch, self.refill_skipped)
            yield from self._deliver(batch, skipped)

    def _iter_workers(self, batches: list[list[int]], epoch: int) -> Iterator[Any]:
        ctx = multiprocessing.get_context(self.multiprocessing_context)
        # A process pool that notices a worker dying (OOM killer, a crash in a decoder): its
        # futures then raise BrokenProcessPool instead of waiting forever for a lost batch, and
        # so does every later submit(); both go through _worker_deaths.
        pool = ProcessPoolExecutor(self.num_workers, mp_context=ctx, initializer=_worker_init,
                                   initargs=(self.dataset, self.collate_fn, self.worker_init_fn, ctx.Value("i", 0),
                                             self.num_workers, self.seed))
        workers: dict[int, Any] = {}  # pid -> Process, every worker this pool started
        try:
            pending: collections.deque = collections.deque()
            todo = iter(batches)
            limit = self.num_workers * self.prefetch_factor

            def submit() -> None:
                indices = next(todo, None)
                if indices is not None:
                    pending.append(pool.submit(_worker_load, indices, self.seed, epoch, self.refill_skipped))
                    workers.update(getattr(pool, "_processes", None) or {})

            with _worker_deaths(epoch, workers):
                for _ in range(limit):
                    submit()
            while pending:
                with _worker_deaths(epoch, workers):
                    batch, skipped = pending.popleft().result()
                    submit()
                yield from self._deliver(batch, skipped)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in workers.values():  # don't wait for batches prefetched for nobody
                proc.terminate()

    def _deliver(self, batch: Any, skipped: list[tuple[str, str]]) -> Iterator[Any]:
        for path, reason in skipped:
            self._report(path, reason)
        if batch is not None:
            yield self._to_tensors(batch) if self.as_tensors else batch

    def _report(self, path: str, reason: str) -> None:
        if path in self._reported:
            return
        self._reported.add(path)
        self.skipped.append((path, reason))
        msg = f"skipped unreadable sample {path}: {reason}"
        warnings.warn(msg, SkippedSampleWarning, stacklevel=3)
        if self.skip_log:
            with open(self.skip_log, "a", encoding="utf-8") as f:
                f.write(f"{path}\t{reason}\n")

    def _to_tensors(self, batch: Any) -> Any:
        import tinyflow

        if isinstance(batch, tuple):
            return tuple(self._to_tensors(b) for b in batch)
        if isinstance(batch, dict):
            return {k: self._to_tensors(v) for k, v in batch.items()}
        if isinstance(batch, np.ndarray):
            return tinyflow.as_tensor(batch, dtype=batch.dtype, device=self.device)  # no copy on the CPU
        return batch
