"""Activations: ReLU, LeakyReLU, GELU, sigmoid, tanh, and the softmax family (softmax,
log_softmax, logsumexp), each computed stably. The classes that share a concept with an nn
layer carry the ``Function`` suffix (``ReLUFunction`` is the op, ``nn.ReLU`` the layer)."""
from __future__ import annotations

import math
from typing import Any

from tinyflow.autograd import Context, Function

__all__ = [
    "ReLUFunction", "LeakyReLUFunction", "GELUFunction", "SigmoidFunction", "TanhFunction",
    "SoftmaxFunction", "LogSoftmaxFunction", "LogSumExp",
]


class TanhFunction(Function):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        out = ctx.xp.tanh(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (out,) = ctx.saved_tensors
        return g * (1 - out * out)


def _sigmoid(xp: Any, a: Any) -> Any:
    """Numerically stable logistic function on a raw array, in place on one temporary.

    With e = exp(-|a|) in (0, 1] (never overflows): sigmoid(a) = 1/(1+e) for a >= 0 and
    e/(1+e) for a < 0.
    """
    e = xp.empty_like(a)
    xp.abs(a, out=e)
    xp.negative(e, out=e)
    xp.exp(e, out=e)
    out = xp.add(e, 1, out=xp.empty_like(a))
    xp.reciprocal(out, out=out)
    xp.multiply(out, e, out=out, where=a < 0)
    return out


class SigmoidFunction(Function):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        out = _sigmoid(ctx.xp, a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (out,) = ctx.saved_tensors
        return g * out * (1 - out)


class ReLUFunction(Function):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        out = ctx.xp.maximum(a, 0)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (out,) = ctx.saved_tensors
        return g * (out > 0)


class LeakyReLUFunction(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, slope: float = 0.01) -> Any:
        ctx.save_for_backward(a)
        ctx.slope = slope
        return ctx.xp.where(a > 0, a, a * slope)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (a,) = ctx.saved_tensors
        return ctx.xp.where(a > 0, g, g * ctx.slope), None


class GELUFunction(Function):
    """GELU, exact (erf) form as PyTorch's default, or the tanh approximation."""

    @staticmethod
    def forward(ctx: Context, a: Any, approximate: str = "none") -> Any:
        xp = ctx.xp
        ctx.save_for_backward(a)
        ctx.approximate = approximate
        if approximate == "tanh":
            inner = math.sqrt(2 / math.pi) * (a + 0.044715 * a**3)
            return 0.5 * a * (1 + xp.tanh(inner))
        return 0.5 * a * (1 + _erf(xp, a / math.sqrt(2)))

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        (a,) = ctx.saved_tensors
        if ctx.approximate == "tanh":
            c = math.sqrt(2 / math.pi)
            inner = c * (a + 0.044715 * a**3)
            t = xp.tanh(inner)
            d = 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * c * (1 + 3 * 0.044715 * a * a)
            return g * d, None
        cdf = 0.5 * (1 + _erf(xp, a / math.sqrt(2)))
        pdf = xp.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)
        return g * (cdf + a * pdf), None


def _erf(xp: Any, x: Any) -> Any:
    """erf on an array (NumPy has none): Numerical Recipes' erfc Chebyshev fit, |error| < 1.2e-7,
    below float32 resolution, which is what GELU is trained in."""
    t = 1.0 / (1.0 + 0.5 * xp.abs(x))
    poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    y = 1 - t * xp.exp(-x * x + poly)
    return xp.where(x >= 0, y, -y).astype(x.dtype, copy=False)


class SoftmaxFunction(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, dim: int = -1) -> Any:
        out = ctx.xp.exp(ctx.kernels.log_softmax_forward(x, axis=dim))
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (p,) = ctx.saved_tensors
        return p * (g - (g * p).sum(axis=ctx.dim, keepdims=True)), None


class LogSoftmaxFunction(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, dim: int = -1) -> Any:
        out = ctx.kernels.log_softmax_forward(x, axis=dim)
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (lp,) = ctx.saved_tensors
        return g - ctx.xp.exp(lp) * g.sum(axis=ctx.dim, keepdims=True), None


class LogSumExp(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, dim: int = -1, keepdim: bool = False) -> Any:
        xp = ctx.xp
        m = x.max(axis=dim, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0)
        out = m + xp.log(xp.exp(x - m).sum(axis=dim, keepdims=True))  # keepdims
        ctx.save_for_backward(x, out)
        ctx.dim, ctx.keepdim = dim, keepdim
        return out if keepdim else out.squeeze(dim)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        x, out = ctx.saved_tensors
        if not ctx.keepdim:
            g = ctx.xp.expand_dims(g, ctx.dim)
        return g * ctx.xp.exp(x - out), None, None
