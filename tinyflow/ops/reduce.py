"""Reductions: sum, mean, var, max/min (and their arg versions, which need no gradient)."""
from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import numpy as np

# The dim helpers live in the core's argument parsing; normalize_dim stays importable from here.
from tinyflow.arg_parser import Axis, normalize_axis, normalize_dim  # noqa: F401
from tinyflow.autograd.function import Context, Function
from tinyflow.dtypes import is_floating_or_complex
from tinyflow.errors import ShapeError

__all__ = ["Sum", "Mean", "Var", "Std", "Max", "Min", "MaxDim", "VectorNorm", "normalize_dim"]


def index_grids(xp: Any, shape: tuple[int, ...]) -> list:
    """``numpy.indices(shape, sparse=True)`` for any array module (CuPy's ``indices`` has no
    ``sparse=``): one ``arange`` per axis, shaped to broadcast against the others."""
    return list(xp.ix_(*(xp.arange(n) for n in shape)))


def _need_floating(op: str, a: Any, what: str) -> None:
    """PyTorch's refusal of integer and bool input for reductions that have no integer result
    (bfloat16, ml_dtypes' kind "V", is floating)."""
    if a.dtype.kind not in "fc" and not is_floating_or_complex(a.dtype):
        raise RuntimeError(
            f"{op}: {what}, got dtype {a.dtype}; convert the input with .float() (or pass dtype=)"
        )


def _check_reduced_sizes(op: str, shape: tuple[int, ...], axes: tuple[int, ...] | None) -> None:
    """max/min-like reductions have no identity: every reduced dim must be non-empty (IndexError,
    as PyTorch; without a dim, an empty tensor is a RuntimeError)."""
    if axes is None:
        if 0 in shape:
            raise ShapeError(
                f"{op}: cannot reduce an empty tensor of shape {shape} over all dims; give a dim whose size is not 0"
            )
        return
    for a in axes:
        if shape[a] == 0:
            raise IndexError(f"{op}: expected reduction dim {a} to have non-zero size (input of shape {shape})")


def _expand_back(xp: Any, g: Any, shape: tuple[int, ...], axes: tuple[int, ...] | None, keepdim: bool) -> Any:
    """Broadcast a reduced gradient back to the input shape."""
    if axes is not None and not keepdim and len(shape) > 0:
        g = xp.expand_dims(g, axes)
    return xp.broadcast_to(g, shape)


class Sum(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, axis: Axis = None, keepdim: bool = False) -> Any:
        ctx.shape = a.shape
        ctx.axes = normalize_axis("sum", axis, a.ndim)
        ctx.keepdim = keepdim
        if a.dtype.kind in "iub":  # PyTorch sums integers and bools in int64 (NumPy: uint8 -> uint64)
            return a.sum(axis=ctx.axes, keepdims=keepdim, dtype="int64")
        return a.sum(axis=ctx.axes, keepdims=keepdim)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return _expand_back(ctx.xp, g, ctx.shape, ctx.axes, ctx.keepdim)


class Mean(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, axis: Axis = None, keepdim: bool = False) -> Any:
        _need_floating("mean", a, "could not infer the output dtype: the input must be floating point or complex")
        ctx.shape = a.shape
        ctx.axes = normalize_axis("mean", axis, a.ndim)
        ctx.keepdim = keepdim
        ctx.n = a.size if ctx.axes is None else _count(a.shape, ctx.axes)
        if ctx.n == 0:  # NaN, without NumPy's "mean of empty slice" warning
            return a.sum(axis=ctx.axes, keepdims=keepdim) / ctx.xp.zeros((), dtype=a.dtype)
        return a.mean(axis=ctx.axes, keepdims=keepdim)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return _expand_back(ctx.xp, g / ctx.n, ctx.shape, ctx.axes, ctx.keepdim)


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    n = 1
    for a in axes:
        n *= shape[a]
    return n


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _callers_level() -> int:
    """warnings.warn's stacklevel for the first frame outside tinyflow: the user's line."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def _centered(op: str, a: Any, axis: Axis, correction: int) -> tuple[Any, tuple[int, ...] | None, int]:
    """Var's and Std's common start: (a - mean over the dims, the dims, n - correction)."""
    _need_floating(op, a, "std and var only support floating point and complex dtypes")
    axes = normalize_axis(op, axis, a.ndim)
    n = a.size if axes is None else _count(a.shape, axes)
    if n - correction <= 0 or a.size == 0:  # inf or NaN follows, as PyTorch, with its warning
        warnings.warn(f"{op}(): degrees of freedom is <= 0. Correction should be strictly less than the reduction "
                      "factor (input numel divided by output numel).", UserWarning, stacklevel=_callers_level())
    mean = a.sum(axis=axes, keepdims=True) / max(n, 1)  # a.mean, without NumPy's warning for an empty slice
    return a - mean, axes, max(n - correction, 0)


def _sum_of_squares(xp: Any, centered: Any, axes: tuple[int, ...] | None) -> Any:
    """The sum of ``centered ** 2`` over ``axes`` (kept), in float64 for narrower floats on the CPU
    as PyTorch's CPU var/std accumulate (1e30 squares past float32's range)."""
    if xp is np and centered.dtype.kind in "fV" and centered.dtype.itemsize < 8:
        centered = centered.astype(np.float64)
    return (centered * centered).sum(axis=axes, keepdims=True)


class Var(Function):
    """Variance with Bessel's correction (``correction=1``) by default, as PyTorch."""

    @staticmethod
    def forward(ctx: Context, a: Any, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> Any:
        centered, axes, denom = _centered("var", a, axis, correction)
        ctx.save_for_backward(centered)
        ctx.axes, ctx.keepdim, ctx.denom, ctx.shape = axes, keepdim, denom, a.shape
        out = (_sum_of_squares(ctx.xp, centered, axes) / denom).astype(a.dtype, copy=False)
        return out if keepdim else out.reshape(()) if axes is None else out.squeeze(axes)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (centered,) = ctx.saved_tensors
        g = _expand_back(ctx.xp, g, ctx.shape, ctx.axes, ctx.keepdim)
        if ctx.denom:  # inf / NaN entries; no dof left: inf, as PyTorch
            return g * centered * (2.0 / ctx.denom)
        return g * centered * 2.0 / ctx.xp.zeros((), dtype=centered.dtype)


class Std(Function):
    """Standard deviation sqrt(var) as one op: its gradient centered / (denom * std) is 0 where the
    std is 0 (all values equal), as PyTorch's, where sqrt's chain rule would give 0 * inf = NaN."""

    @staticmethod
    def forward(ctx: Context, a: Any, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> Any:
        centered, axes, denom = _centered("std", a, axis, correction)
        std = ctx.xp.sqrt(_sum_of_squares(ctx.xp, centered, axes) / denom).astype(a.dtype, copy=False)
        ctx.save_for_backward(centered, std)
        ctx.axes, ctx.keepdim, ctx.denom, ctx.shape = axes, keepdim, denom, a.shape
        if keepdim:
            return std
        return std.reshape(()) if axes is None else std.squeeze(axes)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        xp = ctx.xp
        centered, std = ctx.saved_tensors
        g = _expand_back(xp, g, ctx.shape, ctx.axes, ctx.keepdim)
        denom = ctx.denom if ctx.denom else xp.zeros((), dtype=centered.dtype)
        grad = g * centered / (std * denom)
        return xp.where(std == 0, xp.zeros((), dtype=grad.dtype), grad)


class _Extreme(Function):
    """max/min over dims: the gradient is split evenly between tied extremes. Over all dims (``max()``)
    a NaN result sends the gradient to the NaN entries, as PyTorch's max(); over given dims it
    follows amax, whose gradient is NaN there."""

    reducer = "max"

    @classmethod
    def forward(cls, ctx: Context, a: Any, axis: Axis = None, keepdim: bool = False) -> Any:  # type: ignore[override]
        axes = normalize_axis(cls.reducer, axis, a.ndim)
        _check_reduced_sizes(cls.reducer, tuple(a.shape), axes)
        out = getattr(a, cls.reducer)(axis=axes, keepdims=True)
        ctx.save_for_backward(a, out)
        ctx.axes, ctx.keepdim = axes, keepdim
        ctx.nan_gets_gradient = axis is None  # max() (no dim): its NaN entries get the gradient
        return out if keepdim else (out.reshape(()) if axes is None else out.squeeze(axes))

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        a, out = ctx.saved_tensors
        mask = a == out
        if ctx.nan_gets_gradient and a.dtype.kind == "f":
            mask = mask | (ctx.xp.isnan(a) & ctx.xp.isnan(out))
        count = mask.sum(axis=ctx.axes, keepdims=True)
        if not ctx.keepdim:
            g = g.reshape(out.shape)
        return g * mask / count  # a NaN amax: 0 / 0, NaN as PyTorch's amax


class Max(_Extreme):
    reducer = "max"


class Min(_Extreme):
    reducer = "min"


class MaxDim(Function):
    """max along one dim returning (values, indices); the gradient goes to the index, as PyTorch."""

    @staticmethod
    def forward(ctx: Context, a: Any, dim: int, keepdim: bool = False, largest: bool = True) -> tuple:
        xp = ctx.xp
        if a.ndim == 0:  # max(0) of a 0-d tensor: itself, at index 0
            normalize_axis("max" if largest else "min", dim, 0)
            ctx.dim, ctx.keepdim, ctx.shape = None, keepdim, a.shape
            ctx.save_for_backward(None)
            return a.copy(), xp.zeros((), dtype="int64")
        op = "max" if largest else "min"
        (dim,) = normalize_axis(op, dim, a.ndim)
        _check_reduced_sizes(op, tuple(a.shape), (dim,))
        idx = (a.argmax if largest else a.argmin)(axis=dim)
        idx = xp.expand_dims(idx, dim)
        values = xp.take_along_axis(a, idx, axis=dim)
        ctx.dim, ctx.keepdim, ctx.shape = dim, keepdim, a.shape
        ctx.save_for_backward(idx)
        if not keepdim:
            values, idx = values.squeeze(dim), idx.squeeze(dim)
        return values, idx.astype("int64")

    @staticmethod
    def backward(ctx: Context, g: Any, _gidx: Any) -> Any:
        xp = ctx.xp
        (idx,) = ctx.saved_tensors
        if ctx.dim is None:
            return g
        if not ctx.keepdim:
            g = xp.expand_dims(g, ctx.dim)
        out = xp.zeros(ctx.shape, dtype=g.dtype)
        grids = index_grids(xp, idx.shape)
        grids[ctx.dim] = idx
        out[tuple(grids)] = g
        return out


def arg_extreme(xp: Any, a: Any, name: str, dim: int | None, keepdim: bool) -> Any:
    """``argmax`` or ``argmin`` (``name``) of the array ``a`` as int64: over all elements (dim None)
    or one dim; PyTorch's errors for bool and empty input. An index has no gradient: no Function."""
    if a.dtype == np.bool_:
        raise RuntimeError(f"{name}(): does not support bool input; convert with .int() or .float() first")
    if dim is not None:
        dim = normalize_dim(name, dim, a.ndim)
    if a.size == 0 and dim is None:
        raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0 (shape "
                         f"{tuple(a.shape)})")
    if dim is not None and a.ndim and a.shape[dim] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {dim} to have non-zero size (shape {tuple(a.shape)})")
    if a.ndim == 0:  # PyTorch: dim 0 / -1 of a 0-d tensor, and keepdim keeps it 0-d
        return xp.zeros((), dtype=np.int64)
    out = getattr(a, name)(axis=dim)
    if keepdim and dim is not None:
        out = xp.expand_dims(out, dim)
    return out.astype(np.int64)


class VectorNorm(Function):
    """The p-norm (sum |a|^p)^(1/p) over ``axis`` (all entries when None) for p > 0; p = inf (-inf)
    is the largest (smallest) |a|.

    Gradients as PyTorch's: sign(a) |a|^(p-1) / norm^(p-1), and 0 where the norm is 0 (no inf or
    NaN for a zero vector); for p = 1 the sign of a NaN is 0; for p = +-inf the gradient is split
    between the entries whose |a| equals the norm (none when it is NaN).
    """

    @staticmethod
    def forward(ctx: Context, a: Any, p: float, axis: Axis = None, keepdim: bool = False) -> Any:
        xp = ctx.xp
        axes = normalize_axis("norm", axis, a.ndim)
        absa = xp.abs(a)
        if p in (np.inf, -np.inf):
            if any(n == 0 for i, n in enumerate(a.shape) if axes is None or i in axes):
                raise RuntimeError(
                    f"norm: the {p} norm of an empty slice is undefined (input of shape {tuple(a.shape)}, dim {axis})"
                )
            out = (absa.max if p > 0 else absa.min)(axis=axes, keepdims=True)
        elif p == 2.0:
            out = xp.sqrt((absa * absa).sum(axis=axes, keepdims=True))
        else:
            out = (absa**p).sum(axis=axes, keepdims=True) ** (1.0 / p)
        ctx.save_for_backward(a, out)
        ctx.p, ctx.axes = p, axes
        if keepdim:
            return out
        return out.reshape(()) if axes is None else out.reshape([n for i, n in enumerate(out.shape) if i not in axes])

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        xp = ctx.xp
        a, out = ctx.saved_tensors
        g = g.reshape(out.shape)
        p = ctx.p
        sign = xp.where(xp.isnan(a), 0, xp.sign(a))
        if p in (np.inf, -np.inf):
            mask = xp.abs(a) == out
            count = mask.sum(axis=ctx.axes, keepdims=True)
            return g * sign * mask / xp.maximum(count, 1)
        if p == 1.0:
            return g * sign
        safe = xp.where(out == 0, 1, out)
        scale = a / safe if p == 2.0 else sign * xp.abs(a) ** (p - 1) / safe ** (p - 1)
        return xp.where(out == 0, 0, g * scale)
