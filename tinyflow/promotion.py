"""PyTorch's type promotion: the dtype of ``a op b`` for tensors and Python numbers.

NumPy and PyTorch disagree here, and programs notice (an int tensor divided by 2 is float32 in
PyTorch, float64 in NumPy). The rules, as ``torch.result_type`` applies them
(docs/pytorch.md, "dtype promotion"):

- categories rank bool < integer < floating < complex;
- operands come in three tiers: tensors with dimensions, zero-dimensional tensors, and Python
  numbers (int -> int64, float -> the default dtype, bool -> bool). A lower tier only changes the
  result when its category is higher than every higher tier's: ``float32 tensor * 2.5`` stays
  float32, ``int64 tensor * 2.5`` is float32, ``uint8 tensor + tensor(1000)`` stays uint8;
- within one category the wider dtype wins (``promote_types``), except float16 with bfloat16,
  which meet in float32; across categories the higher category's dtype wins as it is
  (``int64 + float16`` is float16, NumPy would say float64);
- true division and the float functions (exp, log, sqrt, ...) of integer or bool operands give
  the default float dtype.

Binary ops call ``promote(a, b)``, which casts each operand to the result dtype (a differentiable
cast for tensors) and turns Python numbers into 0-d tensors of that dtype, so the op's NumPy/CuPy
forward never promotes on its own.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinyflow.dtypes import as_dtype, finfo, is_complex, is_floating

__all__ = ["promote_types", "result_type", "can_cast", "promote", "float_operand", "checked_scalar"]

_BOOL = np.dtype(bool)
_INT64 = np.dtype(np.int64)


def _category(dtype: np.dtype) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex."""
    if dtype.kind == "b":
        return 0
    if dtype.kind in "iu":
        return 1
    if is_complex(dtype):
        return 3
    if is_floating(dtype):
        return 2
    raise TypeError(f"type promotion: unsupported dtype {dtype}")


def _to_complex(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.complex128) if dtype == np.float64 else np.dtype(np.complex64)


def promote_types(type1: Any, type2: Any) -> np.dtype:
    """``torch.promote_types``: the smallest dtype both ``type1`` and ``type2`` convert to."""
    from tinyflow.dtypes import as_dtype

    a, b = as_dtype(type1), as_dtype(type2)
    if a == b:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        hi, lo = (a, b) if ca > cb else (b, a)
        if max(ca, cb) == 3 and min(ca, cb) == 2:  # complex64 with float64 -> complex128
            return np.promote_types(hi, lo)
        return hi
    if ca == 2 and (a.kind == "V" or b.kind == "V"):  # bfloat16 with float16 / float32 / float64
        other = b if a.kind == "V" else a
        return np.dtype(np.float64) if other == np.float64 else np.dtype(np.float32)
    return np.promote_types(a, b)


def _combine(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
    """c10's combine_categories: a lower tier counts only when its category is higher."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    ch, cl = _category(higher), _category(lower)
    if ch == 3:
        return higher
    if cl == 3:
        return _to_complex(higher) if ch == 2 else lower
    if ch == 2:
        return higher
    if ch == 0 or cl == 2:
        return promote_types(higher, lower)
    return higher


def _merge(current: np.dtype | None, dtype: np.dtype) -> np.dtype:
    return dtype if current is None else promote_types(current, dtype)


def result_type(*operands: Any) -> np.dtype:
    """``torch.result_type`` for any number of tensors, arrays and Python numbers."""
    from tinyflow.tensor import get_default_dtype

    dim = zero = wrapped = None
    for x in operands:
        if x is None:
            continue
        arr = getattr(x, "array", x)
        if isinstance(x, (bool, np.bool_)):
            wrapped = _merge(wrapped, _BOOL)
        elif isinstance(x, (int, np.integer)):
            wrapped = _merge(wrapped, _INT64)
        elif isinstance(x, (float, np.floating)):
            wrapped = _merge(wrapped, get_default_dtype())
        elif isinstance(x, (complex, np.complexfloating)):
            wrapped = _merge(wrapped, _to_complex(get_default_dtype()))
        elif hasattr(arr, "dtype") and hasattr(arr, "ndim"):
            if arr.ndim > 0:
                dim = _merge(dim, arr.dtype)
            else:
                zero = _merge(zero, arr.dtype)
        else:  # a (nested) list: what tinyflow.tensor would make of it
            from tinyflow.tensor import tensor

            t = tensor(x)
            if t.ndim > 0:
                dim = _merge(dim, t.dtype)
            else:
                zero = _merge(zero, t.dtype)
    out = _combine(dim, _combine(zero, wrapped))
    if out is None:
        raise TypeError("result_type: expected at least one tensor or number")
    return out


def can_cast(from_: Any, to: Any) -> bool:
    """``torch.can_cast``: False from complex to non-complex, floating to integer or bool, and
    from anything but bool to bool (what an in-place op may write into its tensor)."""
    from tinyflow.dtypes import as_dtype

    cf, ct = _category(as_dtype(from_)), _category(as_dtype(to))
    if ct == 0:
        return cf == 0
    return cf <= ct or (cf == 2 and ct == 3)


def _cast_operand(x: Any, dtype: np.dtype, ref: Any) -> Any:
    """``x`` as a tensor of ``dtype`` on ``ref``'s device (tensors through a differentiable cast)."""
    from tinyflow.device import move
    from tinyflow.tensor import Tensor

    if isinstance(x, Tensor):
        return x if x.dtype == dtype else x.to(dtype)
    arr = x if hasattr(x, "dtype") and hasattr(x, "shape") else np.asarray(x)
    arr = arr.astype(dtype, copy=False)  # C casts: an int beyond uint8 wraps, as in PyTorch
    return Tensor._from_array(move(arr, ref.device) if ref.device.type != "cpu" else arr, device=ref.device)


def promote(*operands: Any, floating: bool = False) -> tuple:
    """The operands cast to their result dtype (the default float dtype instead of an integer or
    bool one when ``floating``, as true division needs); numbers become 0-d tensors on the
    device of the first tensor. Operands that are None stay None."""
    from tinyflow.tensor import Tensor, get_default_dtype

    dtype = result_type(*operands)
    if floating and _category(dtype) < 2:
        dtype = get_default_dtype()
    ref = next((x for x in operands if isinstance(x, Tensor)), None)
    if ref is None:
        raise TypeError("promote: expected at least one tensor")
    return tuple(None if x is None else _cast_operand(x, dtype, ref) for x in operands)


def float_operand(x: Any) -> Any:
    """``x`` itself when floating or complex, else cast to the default float dtype: the input of a
    float function (exp, log, sin, sqrt, ...), which PyTorch computes in float32 for int tensors."""
    dtype = x.dtype
    if dtype.kind in "fc" or _category(dtype) >= 2:  # the kind test: a fast path, called per op
        return x
    from tinyflow.tensor import get_default_dtype

    return x.to(get_default_dtype())


def checked_scalar(op: str, value: Any, dtype: Any) -> Any:
    """A Python number as it is written into a tensor of ``dtype`` by fill_, full, setitem and
    masked_fill, with PyTorch's checked conversion: an unsigned integer dtype takes -max..max
    (negatives wrap, -1 is 255 in uint8), a signed one its range, a floating one its finite range
    (inf and NaN pass); a float into an integer dtype must lie in its range (then it is truncated).
    Anything else is PyTorch's RuntimeError, not NumPy's OverflowError or a silent inf."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    dt = as_dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        low = -int(info.max) if dt.kind == "u" and isinstance(value, int) else int(info.min)
        fits = low <= value <= int(info.max)  # NaN fits nowhere
        if fits and value < 0 and dt.kind == "u":
            value = int(value) % (int(info.max) + 1)
    elif is_floating(dt):
        fits = not (math.isfinite(value) and abs(value) > float(finfo(dt).max))
    else:
        return value
    if not fits:
        raise RuntimeError(f"{op}: value cannot be converted to type {dt} without overflow (got {value!r})")
    return value
