"""Scatter-style layout ops: index_copy, index_put, masked_scatter, diagonal_scatter, diag_embed.

Each writes values into a copy of its destination. Gradients travel both ways: the destination
gets the gradient outside the written positions, the source the gradient gathered from them
(Tensor methods in tinyflow/surface/tensor_methods_layout.py call these).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.arg_parser import normalize_dim
from tinyflow.autograd.function import Context, Function
from tinyflow.device import device_check

__all__ = [
    "IndexCopy", "IndexPut", "MaskedScatter", "DiagonalScatter", "DiagEmbed",
    "Flip", "Roll", "Repeat", "RepeatInterleave", "UnfoldDim", "Tril", "Triu", "Diag", "Diagonal",
]


def _dtype_name(dtype: Any) -> str:
    return np.dtype(dtype).name


def _check_same_dtype(op: str, a: Any, src: Any, what: str) -> None:
    """PyTorch's scatter-style ops refuse a source of another dtype than the destination."""
    if a.dtype != src.dtype:
        raise RuntimeError(
            f"{op}: self and {what} must have the same dtype, got {_dtype_name(a.dtype)} (self) and "
            f"{_dtype_name(src.dtype)} ({what}); convert {what} with .to(self.dtype)"
        )


def _check_bounds(op: str, xp: Any, index: Any, size: int, dim: int, shape: tuple, negative: bool) -> None:
    """Entries of ``index`` in [0, size) (or [-size, size) when ``negative``); IndexError otherwise,
    checked without a device sync (see device_check)."""
    if index.size == 0:
        return
    lo, hi = index.min(), index.max()
    low = -size if negative else 0

    def make(bad: int) -> Exception:
        return IndexError(
            f"{op}: index {bad} is out of bounds for dimension {dim} with size {size} (tensor of shape {shape}); "
            f"indices must lie in [{low}, {size})"
        )

    device_check((lo < low) | (hi >= size), xp.where(lo < low, lo, hi), make, key=(op, size, low))


class IndexCopy(Function):
    """A copy of input whose slices ``index`` along ``dim`` are the slices of ``source``; input's
    gradient is zero at the copied slices, source's the gradient taken from them."""

    @staticmethod
    def forward(ctx: Context, a: Any, dim: int, index: Any, source: Any) -> Any:
        xp = ctx.xp
        dim = normalize_dim("index_copy", dim, a.ndim)
        if index.ndim > 1:
            raise IndexError(f"index_copy: index should have dimension 1 or 0, got shape {tuple(index.shape)}")
        if index.dtype.kind not in "iu":
            raise IndexError(f"index_copy: index must be an integer (int64) tensor, got dtype {index.dtype}")
        _check_same_dtype("index_copy", a, source, "source")
        shape = a.shape if a.ndim else (1,)
        index = index.reshape(-1)
        expected = shape[:dim] + (index.size,) + shape[dim + 1:]
        src = source if a.ndim else source.reshape(-1)
        if src.ndim == len(shape) and src.shape[dim] != index.size:
            raise IndexError(
                f"index_copy: the number of indices ({index.size}) should equal source.size({dim}) "
                f"({src.shape[dim]}); source has shape {tuple(source.shape)}"
            )
        if tuple(src.shape) != expected:
            raise RuntimeError(
                f"index_copy: source of shape {tuple(source.shape)} does not fit input of shape {tuple(a.shape)} "
                f"with {index.size} indices along dim {dim} (expected shape {expected})"
            )
        _check_bounds("index_copy", xp, index, shape[dim], dim, tuple(a.shape), negative=False)
        ctx.save_for_backward(index)
        ctx.dim, ctx.shape, ctx.source_shape = dim, shape, source.shape
        out = a.reshape(shape).copy()
        xp.moveaxis(out, dim, 0)[index] = xp.moveaxis(src, dim, 0)
        return out.reshape(a.shape)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        (index,) = ctx.saved_tensors
        ga = gs = None
        g2 = g.reshape(ctx.shape)
        if ctx.needs_input_grad[0]:
            ga = g2.copy()
            xp.moveaxis(ga, ctx.dim, 0)[index] = 0
            ga = ga.reshape(g.shape)
        if ctx.needs_input_grad[3]:
            gs = xp.take(g2, index, axis=ctx.dim).reshape(ctx.source_shape)
        return ga, None, None, gs


def _index_dims(indices: tuple) -> list[int]:
    """The dim of ``a`` each index array starts at (a bool mask covers mask.ndim dims)."""
    dims, d = [], 0
    for i in indices:
        dims.append(d)
        d += i.ndim if i.dtype == bool else 1
    return dims


class IndexPut(Function):
    """A copy of input with ``values`` (broadcast) written, or added with ``accumulate``, at
    ``input[indices]`` (a tuple of integer or bool index arrays, as ``input[i, j] = v``)."""

    @staticmethod
    def forward(ctx: Context, a: Any, values: Any, indices: tuple, accumulate: bool = False) -> Any:
        xp = ctx.xp
        _check_same_dtype("index_put", a, values, "values")
        covered = sum(i.ndim if i.dtype == bool else 1 for i in indices)
        if covered > a.ndim:
            raise IndexError(
                f"index_put: too many indices ({len(indices)}) for a tensor of shape {tuple(a.shape)}"
            )
        for i, d in zip(indices, _index_dims(indices)):
            if i.dtype == bool:
                if tuple(i.shape) != tuple(a.shape[d:d + i.ndim]):
                    raise IndexError(
                        f"index_put: the bool mask of shape {tuple(i.shape)} does not match the shape "
                        f"{tuple(a.shape[d:d + i.ndim])} of the indexed tensor (shape {tuple(a.shape)}) at dim {d}"
                    )
            else:
                _check_bounds("index_put", xp, i, a.shape[d], d, tuple(a.shape), negative=True)
        target_shape = a[indices].shape
        try:
            v = xp.broadcast_to(values, target_shape)
        except ValueError:
            raise RuntimeError(
                f"index_put: shape mismatch: values of shape {tuple(values.shape)} cannot be broadcast to the "
                f"indexing result of shape {tuple(target_shape)}"
            ) from None
        ctx.indices, ctx.accumulate = indices, accumulate
        out = a.copy()
        if accumulate:
            xp.add.at(out, indices, v)
        else:
            out[indices] = v
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        ga = gv = None
        if ctx.needs_input_grad[0]:
            ga = g
            if not ctx.accumulate:
                ga = g.copy()
                ga[ctx.indices] = 0
        if ctx.needs_input_grad[1]:
            gv = g[ctx.indices]  # the engine sums it back to values' shape
        return ga, gv, None, None


class MaskedScatter(Function):
    """A copy of input (broadcast with mask) whose positions where ``mask`` is True take the
    first entries of ``source``, in row-major order."""

    @staticmethod
    def forward(ctx: Context, a: Any, mask: Any, source: Any) -> Any:
        xp = ctx.xp
        if mask.dtype != bool:
            raise RuntimeError(f"masked_scatter: mask must be a bool tensor, got dtype {mask.dtype}; use mask.bool()")
        _check_same_dtype("masked_scatter", a, source, "source")
        try:
            shape = np.broadcast_shapes(a.shape, mask.shape)
        except ValueError:
            raise RuntimeError(
                f"masked_scatter: input of shape {tuple(a.shape)} and mask of shape {tuple(mask.shape)} "
                "cannot be broadcast together"
            ) from None
        mask = xp.broadcast_to(mask, shape)
        count = int(mask.sum())  # the result's layout depends on it: one host read
        if source.size < count:
            raise RuntimeError(
                f"masked_scatter: source has {source.size} elements, fewer than the {count} True entries of the "
                f"mask of shape {tuple(shape)}"
            )
        ctx.save_for_backward(mask)
        ctx.count, ctx.source_shape = count, source.shape
        out = xp.broadcast_to(a, shape).copy()
        out[mask] = source.reshape(-1)[:count]
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        (mask,) = ctx.saved_tensors
        ga = gs = None
        if ctx.needs_input_grad[0]:
            ga = xp.where(mask, 0, g).astype(g.dtype, copy=False)  # summed back to input's shape
        if ctx.needs_input_grad[2]:
            gs = xp.zeros(int(np.prod(ctx.source_shape)), dtype=g.dtype)
            gs[: ctx.count] = g[mask]
            gs = gs.reshape(ctx.source_shape)
        return ga, None, gs


class DiagonalScatter(Function):
    """A copy of input whose diagonal ``offset`` in dims (dim1, dim2) is ``src`` (shaped as
    ``input.diagonal(offset, dim1, dim2)``)."""

    @staticmethod
    def forward(ctx: Context, a: Any, src: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
        xp = ctx.xp
        if a.ndim < 2:
            raise RuntimeError(f"diagonal_scatter: input must have at least 2 dims, got shape {tuple(a.shape)}")
        d1, d2 = normalize_dim("diagonal_scatter", dim1, a.ndim), normalize_dim("diagonal_scatter", dim2, a.ndim)
        if d1 == d2:
            raise RuntimeError(f"diagonal_scatter: diagonal dimensions cannot be identical {dim1}, {dim2}")
        expected = xp.diagonal(a, offset, d1, d2).shape
        if tuple(src.shape) != tuple(expected):
            raise RuntimeError(
                f"diagonal_scatter: expected src to have the shape of the diagonal, {tuple(expected)}, "
                f"got {tuple(src.shape)}"
            )
        ctx.offset, ctx.dims = offset, (d1, d2)
        out = a.copy()
        _diagonal_view_set(xp, out, offset, (d1, d2), src)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        ga = gs = None
        if ctx.needs_input_grad[0]:
            ga = g.copy()
            _diagonal_view_set(xp, ga, ctx.offset, ctx.dims, 0)
        if ctx.needs_input_grad[1]:
            gs = xp.diagonal(g, ctx.offset, *ctx.dims).copy()
        return ga, gs, None, None, None


def _diagonal_view_set(xp: Any, out: Any, offset: int, dims: tuple[int, int], value: Any) -> None:
    """Write ``value`` on diagonal ``offset`` of the matrices of ``out`` in ``dims`` (in place)."""
    matrices = xp.moveaxis(out, dims, (-2, -1))  # a view: writing it writes out
    rows, cols = _diagonal_positions(xp, matrices.shape[-2], matrices.shape[-1], offset)
    matrices[..., rows, cols] = value


class DiagEmbed(Function):
    """Matrices in dims (dim1, dim2) of the output (which has one dim more than input) whose
    diagonal ``offset`` holds input's last dim; zeros elsewhere."""

    @staticmethod
    def forward(ctx: Context, a: Any, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:
        xp = ctx.xp
        if a.ndim < 1:
            raise RuntimeError("diag_embed: input must have at least 1 dim, got a 0-d tensor")
        nd = a.ndim + 1
        d1, d2 = normalize_dim("diag_embed", dim1, nd), normalize_dim("diag_embed", dim2, nd)
        if d1 == d2:
            raise RuntimeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
        n = a.shape[-1] + abs(offset)
        out = xp.zeros(a.shape[:-1] + (n, n), dtype=a.dtype)  # (..., n, n)
        rows, cols = _diagonal_positions(xp, n, n, offset)
        out[..., rows, cols] = a
        ctx.offset, ctx.dims = offset, (d1, d2)
        return xp.moveaxis(out, (-2, -1), (d1, d2))

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        return xp.diagonal(g, ctx.offset, *ctx.dims).copy(), None, None, None


# ------------------------------------------------------------------ flips, rolls, repeats, triangles, diagonals
class Flip(Function):
    """Reverse the order along ``dims`` (a copy, as PyTorch)."""

    @staticmethod
    def forward(ctx: Context, a: Any, dims: tuple[int, ...]) -> Any:
        ctx.dims = dims
        return ctx.xp.flip(a, axis=dims).copy() if dims else a.copy()

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return (ctx.xp.flip(g, axis=ctx.dims) if ctx.dims else g), None


class Roll(Function):
    """Shift entries along ``dims`` by ``shifts``, wrapping around (the flattened tensor if no dims)."""

    @staticmethod
    def forward(ctx: Context, a: Any, shifts: tuple[int, ...], dims: tuple[int, ...] | None) -> Any:
        ctx.shifts, ctx.dims = shifts, dims
        if dims is None:
            return ctx.xp.roll(a.reshape(-1), shifts[0]).reshape(a.shape)
        return ctx.xp.roll(a, shifts, axis=dims)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        back = tuple(-s for s in ctx.shifts)
        if ctx.dims is None:
            return ctx.xp.roll(g.reshape(-1), back[0]).reshape(g.shape), None, None
        return ctx.xp.roll(g, back, axis=ctx.dims), None, None


class Repeat(Function):
    """Tile the tensor ``sizes[d]`` times along each dim d (leading new dims allowed, as
    Tensor.repeat); the gradient sums the copies."""

    @staticmethod
    def forward(ctx: Context, a: Any, sizes: tuple[int, ...]) -> Any:
        if len(sizes) < a.ndim:
            raise RuntimeError(
                f"repeat: {len(sizes)} repeat sizes {tuple(sizes)} for a tensor of shape {tuple(a.shape)}; "
                "give at least one size per dim"
            )
        if any(s < 0 for s in sizes):
            raise RuntimeError(f"repeat: sizes {tuple(sizes)} must not be negative")
        ctx.shape = a.shape
        ctx.sizes = sizes
        return ctx.xp.tile(a, sizes)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        padded = (1,) * (len(ctx.sizes) - len(ctx.shape)) + tuple(ctx.shape)
        split = []
        for r, s in zip(ctx.sizes, padded):
            split += [r, s]
        g = g.reshape(split).sum(axis=tuple(range(0, 2 * len(padded), 2)))  # sum the copies
        return g.reshape(ctx.shape), None


class RepeatInterleave(Function):
    """Repeat each slice along ``dim`` ``repeats`` times (an int or one count per slice)."""

    @staticmethod
    def forward(ctx: Context, a: Any, repeats: Any, dim: int) -> Any:
        xp = ctx.xp
        n = a.shape[dim]
        counts = repeats if hasattr(repeats, "shape") else xp.full((n,), int(repeats), dtype="int64")
        counts = counts.reshape(-1)
        if counts.size == 1 and n != 1:
            counts = xp.broadcast_to(counts, (n,))
        if counts.size != n:
            raise RuntimeError(
                f"repeat_interleave: {counts.size} repeat counts for dim {dim} of size {n} (shape "
                f"{tuple(a.shape)}); give one count per slice or a single count"
            )
        ctx.source = xp.repeat(xp.arange(n), counts)  # the input slice of every output slice
        ctx.dim, ctx.shape = dim, a.shape
        return xp.take(a, ctx.source, axis=dim)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        grad = xp.zeros(ctx.shape, dtype=g.dtype)
        xp.add.at(xp.moveaxis(grad, ctx.dim, 0), ctx.source, xp.moveaxis(g, ctx.dim, 0))
        return grad, None, None


class UnfoldDim(Function):
    """Tensor.unfold(dimension, size, step): the windows of ``size`` entries every ``step`` along
    ``dimension``, which becomes the number of windows, with a new last dim of ``size``."""

    @staticmethod
    def forward(ctx: Context, a: Any, dim: int, size: int, step: int) -> Any:
        xp = ctx.xp
        n = a.shape[dim] if a.ndim else 1
        if step <= 0:
            raise RuntimeError(f"unfold: step must be > 0, got {step}")
        if not 0 <= size <= n:
            raise RuntimeError(
                f"unfold: size {size} does not fit dimension {dim} of size {n} (shape {tuple(a.shape)}); "
                f"the window size must be in [0, {n}]"
            )
        count = (n - size) // step + 1
        ctx.windows = xp.arange(count)[:, None] * step + xp.arange(size)[None, :]  # (count, size)
        ctx.dim, ctx.shape = dim, a.shape
        if a.ndim == 0:
            return xp.broadcast_to(a, (size,)).copy()
        out = xp.take(a, ctx.windows, axis=dim)  # (..., count, size, ...)
        return xp.moveaxis(out, dim + 1, -1)  # (..., count, ..., size)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        if not ctx.shape:
            return g.sum(), None, None, None
        d = ctx.dim
        g = xp.moveaxis(xp.moveaxis(g, -1, d + 1), (d, d + 1), (0, 1))  # (count, size, ...)
        grad = xp.zeros(ctx.shape, dtype=g.dtype)
        xp.add.at(xp.moveaxis(grad, d, 0), ctx.windows, g)
        return grad, None, None, None


def _need_matrix(op: str, a: Any) -> None:
    if a.ndim < 2:
        raise RuntimeError(f"{op}: input must have at least 2 dims (a matrix or a batch of them), got shape {tuple(a.shape)}")


class Tril(Function):
    """The lower triangle of the last two dims (on and below diagonal ``k``), zeros elsewhere."""

    @staticmethod
    def forward(ctx: Context, a: Any, k: int = 0) -> Any:
        _need_matrix("tril", a)
        ctx.k = k
        return ctx.xp.tril(a, k)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return ctx.xp.tril(g, ctx.k), None


class Triu(Function):
    """The upper triangle of the last two dims (on and above diagonal ``k``), zeros elsewhere."""

    @staticmethod
    def forward(ctx: Context, a: Any, k: int = 0) -> Any:
        _need_matrix("triu", a)
        ctx.k = k
        return ctx.xp.triu(a, k)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return ctx.xp.triu(g, ctx.k), None


def _diagonal_positions(xp: Any, rows: int, cols: int, offset: int) -> tuple[Any, Any]:
    """Row and column indices of diagonal ``offset`` of a (rows, cols) matrix."""
    length = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
    steps = xp.arange(length)
    return (steps, steps + offset) if offset >= 0 else (steps - offset, steps)


class Diagonal(Function):
    """The diagonal ``offset`` of the matrices in dims (dim1, dim2), as a new last dim (a copy)."""

    @staticmethod
    def forward(ctx: Context, a: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
        ctx.offset, ctx.dims, ctx.shape = offset, (dim1, dim2), a.shape
        return ctx.xp.diagonal(a, offset, dim1, dim2).copy()

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        grad = xp.zeros(ctx.shape, dtype=g.dtype)
        matrices = xp.moveaxis(grad, ctx.dims, (-2, -1))  # a view: writing it writes grad
        rows, cols = _diagonal_positions(xp, matrices.shape[-2], matrices.shape[-1], ctx.offset)
        matrices[..., rows, cols] = g
        return grad, None, None, None


class Diag(Function):
    """diag: a vector -> the square matrix with it on diagonal ``k``; a matrix -> its diagonal k."""

    @staticmethod
    def forward(ctx: Context, a: Any, k: int = 0) -> Any:
        if a.ndim not in (1, 2):
            raise RuntimeError(f"diag: input must be a vector or a matrix, got shape {tuple(a.shape)}")
        ctx.k, ctx.shape = k, a.shape
        return ctx.xp.diag(a, k).copy()

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        if len(ctx.shape) == 1:
            return xp.diag(g, ctx.k).copy(), None
        grad = xp.zeros(ctx.shape, dtype=g.dtype)
        rows, cols = _diagonal_positions(xp, ctx.shape[0], ctx.shape[1], ctx.k)
        grad[rows, cols] = g
        return grad, None
