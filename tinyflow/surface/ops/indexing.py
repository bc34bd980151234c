"""Indexing ops: gather, the scatters, index_select, masked_select and nonzero.

``gather`` and the scatters address one dim through an integer ``index`` tensor with the input's
number of dims; in the other dims ``index`` may be smaller than the input (PyTorch's rule), and
the positions it does not cover are left alone. Gradients travel the opposite way: a gather's
gradient is scattered back (adding where an index repeats), a scatter's gradient is gathered.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.arg_parser import normalize_dim
from tinyflow.autograd.function import Context, Function
from tinyflow.device import device_check, to_host
from tinyflow.errors import ShapeError
from tinyflow.ops.reduce import index_grids

__all__ = [
    "Gather", "Scatter", "ScatterAdd", "ScatterReduce", "IndexSelect", "IndexAdd", "MaskedSelect",
    "Nonzero", "normalize_dim",
]


def _check_index(op: str, xp: Any, index: Any, size: int, dim: int, shape: tuple[int, ...],
                 error: type[Exception] = RuntimeError) -> None:
    """The index must be an integer array with entries in [0, size); checked without a device sync."""
    if index.dtype.kind not in "iu":
        raise RuntimeError(
            f"{op}: index must be an integer tensor (int64), got dtype {index.dtype}; convert it with .long()"
        )
    if index.size == 0:
        return
    lo, hi = index.min(), index.max()

    def make(bad: int) -> Exception:
        return error(
            f"{op}: index {bad} is out of bounds for dimension {dim} with size {size} (input of shape {shape}); "
            f"indices must lie in [0, {size})"
        )

    device_check((lo < 0) | (hi >= size), xp.where(lo < 0, lo, hi), make, key=(op, size))


def _check_covers(op: str, dim: int, index: Any, target: Any, what: str) -> None:
    """``index`` has ``target``'s number of dims and is no larger in the dims other than ``dim``."""
    if index.ndim != target.ndim:
        raise ShapeError(
            f"{op}: index of shape {tuple(index.shape)} must have as many dims as {what} of shape "
            f"{tuple(target.shape)}"
        )
    for d, (n, m) in enumerate(zip(index.shape, target.shape)):
        if d != dim and n > m:
            where = f"only in dim {dim}" if dim >= 0 else "in no dim"
            raise ShapeError(
                f"{op}: index of shape {tuple(index.shape)} is larger than {what} of shape "
                f"{tuple(target.shape)} in dimension {d}; it may be larger {where}"
            )


def _positions(xp: Any, index: Any, dim: int) -> tuple:
    """The index tuple that addresses ``target[..., index[i,j,k], ...]`` for every entry of index."""
    grids = index_grids(xp, index.shape)
    grids[dim] = index
    return tuple(grids)


def _leading(a: Any, shape: tuple[int, ...]) -> Any:
    """The corner of ``a`` of the given shape (the part an index of that shape covers)."""
    return a[tuple(slice(0, n) for n in shape)]


class Gather(Function):
    """out[i][j] = input[index[i][j]][j] along dim 0 (likewise for any dim); the gradient adds back."""

    @staticmethod
    def forward(ctx: Context, a: Any, dim: int, index: Any) -> Any:
        xp = ctx.xp
        dim = normalize_dim("gather", dim, a.ndim)
        out_shape = index.shape
        if a.ndim == 0:  # a 0-d input and index act as 1-element vectors
            a, index = a.reshape(1), index.reshape(-1)
        _check_covers("gather", dim, index, a, "the input")
        _check_index("gather", xp, index, a.shape[dim], dim, tuple(a.shape))
        ctx.save_for_backward(index)
        ctx.dim, ctx.shape = dim, a.shape
        sub = a[tuple(slice(None) if d == dim else slice(0, n) for d, n in enumerate(index.shape))]
        return xp.take_along_axis(sub, index, axis=dim).reshape(out_shape)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        (index,) = ctx.saved_tensors
        grad = xp.zeros(ctx.shape, dtype=g.dtype)
        xp.add.at(grad, _positions(xp, index, ctx.dim), g.reshape(index.shape))
        return grad, None, None


class Scatter(Function):
    """A copy of input with input[index[i][j]][j] = src[i][j] along dim 0 (src an array or a number).

    Where an index repeats, one of the values wins (unspecified, as PyTorch). The gradient of input
    is zero at the written positions; src's is the gradient gathered from them.
    """

    @staticmethod
    def forward(ctx: Context, a: Any, dim: int, index: Any, src: Any) -> Any:
        xp = ctx.xp
        dim = normalize_dim("scatter", dim, a.ndim)
        _check_covers("scatter", dim, index, a, "the input")
        if hasattr(src, "shape"):
            _check_covers("scatter", -1, index, src, "src")
        _check_index("scatter", xp, index, a.shape[dim] if a.ndim else 1, dim, tuple(a.shape))
        where = _positions(xp, index, dim)
        ctx.save_for_backward(index)
        ctx.dim, ctx.src_shape = dim, getattr(src, "shape", None)
        out = a.copy()
        out[where] = _leading(src, index.shape) if hasattr(src, "shape") else src
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        (index,) = ctx.saved_tensors
        where = _positions(xp, index, ctx.dim)
        ga = gs = None
        if ctx.needs_input_grad[0]:
            ga = g.copy()
            ga[where] = 0
        if ctx.src_shape is not None and ctx.needs_input_grad[3]:
            gs = xp.zeros(ctx.src_shape, dtype=g.dtype)
            gs[tuple(slice(0, n) for n in index.shape)] = g[where]
        return ga, None, None, gs


class ScatterAdd(Function):
    """A copy of input with src added at input[index[i][j]][j] (along dim 0), summing repeats."""

    @staticmethod
    def forward(ctx: Context, a: Any, dim: int, index: Any, src: Any) -> Any:
        xp = ctx.xp
        dim = normalize_dim("scatter_add", dim, a.ndim)
        _check_covers("scatter_add", dim, index, a, "the input")
        _check_covers("scatter_add", -1, index, src, "src")
        _check_index("scatter_add", xp, index, a.shape[dim] if a.ndim else 1, dim, tuple(a.shape))
        ctx.save_for_backward(index)
        ctx.dim, ctx.src_shape = dim, src.shape
        out = a.copy()
        xp.add.at(out, _positions(xp, index, dim), _leading(src, index.shape))
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        (index,) = ctx.saved_tensors
        gs = None
        if ctx.needs_input_grad[3]:
            gs = xp.zeros(ctx.src_shape, dtype=g.dtype)
            gs[tuple(slice(0, n) for n in index.shape)] = g[_positions(xp, index, ctx.dim)]
        return g, None, None, gs


_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


class ScatterReduce(Function):
    """scatter_reduce: src reduced ('sum', 'prod', 'mean', 'amax', 'amin') into input at the indexed
    positions, with input's own value taking part unless ``include_self=False``.

    Gradients as PyTorch's: 'sum' and 'mean' spread the gradient (divided by the count for the
    mean), 'prod' gives each factor the product of the others (zeros handled exactly), 'amax' and
    'amin' share it evenly between the values that equal the result.
    """

    @staticmethod
    def forward(ctx: Context, a: Any, dim: int, index: Any, src: Any, reduce: str, include_self: bool = True) -> Any:
        xp = ctx.xp
        if reduce not in _REDUCTIONS:
            raise RuntimeError(f"scatter_reduce: reduce must be one of {', '.join(_REDUCTIONS)}, got {reduce!r}")
        dim = normalize_dim("scatter_reduce", dim, a.ndim)
        _check_covers("scatter_reduce", dim, index, a, "the input")
        _check_covers("scatter_reduce", -1, index, src, "src")
        _check_index("scatter_reduce", xp, index, a.shape[dim] if a.ndim else 1, dim, tuple(a.shape))
        where = _positions(xp, index, dim)
        s = _leading(src, index.shape)
        hit = xp.zeros(a.shape, dtype=bool)
        hit[where] = True
        count = xp.zeros(a.shape, dtype=a.dtype)  # contributions from src per position
        xp.add.at(count, where, 1)
        if include_self:
            out = a.copy()
        else:
            start = {"sum": 0, "mean": 0, "prod": 1}.get(reduce)
            if start is None:  # amax / amin start from the identity of their reduction
                start = _lowest(xp, a.dtype) if reduce == "amax" else _highest(xp, a.dtype)
            out = xp.where(hit, xp.asarray(start, dtype=a.dtype), a)
        if reduce in ("sum", "mean"):
            xp.add.at(out, where, s)
        elif reduce == "prod":
            multiply_at(xp, out, where, s)
        elif reduce == "amax":
            xp.maximum.at(out, where, s)
        else:
            xp.minimum.at(out, where, s)
        if reduce == "mean":
            n = count + (1 if include_self else 0)
            n = xp.where(n == 0, 1, n)
            out = out // n if a.dtype.kind in "iu" else out / n
            ctx.n = n
        ctx.save_for_backward(a, index, src, out)
        ctx.dim, ctx.reduce, ctx.include_self, ctx.hit = dim, reduce, include_self, hit
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        a, index, src, out = ctx.saved_tensors
        where = _positions(xp, index, ctx.dim)
        s = _leading(src, index.shape)
        keep_self = ctx.include_self
        if ctx.reduce in ("sum", "mean"):
            scaled = g / ctx.n if ctx.reduce == "mean" else g
            ga = scaled if keep_self else xp.where(ctx.hit, 0, g)
            gs_lead = scaled[where]
        elif ctx.reduce == "prod":
            ga, gs_lead = _prod_grads(xp, a, s, where, g, ctx.hit, keep_self)
        else:  # amax / amin: split evenly between the values equal to the result
            wins_src = s == out[where]
            ties = xp.zeros(a.shape, dtype=g.dtype)
            xp.add.at(ties, where, wins_src.astype(g.dtype))
            # a position left alone keeps its own value; a written one counts it with include_self
            wins_self = (a == out) & (keep_self | ~ctx.hit)
            ties = ties + wins_self
            share = g / ties  # a NaN result: no winner, NaN as PyTorch
            ga = xp.where(ctx.hit & (not keep_self), 0, share * wins_self)
            gs_lead = share[where] * wins_src
        gs = xp.zeros(src.shape, dtype=g.dtype)
        gs[tuple(slice(0, n) for n in index.shape)] = gs_lead
        return ga, None, None, gs, None, None


def multiply_at(xp: Any, out: Any, where: tuple, values: Any) -> None:
    """``numpy.multiply.at(out, where, values)`` for any array module (CuPy 14 has no
    ``multiply.at``): entries that hit the same position multiply in rounds, each round at most
    one entry per position, so a plain indexed update is exact. Knowing the rounds costs one
    host read (the count of entries per round)."""
    if xp is np:
        np.multiply.at(out, where, values)
        return
    if not out.flags.c_contiguous:
        raise ValueError("multiply_at: the output must be C-contiguous")
    positions = xp.broadcast_arrays(*where)
    flat = xp.ravel_multi_index(tuple(p.reshape(-1) for p in positions), out.shape)
    vals = xp.broadcast_to(values, positions[0].shape).reshape(-1)
    order = xp.argsort(flat)  # entries of one position side by side
    ranked = flat[order]
    occurrence = xp.arange(flat.size) - xp.searchsorted(ranked, ranked)  # 0, 1, ... within a position
    by_round = order[xp.argsort(occurrence)]
    sizes = to_host(xp.bincount(occurrence), "scatter_reduce(prod) rounds").tolist() if flat.size else []
    target = out.reshape(-1)
    start = 0
    for size in sizes:
        pick = by_round[start:start + size]
        target[flat[pick]] *= vals[pick]
        start += size


def _prod_grads(xp: Any, a: Any, s: Any, where: tuple, g: Any, hit: Any, keep_self: bool) -> tuple:
    """Gradients of a scatter product: each factor gets the product of the other factors of its
    position, computed from the product of the non-zero factors and the count of zeros (exact)."""
    ones = xp.ones(a.shape, dtype=a.dtype)
    nonzero_prod = xp.where(a == 0, 1, a) if keep_self else ones.copy()
    zeros = (a == 0).astype(a.dtype) if keep_self else xp.zeros(a.shape, dtype=a.dtype)
    multiply_at(xp, nonzero_prod, where, xp.where(s == 0, 1, s))
    xp.add.at(zeros, where, (s == 0).astype(a.dtype))

    def others(x: Any, p: Any, z: Any) -> Any:  # product of a position's factors other than x
        return xp.where(x == 0, p * (z == 1), p / xp.where(x == 0, 1, x) * (z == 0))

    ga = xp.where(hit, g * others(a, nonzero_prod, zeros) if keep_self else 0, g)
    gs = g[where] * others(s, nonzero_prod[where], zeros[where])
    return ga, gs


def _lowest(xp: Any, dtype: Any) -> Any:
    return -xp.inf if dtype.kind == "f" else xp.iinfo(dtype).min


def _highest(xp: Any, dtype: Any) -> Any:
    return xp.inf if dtype.kind == "f" else xp.iinfo(dtype).max


class IndexSelect(Function):
    """The slices ``index`` (a vector) of ``dim``; the gradient adds back, summing repeats."""

    @staticmethod
    def forward(ctx: Context, a: Any, dim: int, index: Any) -> Any:
        xp = ctx.xp
        dim = normalize_dim("index_select", dim, a.ndim)
        if index.ndim > 1:
            raise IndexError(f"index_select: index must be a vector (0-d or 1-d), got shape {tuple(index.shape)}")
        size = a.shape[dim] if a.ndim else 1
        # PyTorch: IndexError for an index out of range, RuntimeError when the input is empty
        _check_index("index_select", xp, index, size, dim, tuple(a.shape), IndexError if a.size else RuntimeError)
        ctx.save_for_backward(index)
        ctx.dim, ctx.shape = dim, a.shape
        if a.ndim == 0:
            return xp.take(a.reshape(1), index.reshape(-1), axis=0).reshape(index.shape)
        return xp.take(a, index.reshape(-1), axis=dim)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        (index,) = ctx.saved_tensors
        if not ctx.shape:
            return g.sum().reshape(()), None, None
        grad = xp.zeros(ctx.shape, dtype=g.dtype)
        xp.add.at(xp.moveaxis(grad, ctx.dim, 0), index.reshape(-1), xp.moveaxis(g, ctx.dim, 0))
        return grad, None, None


class IndexAdd(Function):
    """A copy of input with ``alpha * source`` added to the slices ``index`` of ``dim``."""

    @staticmethod
    def forward(ctx: Context, a: Any, dim: int, index: Any, source: Any, alpha: float = 1) -> Any:
        xp = ctx.xp
        dim = normalize_dim("index_add", dim, a.ndim)
        if index.ndim > 1:
            raise IndexError(f"index_add: index must be a vector (0-d or 1-d), got shape {tuple(index.shape)}")
        expected = a.shape[:dim] + (index.size,) + a.shape[dim + 1:] if a.ndim else (index.size,)
        if tuple(source.shape) != expected and not (a.ndim == 0 and source.size == index.size):
            raise RuntimeError(
                f"index_add: source of shape {tuple(source.shape)} does not match input of shape {tuple(a.shape)} "
                f"with {index.size} indices along dim {dim} (expected source of shape {expected})"
            )
        size = a.shape[dim] if a.ndim else 1
        _check_index("index_add", xp, index, size, dim, tuple(a.shape), IndexError)
        ctx.save_for_backward(index)
        ctx.dim, ctx.alpha, ctx.source_shape = dim, alpha, source.shape
        out = a.copy()
        src = source.reshape(expected) * alpha if alpha != 1 else source.reshape(expected)
        if a.ndim == 0:
            return out + src.sum()
        xp.add.at(xp.moveaxis(out, dim, 0), index.reshape(-1), xp.moveaxis(src, dim, 0))
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        (index,) = ctx.saved_tensors
        gs = None
        if ctx.needs_input_grad[3]:
            gs = (xp.take(g, index.reshape(-1), axis=ctx.dim) if g.ndim else g.reshape(1)) * ctx.alpha
            gs = gs.reshape(ctx.source_shape)
        return g, None, None, gs, None


class MaskedSelect(Function):
    """The entries of input where mask is True (both broadcast first), as a 1-d tensor."""

    @staticmethod
    def forward(ctx: Context, a: Any, mask: Any) -> Any:
        xp = ctx.xp
        if mask.dtype != bool:
            raise RuntimeError(f"masked_select: mask must be a bool tensor, got dtype {mask.dtype}; use mask.bool()")
        try:
            shape = np.broadcast_shapes(a.shape, mask.shape)  # shapes only: NumPy on every device
        except ValueError:
            raise RuntimeError(
                f"masked_select: input of shape {tuple(a.shape)} and mask of shape {tuple(mask.shape)} "
                "cannot be broadcast together"
            ) from None
        mask = xp.broadcast_to(mask, shape)
        ctx.save_for_backward(mask)
        return xp.broadcast_to(a, shape)[mask]

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (mask,) = ctx.saved_tensors
        grad = ctx.xp.zeros(mask.shape, dtype=g.dtype)
        grad[mask] = g
        return grad, None  # the engine sums it back to input's shape


class Nonzero(Function):
    """The indices of the non-zero entries: an (n, ndim) int64 array, or one vector per dim."""

    @staticmethod
    def forward(ctx: Context, a: Any, as_tuple: bool = False) -> Any:
        xp = ctx.xp
        if as_tuple:
            return tuple(i.astype("int64") for i in xp.nonzero(a.reshape(1) if a.ndim == 0 else a))
        return xp.argwhere(a).astype("int64")  # (n, ndim)

    @staticmethod
    def backward(ctx: Context, *grads: Any) -> tuple:
        raise RuntimeError("nonzero has no gradient")
