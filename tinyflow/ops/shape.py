"""Shape ops: reshape, permute, expand, getitem (with scatter-add gradients), cat, stack,
split, pad. Most forwards return views; backward maps the gradient back to the input layout.
PyTorch's wider shape surface (flip, roll, repeat, tril, ...) lives in tinyflow/surface/."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyflow.autograd.function import Context, Function
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
            raise ShapeError(f"reshape: cannot reshape a tensor of shape {tuple(a.shape)} ({a.size} elements) "
                             f"into shape {tuple(shape)}") from None

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
    return all((isinstance(i, (int, slice, np.integer)) and not isinstance(i, (bool, np.bool_)))
               or i is None or i is Ellipsis for i in items)


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
            raise ShapeError(f"setitem: a value of shape {tuple(getattr(value, 'shape', ()))} cannot be assigned to "
                             f"the selected shape {shape} of a tensor of shape {tuple(a.shape)}") from None
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
                raise ShapeError(f"cat: tensor 0 has shape {tuple(arrays[0].shape)} but tensor {i} has shape "
                                 f"{tuple(a.shape)}; all dims except dim {dim} must match")
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
                raise ShapeError(f"stack: tensor 0 has shape {tuple(arrays[0].shape)} but tensor {i} has shape "
                                 f"{tuple(a.shape)}; stack needs equal shapes")
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
