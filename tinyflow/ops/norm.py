"""Normalisation ops: local response normalisation (AlexNet 2012), batch normalisation and
layer normalisation (which group normalisation reuses), PyTorch semantics. F.local_response_norm and F.batch_norm check the arguments and run both in
float32 inside ``tf.amp.autocast``.
"""
from __future__ import annotations

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
