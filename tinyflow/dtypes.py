"""dtype names and predicates: which dtypes are floating, and bfloat16 without a hard dependency.

NumPy files ml_dtypes' bfloat16 under kind ``'V'`` (void), so ``dtype.kind == "f"`` misses it
and a bf16 tensor would silently drop out of autograd. Every "is this a float?" question in
tinyflow is asked here instead. ml_dtypes is imported only when a bfloat16 dtype is asked for
by name, so ``import tinyflow`` works without it; the predicates recognise bf16 by its name and
never import it (they run on every op's outputs in ``Function.apply``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "float16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool_", "half", "double", "short",
    "long", "get_default_dtype", "set_default_dtype", "bfloat16", "as_dtype", "is_dtype_name", "is_bfloat16",
    "is_floating", "is_complex", "is_floating_or_complex", "is_half",
]


def bfloat16() -> np.dtype:
    """The bfloat16 dtype (from ml_dtypes, which CuPy 14 uses for its bf16 arrays)."""
    try:
        import ml_dtypes  # noqa: PLC0415
    except ImportError:
        raise TypeError("bfloat16 needs the ml_dtypes package, which tinyflow's base install leaves out: "
                        "`pip install ml_dtypes` (or the CUDA extra, `pip install \"tinyflow[cuda]\"`); "
                        "or use float16 or float32 instead") from None
    return np.dtype(ml_dtypes.bfloat16)


# Names accepted wherever a dtype is (``x.to("bf16")``, ``tf.zeros(3, dtype="half")``), with
# PyTorch's meanings: "float" is float32 and "int" int32 (NumPy reads both as 64-bit).
_NAMES: dict[str, str] = {
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16",
    "float32": "float32", "fp32": "float32", "float": "float32",
    "float64": "float64", "fp64": "float64", "double": "float64",
    "int8": "int8", "uint8": "uint8", "int16": "int16", "short": "int16",
    "int32": "int32", "int": "int32", "int64": "int64", "long": "int64",
    "bool": "bool",
}


def is_dtype_name(name: str) -> bool:
    """True for the strings ``as_dtype`` reads as a dtype (so ``to("half")`` is not a device)."""
    return name in _NAMES


def as_dtype(dtype: Any) -> np.dtype:
    """A NumPy dtype from a dtype, a scalar type or a name ("bf16", "half", "float32", ...)."""
    if isinstance(dtype, np.dtype):
        return dtype
    if isinstance(dtype, str):
        name = _NAMES.get(dtype, dtype)
        return bfloat16() if name == "bfloat16" else np.dtype(name)
    return np.dtype(dtype)


def is_bfloat16(dtype: Any) -> bool:
    """ml_dtypes' bfloat16, recognised by name (without importing ml_dtypes)."""
    if not isinstance(dtype, np.dtype):
        dtype = as_dtype(dtype)
    return dtype.kind == "V" and dtype.name == "bfloat16"


def is_floating(dtype: Any) -> bool:
    """float16, float32, float64 and bfloat16 (``torch.is_floating_point``'s set)."""
    if not isinstance(dtype, np.dtype):
        dtype = as_dtype(dtype)
    return dtype.kind == "f" or (dtype.kind == "V" and dtype.name == "bfloat16")


def is_complex(dtype: Any) -> bool:
    return as_dtype(dtype).kind == "c"


def is_floating_or_complex(dtype: Any) -> bool:
    """The dtypes that can carry gradients."""
    if not isinstance(dtype, np.dtype):
        dtype = as_dtype(dtype)
    return dtype.kind in "fc" or (dtype.kind == "V" and dtype.name == "bfloat16")


def finfo(dtype: Any = None) -> Any:
    """``torch.finfo``: eps, tiny, max, ... of a floating dtype, bfloat16 included (NumPy's finfo
    does not know bfloat16; ml_dtypes' does). The default dtype when none is given."""
    dtype = get_default_dtype() if dtype is None else as_dtype(dtype)
    if is_bfloat16(dtype):
        import ml_dtypes  # noqa: PLC0415 (bfloat16 exists only where ml_dtypes does)

        return ml_dtypes.finfo(dtype)
    return np.finfo(dtype)


def is_half(dtype: Any) -> bool:
    """float16 or bfloat16: too coarse for optimizer state and small updates (fp32 master weights)."""
    dtype = as_dtype(dtype)
    return dtype.itemsize == 2 and is_floating(dtype)


# ------------------------------------------------------------------------------ dtype names
# tinyflow.float32 & co. (PyTorch's names; tinyflow/__init__.py exports them).
float16 = half = np.dtype("float16")
float32 = np.dtype("float32")
float64 = double = np.dtype("float64")
int8, uint8, int16, short = np.dtype("int8"), np.dtype("uint8"), np.dtype("int16"), np.dtype("int16")
int32 = np.dtype("int32")
int64 = long = np.dtype("int64")
bool_ = np.dtype("bool")

# Names that would shadow Python's builtins inside the package: tinyflow/__init__.py serves
# tinyflow.float / int / bool from its module __getattr__ instead of defining them.
BUILTIN_DTYPE_NAMES = {"float": float32, "int": int32, "bool": bool_}

# ``x.type()`` names, as PyTorch prints them, and the dtype each legacy constructor makes.
LEGACY_TYPES: dict[str, str] = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16", "BFloat16Tensor": "bfloat16",
    "LongTensor": "int64", "IntTensor": "int32", "ShortTensor": "int16", "CharTensor": "int8",
    "ByteTensor": "uint8", "BoolTensor": "bool",
}

# ------------------------------------------------------------------------------ the default dtype
_default_dtype = float32


def get_default_dtype() -> np.dtype:
    """The dtype of tensors made from Python floats and of ``zeros``/``randn`` without dtype=."""
    return _default_dtype


def set_default_dtype(dtype: Any) -> None:
    global _default_dtype
    dtype = as_dtype(dtype)
    if not is_floating(dtype):
        raise TypeError(f"set_default_dtype: only floating dtypes can be the default, got {dtype}")
    _default_dtype = dtype
