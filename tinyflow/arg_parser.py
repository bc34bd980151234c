"""PyTorch's arguments in NumPy's terms: ``FunctionalError`` (an argument an op cannot work with),
int-or-tuple sizes (``single`` / ``pair`` / ``triple``), dims checked against a rank
(``normalize_dim`` / ``normalize_axis``), ``axis=`` wherever PyTorch takes ``dim=``
(``accept_axis_alias``, applied once at import) and ``x[index]`` as NumPy indexes (``index_steps``).
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from tinyflow.errors import ShapeError

__all__ = [
    "FunctionalError", "single", "pair", "triple", "broadcast_pair", "normalize_dim", "normalize_axis",
    "accept_axis_alias", "takes_dim", "add_axis_alias", "index_steps", "is_advanced",
]

Axis = int | tuple[int, ...] | None
Pair = tuple[int, int]
IntPair = int | tuple[int, int]


class FunctionalError(ShapeError):
    """An argument an op cannot work with (shapes, sizes, modes). PyTorch raises RuntimeError for
    these, so ``except RuntimeError`` catches it, and ``except ValueError`` too."""


# ------------------------------------------------------------------------- int-or-tuple sizes
# PyTorch's _single / _pair / _triple: kernel_size=3 means (3, 3) for a 2-d op. ``op`` and ``name``
# name the caller and the argument in the error.


def single(v: Any, name: str, op: str) -> int:
    """An int or a 1-sequence of ints."""
    if isinstance(v, int):
        return v
    try:
        (a,) = v
        return int(a)
    except (TypeError, ValueError):
        raise FunctionalError(f"{op}: {name} must be an int or a 1-tuple of ints, got {v!r}") from None


def pair(v: Any, name: str, op: str) -> Pair:
    """An int or a 2-sequence of ints, as a (height, width) pair."""
    if isinstance(v, int):
        return (v, v)
    try:
        a, b = v
        return (int(a), int(b))
    except (TypeError, ValueError):
        raise FunctionalError(f"{op}: {name} must be an int or a pair of ints, got {v!r}") from None


def triple(v: Any, name: str, op: str) -> tuple[int, int, int]:
    """An int or a 3-sequence of ints, as (depth, height, width)."""
    if isinstance(v, int):
        return (v, v, v)
    try:
        a, b, c = v
        return (int(a), int(b), int(c))
    except (TypeError, ValueError):
        raise FunctionalError(f"{op}: {name} must be an int or a 3-tuple of ints, got {v!r}") from None


def broadcast_pair(op: str, a: Any, b: Any) -> tuple[Any, Any]:
    """Two tensors expanded to their broadcast shape (each returned as is where it has it)."""
    try:
        shape = tuple(np.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
    except ValueError:
        raise FunctionalError(f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be broadcast "
                              "together") from None
    return (a if tuple(a.shape) == shape else a.expand(*shape)), (b if tuple(b.shape) == shape else b.expand(*shape))


# ----------------------------------------------------------------------------------------- dims


def normalize_dim(op: str, dim: int, ndim: int) -> int:
    """``dim`` in [0, ndim) (a 0-d tensor has one dim, -1 or 0, as PyTorch); IndexError otherwise."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor with {ndim} dimension(s) "
                         f"(expected a dim in [{-n}, {n - 1}])")
    return dim % n


def normalize_axis(op: str, axis: Axis, ndim: int) -> tuple[int, ...] | None:
    """Turn ``dim`` (int, tuple or None) into a sorted tuple of non-negative axes.

    A 0-d tensor accepts dim 0 and -1, as in PyTorch, and has no axis to reduce: ``()``. An empty
    list of dims reduces all of them, as PyTorch's ``sum(dim=())``.
    """
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if not axes:
        return () if ndim == 0 else None
    out = [normalize_dim(op, int(a), ndim) for a in axes]
    if len(set(out)) != len(out):
        dup = next(a for a in out if out.count(a) > 1)
        raise RuntimeError(f"{op}: dim {dup} appears multiple times in the list of dims {tuple(axes)}")
    return () if ndim == 0 else tuple(sorted(out))


def accept_axis_alias(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` that also takes ``axis=`` for its ``dim=`` parameter, as PyTorch's functions do."""

    @functools.wraps(fn)
    def with_axis(*args: Any, **kwargs: Any) -> Any:
        if "axis" in kwargs:
            if "dim" in kwargs:
                raise TypeError(f"{fn.__name__}(): give dim or axis, not both")
            kwargs["dim"] = kwargs.pop("axis")
        return fn(*args, **kwargs)

    return with_axis


def takes_dim(fn: Any) -> bool:
    """True for a function with a ``dim`` parameter and no ``axis`` one."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "dim" in params and "axis" not in params


def add_axis_alias(cls: type) -> None:
    """Wrap every method defined on ``cls`` itself that takes ``dim`` with accept_axis_alias."""
    for name, fn in list(vars(cls).items()):
        if inspect.isfunction(fn) and takes_dim(fn) and not hasattr(fn, "__wrapped__"):
            setattr(cls, name, accept_axis_alias(fn))


# ------------------------------------------------------------------------------------ indexing
# ``x[index]`` with PyTorch's meaning, as one or two NumPy indexes. The indexes a training step
# makes (an int, a slice, a tuple of those, one index tensor) mean the same in NumPy and pass
# through here; any other is read item by item as PyTorch reads it, by tinyflow/_indexing.py
# (loaded on the first such index).


def index_steps(index: Any, tensor_type: type, shape: tuple[int, ...]) -> tuple:
    """``x[index]`` for x of ``shape`` as one or two raw NumPy/CuPy indexes applied in turn, with
    PyTorch's meaning (read by Tensor.__getitem__ and __setitem__): the first holds only ints,
    slices and None (a view), the second index arrays and full slices. ``tensor_type`` is Tensor
    (passed in: tensor.py imports this module); bad indexes raise PyTorch's error types."""
    kind = type(index)
    if kind is int or (kind is slice and _plain_step(index.step)):
        return (index,)  # x[0], x[i], x[a:b]: NumPy's meaning is PyTorch's
    if kind is tuple and _plain_basic(index):
        return (index,)
    if kind is tensor_type and index.array.ndim and (
        _index_dtype(index.dtype) or (index.dtype.kind == "b" and index.shape == shape[:index.ndim])
    ):
        return (index.array,)  # x[idx], x[mask]: one index tensor means the same in NumPy
    from tinyflow._indexing import torch_steps

    return torch_steps(index, tensor_type, shape)


def is_advanced(steps: tuple) -> bool:
    """True when index steps from :func:`index_steps` gather through index arrays (a copy)."""
    last = steps[-1]
    return any(_is_array(i) for i in (last if isinstance(last, tuple) else (last,)))


def _index_dtype(dtype: Any) -> bool:
    """int64 or int32 ("long, int"): the integer tensors PyTorch indexes with."""
    return dtype.kind == "i" and dtype.itemsize in (4, 8)


def _plain_step(step: Any) -> bool:
    return step is None or (type(step) is int and step > 0)


def _plain_basic(items: tuple) -> bool:
    """Ints, slices with positive steps, None and at most one Ellipsis: the same in NumPy."""
    ellipsis = False
    for i in items:
        kind = type(i)
        if kind is int or i is None:
            continue
        if kind is slice:
            if not _plain_step(i.step):
                return False
        elif i is Ellipsis and not ellipsis:
            ellipsis = True
        else:
            return False
    return True


def _is_array(i: Any) -> bool:
    return isinstance(i, np.ndarray) or hasattr(i, "__cuda_array_interface__")
