"""The rest of PyTorch's activations (elu, silu, mish, softplus, softsign, hardtanh, hardsigmoid,
hardswish, logsigmoid, prelu): ops of the PyTorch surface. The core's activations (ReLU,
LeakyReLU, GELU, sigmoid, tanh, the softmax family) are in activation.py.
"""
from __future__ import annotations

from typing import Any

from tinyflow.autograd import Context, Function
from tinyflow.ops.activation import _no_bool, _sigmoid

__all__ = [
    "ELUFunction", "SiLUFunction", "MishFunction", "SoftplusFunction", "SoftsignFunction",
    "HardtanhFunction", "HardsigmoidFunction", "HardswishFunction", "LogSigmoidFunction",
    "PReLUFunction",
]


class ELUFunction(Function):
    """elu, selu and celu in one: ``scale * x`` for x > 0, else
    ``scale * alpha * (exp(x * input_scale) - 1)`` (PyTorch's elu kernel with its three
    coefficients: selu fixes alpha and scale, celu has input_scale = 1 / alpha)."""

    @staticmethod
    def forward(ctx: Context, a: Any, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Any:
        xp = ctx.xp
        ctx.save_for_backward(a)
        ctx.coefs = (alpha, scale, input_scale)
        neg = xp.expm1(xp.minimum(a, 0) * input_scale) * (alpha * scale)  # min: exp never overflows
        return xp.where(a > 0, a * scale, neg).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        (a,) = ctx.saved_tensors
        alpha, scale, input_scale = ctx.coefs
        neg = g * (alpha * scale * input_scale) * xp.exp(xp.minimum(a, 0) * input_scale)
        return xp.where(a > 0, g * scale, neg), None, None, None


class SiLUFunction(Function):
    """silu (swish): x * sigmoid(x)."""

    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        s = _sigmoid(ctx.xp, a)
        ctx.save_for_backward(a, s)
        return a * s

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        a, s = ctx.saved_tensors
        return g * s * (1 + a * (1 - s))


def _softplus(xp: Any, a: Any) -> Any:
    """log(1 + exp(a)) without overflow: max(a, 0) + log1p(exp(-|a|))."""
    return xp.maximum(a, 0) + xp.log1p(xp.exp(-xp.abs(a)))


class MishFunction(Function):
    """mish: x * tanh(softplus(x))."""

    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        xp = ctx.xp
        t = xp.tanh(_softplus(xp, a))
        ctx.save_for_backward(a, t)
        return (a * t).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        a, t = ctx.saved_tensors
        return g * (t + a * _sigmoid(ctx.xp, a) * (1 - t * t))


class SoftplusFunction(Function):
    """softplus: log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold."""

    @staticmethod
    def forward(ctx: Context, a: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
        xp = ctx.xp
        ctx.save_for_backward(a)
        ctx.beta, ctx.threshold = beta, threshold
        z = a * beta
        return xp.where(z > threshold, a, _softplus(xp, z) / beta).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        (a,) = ctx.saved_tensors
        z = a * ctx.beta
        return xp.where(z > ctx.threshold, g, g * _sigmoid(xp, z)), None, None


class SoftsignFunction(Function):
    """softsign: x / (1 + |x|)."""

    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        d = 1 + ctx.xp.abs(a)
        ctx.save_for_backward(a, d)
        return a / d

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        a, d = ctx.saved_tensors
        # PyTorch's composite derivative, 1/d - |x|/d^2: the same for finite x, NaN at +-inf
        return g / d - g * ctx.xp.abs(a) / (d * d)


class HardtanhFunction(Function):
    """hardtanh (and relu6 = hardtanh(0, 6)): clamp to [min_val, max_val]; no gradient at or
    beyond the bounds (PyTorch's rule)."""

    @staticmethod
    def forward(ctx: Context, a: Any, min_val: float = -1.0, max_val: float = 1.0) -> Any:
        _no_bool("hardtanh", a)
        if a.dtype.kind == "u" and min(min_val, max_val) < 0:
            raise RuntimeError(f"hardtanh: cannot clamp an unsigned tensor ({a.dtype}) to negative limits "
                               f"[{min_val}, {max_val}]; convert it to a signed or float dtype first")
        ctx.save_for_backward(a)
        ctx.bounds = (min_val, max_val)
        return ctx.xp.clip(a, min_val, max_val).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (a,) = ctx.saved_tensors
        lo, hi = ctx.bounds
        return g * ((a > lo) & (a < hi)), None, None


class HardsigmoidFunction(Function):
    """hardsigmoid: relu6(x + 3) / 6; slope 1/6 strictly inside (-3, 3)."""

    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        ctx.save_for_backward(a)
        return (ctx.xp.clip(a + 3, 0, 6) / 6).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (a,) = ctx.saved_tensors
        return g * ((a > -3) & (a < 3)) / 6


class HardswishFunction(Function):
    """hardswish: x * relu6(x + 3) / 6."""

    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        ctx.save_for_backward(a)
        xp = ctx.xp
        x = xp.where(a > -3, a, -0.0)  # 0 for x <= -3, -inf included (x * 0 is NaN there)
        return (x * xp.clip(a + 3, 0, 6) / 6).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        xp = ctx.xp
        (a,) = ctx.saved_tensors
        middle = g * (a / 3 + 0.5)  # strictly inside (-3, 3); 0 at -3 and g at 3 (NaN at NaN), as PyTorch
        return xp.where(a <= -3, 0, xp.where(a >= 3, g, middle)).astype(g.dtype, copy=False)


class LogSigmoidFunction(Function):
    """logsigmoid: log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), finite for any x."""

    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        xp = ctx.xp
        ctx.save_for_backward(a)
        return (xp.minimum(a, 0) - xp.log1p(xp.exp(-xp.abs(a)))).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (a,) = ctx.saved_tensors
        return g * _sigmoid(ctx.xp, -a)


class PReLUFunction(Function):
    """prelu: x for x > 0, weight * x otherwise; weight is one value or one per channel (dim 1)."""

    @staticmethod
    def forward(ctx: Context, a: Any, weight: Any) -> Any:
        xp = ctx.xp
        w = _channel_view(a, weight)
        ctx.save_for_backward(a, w)
        ctx.weight_shape = weight.shape
        return xp.where(a > 0, a, a * w).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        a, w = ctx.saved_tensors
        ga = xp.where(a > 0, g, g * w) if ctx.needs_input_grad[0] else None
        gw = None
        if ctx.needs_input_grad[1]:
            contrib = xp.where(a > 0, 0, g * a)
            axes = tuple(i for i in range(a.ndim) if w.ndim != a.ndim or w.shape[i] == 1)
            gw = contrib.sum(axis=axes).reshape(ctx.weight_shape).astype(g.dtype, copy=False)
        return ga, gw


def _channel_view(a: Any, weight: Any) -> Any:
    """``weight`` shaped to broadcast over ``a``: one value everywhere, or one per channel (dim 1)."""
    if weight.size == 1:
        return weight.reshape(())
    shape = [1] * a.ndim
    shape[1 if a.ndim >= 2 else 0] = weight.size
    return weight.reshape(shape)
