"""F.instance_norm: each channel of each sample normalised over its positions.

PyTorch surface: only nn.InstanceNorm1d/2d/3d (surface layers) and users call it; ``F`` loads
this file on first use.
"""
from __future__ import annotations

from tinyflow import amp
from tinyflow.nn.functional._utils import FunctionalError
from tinyflow.nn.functional.normalization import batch_norm
from tinyflow.ops.norm import LayerNormFunction
from tinyflow.tensor import Tensor

__all__ = ["instance_norm"]


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
            from tinyflow.autograd import no_grad

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
