"""Local response normalisation across channels (AlexNet 2012, section 3.3), PyTorch semantics.

    scale[n, c] = k + alpha / size * sum_{c' in window(c)} x[n, c']**2
    out[n, c]   = x[n, c] * scale[n, c] ** -beta

The window of channel ``c`` is ``c - size//2 ... c + (size-1)//2`` clipped to the valid channels
(PyTorch pads with zeros and always divides by ``size``). Input is (N, C, *) with any number of
trailing spatial dims. The window sums loop over the ``size`` channel offsets only.

float16 / bfloat16 compute in float32 and round the results once, as the CUDA kernels do (and
PyTorch's accumulate type): summing squares in half precision loses the small terms.
"""
from __future__ import annotations

import numpy as np

from tinyflow.dtypes import is_half
from tinyflow.kernels._cpu import array_module

__all__ = ["lrn_forward", "lrn_backward"]


def _channel_window_sum(a, before: int, after: int):
    """out[:, c] = sum of a[:, c-before ... c+after] over valid channels; ``a`` is (N, C, *)."""
    xp = array_module(a)
    c = a.shape[1]
    padded = xp.zeros((a.shape[0], c + before + after, *a.shape[2:]), dtype=a.dtype)
    padded[:, before:before + c] = a
    out = padded[:, 0:c].copy()
    for offset in range(1, before + after + 1):
        out += padded[:, offset:offset + c]
    return out


def lrn_forward(x, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
    """Normalise ``x`` (N, C, *) by its channel neighbourhood; returns (out, scale)."""
    if is_half(x.dtype):
        out, scale = lrn_forward(x.astype(np.float32), size, alpha, beta, k)
        return out.astype(x.dtype), scale.astype(x.dtype)
    scale = _channel_window_sum(x * x, size // 2, (size - 1) // 2)
    scale *= alpha / size
    scale += k
    out = x * scale ** -beta
    return out, scale


def lrn_backward(gout, x, out, scale, size: int, alpha: float = 1e-4, beta: float = 0.75,
                 k: float = 1.0):
    """Gradient of :func:`lrn_forward` with respect to ``x``, from its saved ``out`` and ``scale``.

    d out[c] / d x[j] = [c == j] scale[c]**-beta - 2 alpha beta / size * x[c] x[j] scale[c]**(-beta-1)
    summed over every ``c`` whose window holds ``j`` (the transposed window).
    """
    if is_half(x.dtype):
        wide = (a.astype(np.float32) for a in (gout, x, out, scale))
        return lrn_backward(*wide, size, alpha, beta, k).astype(x.dtype)
    # gout * x * scale**(-beta-1) == gout * out / scale
    inner = gout * out / scale
    back = _channel_window_sum(inner, (size - 1) // 2, size // 2)
    gx = gout * scale ** -beta
    gx -= (2.0 * alpha * beta / size) * x * back
    return gx
