"""CUDA twin of ``tinyflow/kernels/random.py``: dropout masks drawn on the device (csrc/random.cu)."""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow_cuda.kernels._launch import KernelCall, dtype_suffix

__all__ = ["dropout_mask"]

Array = Any


def dropout_mask(x: Array, p: float, seed: int) -> Array:
    """A mask shaped and typed like ``x``: 1/(1-p) where kept, 0 where dropped.

    Drawn on the device by a counter-based hash of (seed, element index): the same seed gives
    the same mask on every GPU and grid, but not the mask the CPU reference draws. Dtypes
    without a .cu kernel (bf16, fp16) draw in float32 and cast.
    """
    if not 0 <= p < 1:
        raise ValueError(f"dropout_mask: p must be in [0, 1), got {p}")
    native = dtype_suffix(x) is not None
    dtype = x.dtype if native else np.float32
    call = KernelCall("dropout_mask", x, op="dropout", dtype=dtype)
    with call:
        mask = call.empty(x.shape, dtype)
        threshold = min(int(round(p * 2**32)), 2**32)
        call.launch(mask.size, [mask, int(seed) % 2**64, threshold, 1.0 / (1.0 - p), mask.size])
        return mask if native else mask.astype(x.dtype)
