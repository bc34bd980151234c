"""Elementwise ops: arithmetic, unary maths, activations, where/clip.

Binary ops broadcast like NumPy; the engine sums each gradient back to its input's shape, so
their backward returns gradients of the broadcast shape.
"""
from __future__ import annotations

import math
from typing import Any

from tinyflow.autograd import Context, Function

__all__ = [
    "Add", "Sub", "Mul", "Div", "Pow", "PowScalar", "Neg", "Exp", "Log", "Sqrt", "Tanh", "Sigmoid",
    "ReLU", "LeakyReLU", "GELU", "Abs", "Clip", "Where", "Maximum", "Minimum", "Dropout",
    "broadcast_error", "sigmoid_array",
]


def broadcast_error(op: str, a: Any, b: Any) -> ValueError:
    """The error for operands whose shapes do not broadcast."""
    return ValueError(
        f"{op}: shapes {tuple(getattr(a, 'shape', ()))} and {tuple(getattr(b, 'shape', ()))} "
        "cannot be broadcast together (each dimension must match or be 1, counted from the right)"
    )


def _binary(op: str, fn: Any, a: Any, b: Any) -> Any:
    try:
        return fn(a, b)
    except ValueError as exc:
        if "broadcast" in str(exc):
            raise broadcast_error(op, a, b) from None
        raise


class Add(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        return _binary("add", ctx.xp.add, a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return g, g


class Sub(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        return _binary("sub", ctx.xp.subtract, a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return g, (-g if ctx.needs_input_grad[1] else None)


class Mul(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save_for_backward(a, b)
        return _binary("mul", ctx.xp.multiply, a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b = ctx.saved_tensors
        return (
            g * b if ctx.needs_input_grad[0] else None,
            g * a if ctx.needs_input_grad[1] else None,
        )


class Div(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save_for_backward(a, b)
        return _binary("div", ctx.xp.true_divide, a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b = ctx.saved_tensors
        ga = g / b if ctx.needs_input_grad[0] else None
        gb = -g * a / (b * b) if ctx.needs_input_grad[1] else None
        return ga, gb


class Pow(Function):
    """a ** b for two tensors (b may be a 0-d tensor)."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        out = _binary("pow", ctx.xp.power, a, b)
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        a, b, out = ctx.saved_tensors
        ga = g * b * xp.power(a, b - 1) if ctx.needs_input_grad[0] else None
        gb = None
        if ctx.needs_input_grad[1]:
            safe = xp.where(a > 0, a, 1)
            gb = g * out * xp.log(safe)
        return ga, gb


class PowScalar(Function):
    """a ** p for a Python number p (the common case: cheaper than Pow)."""

    @staticmethod
    def forward(ctx: Context, a: Any, p: float) -> Any:
        ctx.save_for_backward(a)
        ctx.p = p
        return a**p

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (a,) = ctx.saved_tensors
        p = ctx.p
        if p == 2:
            return g * 2 * a, None
        return g * p * a ** (p - 1), None


class Neg(Function):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        return -a

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return -g


class Exp(Function):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        out = ctx.xp.exp(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (out,) = ctx.saved_tensors
        return g * out


class Log(Function):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        ctx.save_for_backward(a)
        return ctx.xp.log(a)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (a,) = ctx.saved_tensors
        return g / a


class Sqrt(Function):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        out = ctx.xp.sqrt(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (out,) = ctx.saved_tensors
        return g / (2 * out)


class Tanh(Function):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        out = ctx.xp.tanh(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (out,) = ctx.saved_tensors
        return g * (1 - out * out)


def sigmoid_array(xp: Any, a: Any) -> Any:
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


class Sigmoid(Function):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        out = sigmoid_array(ctx.xp, a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (out,) = ctx.saved_tensors
        return g * out * (1 - out)


class ReLU(Function):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        out = ctx.xp.maximum(a, 0)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (out,) = ctx.saved_tensors
        return g * (out > 0)


class LeakyReLU(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, slope: float = 0.01) -> Any:
        ctx.save_for_backward(a)
        ctx.slope = slope
        return ctx.xp.where(a > 0, a, a * slope)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (a,) = ctx.saved_tensors
        return ctx.xp.where(a > 0, g, g * ctx.slope), None


class GELU(Function):
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


class Abs(Function):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        ctx.save_for_backward(a)
        return ctx.xp.abs(a)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (a,) = ctx.saved_tensors
        return g * ctx.xp.sign(a)


class Clip(Function):
    """clip(a, lo, hi): the gradient flows where lo <= a <= hi."""

    @staticmethod
    def forward(ctx: Context, a: Any, lo: float | None = None, hi: float | None = None) -> Any:
        xp = ctx.xp
        ctx.save_for_backward(a)
        ctx.lo, ctx.hi = lo, hi
        out = a
        if lo is not None:
            out = xp.maximum(out, lo)
        if hi is not None:
            out = xp.minimum(out, hi)
        return out.astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (a,) = ctx.saved_tensors
        mask = True
        if ctx.lo is not None:
            mask = mask & (a >= ctx.lo)
        if ctx.hi is not None:
            mask = mask & (a <= ctx.hi)
        return g * mask, None, None


class Where(Function):
    """where(cond, a, b); cond is a raw boolean array (no gradient)."""

    @staticmethod
    def forward(ctx: Context, cond: Any, a: Any, b: Any) -> Any:
        xp = ctx.xp
        ctx.save_for_backward(cond)
        try:
            return xp.where(cond, a, b)
        except ValueError:
            raise broadcast_error("where", a, b) from None

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (cond,) = ctx.saved_tensors
        zero = ctx.xp.zeros((), dtype=g.dtype)
        ga = ctx.xp.where(cond, g, zero) if ctx.needs_input_grad[1] else None
        gb = ctx.xp.where(cond, zero, g) if ctx.needs_input_grad[2] else None
        return None, ga, gb


class Maximum(Function):
    """Elementwise maximum; ties split the gradient evenly, as PyTorch does."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save_for_backward(a, b)
        return _binary("maximum", ctx.xp.maximum, a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b = ctx.saved_tensors
        wa = (a > b) + 0.5 * (a == b)
        return g * wa, g * (1 - wa)


class Minimum(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save_for_backward(a, b)
        return _binary("minimum", ctx.xp.minimum, a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b = ctx.saved_tensors
        wa = (a < b) + 0.5 * (a == b)
        return g * wa, g * (1 - wa)


class Dropout(Function):
    """Inverted dropout: multiply by a mask of 0 and 1/(1-p) drawn by the ``dropout_mask`` kernel."""

    @staticmethod
    def forward(ctx: Context, a: Any, p: float, seed: int) -> Any:
        mask = ctx.kernels.dropout_mask(a, p, seed)
        ctx.save_for_backward(mask)
        return a * mask

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (mask,) = ctx.saved_tensors
        return g * mask, None, None
