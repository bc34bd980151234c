"""Elementwise ops: arithmetic, unary maths, where/clip, maximum/minimum and dropout's mask.

Binary ops broadcast like NumPy; the engine sums each gradient back to its input's shape, so
their backward returns gradients of the broadcast shape.
"""
from __future__ import annotations

from typing import Any

from tinyflow.autograd import Context, Function
from tinyflow.errors import ShapeError

__all__ = [
    "Add", "Sub", "Mul", "Div", "Pow", "PowScalar", "Neg", "Exp", "Log", "Sqrt", "Abs", "Clip", "Where",
    "Maximum", "Minimum", "DropoutFunction", "broadcast_error",
]


def broadcast_error(op: str, a: Any, b: Any) -> ShapeError:
    """The error for operands whose shapes do not broadcast (a RuntimeError, as in PyTorch)."""
    return ShapeError(
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
        # PyTorch's: d/da = b * a**(b-1), 0 where b == 0 (not 0 * inf at a = 0);
        # d/db = a**b * log(a), 0 where a == 0 and b >= 0, NaN for a < 0.
        xp = ctx.xp
        a, b, out = ctx.saved_tensors
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = g * xp.where(b == 0, 0, b * xp.power(xp.where(b == 0, 1, a), b - 1))
        if ctx.needs_input_grad[1]:
            zero_base = (a == 0) & (b >= 0)
            log_a = xp.log(xp.where(a > 0, a, 1))
            log_a = xp.where(a > 0, log_a, xp.where(a == 0, -xp.inf, xp.nan)).astype(out.dtype, copy=False)
            gb = g * xp.where(zero_base, 0, out * xp.where(zero_base, 0, log_a))
        return ga, gb


class PowScalar(Function):
    """a ** p for a Python number p (the common case: cheaper than Pow)."""

    @staticmethod
    def forward(ctx: Context, a: Any, p: float) -> Any:
        if p < 0 and a.dtype.kind in "iub":
            raise RuntimeError(
                f"pow: integers to negative integer powers are not allowed (tensor of shape {tuple(a.shape)} "
                f"and dtype {a.dtype}, exponent {p}); convert first, e.g. x.float() ** {p}"
            )
        ctx.save_for_backward(a)
        ctx.p = p
        return a**p

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (a,) = ctx.saved_tensors
        p = ctx.p
        if p == 0:  # x ** 0 is 1 everywhere: the gradient is 0, also at x = 0 (PyTorch's)
            return ctx.xp.zeros_like(g), None
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


class DropoutFunction(Function):
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
