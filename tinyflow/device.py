"""Devices, and the array module (``xp``) and kernel module that serve each one.

A tensor's data is a NumPy array on the CPU or a CuPy array on a GPU; ops never name either
library but write one code against ``ctx.xp`` (``array_module(arr)`` outside an op). Each device
owns a kernel module, ``tinyflow.kernels`` (the NumPy references) or ``tinyflow_cuda.kernels``
(their .cu twins): ``ctx.kernels.im2col(...)``, ``kernels_of(arr)`` outside an op. This is the one
place that decides which backend serves an array, and ``tinyflow``'s only way into ``tinyflow_cuda``.

Also here: where NumPy and CuPy differ for every op family (the GEMM, half-precision sums); host
reads, every one counted per thread by :func:`to_host` (free on the CPU, a sync on a GPU), with
``device_check`` for input checks that must not sync; CUDA graph capture state (at the end).
"""
from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Callable, Hashable, Iterator
from types import ModuleType
from typing import Any, Union

import numpy as np

from tinyflow.dtypes import is_half
from tinyflow.errors import ShapeError


class Device:
    """A place where tensors live: ``Device("cpu")`` or ``Device("cuda:N")``."""

    __slots__ = ("type", "index")

    def __init__(self, spec: Union[str, Device, int, None] = None, index: int | None = None, *,
                 type: str | None = None):  # noqa: A002  (torch.device(type="cuda", index=0))
        if spec is None:
            spec = "cpu" if type is None else type
        elif isinstance(spec, int) and not isinstance(spec, bool):  # torch.device(1) is cuda:1
            spec, index = "cuda", spec
        if isinstance(spec, Device):
            self.type, self.index = spec.type, spec.index
            return
        if not isinstance(spec, str):
            raise TypeError(f"Device expects a string like 'cpu' or 'cuda:0', got {spec!r}")
        kind, _, idx = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"unknown device {spec!r}: expected 'cpu', 'cuda' or 'cuda:N'")
        if kind == "cpu":
            if idx or index:
                raise ValueError(f"device {spec!r}: the cpu device has no index")
            self.type, self.index = "cpu", None
            return
        if idx and index is not None:
            raise ValueError(f"device {spec!r}: index given twice")
        self.type = "cuda"
        self.index = int(idx) if idx else (index if index is not None else 0)

    @property
    def xp(self) -> ModuleType:
        """The array module (numpy or cupy) that holds arrays on this device."""
        if self.type == "cpu":
            return np
        import tinyflow_cuda

        return tinyflow_cuda.array_module(self.index)

    @property
    def kernels(self) -> ModuleType:
        """The kernel module serving this device: tinyflow.kernels or tinyflow_cuda.kernels."""
        return kernel_module(self.xp)

    def put(self, arr: Any) -> Any:
        """``arr`` copied onto this device (``move(arr, self)``)."""
        return move(arr, self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = Device(other)
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __str__(self) -> str:
        return "cpu" if self.type == "cpu" else f"cuda:{self.index}"

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + ("" if self.index is None else f", index={self.index}") + ")"

    def synchronize(self) -> None:
        """Wait until every kernel queued on this device has run (nothing to wait for on the CPU)."""
        if self.type == "cuda":
            import tinyflow_cuda

            tinyflow_cuda.synchronize(self.index)

    def stream(self) -> Any:
        """A context manager that gives the calling thread a CUDA stream of its own on this device,
        synchronized when the block ends (``run_local``'s thread ranks on one GPU); nothing on the CPU."""
        if self.type == "cpu":
            return contextlib.nullcontext()
        from tinyflow_cuda import streams

        return streams.stream_context(self.index)


CPU = Device("cpu")


def array_module(arr: Any) -> ModuleType:
    """numpy for NumPy arrays (and Python scalars), cupy for CuPy arrays."""
    if isinstance(arr, (np.ndarray, np.generic, int, float, bool)):
        return np
    import tinyflow_cuda

    return tinyflow_cuda.array_module_of(arr)


# PyTorch computes log(0), 1 / 0, inf * 0 and float16 overflow silently; NumPy warns (an error under
# -W error). CPU ops run in NumPy's "ignore" state, set by quiet_numpy() and undone by restore_numpy():
# NumPy 2 keeps it in a context variable (~0.1 us to set and reset; np.errstate ~0.7 us), NumPy 1 per thread.
try:
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
    quiet_numpy: Callable[[], Any] = functools.partial(_extobj_contextvar.set, _make_extobj(all="ignore"))
    restore_numpy: Callable[[Any], Any] = _extobj_contextvar.reset
except (ImportError, TypeError):  # NumPy 1
    quiet_numpy = functools.partial(np.seterr, all="ignore")

    def restore_numpy(old: Any) -> Any:
        return np.seterr(**old)


def numpy_quietly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run between quiet_numpy() and restore_numpy() (a backward pass: one state for all its ops)."""
    @functools.wraps(fn)
    def quietly(*args: Any, **kwargs: Any) -> Any:
        token = quiet_numpy()
        try:
            return fn(*args, **kwargs)
        finally:
            restore_numpy(token)
    return quietly


_kernel_modules: dict[ModuleType, ModuleType] = {}


def kernel_module(xp: ModuleType) -> ModuleType:
    """The kernel module for arrays of array module ``xp``: the references for NumPy, the CUDA
    twins otherwise (imported on first use, so the CPU path never loads tinyflow_cuda)."""
    module = _kernel_modules.get(xp)
    if module is None:
        if xp is np:
            import tinyflow.kernels as module
        else:
            import tinyflow_cuda.kernels as module
        _kernel_modules[xp] = module
    return module


def kernels_of(arr: Any) -> ModuleType:
    """The kernel module of the device ``arr`` lives on (``ctx.kernels`` outside an op)."""
    return kernel_module(array_module(arr))


def catch_oom(op: str, shape: tuple[int, ...]) -> Any:
    """A context manager that turns a device out-of-memory error inside it into one that names
    ``op``, the ``shape`` and what to do (CUDA only: the CPU never raises one)."""
    import tinyflow_cuda

    return tinyflow_cuda.catch_oom(op, tuple(shape))


def device_of(arr: Any) -> Device:
    """The Device an array lives on."""
    if isinstance(arr, (np.ndarray, np.generic)):
        return CPU
    import tinyflow_cuda

    return Device("cuda", tinyflow_cuda.device_index_of(arr))


def to_host(arr: Any, why: str = "to_host") -> np.ndarray:
    """``arr`` as a NumPy array (itself on the CPU): one counted host read, named ``why`` in
    :func:`count_host_reads` records; this thread's pending :func:`device_check` flags are read first."""
    _host_read(why)
    return _copy_to_host(arr)


def _copy_to_host(arr: Any) -> Any:
    """The host copy itself, uncounted (only ``to_host`` and ``check_deferred`` call it)."""
    if isinstance(arr, (np.ndarray, np.generic)):
        return arr
    import tinyflow_cuda

    return tinyflow_cuda.to_host(arr)


def move(arr: Any, device: Device) -> Any:
    """Copy ``arr`` to ``device`` (no copy when it is already there; to the CPU: a host read)."""
    src = device_of(arr)
    if src == device:
        return arr
    if device.type == "cpu":
        return to_host(arr, "move to cpu")
    import tinyflow_cuda

    return tinyflow_cuda.to_device(arr, device.index)


# ---- array maths every op family uses, where NumPy and CuPy differ: the GEMM, half sums ---------
def _matmul_error(a: Any, b: Any) -> ShapeError:
    sa, sb = tuple(a.shape), tuple(b.shape)
    if a.ndim == 0 or b.ndim == 0:
        why = "both operands need at least one dimension"
    else:
        k_a = sa[-1]
        k_b = sb[0] if b.ndim == 1 else sb[-2]
        why = (f"the last dimension of the first ({k_a}) must equal the "
               f"{'only' if b.ndim == 1 else 'second-to-last'} dimension of the second ({k_b})"
               if k_a != k_b else "their batch dimensions do not broadcast")
    return ShapeError(f"matmul: shapes {sa} and {sb} cannot be multiplied: {why}")


def matmul_array(xp: Any, a: Any, b: Any, out: Any = None) -> Any:
    """``a @ b`` on raw arrays (NumPy's matmul rules), written into ``out`` if given: ``xp.matmul``
    (BLAS, cuBLAS), except for two float16 / bfloat16 operands (the result has their dtype):

    * NumPy has no half-precision BLAS (float16 is a slow C loop, ml_dtypes' bfloat16 returns
      float32): the operands are widened to float32 and the product rounded once, as cuBLAS does.
    * CuPy: batched (> 2-D) products run as 2-D GEMMs (:func:`_batched_as_2d`), because CuPy's
      batched matmul fails on bfloat16 ("data type E not understood") and widens float16.
    """
    try:
        if a.dtype.itemsize == 2 and a.dtype == b.dtype and is_half(a.dtype):
            return _half_matmul(xp, a, b, out)
        return xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out)
    except ValueError:
        raise _matmul_error(a, b) from None


def _half_matmul(xp: Any, a: Any, b: Any, out: Any) -> Any:
    if xp is np:
        product = np.matmul(a.astype(np.float32), b.astype(np.float32))  # one rounding below
        if out is None:
            return product.astype(a.dtype)
        out[...] = product
        return out
    if a.ndim <= 2 and b.ndim <= 2:
        return xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out)
    return _batched_as_2d(xp, a, b, out)


def _batched_as_2d(xp: Any, a: Any, b: Any, out: Any) -> Any:
    """Batched ``a @ b`` (at least one operand > 2-D) with 2-D GEMMs only."""
    if b.ndim <= 2:  # (..., n, k) @ (k, m) or (k,): fold the batch into the rows of one GEMM
        product = xp.matmul(_rows(a), b)  # (B*n, m) or (B*n,)
        product = product.reshape(*a.shape[:-1], *b.shape[1:])  # (..., n, m) or (..., n)
    else:  # (..., n, k) or (k,) @ (..., k, m): one GEMM per entry of the broadcast batch
        a2 = a[None, :] if a.ndim == 1 else a  # (..., n, k)
        if a2.shape[-1] != b.shape[-2]:
            raise _matmul_error(a, b)
        batch = np.broadcast_shapes(a2.shape[:-2], b.shape[:-2])
        a_b = xp.broadcast_to(a2, batch + a2.shape[-2:])  # views: no copy of the smaller one
        b_b = xp.broadcast_to(b, batch + b.shape[-2:])
        product = xp.empty(batch + (a2.shape[-2], b.shape[-1]), dtype=a.dtype)  # (..., n, m)
        for index in np.ndindex(*batch):
            xp.matmul(a_b[index], b_b[index], out=product[index])
        if a.ndim == 1:
            product = product[..., 0, :]  # (..., m)
    if out is None:
        return product
    out[...] = product
    return out


def _rows(x: Any) -> Any:
    """(..., k) -> (prod(...), k); explicit sizes, as reshape cannot infer -1 for an empty batch."""
    return x.reshape(math.prod(x.shape[:-1]), x.shape[-1])


def safe_sum(a: Any, axis: Any) -> Any:
    """``a.sum(axis)`` in ``a``'s dtype, accumulated in float32 when ``a`` is half precision (gradient
    reductions sum thousands of terms: bfloat16 stalls at 256 + 1 == 256, float16 overflows)."""
    if a.dtype.itemsize == 2 and is_half(a.dtype):
        return a.sum(axis=axis, dtype=np.float32).astype(a.dtype)
    return a.sum(axis=axis)


# ---- host reads: counted per thread; checks that wait for the next one ------------------------
class HostSyncError(RuntimeError):
    """A host read inside a :func:`forbid_host_reads` block."""


class _ThreadReads(threading.local):
    """This thread's host reads (thread ranks and loader threads each count their own)."""

    count = 0
    recorders: tuple = ()  # the count_host_reads() blocks open on this thread
    forbidden = 0  # depth of forbid_host_reads() blocks
    pending: dict | None = None  # device_check flags not read yet: key -> [bad, value, make_error]


_reads = _ThreadReads()


def _count(why: str) -> None:
    reads = _reads
    reads.count += 1
    for recorder in reads.recorders:
        recorder.reasons.append(why)


def _host_read(why: str) -> None:
    reads = _reads
    if reads.forbidden:
        raise HostSyncError(f"host read ({why}) inside forbid_host_reads(): on a GPU it would wait for the device; "
                            "keep the value on the device (accumulate it) and read it once per log interval")
    if reads.pending:
        check_deferred()
    _count(why)


def host_reads() -> int:
    """How many host reads this thread has made so far (compare two calls to count a region)."""
    return _reads.count


class HostReads:
    """What a :func:`count_host_reads` block saw: ``count`` and the ``reasons``, in order."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    @property
    def count(self) -> int:
        return len(self.reasons)

    def __repr__(self) -> str:
        return f"HostReads(count={self.count}, reasons={self.reasons})"


@contextlib.contextmanager
def count_host_reads() -> Iterator[HostReads]:
    """``with count_host_reads() as r: ...`` records this thread's host reads in the block
    (``r.count``, ``r.reasons`` such as ``"item"`` or ``"numpy"``)."""
    recorder = HostReads()
    reads = _reads
    reads.recorders = (*reads.recorders, recorder)
    try:
        yield recorder
    finally:
        reads.recorders = tuple(r for r in reads.recorders if r is not recorder)


@contextlib.contextmanager
def forbid_host_reads() -> Iterator[None]:
    """Inside the block a host read on this thread raises :class:`HostSyncError` (a scoped
    ``torch.cuda.set_sync_debug_mode("error")`` for the reads that go through ``to_host``)."""
    _reads.forbidden += 1
    try:
        yield
    finally:
        _reads.forbidden -= 1


def device_check(bad: Any, value: Any, make_error: Callable[[int], Exception], key: Hashable,
                 defer: bool | None = None) -> None:
    """Raise ``make_error(int(value))`` if the 0-d ``bad`` is true, without a sync on a device.

    A host array is checked at once. On a device the flag stays there, OR-ed with the pending flag
    of the same ``key`` (e.g. ``("embedding", rows)``; the first bad ``value`` kept), and is read at
    this thread's next host read or :func:`check_deferred`, as a CUDA device-side assert surfaces at
    the next sync. ``defer=True`` defers a host check too (tests).
    """
    if defer is None:
        defer = not isinstance(bad, (np.ndarray, np.generic, bool))
    if not defer:
        if bad:
            raise make_error(int(value))
        return
    reads = _reads
    if reads.pending is None:
        reads.pending = {}
    entry = reads.pending.get(key)
    if entry is None:
        reads.pending[key] = [bad, value, make_error]
    else:
        xp = array_module(bad)
        entry[1] = xp.where(entry[0], entry[1], value)
        entry[0] = entry[0] | bad


def check_deferred() -> None:
    """Read this thread's pending :func:`device_check` flags (one host read per device holding
    some) and raise the first error; nothing to do, no read."""
    reads = _reads
    pending = reads.pending
    if not pending:
        return
    if reads.forbidden:
        raise HostSyncError("check_deferred() inside forbid_host_reads(): reading the pending device "
                            "checks is a host read")
    reads.pending = None
    groups: dict[Device, list] = {}
    for entry in pending.values():
        groups.setdefault(device_of(entry[0]), []).append(entry)
    for entries in groups.values():
        xp = array_module(entries[0][0])
        packed = xp.stack([xp.stack([bad.astype(np.int64), value.astype(np.int64)]) for bad, value, _ in entries])
        _count("device checks")
        for (flag, value), (_, _, make_error) in zip(_copy_to_host(packed).tolist(), entries):  # (K, 2)
            if flag:
                raise make_error(int(value))


# ---- handing a buffer to another thread (thread ranks, each on its own stream) ----------------
def handoff(arr: Any) -> Any:
    """A private copy of ``arr`` for another thread to read with :func:`receive_handoff`; on a GPU
    queued on this thread's stream with an event the reader's stream waits for (no thread blocks)."""
    if isinstance(arr, np.ndarray):
        return arr.copy()
    from tinyflow_cuda import streams

    return streams.handoff(arr)


def receive_handoff(dst: Any, message: Any) -> None:
    """Copy a :func:`handoff` message into ``dst`` (same size; any shape) on this thread's stream."""
    if isinstance(message, np.ndarray):
        dst[...] = message.reshape(dst.shape)
        return
    from tinyflow_cuda import streams

    streams.receive(dst, message)


# ---- the CUDA backend, for the device queries of tinyflow.cuda / tinyflow.accelerator ---------
def cuda_backend() -> ModuleType:
    """The ``tinyflow_cuda`` module (imported on first use; it imports without CuPy or a GPU and
    then answers ``is_available() == False``). ``tinyflow.cuda`` asks its questions through this."""
    import tinyflow_cuda

    return tinyflow_cuda


def nccl_communicator(**kwargs: Any) -> Any:
    """``tinyflow_cuda.nccl.NcclCommunicator(**kwargs)``: an NCCL communicator for this rank's GPU
    (``tinyflow.distributed``'s "nccl" backend makes its process group with this)."""
    from tinyflow_cuda.nccl import NcclCommunicator

    return NcclCommunicator(**kwargs)


def cuda_graphs() -> ModuleType:
    """``tinyflow_cuda.graphs``: CUDA graph capture and replay (``tinyflow.cuda.graphs`` uses it)."""
    from tinyflow_cuda import graphs

    return graphs
