"""``x[index]`` read as PyTorch reads it (torch/csrc/autograd/python_variable_indexing.cpp), for
the indexes that NumPy reads otherwise; loaded by arg_parser.index_steps on the first such index.

PyTorch reads an index item by item on the tensor the items before have left: ints select (a dim
goes), slices and None keep a view, and index tensors (integer and bool tensors, lists and tuples
in the index, Python bools and 0-d bool tensors) are gathered at the end, all together. So the
result is one NumPy basic index (ints, slices, None: a view) and then one of index arrays and full
slices. NumPy's own reading differs:

- an int among index arrays is one more index array in NumPy (``x[0, :, idx]`` of x (A, B, C) is
  (K, B) in NumPy, (B, K) in PyTorch);
- a tuple inside the index is several items in NumPy, one index tensor in PyTorch, as a list is
  (``x[0, (2, 1), idx]``);
- a short list that holds a slice, None, Ellipsis, a tensor or a sequence is a tuple of items in
  PyTorch (its deprecated rule, with its warning); a list of numbers is an index tensor (floats cut
  to ints, all-bool a mask);
- a Python bool or a 0-d bool tensor is a new dim of size 1, taken or not (an index tensor [0] or
  [] there); a 0-d integer tensor is an int; a uint8 tensor is a mask (deprecated);
- Ellipsis stands for the dims no item addresses, each time it appears;
- a slice's step must be positive.

Errors have PyTorch's types: IndexError (out of range, too many indices, a float or a tensor of
another dtype, a mask of the wrong shape), ValueError (a slice step of 0 or below, a ragged list),
TypeError (a string, a multi-element tensor inside a list), RuntimeError (a slice or None inside a
list). ``selection_shape`` gives the shape of a selection from shapes alone, for the order of
``x[index] = value``'s errors.
"""
from __future__ import annotations

import math
import operator
import warnings
from typing import Any

import numpy as np

from tinyflow.device import to_host

__all__ = ["torch_steps", "selection_shape"]

_LIST_AS_TUPLE_BELOW = 32  # PyTorch (after old NumPy): a shorter list holding slices, ... is a tuple
_INVALID_ITEM = (
    "only integers, slices (`:`), ellipsis (`...`), None and long or byte tensors are valid indices"
)


def torch_steps(index: Any, tensor_type: type, shape: tuple[int, ...]) -> tuple:
    """``index`` for a tensor of ``shape`` as one or two NumPy indexes (see arg_parser.index_steps)."""
    if isinstance(index, slice):  # x[::-1]: PyTorch checks a lone slice's step before the dims
        _check_step(index)
    return _torch_steps(_index_items(index, tensor_type), tensor_type, shape)


def selection_shape(shape: tuple[int, ...], steps: tuple) -> tuple[int, ...] | None:
    """The shape that index steps from arg_parser.index_steps select from a tensor of ``shape``,
    read from shapes alone (an index array's values may be out of range); None when the index
    arrays do not fit the tensor or each other."""
    view = np.broadcast_to(np.empty((), dtype=np.int8), shape)  # no memory: shapes only
    if len(steps) > 1:
        view = view[steps[0]]
    last = steps[-1] if isinstance(steps[-1], tuple) else (steps[-1],)
    if not any(_is_array(i) for i in last):
        return view[last].shape
    gathered: list[tuple[int, ...]] = []  # the shape each index array contributes
    indexed: list[int] = []  # the dims of view the index arrays address
    empty_dim = False  # an index array addresses a dim of size 0
    at = 0
    for i in last:
        width = i.ndim if _is_array(i) and i.dtype.kind == "b" else 1
        if _is_array(i):
            if i.dtype.kind == "b":
                if tuple(i.shape) != view.shape[at:at + width]:
                    return None
                gathered.append((int(to_host(i.sum(), "mask count")),))
            else:
                gathered.append(tuple(i.shape))
                empty_dim = empty_dim or not view.shape[at]
            indexed.extend(range(at, at + width))
        at += width
    try:
        together = np.broadcast_shapes(*gathered)
    except ValueError:
        return None
    if empty_dim and math.prod(together):
        return None  # gathering from a dim of size 0: out of bounds whatever the values
    rest = [n for d, n in enumerate(view.shape) if d not in indexed]
    if indexed == list(range(indexed[0], indexed[-1] + 1)):  # side by side: in place
        return tuple(rest[:indexed[0]]) + together + tuple(rest[indexed[0]:])
    return together + tuple(rest)


def _is_array(i: Any) -> bool:
    return isinstance(i, np.ndarray) or hasattr(i, "__cuda_array_interface__")


def _index_dtype(dtype: Any) -> bool:
    """int64 or int32 ("long, int"): the integer tensors PyTorch indexes with."""
    return dtype.kind == "i" and dtype.itemsize in (4, 8)


def _mask_dtype(dtype: Any) -> bool:
    """bool, or uint8 (a mask too in PyTorch, deprecated)."""
    return dtype.kind == "b" or (dtype.kind == "u" and dtype.itemsize == 1)


def _index_items(index: Any, tensor_type: type) -> tuple:
    """The items of ``index``: a tuple's own; a short list that holds a slice, None, Ellipsis, a
    tensor or a sequence is read as a tuple too (PyTorch's deprecated rule, with its warning);
    anything else is one item (a list of numbers is an index array)."""
    if isinstance(index, tuple):
        return index
    if isinstance(index, list) and len(index) < _LIST_AS_TUPLE_BELOW and any(
        i is None or i is Ellipsis or isinstance(i, (slice, tensor_type, list, tuple, str, range, np.ndarray))
        for i in index
    ):
        warnings.warn(
            "indexing with a list that holds slices, None, Ellipsis, tensors or sequences reads it as a "
            "tuple (PyTorch's deprecated rule); write x[tuple(seq)] for that, or x[tensor(seq)] for one index",
            UserWarning, stacklevel=5,
        )
        return tuple(index)
    return (index,)


def _count_specified(items: tuple, tensor_type: type) -> int:
    """The dims the items address (a bool or uint8 tensor one per dim of it; None, Ellipsis and
    Python bools none), as PyTorch counts them before it reads any item."""
    n = 0
    for i in items:
        if isinstance(i, tensor_type):
            n += i.ndim if _mask_dtype(i.array.dtype) else 1
        elif not (i is None or i is Ellipsis or i is True or i is False):
            n += 1
    return n


def _torch_steps(items: tuple, tensor_type: type, shape: tuple[int, ...]) -> tuple:
    """The index items read one by one, as PyTorch does, on the sizes they leave (``sizes``, with
    ``dim`` the next dim an item addresses): ints, slices and None go to the first (basic) step,
    index arrays to the second, at the dim where they stand once the basic items are applied."""
    ndim = len(shape)
    specified = _count_specified(items, tensor_type)
    if specified > ndim:
        raise IndexError(f"indexing: too many indices for tensor of dimension {ndim} (shape {tuple(shape)})")
    sizes = list(shape)
    basic: list = []  # NumPy's basic index: aligned with the dims of ``sizes`` before ``dim``
    arrays: dict[int, Any] = {}  # dim after the basic step -> index array
    bad_dtype = None  # a tensor of a dtype that cannot index: PyTorch says so once all items are read
    dim = 0
    for item in items:
        if item is Ellipsis:
            skip = ndim - specified
            basic.extend([slice(None)] * max(0, min(skip, len(sizes) - dim)))
            dim += skip
            continue
        if isinstance(item, tensor_type):
            item = _tensor_item(item.array)
        elif isinstance(item, (list, tuple, range, str)) or _is_array(item):
            item = _tensor_item(_sequence_array(item, tensor_type))
        if _is_array(item) and not _index_dtype(item.dtype) and item.dtype.kind != "b":
            bad_dtype = bad_dtype or item.dtype
        if item is None or item is True or item is False or isinstance(item, _Mask0d):
            _check_dim(sizes, dim, shape, "None" if item is None else "a bool", insert=True)
            sizes.insert(dim, 1)
            basic.append(None)
            if item is not None:  # a bool: a new dim of size 1, taken (True) or not (False)
                taken = item if isinstance(item, bool) else item.value
                arrays[dim] = np.zeros(1 if taken else 0, dtype=np.int64)
            dim += 1
        elif isinstance(item, slice):
            _check_step(item)
            _check_dim(sizes, dim, shape, "a slice")
            sizes[dim] = len(range(*item.indices(sizes[dim])))
            basic.append(item)
            dim += 1
        elif _is_array(item):
            width = item.ndim if item.dtype.kind == "b" else 1
            _check_dim(sizes, dim + width - 1, shape, "an index tensor")
            arrays[dim] = item
            basic.extend([slice(None)] * width)
            dim += width
        else:
            i = _integer(item)
            _check_dim(sizes, dim, shape, f"the index {i}")
            if not -sizes[dim] <= i < sizes[dim]:
                raise IndexError(f"indexing: index {i} is out of bounds for dimension {dim} with size {sizes[dim]} "
                                 f"(tensor of shape {tuple(shape)})")
            del sizes[dim]
            basic.append(i)
    if bad_dtype is not None:
        raise IndexError(
            f"indexing: tensors used as indices must be long, int, byte or bool tensors, got {bad_dtype}; "
            "convert the index with .long()"
        )
    for at, a in arrays.items():
        if a.dtype.kind == "b" and tuple(a.shape) != tuple(sizes[at:at + a.ndim]):
            raise IndexError(
                f"indexing: the shape of the mask {tuple(a.shape)} does not match the dims {tuple(sizes[at:at + a.ndim])} "
                f"it stands for (dims {at}.. of {tuple(sizes)}, the tensor of shape {tuple(shape)} after the items "
                "before the mask)"
            )
    while basic and basic[-1] == slice(None):
        basic.pop()
    if not arrays:
        return (tuple(basic),)
    second: list = []  # full slices up to the last index array (a mask spans its dims)
    at = 0
    while at <= max(arrays):
        a = arrays.get(at)
        second.append(slice(None) if a is None else a)
        at += a.ndim if a is not None and a.dtype.kind == "b" else 1
    return (tuple(basic), tuple(second)) if basic else (tuple(second),)


class _Mask0d:
    """A 0-d bool (or uint8) tensor in an index: like a Python bool, a new dim taken or not."""

    def __init__(self, value: bool) -> None:
        self.value = value


def _tensor_item(a: Any) -> Any:
    """An index array (NumPy or CuPy) as PyTorch reads it: a 0-d integer one is an int, a 0-d bool
    (or uint8) one a new dim, an int64/int32 one an index array, a bool (or uint8) one a mask."""
    kind = a.dtype.kind
    if a.ndim == 0 and kind in "iub":
        v = to_host(a, "0-d tensor index")
        if _mask_dtype(a.dtype):
            return _Mask0d(bool(v))
        return int(v)
    if kind == "u" and a.dtype.itemsize == 1:
        warnings.warn("indexing with a uint8 tensor (a mask) is deprecated, as in PyTorch; use a bool tensor",
                      UserWarning, stacklevel=6)
        return a.astype(bool)
    return a  # an index array: _torch_steps refuses the dtypes PyTorch does not index with


def _sequence_array(seq: Any, tensor_type: type) -> np.ndarray:
    """A list, tuple or NumPy array in an index as PyTorch reads it (an index tensor): nested
    numbers (ints, floats cut to ints, one-element integer tensors) as int64, all-bool as a mask."""
    if isinstance(seq, str):
        raise TypeError(f"indexing: a string ({seq!r}) is not an index")
    if _is_array(seq):
        arr = seq
    elif all(type(i) is int for i in seq):  # the common list of ints
        return np.array(seq, dtype=np.int64)
    else:
        try:
            arr = np.array(_numbers(seq, tensor_type))
        except ValueError:
            raise ValueError(f"indexing: a nested list in an index must be rectangular, got {seq!r}") from None
    if _mask_dtype(arr.dtype):
        return arr.astype(bool)
    if arr.dtype.kind in "iuf":
        return arr.astype(np.int64)
    raise TypeError(f"indexing: a sequence of {arr.dtype} ({seq!r}) is not an index; use integers or bools")


def _numbers(seq: Any, tensor_type: type) -> list:
    """The entries of a nested list or tuple as Python/NumPy numbers (one-element tensors unwrapped)."""
    out = []
    for i in seq:
        if isinstance(i, tensor_type):
            if i.array.size != 1 or i.dtype.kind not in "iub":
                raise TypeError(
                    f"indexing: only integer tensors of a single element can be converted to an index, got a "
                    f"{i.dtype} tensor of shape {tuple(i.shape)} inside a list"
                )
            out.append(to_host(i.array, "tensor in an index list").reshape(())[()])
        elif isinstance(i, (list, tuple, range)) or _is_array(i):
            out.append(_numbers(i, tensor_type) if not _is_array(i) else to_host(i, "index array"))
        elif i is None or i is Ellipsis or isinstance(i, slice):
            raise RuntimeError(f"indexing: could not infer dtype of {type(i).__name__} inside a list in the index; "
                               "a list there is an index tensor (use a tuple of items for x[a, b])")
        elif isinstance(i, (bool, int, float, np.number, np.bool_)):
            out.append(i)
        else:
            raise TypeError(f"indexing: {type(i).__name__} ({i!r}) inside a list in the index is not a number")
    return out


def _integer(item: Any) -> int:
    """An int index (a Python or NumPy integer, or anything with __index__); IndexError otherwise."""
    if isinstance(item, (bool, np.bool_)):
        raise IndexError(f"indexing: {_INVALID_ITEM} (got {type(item).__name__})")
    try:
        return operator.index(item)
    except TypeError:
        raise IndexError(f"indexing: {_INVALID_ITEM} (got {type(item).__name__} {item!r})") from None


def _check_step(item: slice) -> None:
    if item.step is not None and item.step <= 0:
        raise ValueError("indexing: slice step cannot be zero" if item.step == 0 else
                         f"indexing: a slice step must be greater than zero, got {item.step} (PyTorch has "
                         "no negative steps; use flip(dim) for a reversed order)")


def _check_dim(sizes: list, dim: int, shape: tuple[int, ...], what: str, insert: bool = False) -> None:
    """``dim`` must be a dim of the tensor as the items so far left it (or one past, for None)."""
    if dim < len(sizes) + insert:
        return
    if not shape:
        raise IndexError(f"indexing: invalid index of a 0-dim tensor ({what}); use tensor.item() to read its value")
    raise IndexError(f"indexing: {what} addresses dimension {dim} of a tensor of shape {tuple(shape)} after the "
                     "items before it (too many indices, or a second Ellipsis)")
