"""Sorting: the sort order along a dim (``Argsort``) and ``Unique``.

sort, topk, kthvalue and median are built on ``Argsort`` in tinyflow/surface/tensor_methods.py: the
order is computed here (no gradient), the values are a gather along it, so the gradient goes back
to the positions the values came from. Sorting is stable: equal values keep their order, as with
PyTorch's ``stable=True`` (which its default may but need not follow). NaN sorts as the largest
value: last ascending, first descending, as PyTorch.
"""
from __future__ import annotations

from typing import Any

from tinyflow.arg_parser import normalize_dim
from tinyflow.autograd.function import Context, Function

__all__ = ["Argsort", "Unique"]


class Argsort(Function):
    """The int64 indices that sort ``a`` along ``dim`` (ascending, or descending), stably."""

    @staticmethod
    def forward(ctx: Context, a: Any, dim: int = -1, descending: bool = False) -> Any:
        xp = ctx.xp
        if a.ndim == 0:
            normalize_dim("sort", dim, 0)
            return xp.zeros((), dtype="int64")
        dim = normalize_dim("sort", dim, a.ndim)
        if not descending:
            return xp.argsort(a, axis=dim, kind="stable").astype("int64", copy=False)
        # Descending and stable: sort the reversed array ascending (equal values then come last
        # index first), reverse that order, and map positions back to the unreversed array.
        order = xp.argsort(xp.flip(a, axis=dim), axis=dim, kind="stable")
        return (a.shape[dim] - 1 - xp.flip(order, axis=dim)).astype("int64", copy=False)

    @staticmethod
    def backward(ctx: Context, *grads: Any) -> tuple:
        raise RuntimeError("argsort has no gradient")


def _unique_dim(a: Any, dim: int) -> int:
    """``dim`` checked as torch.unique(dim=...) does: a 0-d tensor has none; empty dims other than
    ``dim`` leave no slices to compare."""
    if a.ndim == 0:
        raise IndexError(f"unique: dim {dim} given but the tensor has no dimensions (shape ())")
    dim = normalize_dim("unique", dim, a.ndim)
    if any(n == 0 for d, n in enumerate(a.shape) if d != dim):
        raise RuntimeError(
            f"unique: the input of shape {tuple(a.shape)} has 0-sized dims other than dim {dim}, so there are "
            "no slices to compare"
        )
    return dim


def _unique(xp: Any, a: Any, dim: int | None) -> tuple[Any, Any, Any]:
    """values, inverse and counts; NaNs are all distinct, as in PyTorch (NumPy merges them)."""
    try:
        return xp.unique(a, return_inverse=True, return_counts=True, axis=dim, equal_nan=False)
    except TypeError:  # an array module without equal_nan
        return xp.unique(a, return_inverse=True, return_counts=True, axis=dim)


class Unique(Function):
    """The sorted distinct values (of the flattened input, or the distinct slices along ``dim``),
    with the inverse indices and the counts when asked, as torch.unique."""

    @staticmethod
    def forward(ctx: Context, a: Any, return_inverse: bool = False, return_counts: bool = False,
                dim: int | None = None) -> Any:
        xp = ctx.xp
        if dim is not None:
            dim = _unique_dim(a, dim)
        values, inverse, counts = _unique(xp, a, dim)
        if dim is None:
            inverse = inverse.reshape(a.shape)
        extra = ([inverse.astype("int64")] if return_inverse else []) + ([counts.astype("int64")] if return_counts else [])
        return (values, *extra) if extra else values

    @staticmethod
    def backward(ctx: Context, *grads: Any) -> tuple:
        raise RuntimeError("unique has no gradient")
