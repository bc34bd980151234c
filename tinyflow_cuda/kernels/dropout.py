"""CUDA twin of ``tinyflow/kernels/dropout.py``: dropout masks drawn on the device (csrc/dropout.cu)."""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.kernels.dropout import check_seed
from tinyflow_cuda.kernels._launch import KernelCall

__all__ = ["dropout_mask"]

Array = Any


def dropout_mask(x: Array, p: float, seed: int | Array) -> Array:
    """A mask shaped and typed like ``x``: 1/(1-p) where kept, 0 where dropped.

    Drawn on the device by a counter-based hash of (seed, element index): the same seed gives
    the same mask on every GPU and grid, but not the mask the CPU reference draws. ``seed`` is an
    int (a kernel argument) or a (1,) uint64 device array the kernel reads (a captured step's
    slot, refilled before each replay: see tinyflow/capture.py).
    """
    if not 0 <= p < 1:
        raise ValueError(f"dropout_mask: p must be in [0, 1), got {p}")
    seed_array = check_seed(seed)
    call = KernelCall("dropout_mask", x, op="dropout")
    native = call.supported  # every floating dtype; any other draws in float32 and casts
    if not native:
        call = KernelCall("dropout_mask", x, op="dropout", dtype=np.float32)
    with call:
        mask = call.empty(x.shape, None if native else np.float32)
        threshold = min(int(round(p * 2**32)), 2**32)
        scalar_seed = 0 if seed_array is not None else int(seed) % 2**64
        call.launch(mask.size, [mask, seed_array, scalar_seed, threshold, 1.0 / (1.0 - p), mask.size])
        return mask if native else mask.astype(x.dtype)
