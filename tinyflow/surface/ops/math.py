"""Elementwise maths beyond arithmetic: trigonometric and hyperbolic functions, logarithms and
exponentials in other bases, erf and erfinv, rounding, fmod/remainder, atan2, lerp, logaddexp,
copysign, and the ops that have no gradient (floor division, predicates, logical and bitwise ops).

A unary op is a ``UnaryFunction`` with two formulas: ``f`` (the value) and ``df`` (its derivative,
from the input and the output), so each op reads as its maths. Rounding ops have zero gradients
almost everywhere, as PyTorch's.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinyflow.autograd.function import Context, Function
from tinyflow.ops.activation import _wide, erf_array  # GELU needs erf too: it lives with GELU (core)
from tinyflow.ops.elementwise import NoGradient, _binary  # noqa: F401 (NoGradient: re-exported)

__all__ = [
    "UnaryFunction", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
    "Rsqrt", "Log2", "Log10", "Log1p", "Expm1", "Exp2", "Erf", "Erfinv", "Reciprocal", "Square", "Frac",
    "Floor", "Ceil", "Trunc", "Round", "Sign", "Atan2", "Fmod", "Remainder", "DivRounded", "FloorDivide",
    "Lerp", "LogAddExp", "CopySign", "erfinv_array",
]


class UnaryFunction(Function):
    """y = f(x) with dy/dx = df(x, y); subclasses define the two formulas over ``xp``."""

    @staticmethod
    def f(xp: Any, a: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def df(xp: Any, a: Any, out: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def forward(cls, ctx: Context, a: Any) -> Any:  # type: ignore[override]
        out = cls.f(ctx.xp, a)
        ctx.save_for_backward(a, out)
        return out

    @classmethod
    def backward(cls, ctx: Context, g: Any) -> Any:  # type: ignore[override]
        a, out = ctx.saved_tensors
        return g * cls.df(ctx.xp, a, out)


# ------------------------------------------------------------------ trigonometric, hyperbolic


class Sin(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.sin(a))
    df = staticmethod(lambda xp, a, out: xp.cos(a))


class Cos(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.cos(a))
    df = staticmethod(lambda xp, a, out: -xp.sin(a))


class Tan(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.tan(a))
    df = staticmethod(lambda xp, a, out: 1 + out * out)


class Asin(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.arcsin(a))
    df = staticmethod(lambda xp, a, out: 1 / xp.sqrt(1 - a * a))


class Acos(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.arccos(a))
    df = staticmethod(lambda xp, a, out: -1 / xp.sqrt(1 - a * a))


class Atan(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.arctan(a))
    df = staticmethod(lambda xp, a, out: 1 / (1 + a * a))


class Sinh(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.sinh(a))
    df = staticmethod(lambda xp, a, out: xp.cosh(a))


class Cosh(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.cosh(a))
    df = staticmethod(lambda xp, a, out: xp.sinh(a))


class Asinh(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.arcsinh(a))
    df = staticmethod(lambda xp, a, out: 1 / xp.sqrt(a * a + 1))


class Acosh(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.arccosh(a))
    df = staticmethod(lambda xp, a, out: 1 / xp.sqrt(a * a - 1))


class Atanh(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.arctanh(a))
    df = staticmethod(lambda xp, a, out: 1 / (1 - a * a))


# ------------------------------------------------------------------ powers, logs, exponentials


class Rsqrt(UnaryFunction):
    f = staticmethod(lambda xp, a: 1 / xp.sqrt(a))
    df = staticmethod(lambda xp, a, out: -0.5 * out * out * out)


class Log2(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.log2(a))
    df = staticmethod(lambda xp, a, out: 1 / (a * math.log(2)))


class Log10(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.log10(a))
    df = staticmethod(lambda xp, a, out: 1 / (a * math.log(10)))


class Log1p(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.log1p(a))
    df = staticmethod(lambda xp, a, out: 1 / (1 + a))


class Expm1(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.expm1(a))
    df = staticmethod(lambda xp, a, out: out + 1)


class Exp2(UnaryFunction):
    f = staticmethod(lambda xp, a: xp.exp2(a))
    df = staticmethod(lambda xp, a, out: out * math.log(2))


class Reciprocal(UnaryFunction):
    f = staticmethod(lambda xp, a: 1 / a)
    df = staticmethod(lambda xp, a, out: -out * out)


class Square(UnaryFunction):
    """x * x; a bool tensor squares to int64, as PyTorch's pow(x, 2)."""

    f = staticmethod(lambda xp, a: a * a if a.dtype.kind != "b" else a.astype(xp.int64))
    df = staticmethod(lambda xp, a, out: 2 * a)


class Frac(UnaryFunction):
    """x - trunc(x): the fractional part, with the sign of x; its gradient is 1."""

    f = staticmethod(lambda xp, a: a - xp.trunc(a))
    df = staticmethod(lambda xp, a, out: xp.ones_like(a))


class Erf(UnaryFunction):
    f = staticmethod(lambda xp, a: erf_array(xp, a))
    df = staticmethod(lambda xp, a, out: (2 / math.sqrt(math.pi)) * xp.exp(-a * a))


class Erfinv(UnaryFunction):
    f = staticmethod(lambda xp, a: erfinv_array(xp, a))
    df = staticmethod(lambda xp, a, out: (math.sqrt(math.pi) / 2) * xp.exp(out * out))


def erfinv_array(xp: Any, a: Any) -> Any:
    """The inverse of erf on (-1, 1) (+-inf at +-1, NaN outside): Winitzki's closed-form guess
    (relative error < 2e-3), refined by three Halley steps on erf(x) = y (cubic convergence)."""
    y = _wide(xp, a)
    inside = xp.abs(y) < 1
    ys = xp.where(inside, y, 0.0)
    c = 0.147
    ln = xp.log1p(-ys * ys)
    first = 2 / (math.pi * c) + ln / 2
    x = xp.copysign(xp.sqrt(xp.sqrt(first * first - ln / c) - first), ys)
    for _ in range(3):
        err = erf_array(xp, x) - ys
        slope = (2 / math.sqrt(math.pi)) * xp.exp(-x * x)
        x = x - err / (slope + x * err)  # Halley: f / (f' - f f'' / (2 f')) with f'' = -2x f'
    edge = xp.where(y == 1, math.inf, xp.where(y == -1, -math.inf, math.nan))
    return xp.where(inside, x, edge).astype(a.dtype, copy=False)


# ------------------------------------------------------------------ rounding: zero gradients


class _Stepwise(Function):
    """An op that is piecewise constant: its gradient is zero (as PyTorch's, not undefined)."""

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return ctx.xp.zeros_like(g), None


class Floor(_Stepwise):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        return ctx.xp.floor(a)


class Ceil(_Stepwise):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        return ctx.xp.ceil(a)


class Trunc(_Stepwise):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        return ctx.xp.trunc(a)


class Round(_Stepwise):
    """Round half to even, at ``decimals`` places (negative: tens, hundreds, ...), as PyTorch."""

    @staticmethod
    def forward(ctx: Context, a: Any, decimals: int = 0) -> Any:
        return ctx.xp.round(a, decimals)


class Sign(_Stepwise):
    """-1, 0 or 1; NaN gives 0, as PyTorch's sign (NumPy's gives NaN); a bool tensor is its own sign."""

    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        if a.dtype.kind == "b":
            return a.copy()
        out = ctx.xp.sign(a)
        if out.dtype.kind == "f":
            out = ctx.xp.nan_to_num(out, nan=0.0)
        return out


# ------------------------------------------------------------------ binary maths


def _integer_division(op: str, xp: Any, a: Any, b: Any) -> None:
    """Integer division by zero is PyTorch's RuntimeError "ZeroDivisionError" on the CPU (NumPy
    would answer 0 and warn). On a GPU it is not checked (a host read per op), as in PyTorch."""
    if getattr(b, "dtype", None) is not None and b.dtype.kind in "iu" and a.dtype.kind in "iu" \
            and type(b) is np.ndarray and not b.all():
        raise RuntimeError(f"ZeroDivisionError: {op}: integer division by zero (divisor of shape "
                           f"{tuple(b.shape)} and dtype {b.dtype} holds a 0); divide in floating point "
                           "(a.float() / b) or replace the zeros first")


def _no_bool(op: str, a: Any, b: Any) -> None:
    """PyTorch implements the division-like ops for numbers, not for two bool tensors."""
    if a.dtype.kind == "b" and getattr(b, "dtype", a.dtype).kind == "b":
        raise NotImplementedError(f"{op}: not implemented for bool tensors; convert with .long() or .float() first")



class Atan2(Function):
    """atan2(a, b): the angle of the point (b, a)."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save_for_backward(a, b)
        return _binary("atan2", ctx.xp.arctan2, a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        a, b = ctx.saved_tensors
        norm = a * a + b * b
        scale = xp.where(norm == 0, 0, g / xp.where(norm == 0, 1, norm)).astype(g.dtype, copy=False)
        return scale * b, -scale * a  # 0 at the origin, as PyTorch


class Fmod(Function):
    """C's fmod: the remainder of a / b truncated toward zero, with the sign of a."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        _no_bool("fmod", a, b)
        _integer_division("fmod", ctx.xp, a, b)
        ctx.save_for_backward(a, b)
        return _binary("fmod", ctx.xp.fmod, a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b = ctx.saved_tensors
        gb = -g * ctx.xp.trunc(a / b) if ctx.needs_input_grad[1] else None
        return g, gb


class Remainder(Function):
    """Python's %: the remainder of a / b floored, with the sign of b."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        _no_bool("remainder", a, b)
        _integer_division("remainder", ctx.xp, a, b)
        ctx.save_for_backward(a, b)
        return _binary("remainder", ctx.xp.remainder, a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b = ctx.saved_tensors
        gb = -g * ctx.xp.floor_divide(a, b) if ctx.needs_input_grad[1] else None
        return g, gb


def _divide_rounded(xp: Any, a: Any, b: Any, mode: str) -> Any:
    if mode == "floor":
        return xp.floor_divide(a, b)
    if a.dtype.kind in "iub" and getattr(b, "dtype", a.dtype).kind in "iub":  # integer truncation
        q = xp.floor_divide(a, b)
        return q + ((xp.remainder(a, b) != 0) & ((a < 0) != (b < 0)))
    return xp.trunc(xp.true_divide(a, b))


class DivRounded(_Stepwise):
    """div(a, b, rounding_mode='trunc' | 'floor'); zero gradients, as PyTorch."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any, mode: str) -> Any:
        _no_bool(f"div(rounding_mode={mode!r})", a, b)
        _integer_division(f"div(rounding_mode={mode!r})", ctx.xp, a, b)
        return _binary("div", lambda x, y: _divide_rounded(ctx.xp, x, y, mode), a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        zero = ctx.xp.zeros_like(g)
        return zero, zero, None


class FloorDivide(Function):
    """a // b. PyTorch defines no derivative for floor_divide: backward through it is an error."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        _no_bool("floor_divide", a, b)
        _integer_division("floor_divide", ctx.xp, a, b)
        return _binary("floor_divide", ctx.xp.floor_divide, a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        raise RuntimeError(
            "floor_divide (//): the derivative is not implemented, as in PyTorch; use "
            "div(a, b, rounding_mode='floor') (zero gradient) or detach the operands"
        )


class Lerp(Function):
    """start + weight * (end - start), with PyTorch's two-sided formula (exact at weight 1)."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any, w: Any) -> Any:
        xp = ctx.xp
        ctx.save_for_backward(a, b, w)
        diff = b - a
        return xp.where(abs(w) < 0.5, a + w * diff, b - diff * (1 - w))

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b, w = ctx.saved_tensors
        need = ctx.needs_input_grad
        return (
            g * (1 - w) if need[0] else None,
            g * w if need[1] else None,
            g * (b - a) if len(need) > 2 and need[2] else None,
        )


class LogAddExp(Function):
    """log(exp(a) + exp(b)); gradients g / (1 + exp(b - a)) and g / (1 + exp(a - b)), PyTorch's
    formulas (a half each where a == b, also at -inf or huge magnitudes)."""

    ufunc, exp = "logaddexp", "exp"  # LogAddExp2 (surface/ops/special.py): "logaddexp2", "exp2"

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        out = _binary(ctx.fn.ufunc, getattr(ctx.xp, ctx.fn.ufunc), a, b)
        ctx.save_for_backward(a, b)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        exp = getattr(ctx.xp, ctx.fn.exp)
        a, b = ctx.saved_tensors
        return g / (1 + exp(b - a)), g / (1 + exp(a - b))


class CopySign(Function):
    """|a| with the sign of b; the gradient reaches a only (zero where a is zero), as PyTorch."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        out = _binary("copysign", ctx.xp.copysign, a, b)
        ctx.save_for_backward(a, out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        a, out = ctx.saved_tensors
        ratio = xp.where(a == 0, 0, out / xp.where(a == 0, 1, a))
        return g * ratio, (xp.zeros_like(g) if ctx.needs_input_grad[1] else None)


# ------------------------------------------------------------------ no gradient at all
