"""CUDA twins of ``tinyflow/kernels/lrn.py``: local response normalisation over csrc/lrn.cu.

Every floating dtype has its kernel (fp16 / bf16 compute in fp32 and round once), so LRN never
runs the reference's per-offset loop on a GPU. One thread per element, flat over (N, C, S) with
32-bit indices decoded by host-computed magic divisors (``_fastdiv``); a tensor of 2^31
elements or more is launched a run of whole images at a time. The constants the kernels need
(alpha / size, 2 alpha beta / size) are computed here, so no kernel divides.
"""
from __future__ import annotations

import math
from typing import Any

from tinyflow.dtypes import is_floating
from tinyflow.kernels import lrn as reference
from tinyflow_cuda.kernels import _fastdiv
from tinyflow_cuda.kernels._fastdiv import magic
from tinyflow_cuda.kernels._launch import KernelCall

__all__ = ["lrn_forward", "lrn_backward"]

Array = Any


def _images(n: int, c: int, spatial: int):
    """Runs [n0, n1) of whole images, each run under the 32-bit index limit of one launch."""
    return _fastdiv.chunks(n, c * spatial)


def lrn_forward(x: Array, size: int, alpha: float = 1e-4, beta: float = 0.75,
                k: float = 1.0) -> tuple[Array, Array]:
    """Normalise ``x`` (N, C, *) by its channel neighbourhood; returns (out, scale)."""
    call = KernelCall("lrn_forward", x, op="local_response_norm")
    if not call.supported:  # not a floating dtype
        return reference.lrn_forward(x, size, alpha, beta, k)
    with call:
        x = call.contiguous(x)
        n, c = x.shape[:2]
        spatial = math.prod(x.shape[2:])
        out = call.empty(x.shape)
        scale = call.empty(x.shape)
        if x.size == 0:
            return out, scale
        flat = [a.reshape(n, c * spatial) for a in (x, out, scale)]  # (N, C*S) views
        consts = [c, spatial, size, alpha / size, beta, k, magic(spatial), magic(c)]
        for n0, n1 in _images(n, c, spatial):
            xs, os_, ss = (a[n0:n1] for a in flat)
            call.launch(xs.size, [xs, os_, ss, xs.size, *consts])
        return out, scale


def lrn_backward(gout: Array, x: Array, out: Array, scale: Array, size: int,
                 alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Array:
    """Gradient of :func:`lrn_forward` with respect to ``x`` from its saved out and scale."""
    if gout.dtype != x.dtype and is_floating(gout.dtype) and is_floating(x.dtype):
        gout = gout.astype(x.dtype)  # one cast launch, not the reference's per-offset loop
    call = KernelCall("lrn_backward", gout, x, out, scale, op="local_response_norm backward")
    if not call.supported:  # not a floating dtype, or mixed dtypes
        return reference.lrn_backward(gout, x, out, scale, size, alpha, beta, k)
    with call:
        gout, x, out, scale = call.contiguous(gout, x, out, scale)
        n, c = x.shape[:2]
        spatial = math.prod(x.shape[2:])
        gx = call.empty(x.shape)
        if x.size == 0:
            return gx
        flat = [a.reshape(n, c * spatial) for a in (gout, x, out, scale, gx)]  # (N, C*S) views
        consts = [c, spatial, size, 2.0 * alpha * beta / size, beta, magic(spatial), magic(c)]
        for n0, n1 in _images(n, c, spatial):
            g, xs, os_, ss, gs = (a[n0:n1] for a in flat)
            call.launch(xs.size, [g, xs, os_, ss, gs, xs.size, *consts])
        return gx
