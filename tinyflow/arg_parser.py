"""PyTorch's arguments in NumPy's terms: dims, the ``axis=`` spelling, indexes.

- ``normalize_dim`` / ``normalize_axis``: a ``dim`` argument checked against a tensor's rank and
  made non-negative, with PyTorch's errors (every op family that takes a dim uses them).
- ``axis=`` for ``dim=`` (NumPy's name): PyTorch's argument parser takes it wherever a function
  takes ``dim=``; tinyflow wraps such functions and methods once, at import, with
  :func:`accept_axis_alias`.
- ``index_steps``: ``x[index]`` with PyTorch's meaning, as one or two NumPy indexes.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from tinyflow.device import to_host

__all__ = ["normalize_dim", "normalize_axis", "accept_axis_alias", "takes_dim", "add_axis_alias", "index_steps"]

Axis = int | tuple[int, ...] | None


def normalize_dim(op: str, dim: int, ndim: int) -> int:
    """``dim`` in [0, ndim) (a 0-d tensor has one dim, -1 or 0, as PyTorch); IndexError otherwise."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"{op}: dim {dim} is out of range for a tensor with {ndim} dimension(s) "
            f"(expected a dim in [{-n}, {n - 1}])"
        )
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
    out = []
    for a in axes:
        a = int(a)
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise IndexError(
                f"{op}: dim {a} is out of range for a tensor with {ndim} dimension(s) (expected "
                f"a dim in [{-max(ndim, 1)}, {max(ndim, 1) - 1}])"
            )
        out.append(a % max(ndim, 1))
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


def index_steps(index: Any, tensor_type: type) -> tuple:
    """``index`` as one or two raw NumPy/CuPy indexes applied in turn, with PyTorch's meaning
    (``x[index]`` reads them in Tensor.__getitem__, ``x[index] = v`` writes through them in
    tinyflow/inplace.py). ``tensor_type`` is Tensor, whose items are unwrapped to their arrays
    (passed in: tensor.py imports this module, so this module cannot import it).

    PyTorch applies integers (and 0-d integer tensors) first, as selections, then the tensor
    indices; NumPy treats an integer beside an index array as one more index array. The two
    differ when an integer and an index array are separated by a slice: for x of shape
    (A, B, C), ``x[0, :, idx]`` is (B, K) in PyTorch and (K, B) in NumPy. So when integers meet
    index arrays, the integers (with the slices, None and Ellipsis) go first and the arrays
    second, on what remains; otherwise NumPy's rule is PyTorch's and one step does.
    """
    items = index if isinstance(index, tuple) else (index,)
    raw = []
    for i in items:
        if isinstance(i, tensor_type):
            i = i.array
            if i.ndim == 0 and i.dtype.kind in "iu":
                i = int(to_host(i, "0-d tensor index"))
        elif isinstance(i, list):
            i = np.asarray(i)  # a list is an index tensor, as in PyTorch
            if i.dtype.kind == "f" or (i.size == 0 and i.dtype.kind not in "iub"):
                i = i.astype(np.int64)
        raw.append(i)
    arrays = [isinstance(i, np.ndarray) or hasattr(i, "__cuda_array_interface__") for i in raw]
    ints = [isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)) for i in raw]
    if not any(arrays) or not any(ints):
        return (tuple(raw) if isinstance(index, tuple) else raw[0],)
    first: list = []
    second: list = []
    for i, is_array, is_int in zip(raw, arrays, ints):
        if is_int:
            first.append(i)
        elif is_array:
            first.extend([slice(None)] * (i.ndim if i.dtype.kind == "b" else 1))
            second.append(i)
        elif i is None:
            first.append(None)
            second.append(slice(None))
        elif i is Ellipsis:
            first.append(Ellipsis)
            second.append(Ellipsis)
        else:
            first.append(i)
            second.append(slice(None))
    return tuple(first), tuple(second)
