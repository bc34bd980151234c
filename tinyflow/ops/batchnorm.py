"""Batch normalisation: the op (the named ``batch_norm_forward`` / ``batch_norm_backward`` kernels),
F.batch_norm and F.instance_norm (each channel of each sample normalised over its positions, with
layer_norm's op; in evaluation, or with use_input_stats=False, batch_norm with running statistics).
"""
from __future__ import annotations

from tinyflow.amp import autocast_mode as amp
from tinyflow.arg_parser import FunctionalError
from tinyflow.autograd.function import Function
from tinyflow.autograd.grad_mode import no_grad
from tinyflow.ops.elementwise import floating_only
from tinyflow.ops.normalization import LayerNormFunction
from tinyflow.tensor import Tensor

__all__ = ["BatchNorm", "batch_norm", "instance_norm"]


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


# ======================================================================= F (tinyflow.nn.functional)


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,  # noqa: A002
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalisation over the channel axis of (N, C, *), as ``torch.nn.functional.batch_norm``."""
    x = input
    if x.ndim < 2:
        raise FunctionalError(f"batch_norm: input must be (N, C, *), got shape {tuple(x.shape)}")
    c = x.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise FunctionalError(f"batch_norm: {name} has shape {tuple(t.shape)} but input "
                             f"{tuple(x.shape)} has {c} channels")
    if not training and (running_mean is None or running_var is None):
        raise FunctionalError("batch_norm: evaluation mode needs running_mean and running_var")
    if training and x.numel() // max(c, 1) <= 1:
        raise FunctionalError(f"batch_norm: expected more than 1 value per channel when training, got "
                         f"input shape {tuple(x.shape)}")
    # Under autocast x keeps its half dtype and the affine parameters are float32, as PyTorch's
    # batch_norm (on no autocast list) runs cuDNN's half-input kernel: statistics in float32 inside
    # the kernel, no cast of the activation either way.
    weight, bias = amp.float32_inputs(weight, bias)
    return BatchNorm.apply(x, running_mean, running_var, weight, bias, bool(training),
                               float(momentum), float(eps))


def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,  # noqa: A002
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel of each sample over its positions (N, C, *)."""
    if input.ndim < 3:
        raise FunctionalError(f"instance_norm: expected input (N, C, *) with positions, got shape {tuple(input.shape)}")
    n, c = input.shape[:2]
    if use_input_stats:
        (x,) = amp.float32_inputs(input)
        y = LayerNormFunction.apply(x.reshape(n, c, -1), 1, None, None, float(eps)).reshape(*x.shape)
        if running_mean is not None or running_var is not None:
            with no_grad():
                flat = x.detach().reshape(n, c, -1)
                count = flat.shape[-1]
                if running_mean is not None:
                    running_mean.mul_(1 - momentum).add_(flat.mean(2).mean(0) * momentum)
                if running_var is not None:
                    var = flat.var(2, unbiased=False) * (count / max(count - 1, 1))
                    running_var.mul_(1 - momentum).add_(var.mean(0) * momentum)
    else:
        y = batch_norm(input, running_mean, running_var, None, None, False, momentum, eps)
    view = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(*view)
    if bias is not None:
        y = y + bias.reshape(*view)
    return y
