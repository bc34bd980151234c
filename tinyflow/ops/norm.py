"""Normalisation ops: local response normalisation (AlexNet 2012), batch normalisation and
layer normalisation (which group normalisation reuses), PyTorch semantics. F.local_response_norm and F.batch_norm check the arguments and run both in
float32 inside ``tf.amp.autocast``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.autograd import Function
from tinyflow.dtypes import get_default_dtype, is_floating, is_half
from tinyflow.kernels.lrn import _channel_window_sum
from tinyflow.ops.elementwise import floating_only, not_implemented_for

__all__ = ["LocalResponseNormFunction", "BatchNorm", "LayerNormFunction"]


class LocalResponseNormFunction(Function):
    """Cross-channel LRN through the named ``lrn_forward`` / ``lrn_backward`` kernels."""

    @staticmethod
    def forward(ctx, x, size, alpha, beta, k):
        if not is_floating(x.dtype):
            return _integer_lrn(x, size, alpha, beta, k)
        out, scale = ctx.kernels.lrn_forward(x, size, alpha, beta, k)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x, out, scale)
        ctx.params = (size, alpha, beta, k)
        return out

    @staticmethod
    def backward(ctx, gout):
        x, out, scale = ctx.saved_tensors
        return ctx.kernels.lrn_backward(gout, x, out, scale, *ctx.params)


def _widened(x: Any, k: int, weight: Any, bias: Any) -> tuple:
    """LayerNormFunction's arguments with the arrays in float32."""
    return x.astype(np.float32), k, *(None if a is None else a.astype(np.float32) for a in (weight, bias))


def _integer_lrn(x: Any, size: int, alpha: float, beta: float, k: float) -> Any:
    """LRN of an int64 input as PyTorch computes it (its F composes avg_pool, which has an int64
    kernel and no other integer one): the window mean of the squares divided in int64 (toward
    zero), then ``x / (mean * alpha + k) ** beta`` in the default float dtype. No gradient."""
    if x.dtype.kind != "i" or x.dtype.itemsize != 8:
        raise not_implemented_for("local_response_norm", x.dtype)
    dtype = get_default_dtype()
    mean = _channel_window_sum(x * x, size // 2, (size - 1) // 2) // size  # the squares are >= 0
    scale = (mean.astype(dtype) * dtype.type(alpha) + dtype.type(k)) ** dtype.type(beta)
    return x.astype(dtype) / scale


class BatchNorm(Function):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the channel axis of (N, C, *).

    In training the batch statistics are used (biased variance, as PyTorch) and the running
    statistics are updated in place, the running variance with the unbiased estimate. The work is
    the named ``batch_norm_forward`` / ``batch_norm_backward`` kernels (tinyflow/kernels/batchnorm.py,
    the CUDA twin fused into two launches each way); the backward recomputes xhat from the saved
    input and per-channel statistics, as PyTorch's.
    """

    @staticmethod
    def forward(ctx, x, running_mean, running_var, weight, bias, training, momentum, eps):
        floating_only("batch_norm", x)
        y, save_mean, save_invstd = ctx.kernels.batch_norm_forward(
            x, weight, bias, running_mean, running_var, training, momentum, eps)
        if any(ctx.needs_input_grad):
            ctx.save_for_backward(x, weight, save_mean, save_invstd)
        ctx.training = training
        return y

    @staticmethod
    def backward(ctx, gout):
        x, weight, save_mean, save_invstd = ctx.saved_tensors
        needs = ctx.needs_input_grad
        gx, gweight, gbias = ctx.kernels.batch_norm_backward(
            gout, x, weight, save_mean, save_invstd, ctx.training, (needs[0], needs[3], needs[4]))
        return gx, None, None, gweight, gbias


class LayerNormFunction(Function):
    """y = (x - mean) / sqrt(var + eps) * weight + bias, statistics over the last ``k`` dims of x
    (biased variance, as PyTorch); weight and bias have those dims' shape, or are None.

    F.group_norm reuses it: groups are the last dim of a (N, G, C/G * rest) view.
    """

    @staticmethod
    def forward(ctx, x, k, weight=None, bias=None, eps=1e-5):
        xp = ctx.xp
        floating_only("layer_norm", x)
        ctx.dtypes = None
        if is_half(x.dtype):  # statistics and gradients in float32, each result rounded once, as PyTorch
            y = LayerNormFunction.forward(ctx, *_widened(x, k, weight, bias), eps)
            ctx.dtypes = tuple(None if a is None else a.dtype for a in (x, weight, bias))
            return y.astype(x.dtype)
        axes = tuple(range(x.ndim - k, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        centered = x - mean
        var = (centered * centered).mean(axis=axes, keepdims=True)
        invstd = (1.0 / xp.sqrt(var + eps)).astype(x.dtype)
        xhat = centered * invstd
        y = xhat * weight if weight is not None else xhat
        if bias is not None:
            y = y + bias
        ctx.save_for_backward(xhat, invstd, weight)
        ctx.axes = axes
        return y.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, gout):
        if ctx.dtypes is not None:  # the float32 gradients, rounded to each input's dtype
            dtypes, ctx.dtypes = ctx.dtypes, None
            grads = LayerNormFunction.backward(ctx, gout.astype(np.float32))
            return tuple(None if g is None else g.astype(d) for g, d in zip(grads, dtypes[:1] + (None,) + dtypes[1:]))
        xhat, invstd, weight = ctx.saved_tensors
        axes = ctx.axes
        lead = tuple(range(gout.ndim - len(axes)))
        gw = (gout * xhat).sum(axis=lead) if ctx.needs_input_grad[2] else None
        gb = gout.sum(axis=lead) if ctx.needs_input_grad[3] else None
        gx = None
        if ctx.needs_input_grad[0]:
            gxhat = gout * weight if weight is not None else gout
            mean_g = gxhat.mean(axis=axes, keepdims=True)
            mean_gx = (gxhat * xhat).mean(axis=axes, keepdims=True)
            gx = (gxhat - mean_g - xhat * mean_gx) * invstd
        return gx, None, gw, gb, None
