"""ReLU forward and backward, one pass each way: the reference for ``tinyflow_cuda/kernels/activation.py``.
Backward reads the saved *output*, so it needs neither the input nor a boolean mask kept alive."""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.kernels._cpu import array_module

__all__ = ["relu_forward", "relu_backward"]

Array = Any


def relu_forward(x: Array) -> Array:
    """max(x, 0), elementwise, in x's dtype (NaN stays NaN, as ``torch.relu``)."""
    return array_module(x).maximum(x, 0)


def relu_backward(g: Array, out: Array) -> Array:
    """The input gradient of y = relu(x) from the output y: g where y > 0 (or NaN, as PyTorch's
    ``threshold_backward``), else 0."""
    xp = array_module(g)
    with np.errstate(invalid="ignore"):  # NaN <= 0 is False, as wanted (bfloat16 warns)
        cut = out <= 0
    return xp.where(cut, xp.zeros((), dtype=g.dtype), g)
