"""The four dtypes every .cu family is instantiated for (csrc/common.cuh, TF_FLOAT_TYPES), and how
a half-precision kernel is compared with the NumPy reference: the reference runs in float32 on
the half inputs widened exactly, its results are rounded once to the half dtype, and the two
agree to about one unit in the last place of that dtype (the kernel rounds its fp32 result once
too; the fp32 values may differ in their last bits, which can move a rounding by one step).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

try:
    from ml_dtypes import bfloat16
except ImportError:  # the base install has no ml_dtypes: bfloat16 cases are left out
    bfloat16 = None

HALVES = [np.float16] + ([bfloat16] if bfloat16 is not None else [])
DTYPES = [np.float32, np.float64] + HALVES
ALL_FLOATS = st.sampled_from(DTYPES)


def is_half(dtype: Any) -> bool:
    return np.dtype(dtype).itemsize == 2


def dtype_tol(dtype: Any) -> dict:
    """assert_allclose tolerances for a kernel against the (rounded) reference, by dtype.

    float16 keeps 11 significant bits (one step 2^-10 relative), bfloat16 8 (2^-7): two steps
    of relative error, and an absolute floor for values that cancel to near zero in fp32."""
    name = np.dtype(dtype).name
    return {
        "float64": {"rtol": 1e-12, "atol": 1e-13},
        "float32": {"rtol": 1e-5, "atol": 1e-5},
        "float16": {"rtol": 2e-3, "atol": 1e-5},
        "bfloat16": {"rtol": 1.6e-2, "atol": 1e-5},
    }[name]


def widen(a: Any) -> Any:
    """A half-precision array as float32 (exactly); anything else unchanged."""
    return a.astype(np.float32) if isinstance(a, np.ndarray) and is_half(a.dtype) else a


def via_fp32(fn: Callable[..., Any], dtype: Any, *args: Any) -> Any:
    """``fn`` on the arguments with half arrays widened to float32, its float results rounded once
    to ``dtype`` (the reference for a half-precision kernel); other dtypes call ``fn`` as is."""
    if not is_half(dtype):
        return fn(*args)
    with np.errstate(all="ignore"):
        out = fn(*(widen(a) for a in args))

    def narrow(o: Any) -> Any:
        if isinstance(o, tuple):
            return tuple(narrow(x) for x in o)
        return o.astype(dtype) if isinstance(o, np.ndarray) and o.dtype.kind == "f" else o

    return narrow(out)


def as_float64(a: Any) -> np.ndarray:
    """For comparisons: assert_allclose has no bfloat16 arithmetic."""
    return np.asarray(a).astype(np.float64)
