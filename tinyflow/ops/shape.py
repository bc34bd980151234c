"""Shape ops: reshape, permute, expand, getitem (with scatter-add gradients), cat, stack,
split, pad. Most forwards return views; backward maps the gradient back to the input layout."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyflow.autograd import Context, Function
from tinyflow.errors import ShapeError

__all__ = ["Reshape", "Permute", "Expand", "GetItem", "SetItem", "Cat", "Stack", "Split", "Pad"]


class Reshape(Function):
    returns_view = True
    @staticmethod
    def forward(ctx: Context, a: Any, shape: tuple[int, ...]) -> Any:
        ctx.shape = a.shape
        try:
            return a.reshape(shape)
        except ValueError:
            raise ShapeError(
                f"reshape: cannot reshape a tensor of shape {tuple(a.shape)} ({a.size} elements) "
                f"into shape {tuple(shape)}"
            ) from None

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return g.reshape(ctx.shape), None


class Permute(Function):
    returns_view = True
    @staticmethod
    def forward(ctx: Context, a: Any, axes: tuple[int, ...]) -> Any:
        if sorted(ax % max(a.ndim, 1) for ax in axes) != list(range(a.ndim)):
            raise ShapeError(f"permute: {tuple(axes)} is not a permutation of the {a.ndim} dims of shape {tuple(a.shape)}")
        ctx.axes = axes
        return a.transpose(axes)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        inverse = [0] * len(ctx.axes)
        for i, ax in enumerate(ctx.axes):
            inverse[ax % len(ctx.axes)] = i
        return g.transpose(inverse), None


class Expand(Function):
    returns_view = True
    @staticmethod
    def forward(ctx: Context, a: Any, shape: tuple[int, ...]) -> Any:
        try:
            return ctx.xp.broadcast_to(a, shape)
        except ValueError:
            raise ShapeError(f"expand: shape {tuple(a.shape)} cannot be broadcast to {tuple(shape)}") from None

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return g, None  # the engine sums it back to the input shape


def _is_basic(index: Any) -> bool:
    """True when indexing uses only ints, slices, None and Ellipsis (no element repeats)."""
    items = index if isinstance(index, tuple) else (index,)
    return all(
        (isinstance(i, (int, slice, np.integer)) and not isinstance(i, (bool, np.bool_))) or i is None or i is Ellipsis
        for i in items
    )


class GetItem(Function):
    """a[index]; the gradient is scattered back, summing where an index repeats."""

    returns_view = True  # for basic indexing; a copy (advanced indexing) shares the counter harmlessly

    @staticmethod
    def forward(ctx: Context, a: Any, index: Any) -> Any:
        ctx.shape, ctx.dtype, ctx.index = a.shape, a.dtype, index
        if _is_basic(index):  # x[0] of a vector: a 0-d view (NumPy would return a copied scalar)
            items = index if isinstance(index, tuple) else (index,)
            if Ellipsis not in items:
                index = (*items, Ellipsis)
        try:
            return a[index]
        except IndexError as exc:
            raise IndexError(f"getitem: {exc} (tensor of shape {tuple(a.shape)})") from None

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        out = xp.zeros(ctx.shape, dtype=g.dtype)
        if _is_basic(ctx.index):
            out[ctx.index] = g
        else:
            xp.add.at(out, ctx.index, g)
        return out, None


def _select(a: Any, steps: tuple) -> Any:
    """``a`` indexed by each step in turn (Tensor.__setitem__'s index steps)."""
    for step in steps:
        a = a[step]
    return a


class SetItem(Function):
    """The new value of ``a`` after ``a[index] = value`` (index given as Tensor's index steps,
    the first of them basic): a copy of a with the selection replaced. Gradients: a's outside the
    selection, value's the selected part of the gradient (summed back to value's shape)."""

    @staticmethod
    def forward(ctx: Context, a: Any, value: Any, steps: tuple) -> Any:
        ctx.steps = steps
        out = a.copy()
        target = out[steps[0]] if len(steps) > 1 else out
        last = steps[-1]
        try:
            target[last] = value
        except ValueError:
            shape = tuple(_select(a, steps).shape)
            raise ShapeError(
                f"setitem: a value of shape {tuple(getattr(value, 'shape', ()))} cannot be assigned to "
                f"the selected shape {shape} of a tensor of shape {tuple(a.shape)}"
            ) from None
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        ga = gv = None
        if ctx.needs_input_grad[0]:
            ga = g.copy()
            target = ga[ctx.steps[0]] if len(ctx.steps) > 1 else ga
            target[ctx.steps[-1]] = 0
        if ctx.needs_input_grad[1]:
            gv = _select(g, ctx.steps)
        return ga, gv, None


class Cat(Function):
    @staticmethod
    def forward(ctx: Context, *arrays_and_dim: Any) -> Any:
        *arrays, dim = arrays_and_dim
        if not arrays:
            raise ShapeError("cat: expected a non-empty sequence of tensors")
        ndim = arrays[0].ndim
        for i, a in enumerate(arrays):
            if a.ndim == 0:
                raise RuntimeError(f"cat: zero-dimensional tensor (at position {i}) cannot be concatenated; "
                                   "unsqueeze it or use stack")
        if not -ndim <= dim < ndim:
            raise IndexError(f"cat: dim {dim} is out of range for tensors with {ndim} dimension(s) "
                             f"(expected a dim in [{-ndim}, {ndim - 1}])")
        d = dim % ndim
        for i, a in enumerate(arrays):
            if a.ndim != ndim or a.shape[:d] + a.shape[d + 1 :] != arrays[0].shape[:d] + arrays[0].shape[d + 1 :]:
                raise ShapeError(
                    f"cat: tensor 0 has shape {tuple(arrays[0].shape)} but tensor {i} has shape "
                    f"{tuple(a.shape)}; all dims except dim {dim} must match"
                )
        ctx.dim = d
        ctx.sizes = [a.shape[d] for a in arrays]
        return ctx.xp.concatenate(arrays, axis=d)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        grads, start = [], 0
        for n in ctx.sizes:
            sl = [slice(None)] * g.ndim
            sl[ctx.dim] = slice(start, start + n)
            grads.append(g[tuple(sl)])
            start += n
        return (*grads, None)


class Stack(Function):
    @staticmethod
    def forward(ctx: Context, *arrays_and_dim: Any) -> Any:
        *arrays, dim = arrays_and_dim
        if not arrays:
            raise ShapeError("stack: expected a non-empty sequence of tensors")
        for i, a in enumerate(arrays):
            if a.shape != arrays[0].shape:
                raise ShapeError(
                    f"stack: tensor 0 has shape {tuple(arrays[0].shape)} but tensor {i} has shape "
                    f"{tuple(a.shape)}; stack needs equal shapes"
                )
        ctx.dim = dim % (arrays[0].ndim + 1)
        return ctx.xp.stack(arrays, axis=ctx.dim)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return (*(g.take(i, axis=ctx.dim) for i in range(g.shape[ctx.dim])), None)


class Split(Function):
    """Split along ``dim`` into pieces of the given sizes (one output per piece)."""

    returns_view = True

    @staticmethod
    def forward(ctx: Context, a: Any, sizes: Sequence[int], dim: int = 0) -> tuple:
        d = dim % max(a.ndim, 1)
        if sum(sizes) != a.shape[d]:
            raise ShapeError(f"split: sizes {list(sizes)} do not add up to dim {dim} of shape {tuple(a.shape)}")
        ctx.dim = d
        outs, start = [], 0
        for n in sizes:
            sl = [slice(None)] * a.ndim
            sl[d] = slice(start, start + n)
            outs.append(a[tuple(sl)])
            start += n
        return tuple(outs)

    @staticmethod
    def backward(ctx: Context, *grads: Any) -> tuple:
        return ctx.xp.concatenate(grads, axis=ctx.dim), None, None


class Pad(Function):
    """Constant padding; ``pad`` lists (before, after) per dim, last dim first, as F.pad."""

    @staticmethod
    def forward(ctx: Context, a: Any, pad: Sequence[int], value: float = 0.0) -> Any:
        if len(pad) % 2 or len(pad) // 2 > a.ndim:
            raise ShapeError(f"pad: padding {tuple(pad)} must be pairs for at most {a.ndim} dims of shape {tuple(a.shape)}")
        widths = [(0, 0)] * a.ndim
        for i in range(len(pad) // 2):
            widths[a.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
        if any(lo < 0 or hi < 0 for lo, hi in widths):
            raise ShapeError(f"pad: negative padding {tuple(pad)} is not supported")
        ctx.slices = tuple(slice(lo, lo + n) for (lo, _), n in zip(widths, a.shape))
        return ctx.xp.pad(a, widths, mode="constant", constant_values=value)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return g[ctx.slices], None, None


# -------------------------------------------------------------------- PyTorch's wider shape surface
# flip, roll, repeat (and tile), repeat_interleave, unfold (sliding windows), tril/triu, diag,
# diagonal. narrow, unflatten, movedim, chunk and friends are views built from the ops above.

__all__ += ["Flip", "Roll", "Repeat", "RepeatInterleave", "UnfoldDim", "Tril", "Triu", "Diag", "Diagonal"]


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
