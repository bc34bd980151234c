"""Reductions: sum, mean, var, max/min (and their arg versions, which need no gradient)."""
from __future__ import annotations

from typing import Any

from tinyflow.autograd import Context, Function
from tinyflow.errors import ShapeError

__all__ = ["Sum", "Mean", "Var", "Max", "Min", "MaxDim"]

Axis = int | tuple[int, ...] | None


def normalize_axis(op: str, axis: Axis, ndim: int) -> tuple[int, ...] | None:
    """Turn ``dim`` (int, tuple or None) into a sorted tuple of non-negative axes.

    A 0-d tensor accepts dim 0 and -1, as in PyTorch, and has no axis to reduce: ``()``.
    """
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axes:
        a = int(a)
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise IndexError(
                f"{op}: dim {a} is out of range for a tensor with {ndim} dimension(s) (expected "
                f"a dim in [{-max(ndim, 1)}, {max(ndim, 1) - 1}])"
            )
        out.append(a % max(ndim, 1))
    return () if ndim == 0 else tuple(sorted(set(out)))


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
        ctx.shape = a.shape
        ctx.axes = normalize_axis("mean", axis, a.ndim)
        ctx.keepdim = keepdim
        ctx.n = a.size if ctx.axes is None else _count(a.shape, ctx.axes)
        return a.mean(axis=ctx.axes, keepdims=keepdim)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return _expand_back(ctx.xp, g / ctx.n, ctx.shape, ctx.axes, ctx.keepdim)


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    n = 1
    for a in axes:
        n *= shape[a]
    return n


class Var(Function):
    """Variance with Bessel's correction (``correction=1``) by default, as PyTorch."""

    @staticmethod
    def forward(ctx: Context, a: Any, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> Any:
        axes = normalize_axis("var", axis, a.ndim)
        n = a.size if axes is None else _count(a.shape, axes)
        mean = a.mean(axis=axes, keepdims=True)
        centered = a - mean
        denom = max(n - correction, 0)  # 0 gives inf/nan, as PyTorch
        ctx.save_for_backward(centered)
        ctx.axes, ctx.keepdim, ctx.denom, ctx.shape = axes, keepdim, denom, a.shape
        return (centered * centered).sum(axis=axes, keepdims=keepdim) / denom

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (centered,) = ctx.saved_tensors
        g = _expand_back(ctx.xp, g, ctx.shape, ctx.axes, ctx.keepdim)
        return g * centered * (2.0 / ctx.denom) if ctx.denom else g * centered * ctx.xp.nan


class _Extreme(Function):
    """max/min over dims: the gradient is split evenly between tied extremes."""

    reducer = "max"

    @classmethod
    def forward(cls, ctx: Context, a: Any, axis: Axis = None, keepdim: bool = False) -> Any:  # type: ignore[override]
        axes = normalize_axis(cls.reducer, axis, a.ndim)
        if a.size == 0:
            raise ShapeError(
                f"{cls.reducer}: cannot reduce an empty tensor of shape {a.shape} over all dims; give a dim "
                "whose size is not 0"
            )
        out = getattr(a, cls.reducer)(axis=axes, keepdims=True)
        ctx.save_for_backward(a, out)
        ctx.axes, ctx.keepdim = axes, keepdim
        return out if keepdim else (out.reshape(()) if axes is None else out.squeeze(axes))

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        a, out = ctx.saved_tensors
        mask = a == out
        count = mask.sum(axis=ctx.axes, keepdims=True)
        if not ctx.keepdim:
            g = g.reshape(out.shape)
        return g * mask / count


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
        (dim,) = normalize_axis("max" if largest else "min", dim, a.ndim)
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
        grids = list(xp.indices(idx.shape, sparse=True))
        grids[ctx.dim] = idx
        out[tuple(grids)] = g
        return out
