"""DataParallel: one model replica per worker, gradients averaged by bucketed all-reduce.

How one training step flows:

1. ``DataParallel(model, comm)`` checks that every rank holds the same parameter names,
   shapes and dtypes (an error names the first difference and the rank), broadcasts rank 0's
   parameters and buffers, and groups the parameters into flat buckets of about ``bucket_mb``
   MB each, in reverse registration order (roughly the order backward produces gradients).
2. During ``loss.backward()`` the engine calls each parameter's post-accumulate-grad hook once
   its gradient is final. The hook copies the gradient into its bucket; when a bucket is full
   it is handed to a background communication thread, which all-reduces the buckets strictly in
   bucket order (so all ranks issue the same collectives in the same order) while backward
   carries on computing earlier layers' gradients: communication overlaps computation.
3. When the last gradient arrives, its hook waits for the communication thread to finish and
   writes the averaged gradients back into every ``param.grad``. So after ``backward()``
   returns, the gradients are already averaged and ``optimizer.step()`` can run as usual.

If some parameters may get no gradient in a step (unused branches), the automatic finish
cannot know the step is over: call ``dp.synchronize()`` after ``backward()`` on every rank
(it is a no-op when the step already finished). Missing gradients count as zeros.
"""
from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tinyflow.device import array_module, kernels_of
from tinyflow.nn.modules.module import Module
from tinyflow.parallel.allreduce import (
    ALGORITHM_CHOICES,
    DEFAULT_ALGORITHM,
    all_gather_object,
    allreduce,
    broadcast,
    choose_algorithm,
)
from tinyflow.parallel.communicator import CommError, Communicator
from tinyflow.parallel.compression import Compression, get_compression
from tinyflow.tensor import Tensor


@dataclass
class _Slot:
    name: str
    param: Tensor
    offset: int
    numel: int


@dataclass
class _Bucket:
    index: int
    flat: Any  # one contiguous buffer for all the bucket's gradients
    slots: list[_Slot]
    pending: int = 0
    filled: set = field(default_factory=set)
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def nbytes(self) -> int:
        return int(self.flat.nbytes)


@dataclass
class StepStats:
    """What the last synchronized step cost in communication."""

    comm_seconds: float = 0.0  # time the comm thread spent all-reducing
    wait_seconds: float = 0.0  # time backward was blocked waiting for communication (exposed)
    bytes_sent: int = 0  # payload bytes this rank sent
    buckets: int = 0


class DataParallel(Module):
    """Wrap ``module`` so that its gradients are averaged over all ranks of ``comm``.

    ``algorithm``: one of allreduce.py's ``ALGORITHM_CHOICES``: "auto" (the default: native,
    tree or ring per bucket, by a fixed size rule, ``choose_by_size``, or with ``calibrate=True``
    from a cost model timed once per world when the wrapper is built: a start-up benchmark that
    may pay off on an unusual transport) | ring | tree | naive | native (that one for every bucket).
    ``dp.bucket_algorithms`` holds each bucket's choice. ``compression``: None | "fp16" | "1bit".
    ``overlap=False`` all-reduces every bucket after backward instead of during it.
    ``timeout`` (seconds) overrides the communicator's; a silent rank becomes an error naming it.
    ``broadcast_buffers`` (default True) copies rank 0's buffers (BatchNorm statistics) to every
    rank at each training forward, as DDP does.
    Move the model to its device before wrapping it: the buckets live where the parameters are.
    """

    def __init__(
        self,
        module: Module,
        comm: Communicator,
        algorithm: str = DEFAULT_ALGORITHM,
        bucket_mb: float = 25.0,
        compression: str | Compression | None = None,
        timeout: float | None = None,
        overlap: bool = True,
        tracer: Any = None,
        broadcast_buffers: bool = True,
        calibrate: bool = False,
    ) -> None:
        super().__init__()
        if algorithm not in ALGORITHM_CHOICES:
            raise ValueError(f"DataParallel: unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHM_CHOICES)}")
        if bucket_mb <= 0:
            raise ValueError(f"DataParallel: bucket_mb must be > 0, got {bucket_mb}")
        self.module = module
        object.__setattr__(self, "comm", comm)
        if timeout is not None:
            comm.timeout = float(timeout)
        self.algorithm = algorithm
        self.compression = get_compression(compression)
        self.overlap = overlap
        self.tracer = tracer
        self.broadcast_buffers = broadcast_buffers
        self.last_step = StepStats()

        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self._check_same_model(module)
        self._broadcast_state(module)
        self.buckets = self._make_buckets(named, int(bucket_mb * 1024 * 1024))
        self.bucket_algorithms = self._choose_algorithms(calibrate)
        self._where: dict[int, tuple[_Bucket, _Slot]] = {
            id(s.param): (b, s) for b in self.buckets for s in b.slots
        }
        self._lock = threading.Lock()
        self._sync_enabled = True
        self._step_open = False
        self._next_launch = 0
        self._error: BaseException | None = None
        self._hook_removers = []
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        if comm.size > 1:
            for _, p in named:
                self._hook_removers.append(p.register_post_accumulate_grad_hook(self._on_grad_ready))
            if overlap:
                self._queue = queue.Queue()
                self._thread = threading.Thread(
                    target=self._comm_loop, name=f"tinyflow-comm-rank{comm.rank}", daemon=True
                )
                self._thread.start()

    # ---- the wrapped model -------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self._step_open:
            raise RuntimeError(
                "DataParallel: the previous backward left gradients un-averaged (some parameters got "
                "no gradient); call dp.synchronize() after backward on every rank"
            )
        if self.broadcast_buffers and self.training and self.comm.size > 1:
            # BatchNorm's running statistics are computed from each rank's shard: keep rank 0's
            # everywhere, as DDP does, so evaluation and checkpoints agree across ranks.
            for b in self.module.buffers():
                broadcast(b.array, self.comm, root=0)
        return self.module(*args, **kwargs)

    def state_dict(self, prefix: str = "") -> Any:
        """The wrapped module's state dict (no 'module.' prefix), so checkpoints stay portable."""
        return self.module.state_dict(prefix=prefix)

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> Any:
        return self.module.load_state_dict(state_dict, strict)

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Accumulate gradients locally inside this block; the next backward outside syncs them."""
        self._sync_enabled = False
        try:
            yield
        finally:
            self._sync_enabled = True

    # ---- setup ---------------------------------------------------------------------------
    def _check_same_model(self, module: Module) -> None:
        """Fail on every rank, with the same message, if any rank's model differs from rank 0's."""
        mine = [("parameter", n, tuple(p.shape), str(p.dtype)) for n, p in module.named_parameters()]
        mine += [("buffer", n, tuple(b.shape), str(b.dtype)) for n, b in module.named_buffers()]
        everyone = all_gather_object(mine, self.comm)
        reference = everyone[0]
        for rank, theirs in enumerate(everyone[1:], start=1):
            problem = _first_difference(reference, theirs, rank)
            if problem:
                raise CommError(f"DataParallel: the model differs between ranks: {problem}", rank=self.comm.rank, peer=rank)

    def _broadcast_state(self, module: Module) -> None:
        """Copy rank 0's parameters and buffers to every rank, so replicas start identical."""
        for t in [*module.parameters(), *module.buffers()]:
            broadcast(t.array, self.comm, root=0)

    def _choose_algorithms(self, calibrate: bool) -> list[str]:
        """Each bucket's all-reduce algorithm: for auto, what allreduce's auto picks for its size
        (the size rule, or with ``calibrate`` the cost model, timing the candidates once now:
        collective); else the one algorithm asked for."""
        if self.algorithm != "auto" or self.comm.size == 1 or not self.buckets:
            return [self.algorithm] * len(self.buckets)
        if calibrate:
            from tinyflow.parallel.auto import calibrate as fit  # opt-in: only calibrate=True loads it

            largest = max(self.buckets, key=lambda b: b.nbytes)
            fit(self.comm, largest.nbytes, like=largest.flat)
        return [choose_algorithm(b.nbytes, self.comm) for b in self.buckets]

    def _make_buckets(self, named: list[tuple[str, Tensor]], bucket_bytes: int) -> list[_Bucket]:
        """Pack parameters, last-registered first, into flat buckets of one dtype and device."""
        buckets: list[_Bucket] = []
        group: list[tuple[str, Tensor]] = []
        size = 0

        def close() -> None:
            if not group:
                return
            xp = array_module(group[0][1].array)
            slots, offset = [], 0
            for name, p in group:
                slots.append(_Slot(name, p, offset, p.numel()))
                offset += p.numel()
            flat = xp.zeros(offset, dtype=group[0][1].dtype)  # (total numel,)
            buckets.append(_Bucket(len(buckets), flat, slots, pending=len(slots)))

        for name, p in reversed(named):
            nbytes = p.numel() * p.dtype.itemsize
            if group and (
                size + nbytes > bucket_bytes
                or p.dtype != group[0][1].dtype
                or p.device != group[0][1].device
            ):
                close()
                group, size = [], 0
            group.append((name, p))
            size += nbytes
        close()
        return buckets

    # ---- during backward -----------------------------------------------------------------
    def _on_grad_ready(self, param: Tensor) -> None:
        """Post-accumulate hook: copy the gradient into its bucket; launch full buckets."""
        if not self._sync_enabled:
            return
        bucket, slot = self._where[id(param)]
        with self._lock:
            if not self._step_open:
                self._begin_step()
            if id(param) in bucket.filled:
                return  # a second backward before synchronize: the grad already includes it
            bucket.flat[slot.offset : slot.offset + slot.numel] = param.grad.array.reshape(-1)
            bucket.filled.add(id(param))
            bucket.pending -= 1
            self._launch_ready()
            everything_ready = self._next_launch == len(self.buckets)
        if everything_ready:
            self._finish()

    def _begin_step(self) -> None:
        if self._error is not None:
            raise self._error
        self._step_open = True
        self._next_launch = 0
        self._bytes_at_start = self.comm.bytes_sent
        self.last_step = StepStats()

    def _launch_ready(self) -> None:
        """Hand every bucket that is ready, in bucket order, to the comm thread (or keep it)."""
        while self._next_launch < len(self.buckets) and self.buckets[self._next_launch].pending == 0:
            bucket = self.buckets[self._next_launch]
            self._next_launch += 1
            if self._queue is not None:
                self._queue.put(bucket)

    def _comm_loop(self) -> None:
        while True:
            bucket = self._queue.get()
            if bucket is None:
                return
            try:
                if self._error is None:
                    self._reduce(bucket)
            except BaseException as exc:  # noqa: BLE001 - surfaced to the main thread
                self._error = exc
            finally:
                bucket.done.set()

    def _reduce(self, bucket: _Bucket) -> None:
        """Average one bucket over all ranks (sum, optionally compressed, then divide)."""
        start = time.perf_counter()
        if self.compression is None:
            allreduce(bucket.flat, self.comm, algorithm=self.bucket_algorithms[bucket.index])
        else:
            # auto chooses again for the compressed (smaller) buffer; otherwise the bucket's own
            algorithm = "auto" if self.algorithm == "auto" else self.bucket_algorithms[bucket.index]
            self.compression.allreduce_sum(bucket.flat, self.comm, algorithm=algorithm, key=bucket.index)
        kernels_of(bucket.flat).reduce_scale(bucket.flat, 1.0 / self.comm.size)
        end = time.perf_counter()
        self.last_step.comm_seconds += end - start
        if self.tracer is not None:
            self.tracer.add(
                f"allreduce bucket {bucket.index}", start, end, cat="comm",
                bytes=bucket.nbytes, algorithm=self.bucket_algorithms[bucket.index],
            )

    # ---- finishing the step --------------------------------------------------------------
    def synchronize(self) -> None:
        """Finish this step's all-reduce: missing gradients count as zeros. No-op if done."""
        if self.comm.size == 1 or not self._step_open:
            return
        with self._lock:
            for bucket in self.buckets:
                for slot in bucket.slots:
                    if id(slot.param) not in bucket.filled:
                        bucket.flat[slot.offset : slot.offset + slot.numel] = 0
                        bucket.filled.add(id(slot.param))
                        bucket.pending -= 1
            self._launch_ready()
        self._finish()

    def _finish(self) -> None:
        """Wait for every bucket's all-reduce, then write the averages into ``param.grad``."""
        start = time.perf_counter()
        try:
            for bucket in self.buckets:
                if self._queue is None:
                    if self._error is None:
                        self._reduce(bucket)
                else:
                    while not bucket.done.wait(1.0):
                        if self._thread is not None and not self._thread.is_alive():
                            raise CommError("DataParallel: the communication thread died")
            if self._error is not None:
                raise self._error
        finally:
            wait = time.perf_counter() - start
            for bucket in self.buckets:
                bucket.done.clear()
                bucket.filled.clear()
                bucket.pending = len(bucket.slots)
            self._step_open = False
        for bucket in self.buckets:
            for slot in bucket.slots:
                p = slot.param
                averaged = bucket.flat[slot.offset : slot.offset + slot.numel].reshape(p.shape)
                if p.grad is None:
                    p.grad = Tensor._from_array(averaged.copy(), device=p.device)
                else:
                    p.grad.array[...] = averaged
        stats = self.last_step
        stats.wait_seconds = wait if self._queue is not None else stats.comm_seconds
        stats.bytes_sent = self.comm.bytes_sent - self._bytes_at_start
        stats.buckets = len(self.buckets)
        if self.tracer is not None:
            self.tracer.add("wait for all-reduce", start, start + wait, cat="comm")

    def close(self) -> None:
        """Stop the comm thread and remove the hooks (the model keeps working alone)."""
        for remove in self._hook_removers:
            remove()
        self._hook_removers = []
        if self._queue is not None:
            self._queue.put(None)
            self._queue = None

    def extra_repr(self) -> str:
        comp = self.compression.name if self.compression else "none"
        algorithm = self.algorithm
        if algorithm == "auto" and self.comm.size > 1:
            algorithm += "(" + ",".join(self.bucket_algorithms) + ")"
        return (
            f"algorithm={algorithm}, world={self.comm.size}, buckets={len(self.buckets)}, "
            f"compression={comp}, overlap={self.overlap}"
        )


def _first_difference(reference: list[tuple], theirs: list[tuple], rank: int) -> str | None:
    """Describe the first entry where ``rank``'s model signature differs from rank 0's."""
    for ref, got in zip(reference, theirs):
        if ref == got:
            continue
        kind, name, shape, dtype = got
        rkind, rname, rshape, rdtype = ref
        if (kind, name) != (rkind, rname):
            return f"rank {rank} has {kind} {name!r} where rank 0 has {rkind} {rname!r}"
        return (
            f"{kind} {name!r} is {shape} {dtype} on rank {rank} but {rshape} {rdtype} on rank 0"
        )
    if len(theirs) != len(reference):
        longer, extra_rank = (theirs, rank) if len(theirs) > len(reference) else (reference, 0)
        kind, name = longer[min(len(theirs), len(reference))][:2]
        return (
            f"rank {rank} has {len(theirs)} parameters+buffers but rank 0 has {len(reference)}; "
            f"{kind} {name!r} exists only on rank {extra_rank}"
        )
    return None
