"""Elementwise ops: arithmetic, unary maths, where/clip, maximum/minimum.

Binary ops broadcast like NumPy; the engine sums each gradient back to its input's shape, so
their backward returns gradients of the broadcast shape.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyflow.autograd.function import Context, Function
from tinyflow.dtypes import is_floating_or_complex
from tinyflow.errors import ShapeError
from tinyflow.promotion import result_type

__all__ = [
    "Add", "Sub", "Mul", "Div", "Pow", "PowScalar", "Neg", "Exp", "Log", "Sqrt", "Abs", "Clip", "Where",
    "Maximum", "Minimum", "NoGradient", "broadcast_error", "bool_error",
    "sub_operand", "floating_only", "floating_or_int64", "not_implemented_for",
]


def broadcast_error(op: str, a: Any, b: Any) -> ShapeError:
    """The error for operands whose shapes do not broadcast (a RuntimeError, as in PyTorch)."""
    return ShapeError(f"{op}: shapes {tuple(getattr(a, 'shape', ()))} and {tuple(getattr(b, 'shape', ()))} "
                      "cannot be broadcast together (each dimension must match or be 1, counted from the right)")


def bool_error(op: str, message: str) -> RuntimeError:
    """PyTorch's error for an arithmetic operator that bool tensors do not support."""
    return RuntimeError(f"{op}: {message} (bool tensors); use the `~` / `^` operators or logical_not() / "
                        "logical_xor() for masks, or convert with .long() / .float() first")


def sub_operand(a: Any, other: Any) -> Any:
    """``other``, checked before promotion: PyTorch refuses ``-`` when either operand is a bool
    tensor or a Python bool (promotion would turn ``mask - 1`` into an int64 subtraction)."""
    if a.dtype == np.bool_ or isinstance(other, bool) or getattr(other, "dtype", None) == np.bool_:
        raise bool_error("sub", "subtraction, the `-` operator, is not supported")
    return other


def not_implemented_for(op: str, dtype: Any) -> NotImplementedError:
    """PyTorch's refusal of a dtype ``op`` has no kernel for ("not implemented for 'Long'"): a
    NotImplementedError, which ``except RuntimeError`` catches too."""
    return NotImplementedError(f'"{op}" not implemented for {dtype} input; convert it with .float() first')


def floating_only(op: str, *arrays: Any) -> None:
    """Refuse bool and integer arrays (None skipped) where PyTorch computes in floating point only."""
    for a in arrays:
        if a is not None and not is_floating_or_complex(a.dtype):
            raise not_implemented_for(op, a.dtype)


def floating_or_int64(op: str, a: Any) -> None:
    """Refuse bool and integer arrays other than int64, where PyTorch's kernels take int64 too."""
    if a.dtype.kind in "bu" or a.dtype.kind == "i" and a.dtype.itemsize != 8:
        raise not_implemented_for(op, a.dtype)


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
        if a.dtype.kind == "b":
            raise bool_error("sub", "subtraction, the `-` operator, is not supported")
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
        return g * b if ctx.needs_input_grad[0] else None, g * a if ctx.needs_input_grad[1] else None


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


def _integer_power(xp: Any, a: Any, b: Any) -> Any:
    """a ** b for integer arrays, with PyTorch's answer for negative exponents (NumPy raises):
    1 for a base of 1, +-1 for -1 (by the exponent's parity), 0 for any other base."""
    if a.dtype.kind == "b" and b.dtype.kind == "b":
        if b.ndim:
            raise NotImplementedError("pow: not implemented for two bool tensors; convert with .long() first")
        return a | ~b  # x ** False is 1, x ** True is x (a bool number as the exponent)
    negative = b < 0  # no early exit on negative.any(): that would read a GPU array on the host
    out = _binary("pow", xp.power, a, xp.where(negative, 0, b).astype(b.dtype, copy=False))
    odd = (b % 2) != 0
    special = xp.where(a == 1, 1, xp.where(a == -1, xp.where(odd, -1, 1), 0)).astype(out.dtype, copy=False)
    return xp.where(negative, special, out)


class Pow(Function):
    """a ** b for two tensors (b may be a 0-d tensor)."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        if a.dtype.kind in "iub" and b.dtype.kind in "iub":
            out = _integer_power(ctx.xp, a, b)
        else:
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


def _scalar_power(xp: Any, a: Any, p: float) -> Any:
    """a ** p with PyTorch's shortcut for p = -0.5 (rsqrt: NaN at -inf, -inf at -0.0, where C's pow
    gives 0 and inf); NumPy already takes PyTorch's shortcuts for -1, 0, 0.5, 1 and 2. float16 takes
    neither square-root shortcut in PyTorch: C's pow (an exponent array: no NumPy shortcut)."""
    if p in (0.5, -0.5) and a.dtype == xp.float16:
        return xp.power(a, xp.full(a.shape, p, dtype=a.dtype))
    if p == -0.5 and is_floating_or_complex(a.dtype):
        return 1 / xp.sqrt(a)
    out = a**p
    return out if out.dtype == a.dtype or a.dtype.kind in "iub" else out.astype(a.dtype)  # bf16 ** 0.5 is float32


class PowScalar(Function):
    """a ** p for a Python number p (the common case: cheaper than Pow)."""

    @staticmethod
    def forward(ctx: Context, a: Any, p: float) -> Any:
        if p < 0 and a.dtype.kind in "iub":
            raise RuntimeError(f"pow: integers to negative integer powers are not allowed (tensor of shape "
                               f"{tuple(a.shape)} and dtype {a.dtype}, exponent {p}); convert first, e.g. "
                               f"x.float() ** {p}")
        if a.dtype.kind == "b" and p >= 0:  # bool ** n counts as an integer power (int64), as PyTorch
            a = a.astype(ctx.xp.int64)
        ctx.save_for_backward(a)
        ctx.p = p
        return _scalar_power(ctx.xp, a, p)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (a,) = ctx.saved_tensors
        p = ctx.p
        if p == 0:  # x ** 0 is 1 everywhere: the gradient is 0, also at x = 0 (PyTorch's)
            return ctx.xp.zeros_like(g), None
        if p == 2:
            return g * 2 * a, None
        return g * p * _scalar_power(ctx.xp, a, p - 1), None


class Neg(Function):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        if a.dtype.kind == "b":
            raise bool_error("neg", "negation, the `-` operator, is not supported")
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
        if a.dtype.kind == "b":
            raise NotImplementedError("abs: not implemented for bool tensors; convert with .long() first")
        ctx.save_for_backward(a)
        return ctx.xp.abs(a)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (a,) = ctx.saved_tensors
        sign = ctx.xp.sign(a)
        if sign.dtype.kind == "f":  # sign(NaN) is 0, as PyTorch's sgn: no NaN gradient
            sign = ctx.xp.where(sign == sign, sign, 0).astype(sign.dtype, copy=False)
        return g * sign


def _wrapped(bound: Any, dtype: Any) -> Any:
    """An int bound as PyTorch converts it to an integer dtype: an unsigned one wraps negatives
    (-1 is 255 for uint8); a value out of range otherwise is a RuntimeError."""
    if not isinstance(bound, int):
        return bound
    info = np.iinfo(dtype)
    if not (-info.max if info.min == 0 else info.min) <= bound <= info.max:
        raise RuntimeError(f"clamp: value {bound} cannot be converted to {dtype} without overflow")
    return bound % (info.max + 1) if info.min == 0 else bound


class Clip(Function):
    """clip(a, lo, hi) = min(max(a, lo), hi), in the dtype PyTorch's promotion gives (an int
    tensor clamped at 0.5 is float32). lo and hi are numbers or arrays; the gradient flows to a
    where lo <= a <= hi, to an array lo where a < lo (and lo < hi), to an array hi where a > hi
    or hi < lo (PyTorch's rules)."""

    @staticmethod
    def forward(ctx: Context, a: Any, lo: Any = None, hi: Any = None) -> Any:
        xp = ctx.xp
        dtype = result_type(a, lo, hi)
        ctx.save_for_backward(a)
        ctx.lo, ctx.hi = lo, hi
        out = a.astype(dtype, copy=False)
        try:
            if lo is not None:
                out = xp.maximum(out, lo)
            if hi is not None:
                out = xp.minimum(out, hi)
        except ValueError:
            raise broadcast_error("clamp", a, lo if hasattr(lo, "shape") else hi) from None
        except OverflowError:  # a Python int bound outside the integer dtype
            return Clip.forward(ctx, a, *(_wrapped(b, dtype) for b in (lo, hi)))
        return out.astype(dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (a,) = ctx.saved_tensors
        lo, hi = ctx.lo, ctx.hi
        need = ctx.needs_input_grad
        mask = True
        if lo is not None:
            mask = mask & (a >= lo)
        if hi is not None:
            mask = mask & (a <= hi)
        g_lo = g_hi = None
        if len(need) > 1 and need[1]:
            g_lo = g * ((a < lo) & (lo < hi) if hi is not None else a < lo)
        if len(need) > 2 and need[2]:
            g_hi = g * ((a > hi) | (hi < lo) if lo is not None else a > hi)
        return g * mask, g_lo, g_hi


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


def _extremum_grads(xp: Any, g: Any, a: Any, b: Any, a_loses: Any, b_loses: Any) -> tuple:
    """PyTorch's maximum/minimum gradients: ties split evenly, the loser gets 0, and where a NaN
    makes both comparisons false, both operands get the whole gradient."""
    share = xp.where(a == b, g * 0.5, g)
    return share * ~a_loses, share * ~b_loses


class Maximum(Function):
    """Elementwise maximum; ties split the gradient evenly, as PyTorch does."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save_for_backward(a, b)
        return _binary("maximum", ctx.xp.maximum, a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b = ctx.saved_tensors
        return _extremum_grads(ctx.xp, g, a, b, a < b, a > b)


class Minimum(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save_for_backward(a, b)
        return _binary("minimum", ctx.xp.minimum, a, b)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, b = ctx.saved_tensors
        return _extremum_grads(ctx.xp, g, a, b, a > b, a < b)


class NoGradient(Function):
    """``fn(xp, *arrays)`` for ops whose results carry no gradient: predicates (isnan, isclose),
    logical and bitwise ops, shifts. Their outputs are boolean or integer, so autograd never
    records them."""

    @staticmethod
    def forward(ctx: Context, fn: Callable[..., Any], *arrays: Any) -> Any:
        if len(arrays) != 2:
            return fn(ctx.xp, *arrays)
        name = getattr(fn, "__name__", "<lambda>")
        return _binary("elementwise op" if name == "<lambda>" else name, lambda a, b: fn(ctx.xp, a, b), *arrays)

    @staticmethod
    def backward(ctx: Context, *grads: Any) -> tuple:
        raise RuntimeError("this op has no gradient (its result is boolean or integer)")
