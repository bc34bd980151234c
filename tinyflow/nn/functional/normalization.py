"""Normalisation: batch_norm, layer_norm, group_norm, rms_norm and local_response_norm."""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow import amp
from tinyflow.nn.functional._utils import FunctionalError
from tinyflow.dtypes import finfo
from tinyflow.ops.elementwise import not_implemented_for
from tinyflow.ops.norm import BatchNorm, LayerNormFunction, LocalResponseNormFunction
from tinyflow.tensor import Tensor

__all__ = ["local_response_norm", "batch_norm", "layer_norm", "rms_norm", "group_norm"]


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,  # noqa: A002
                        k: float = 1.0) -> Tensor:
    """Normalise each activation by the energy of its ``size`` neighbouring channels (N, C, *)."""
    if input.ndim < 3:
        raise FunctionalError(f"local_response_norm: input must be at least 3-D (N, C, *), got shape "
                         f"{tuple(input.shape)}")
    if not isinstance(size, int) or size < 1:
        raise FunctionalError(f"local_response_norm: size must be a positive int, got {size!r}")
    (x,) = amp.float32_inputs(input)
    return LocalResponseNormFunction.apply(x, size, float(alpha), float(beta), float(k))


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


def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,  # noqa: A002
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the last len(normalized_shape) dims (biased variance), then scale and shift."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)
    if tuple(input.shape[input.ndim - len(shape):]) != shape or len(shape) > input.ndim:
        raise FunctionalError(f"layer_norm: normalized_shape {list(shape)} must be the last dims of the input "
                              f"shape {list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise FunctionalError(f"layer_norm: {name} has shape {tuple(t.shape)}, expected normalized_shape {shape}")
    x, weight, bias = amp.float32_inputs(input, weight, bias)
    return LayerNormFunction.apply(x, len(shape), weight, bias, float(eps))


def rms_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,  # noqa: A002
             eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2 over the last dims) + eps) * weight; eps defaults to the dtype's epsilon."""
    if not input.is_floating_point():
        raise not_implemented_for("rms_norm", input.dtype)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)
    if len(shape) > input.ndim or tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise FunctionalError(f"rms_norm: normalized_shape {list(shape)} must be the last dims of the input "
                              f"shape {list(input.shape)}")
    if eps is None:
        eps = float(finfo(input.dtype).eps)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    y = input * ((input * input).mean(dim=dims, keepdim=True) + eps) ** -0.5
    return y * weight if weight is not None else y


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,  # noqa: A002
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each of ``num_groups`` channel groups of (N, C, *) over its channels and
    positions, then scale and shift per channel."""
    if input.ndim < 2 or input.shape[1] % num_groups:
        raise FunctionalError(f"group_norm: expected input (N, C, *) with C divisible by num_groups={num_groups}, "
                              f"got shape {tuple(input.shape)}")
    n, c = input.shape[:2]
    (x,) = amp.float32_inputs(input)
    y = LayerNormFunction.apply(x.reshape(n, num_groups, -1), 1, None, None, float(eps)).reshape(*x.shape)
    view = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(*view)
    if bias is not None:
        y = y + bias.reshape(*view)
    return y
