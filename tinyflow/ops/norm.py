"""Normalisation ops: local response normalisation (AlexNet 2012), batch normalisation and
layer normalisation (which group normalisation reuses), PyTorch semantics. F.local_response_norm and F.batch_norm check the arguments and run both in
float32 inside ``tf.amp.autocast``.
"""
from __future__ import annotations

from typing import Any

from tinyflow.autograd import Function

__all__ = ["LocalResponseNormFunction", "BatchNorm", "LayerNormFunction"]


class LocalResponseNormFunction(Function):
    """Cross-channel LRN through the named ``lrn_forward`` / ``lrn_backward`` kernels."""

    @staticmethod
    def forward(ctx, x, size, alpha, beta, k):
        out, scale = ctx.kernels.lrn_forward(x, size, alpha, beta, k)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(x, out, scale)
        ctx.params = (size, alpha, beta, k)
        return out

    @staticmethod
    def backward(ctx, gout):
        x, out, scale = ctx.saved_tensors
        return ctx.kernels.lrn_backward(gout, x, out, scale, *ctx.params)


def _stat_axes(ndim: int) -> tuple[int, ...]:
    """Axes that batch statistics reduce over: all but the channel axis 1."""
    return (0, *range(2, ndim))


def _per_channel(a: Any, ndim: int) -> Any:
    """A (C,) array shaped to broadcast against (N, C, *)."""
    return a.reshape(1, -1, *([1] * (ndim - 2)))


class BatchNorm(Function):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the channel axis of (N, C, *).

    In training the batch statistics are used (biased variance, as PyTorch) and the running
    statistics are updated in place, the running variance with the unbiased estimate.
    """

    @staticmethod
    def forward(ctx, x, running_mean, running_var, weight, bias, training, momentum, eps):
        xp = ctx.xp
        axes = _stat_axes(x.ndim)
        if training:
            count = x.size // x.shape[1]
            mean = x.mean(axis=axes)
            centered = x - _per_channel(mean, x.ndim)
            var = xp.mean(centered * centered, axis=axes)  # biased, for normalising
            if running_mean is not None:
                running_mean *= 1 - momentum
                running_mean += momentum * mean.astype(running_mean.dtype)
            if running_var is not None:
                unbiased = var * (count / max(count - 1, 1))
                running_var *= 1 - momentum
                running_var += momentum * unbiased.astype(running_var.dtype)
        else:
            mean, var = running_mean.astype(x.dtype), running_var.astype(x.dtype)
            centered = x - _per_channel(mean, x.ndim)
        invstd = (1.0 / xp.sqrt(var + eps)).astype(x.dtype)  # (C,)
        xhat = centered
        xhat *= _per_channel(invstd, x.ndim)
        y = xhat * _per_channel(weight, x.ndim) if weight is not None else xhat.copy()
        if bias is not None:
            y += _per_channel(bias, x.ndim)
        ctx.save_for_backward(xhat, invstd, weight)
        ctx.training = training
        return y

    @staticmethod
    def backward(ctx, gout):
        xhat, invstd, weight = ctx.saved_tensors
        nd = gout.ndim
        axes = _stat_axes(nd)
        gweight = (gout * xhat).sum(axis=axes) if ctx.needs_input_grad[3] else None
        gbias = gout.sum(axis=axes) if ctx.needs_input_grad[4] else None
        gx = None
        if ctx.needs_input_grad[0]:
            gxhat = gout * _per_channel(weight, nd) if weight is not None else gout
            scale = _per_channel(invstd, nd)
            if ctx.training:
                # d/dx of normalising by the batch's own mean and variance
                mean_g = _per_channel(gxhat.mean(axis=axes), nd)
                mean_gx = _per_channel((gxhat * xhat).mean(axis=axes), nd)
                gx = (gxhat - mean_g - xhat * mean_gx) * scale
            else:
                gx = gxhat * scale
        return gx, None, None, gweight, gbias


class LayerNormFunction(Function):
    """y = (x - mean) / sqrt(var + eps) * weight + bias, statistics over the last ``k`` dims of x
    (biased variance, as PyTorch); weight and bias have those dims' shape, or are None.

    F.group_norm reuses it: groups are the last dim of a (N, G, C/G * rest) view.
    """

    @staticmethod
    def forward(ctx, x, k, weight=None, bias=None, eps=1e-5):
        xp = ctx.xp
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
