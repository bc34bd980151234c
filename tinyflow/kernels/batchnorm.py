"""Batch normalisation over the channel axis of (N, C, *), PyTorch's native_batch_norm contract.

    forward:   y = (x - mean[c]) * invstd[c] * weight[c] + bias[c],  invstd = 1 / sqrt(var + eps)
    training:  mean, var = the batch's per-channel mean and biased variance over (N, *), and
               running_mean <- (1 - momentum) * running_mean + momentum * mean
               running_var  <- (1 - momentum) * running_var  + momentum * var * M / (M - 1)
               (M = N * prod(*) values per channel: the running variance is the unbiased one)
    eval:      mean, var = running_mean, running_var
    backward:  xhat = (x - mean) * invstd,  gweight = sum(g * xhat),  gbias = sum(g)
               training: gx = weight * invstd * (g - sum(g) / M - xhat * sum(g * xhat) / M)
               eval:     gx = weight * invstd * g

The statistics (``save_mean``, ``save_invstd``) are in the accumulate dtype: float64 for float64
inputs, float32 for everything else (float16 and bfloat16 inputs are normalised in float32 and
rounded once, as PyTorch's and the CUDA kernels' accumulate type). ``weight``, ``bias`` and the
running statistics may be in another floating dtype than ``x`` (float32 parameters with a half
input, as under autocast). Unlike PyTorch, eval mode returns the statistics it used too (the
running mean and 1 / sqrt(running_var + eps)), so the backward needs no running statistics.

``tinyflow_cuda/kernels/batchnorm.py`` is the CUDA twin (csrc/batchnorm.cu): two launches a
forward in training, one in eval, two a backward.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.kernels._cpu import array_module

__all__ = ["batch_norm_forward", "batch_norm_backward"]

Array = Any


def acc_dtype(dtype: Any) -> np.dtype:
    """The dtype statistics are computed in: float64 for float64, else float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def _channels_last_axes(x: Array) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the axes the statistics reduce over, the shape that broadcasts a (C,) array): (N, C, *)."""
    axes = (0, *range(2, x.ndim))
    return axes, (1, x.shape[1], *([1] * (x.ndim - 2)))


def batch_norm_forward(x: Array, weight: Array | None, bias: Array | None,
                       running_mean: Array | None, running_var: Array | None, training: bool,
                       momentum: float, eps: float) -> tuple[Array, Array, Array]:
    """Normalise ``x`` (N, C, *) per channel; returns (y, save_mean, save_invstd), the last two (C,).

    In training the batch statistics are used and ``running_mean`` / ``running_var`` (either may
    be None) are updated in place; in eval both must be given and are used as they are.
    """
    xp = array_module(x)
    acc = acc_dtype(x.dtype)
    axes, per_channel = _channels_last_axes(x)
    xa = x.astype(acc, copy=False)
    if training:
        count = x.size // max(x.shape[1], 1)  # M, values per channel
        mean = xa.mean(axis=axes)  # (C,)
        centered = xa - mean.reshape(per_channel)  # (N, C, *)
        var = xp.mean(centered * centered, axis=axes)  # (C,) biased, for normalising
        if running_mean is not None:
            running_mean *= 1 - momentum
            running_mean += (momentum * mean).astype(running_mean.dtype, copy=False)
        if running_var is not None:
            unbiased = var * (count / max(count - 1, 1))
            running_var *= 1 - momentum
            running_var += (momentum * unbiased).astype(running_var.dtype, copy=False)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm_forward: eval mode needs running_mean and running_var")
        mean, var = running_mean.astype(acc), running_var.astype(acc)
        centered = xa - mean.reshape(per_channel)
    invstd = (1.0 / xp.sqrt(var + eps)).astype(acc, copy=False)  # (C,)
    scale = invstd * weight.astype(acc, copy=False) if weight is not None else invstd
    y = centered
    y *= scale.reshape(per_channel)
    if bias is not None:
        y += bias.astype(acc, copy=False).reshape(per_channel)
    return y.astype(x.dtype, copy=False), mean.astype(acc, copy=False), invstd


def batch_norm_backward(gout: Array, x: Array, weight: Array | None, save_mean: Array,
                        save_invstd: Array, training: bool,
                        output_mask: tuple[bool, bool, bool] = (True, True, True),
                        ) -> tuple[Array | None, Array | None, Array | None]:
    """Gradients (gx, gweight, gbias) of :func:`batch_norm_forward` from its saved statistics.

    ``output_mask`` says which of the three are wanted (None for the others); gx is in x's dtype,
    gweight and gbias in the accumulate dtype.
    """
    acc = acc_dtype(x.dtype)
    axes, per_channel = _channels_last_axes(x)
    want_gx, want_gw, want_gb = output_mask
    g = gout.astype(acc, copy=False)
    invstd = save_invstd.astype(acc, copy=False)
    xhat = x.astype(acc, copy=False) - save_mean.astype(acc, copy=False).reshape(per_channel)  # (N, C, *)
    xhat *= invstd.reshape(per_channel)
    need_sums = training and want_gx
    sum_g = g.sum(axis=axes) if (want_gb or need_sums) else None  # (C,)
    sum_gxhat = (g * xhat).sum(axis=axes) if (want_gw or need_sums) else None  # (C,)
    gx = None
    if want_gx:
        scale = invstd * weight.astype(acc, copy=False) if weight is not None else invstd
        if training:
            count = x.size // max(x.shape[1], 1)
            xhat *= (sum_gxhat / count).reshape(per_channel)
            gx = g - (sum_g / count).reshape(per_channel)
            gx -= xhat
            gx *= scale.reshape(per_channel)
        else:
            gx = g * scale.reshape(per_channel)
        gx = gx.astype(x.dtype, copy=False)
    return gx, sum_gxhat if want_gw else None, sum_g if want_gb else None
