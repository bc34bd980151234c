"""Mixed precision (``torch.amp.autocast_mode``): GEMMs in bf16/fp16 under ``autocast``, float32
master weights; fp16 adds dynamic loss scaling (grad_scaler.py). docs/cuda.md ("Mixed precision")
shows a training step with both.

Inside ``autocast`` (PyTorch's two lists) matmul, ``F.linear`` and ``F.conv2d`` compute in the
autocast dtype; ``F.softmax``, ``F.log_softmax``, the losses, ``F.batch_norm`` and
``F.local_response_norm`` compute in float32; other ops are not cast. An op joins a list by
calling one helper on its Tensors before ``Function.apply``:

    x, w, b = amp.autocast_inputs(x, w, b)     # a GEMM op: compute in the autocast dtype
    (logits,) = amp.float32_inputs(logits)     # a precision-sensitive op: compute in float32

Outside autocast both return their arguments unchanged; None, non-Tensors, integer and float64
tensors always pass through. The casts are graph nodes (``Cast``), so the float32 parameters get
float32 gradients and backward needs nothing more; a parameter's cast is made once per region
(the weight-cast cache, ``_cached_cast``). An op that casts raw arrays inside its forward reads
``amp.autocast_dtype()`` in its wrapper and passes it to ``apply`` (backward runs outside the
``with`` block), and multiplies half-precision arrays with ``tinyflow.device.matmul_array``.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any

import numpy as np

from tinyflow.autograd.function import Context, Function
from tinyflow.dtypes import bfloat16, is_half

__all__ = ["autocast", "autocast_dtype", "autocast_inputs", "float32_inputs", "is_autocast_enabled",
           "is_autocast_cache_enabled", "clear_autocast_cache", "bfloat16"]

_local = threading.local()


_BFLOAT16_MISSING = (
    "autocast to bfloat16 needs the ml_dtypes package, which tinyflow's base install leaves out: "
    "`pip install ml_dtypes` (or install tinyflow's cuda extra, `pip install \"tinyflow[cuda]\"`); "
    "or autocast to float16 ('fp16') instead"
)


def _check(dtype: Any) -> np.dtype | str:
    """``dtype`` checked to name float16 or bfloat16, without importing ml_dtypes: the float16
    dtype, a bfloat16 dtype given as one, or the name "bfloat16" (resolved by ``_resolve``)."""
    if isinstance(dtype, str):
        name = dtype.lower()
        if name in ("bf16", "bfloat16"):
            return "bfloat16"
        if name in ("fp16", "float16", "half"):
            return np.dtype(np.float16)
        raise ValueError(f"autocast: unknown dtype {dtype!r}; use 'bf16' or 'fp16'")
    resolved = np.dtype(dtype)
    if resolved == np.float16 or resolved.name == "bfloat16":
        return resolved
    raise ValueError(f"autocast: dtype must be float16 or bfloat16, got {resolved}")


def _resolve(dtype: Any) -> np.dtype:
    """float16 / bfloat16 from a dtype or a name ('fp16', 'float16', 'half', 'bf16', 'bfloat16');
    bfloat16 without ml_dtypes is a TypeError that says how to install it."""
    checked = _check(dtype)
    if isinstance(checked, np.dtype):
        return checked
    try:
        return bfloat16()
    except TypeError:
        raise TypeError(_BFLOAT16_MISSING) from None


DEVICE_TYPES = {"cuda": "float16", "cpu": "bfloat16"}  # device_type -> PyTorch's default dtype


def _cuda_available() -> bool:
    from tinyflow.device import cuda_backend

    return bool(cuda_backend().is_available())


class autocast(contextlib.ContextDecorator):  # noqa: N801  (PyTorch's name)
    """Run the GEMM ops of the block in float16 or bfloat16; nests and restores, per thread.

    ``autocast("cuda")`` computes in float16, ``autocast("cpu")`` in bfloat16, ``dtype=`` picks
    either, and tinyflow's shorter ``autocast("fp16")`` / ``autocast("bf16")`` works too.
    ``cache_enabled`` (None: True) keeps one cast copy of each parameter for the region
    (``_cached_cast``). ``"cuda"`` without CUDA warns and runs in full precision, as PyTorch does.
    ``enabled=False`` is a float32 island that never imports ml_dtypes (a base install can build
    one); enabled bfloat16 without ml_dtypes is a TypeError saying how to install it. A context
    manager and a decorator; ``as`` gives the dtype.
    """

    def __init__(self, device_type: Any = None, dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        if device_type is not None and str(device_type).split(":")[0] not in DEVICE_TYPES:
            if dtype is not None:
                raise ValueError(f"autocast: unknown device_type {device_type!r}; use 'cuda' or 'cpu'")
            device_type, dtype = None, device_type  # tinyflow's autocast("fp16")
        kind = None if device_type is None else str(device_type).split(":")[0]
        if enabled and kind == "cuda" and not _cuda_available():
            import warnings

            warnings.warn("User provided device_type of 'cuda', but CUDA is not available. Disabling",
                          UserWarning, stacklevel=2)
            enabled = False
        if dtype is None:
            dtype = DEVICE_TYPES[kind] if kind is not None else "bf16"
        self.device_type = kind or "cpu"
        self.enabled = bool(enabled)
        # Enabled, the dtype is resolved now (bfloat16 without ml_dtypes fails here, saying how
        # to install it); disabled, it is only checked: a float32 island needs no ml_dtypes.
        self._dtype: np.dtype | str = _resolve(dtype) if self.enabled else _check(dtype)
        # None: PyTorch's torch.is_autocast_cache_enabled(), True unless a caller turned it off
        self.cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        self._saved: list[tuple[np.dtype | None, bool]] = []

    @property
    def fast_dtype(self) -> np.dtype:
        """The dtype the block computes in when enabled (PyTorch's attribute)."""
        if isinstance(self._dtype, str):
            self._dtype = _resolve(self._dtype)
        return self._dtype

    def __enter__(self) -> np.dtype | None:
        self._saved.append((getattr(_local, "dtype", None), is_autocast_cache_enabled()))
        _local.dtype = self.fast_dtype if self.enabled else None
        _local.cache_enabled = self.cache_enabled
        _local.depth = getattr(_local, "depth", 0) + 1  # every region counts, enabled or not
        return _local.dtype

    def __exit__(self, *exc: object) -> None:
        _local.dtype, _local.cache_enabled = self._saved.pop()
        _local.depth -= 1
        if _local.depth == 0:
            clear_autocast_cache()  # the outermost region is over: its casts go


def is_autocast_cache_enabled() -> bool:
    """Whether the current autocast region caches its weight casts (PyTorch's function)."""
    return getattr(_local, "cache_enabled", True)


def clear_autocast_cache() -> None:
    """Drop this thread's cached weight casts (the outermost autocast region's exit does it)."""
    _local.cache = {}


class CastFromCache(Function):
    """A cast whose result is already there: forward returns the cached half-precision array;
    backward casts the gradient to the parameter's dtype, as ``Cast`` does."""

    @staticmethod
    def forward(ctx: Context, a: Any, cast: Any) -> Any:
        ctx.dtype = a.dtype
        return cast

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return g.astype(ctx.dtype), None


def _cached_cast(t: Any, dtype: np.dtype) -> Any:
    """``t.to(dtype)`` for a float32 parameter, the cast array made once per region (PyTorch's
    weight-cast cache: a weight used twice, tied embeddings or an LSTM cell over time, is cast once).

    Each use gets its own ``CastFromCache`` node over the cached array, so its gradient reaches the
    float32 parameter exactly as its own Cast's would (PyTorch shares one node and sums the uses'
    gradients in half precision). An entry holds the tensor (its id is not reused) and the version
    it was cast at: an in-place edit through a Tensor method makes the cast again (PyTorch keeps the
    stale copy); raw writes to ``.array`` (an optimizer step) are not seen, so autocast the forward
    pass, not the step. The outermost region's exit drops the cache.
    """
    cache = getattr(_local, "cache", None)
    if cache is None:
        cache = _local.cache = {}
    key = (id(t), dtype)
    entry = cache.get(key)
    if entry is None or entry[0] is not t or entry[1] != t._version:
        entry = cache[key] = (t, t._version, _cast_array(t.array, dtype))
    return CastFromCache.apply(t, entry[2])


def _cast_array(arr: Any, dtype: np.dtype) -> Any:
    """The one cast a cache entry costs (a function of its own, so tests can count them)."""
    return arr.astype(dtype)


def _cacheable(t: Any, dtype: np.dtype) -> bool:
    """PyTorch's rule: a float32 leaf that requires grad (a parameter), cast to the region's
    dtype, while the cache is enabled."""
    return (is_autocast_cache_enabled() and dtype == autocast_dtype() and t.dtype == np.float32
            and t.requires_grad and t.is_leaf)


def autocast_dtype() -> np.dtype | None:
    """The dtype GEMM ops must compute in right now, or None outside autocast."""
    return getattr(_local, "dtype", None)


def is_autocast_enabled() -> bool:
    return autocast_dtype() is not None


def autocast_inputs(*tensors: Any) -> tuple[Any, ...]:
    """The arguments with each float16/bfloat16/float32 Tensor cast to the autocast dtype (GEMM
    ops: matmul, linear, conv2d); float64 passes through, asked for explicitly as PyTorch leaves it."""
    dtype = autocast_dtype()
    if dtype is None:
        return tensors
    return _cast_floating(tensors, dtype, include_float32=True)


def float32_inputs(*tensors: Any) -> tuple[Any, ...]:
    """The arguments with each float16/bfloat16 Tensor cast to float32, inside autocast only
    (precision-sensitive ops); outside, a model converted to half precision by hand stays so."""
    if autocast_dtype() is None:
        return tensors
    return _cast_floating(tensors, np.dtype(np.float32), include_float32=False)


def _cast_floating(tensors: tuple[Any, ...], dtype: np.dtype, include_float32: bool) -> tuple[Any, ...]:
    """``tensors`` with each float16/bfloat16 Tensor (and float32 one, if asked) cast to ``dtype``."""
    out = []
    for t in tensors:
        current = getattr(t, "dtype", None) if hasattr(t, "to") else None
        if current is not None and current != dtype and (
                is_half(current) or (include_float32 and current == np.float32)):
            t = _cached_cast(t, dtype) if include_float32 and _cacheable(t, dtype) else t.to(dtype)
        out.append(t)
    return tuple(out)
