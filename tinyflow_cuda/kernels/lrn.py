"""CUDA twins of ``tinyflow/kernels/lrn.py``: local response normalisation over csrc/lrn.cu."""
from __future__ import annotations

import math
from typing import Any

from tinyflow.kernels import lrn as reference
from tinyflow_cuda.kernels._launch import KernelCall

__all__ = ["lrn_forward", "lrn_backward"]

Array = Any


def lrn_forward(x: Array, size: int, alpha: float = 1e-4, beta: float = 0.75,
                k: float = 1.0) -> tuple[Array, Array]:
    """Normalise ``x`` (N, C, *) by its channel neighbourhood; returns (out, scale)."""
    call = KernelCall("lrn_forward", x, op="local_response_norm")
    if not call.supported:
        return reference.lrn_forward(x, size, alpha, beta, k)
    with call:
        x = call.contiguous(x)
        n, c = x.shape[:2]
        spatial = math.prod(x.shape[2:])
        out = call.empty(x.shape)
        scale = call.empty(x.shape)
        call.launch(x.size, [x, out, scale, n, c, spatial, size, alpha, beta, k])
        return out, scale


def lrn_backward(gout: Array, x: Array, out: Array, scale: Array, size: int,
                 alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Array:
    """Gradient of :func:`lrn_forward` with respect to ``x`` from its saved out and scale."""
    call = KernelCall("lrn_backward", gout, x, out, scale, op="local_response_norm backward")
    if not call.supported:
        return reference.lrn_backward(gout, x, out, scale, size, alpha, beta, k)
    with call:
        gout, x, out, scale = call.contiguous(gout, x, out, scale)
        n, c = x.shape[:2]
        spatial = math.prod(x.shape[2:])
        gx = call.empty(x.shape)
        call.launch(x.size, [gout, x, out, scale, gx, n, c, spatial, size, alpha, beta])
        return gx
