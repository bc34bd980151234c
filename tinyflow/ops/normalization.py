"""Layer normalisation: the op, LayerNormFunction (statistics over the last k dims), and F's
layer_norm, group_norm (groups as the last dim of a (N, G, C/G * rest) view, on the same op) and
rms_norm (composed of Tensor ops)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinyflow.amp import autocast_mode as amp
from tinyflow.arg_parser import FunctionalError
from tinyflow.autograd.function import Function
from tinyflow.dtypes import finfo, is_half
from tinyflow.ops.elementwise import floating_only, not_implemented_for
from tinyflow.tensor import Tensor

__all__ = ["LayerNormFunction", "layer_norm", "group_norm", "rms_norm"]


def _widened(x: Any, k: int, weight: Any, bias: Any) -> tuple:
    """LayerNormFunction's arguments with the arrays in float32."""
    return x.astype(np.float32), k, *(None if a is None else a.astype(np.float32) for a in (weight, bias))


def _mean(a: Any, axes: tuple[int, ...]) -> Any:
    """``a.mean(axes, keepdims=True)`` (the same sum and division); 0 over an empty slice, where
    NumPy would warn "Mean of empty slice" (an empty normalized shape: PyTorch returns the empty input)."""
    return a.sum(axis=axes, keepdims=True) / max(math.prod(a.shape[i] for i in axes), 1)


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
        mean = _mean(x, axes)
        centered = x - mean
        var = _mean(centered * centered, axes)
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
            mean_g = _mean(gxhat, axes)
            mean_gx = _mean(gxhat * xhat, axes)
            gx = (gxhat - mean_g - xhat * mean_gx) * invstd
        return gx, None, gw, gb, None


# ======================================================================= F (tinyflow.nn.functional)


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
