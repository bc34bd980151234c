"""Scans and products along a dim: cumsum, cumprod, cummax/cummin, logcumsumexp, prod.

Their gradients run the scan backwards: a reversed cumulative sum for cumsum, the products of the
other factors for prod and cumprod (exact where factors are zero: no division by them), the
positions of the running extremes for cummax/cummin, and a reversed log-space sum for
logcumsumexp (no overflow).
"""
from __future__ import annotations

from typing import Any

from tinyflow.arg_parser import normalize_dim
from tinyflow.autograd.function import Context, Function
from tinyflow.ops.reduce import index_grids

__all__ = ["CumSum", "CumProd", "CumExtreme", "LogCumSumExp", "Prod", "accumulate"]


def _cumsum(xp: Any, a: Any, axis: int) -> Any:
    """cumsum along ``axis``; 16-bit floats accumulate in float32 (as PyTorch: a float16 running
    sum stops growing at 2048)."""
    if a.dtype.kind not in "iub" and a.dtype.itemsize == 2:
        return xp.cumsum(a.astype("float32"), axis=axis).astype(a.dtype)
    return xp.cumsum(a, axis=axis)


def _cumprod(xp: Any, a: Any, axis: int) -> Any:
    """cumprod along ``axis``; 16-bit floats accumulate in float32, as PyTorch."""
    if a.dtype.kind not in "iub" and a.dtype.itemsize == 2:
        return xp.cumprod(a.astype("float32"), axis=axis).astype(a.dtype)
    return xp.cumprod(a, axis=axis)


def _reverse_cumsum(xp: Any, a: Any, axis: int) -> Any:
    return xp.flip(_cumsum(xp, xp.flip(a, axis=axis), axis), axis=axis)


def accumulate(xp: Any, name: str, a: Any, axis: int) -> Any:
    """The running ``xp.<name>`` (maximum, minimum, logaddexp) along ``axis``: the ufunc's
    ``accumulate`` where the array module has it, else one step per entry of the axis."""
    ufunc = getattr(xp, name)
    try:
        return ufunc.accumulate(a, axis=axis)
    except (AttributeError, NotImplementedError, TypeError):
        out = xp.moveaxis(a.copy(), axis, 0)
        for i in range(1, out.shape[0]):
            out[i] = ufunc(out[i - 1], out[i])
        return xp.moveaxis(out, 0, axis)


def _exclusive_products(xp: Any, a: Any, axis: int) -> Any:
    """prod of all entries along ``axis`` but the one at each position, with no division."""
    ones = xp.ones_like(xp.take(a, [0], axis=axis))
    head = xp.concatenate([ones, xp.take(a, range(a.shape[axis] - 1), axis=axis)], axis=axis)
    tail = xp.concatenate([xp.take(a, range(1, a.shape[axis]), axis=axis), ones], axis=axis)
    before = xp.cumprod(head, axis=axis)  # prod of the entries before each position
    after = xp.flip(xp.cumprod(xp.flip(tail, axis=axis), axis=axis), axis=axis)  # ... after it
    return before * after


class CumSum(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, dim: int) -> Any:
        ctx.dim = normalize_dim("cumsum", dim, a.ndim)
        if a.dtype.kind in "iub":  # integer and bool inputs sum in int64, as PyTorch
            a = a.astype("int64")
        if a.ndim == 0:
            return a.copy()
        return _cumsum(ctx.xp, a, ctx.dim)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        if g.ndim == 0:
            return g, None
        return _reverse_cumsum(ctx.xp, g, ctx.dim), None


class CumProd(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, dim: int) -> Any:
        xp = ctx.xp
        ctx.dim = normalize_dim("cumprod", dim, a.ndim)
        if a.dtype.kind in "iub":  # integer and bool inputs multiply in int64, as PyTorch
            a = a.astype("int64")
        if a.ndim == 0:
            return a.copy()
        out = _cumprod(xp, a, ctx.dim)
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        if g.ndim == 0:
            return g, None
        a, out = ctx.saved_tensors
        d = ctx.dim
        if not bool((a == 0).any()):  # d out_k / d a_i = out_k / a_i for k >= i
            return _reverse_cumsum(xp, g * out, d) / a, None
        # With zeros: grad_i = (prod_{j<i} a_j) * S_i, where S_i = sum_{k>=i} g_k prod_{i<j<=k} a_j
        # runs backwards as S_i = g_i + a_{i+1} S_{i+1}: exact, no division.
        x, gg = xp.moveaxis(a, d, 0), xp.moveaxis(g, d, 0)
        s = xp.empty_like(gg)
        s[-1] = gg[-1]
        for i in range(x.shape[0] - 2, -1, -1):
            s[i] = gg[i] + x[i + 1] * s[i + 1]
        before = xp.concatenate([xp.ones_like(x[:1]), xp.cumprod(x[:-1], axis=0)], axis=0)
        return xp.moveaxis(before * s, 0, d), None


class CumExtreme(Function):
    """cummax / cummin: the running extreme and the index where it was reached (the latest of equal
    values, and a NaN once seen, as PyTorch). The gradient goes to those indices."""

    @staticmethod
    def forward(ctx: Context, a: Any, dim: int, largest: bool = True) -> tuple:
        xp = ctx.xp
        op = "cummax" if largest else "cummin"
        ctx.dim = d = normalize_dim(op, dim, a.ndim)
        ctx.shape = a.shape
        if a.ndim == 0:
            index = xp.zeros((), dtype="int64")
            ctx.save_for_backward(index)
            return a.copy(), index
        values = accumulate(xp, "maximum" if largest else "minimum", a, d)
        reached = a == values
        if a.dtype.kind == "f":
            reached = reached | xp.isnan(a)
        steps = xp.arange(a.shape[d], dtype="int64").reshape((-1,) + (1,) * (a.ndim - d - 1))
        index = accumulate(xp, "maximum", xp.where(reached, steps, 0), d)
        ctx.save_for_backward(index)
        return values, index

    @staticmethod
    def backward(ctx: Context, g: Any, _g_index: Any) -> tuple:
        xp = ctx.xp
        (index,) = ctx.saved_tensors
        if g.ndim == 0:
            return g, None, None
        grad = xp.zeros(ctx.shape, dtype=g.dtype)
        grids = index_grids(xp, index.shape)
        grids[ctx.dim] = index
        xp.add.at(grad, tuple(grids), g)
        return grad, None, None


def _log_of(xp: Any, x: Any) -> Any:
    """log(x) where x > 0, -inf elsewhere (no warning for the zeros)."""
    return xp.where(x > 0, xp.log(xp.where(x > 0, x, 1)), -xp.inf)


class LogCumSumExp(Function):
    """log(cumsum(exp(a))) computed pairwise in log space (no overflow, no underflow to -inf)."""

    @staticmethod
    def forward(ctx: Context, a: Any, dim: int) -> Any:
        ctx.dim = normalize_dim("logcumsumexp", dim, a.ndim)
        if a.ndim == 0:
            out = a.copy()
        else:
            wide = a.astype("float32") if a.dtype.itemsize == 2 else a  # 16-bit floats accumulate in float32
            out = accumulate(ctx.xp, "logaddexp", wide, ctx.dim).astype(a.dtype, copy=False)
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        a, out = ctx.saved_tensors
        if g.ndim == 0:
            return g, None
        d = ctx.dim

        def reverse_lse(v: Any) -> Any:  # log sum_{k >= i} exp(v_k)
            return xp.flip(accumulate(xp, "logaddexp", xp.flip(v, axis=d), d), axis=d)

        # grad_i = sum_{k>=i} g_k exp(a_i - out_k), split by the sign of g to stay in log space
        up = reverse_lse(_log_of(xp, g) - out)
        down = reverse_lse(_log_of(xp, -g) - out)
        return xp.exp(a + up) - xp.exp(a + down), None


class Prod(Function):
    """The product over ``dim`` (all entries when None); each factor's gradient is the product of
    the others, exact with zeros. Integer and bool inputs multiply in int64, as PyTorch."""

    @staticmethod
    def forward(ctx: Context, a: Any, dim: int | None = None, keepdim: bool = False) -> Any:
        xp = ctx.xp
        ctx.shape = a.shape
        ctx.dim = None if dim is None else normalize_dim("prod", dim, a.ndim)
        ctx.keepdim = keepdim
        ctx.save_for_backward(a)
        if a.dtype.kind in "iub":
            a = a.astype("int64")
        if ctx.dim is None or a.ndim == 0:
            out = a.prod()
            return xp.asarray(out).reshape((1,) * a.ndim if keepdim else ())
        return a.prod(axis=ctx.dim, keepdims=keepdim)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        xp = ctx.xp
        (a,) = ctx.saved_tensors
        if ctx.dim is None or a.ndim == 0:
            flat = a.reshape(-1)
            others = _exclusive_products(xp, flat, 0).reshape(a.shape) if flat.size else flat.reshape(a.shape)
            return g.reshape(()) * others, None, None
        if not ctx.keepdim:
            g = xp.expand_dims(g, ctx.dim)
        if a.shape[ctx.dim] == 0:
            return xp.zeros(a.shape, dtype=g.dtype), None, None
        return g * _exclusive_products(xp, a, ctx.dim), None, None
