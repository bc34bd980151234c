"""Activations: ReLU, LeakyReLU, GELU, sigmoid, tanh and the softmax family (softmax,
log_softmax, logsumexp), each computed stably; the rest of PyTorch's set (elu, silu, mish,
softplus, hardtanh, ...) is in activation_extra.py.
The classes that share a concept with an nn layer carry the ``Function`` suffix
(``ReLUFunction`` is the op, ``nn.ReLU`` the layer)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinyflow.arg_parser import normalize_dim
from tinyflow.autograd import Context, Function
from tinyflow.dtypes import get_default_dtype, is_floating_or_complex
from tinyflow.ops.elementwise import floating_only

__all__ = [
    "ReLUFunction", "LeakyReLUFunction", "GELUFunction", "SigmoidFunction", "TanhFunction",
    "SoftmaxFunction", "LogSoftmaxFunction", "LogSumExp",
]


def _fusable(g: Any, saved: Any) -> bool:
    """Whether a backward can build its result in one temporary of ``saved``'s kind: the
    gradient has the same dtype (no downcast) and the arrays have dimensions (NumPy turns 0-d
    results into scalars, which cannot be written into)."""
    return g.dtype == saved.dtype and saved.ndim > 0


class TanhFunction(Function):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        out = ctx.xp.tanh(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (out,) = ctx.saved_tensors
        if not _fusable(g, out):
            return g * (1 - out * out)
        d = out * out
        ctx.xp.subtract(1, d, out=d)
        d *= g  # g * (1 - out^2), in one temporary
        return d


def _sigmoid(xp: Any, a: Any) -> Any:
    """Numerically stable logistic function on a raw array, in place on one temporary.

    With e = exp(-|a|) in (0, 1] (never overflows): sigmoid(a) = 1/(1+e) for a >= 0 and
    e/(1+e) for a < 0.
    """
    e = xp.empty_like(a)  # out= arrays throughout: 0-d results stay arrays, not NumPy scalars
    xp.abs(a, out=e)
    xp.negative(e, out=e)
    xp.exp(e, out=e)
    out = xp.add(e, 1, out=xp.empty_like(a))
    xp.reciprocal(out, out=out)
    xp.putmask(e, a >= 0, 1)  # e where a < 0, else 1: multiplying by 1 is exact
    out *= e
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
        if not _fusable(g, out):
            return g * (1 - out) * out
        d = ctx.xp.subtract(1, out)
        ctx.xp.multiply(g, d, out=d)
        d *= out  # g * (1 - out) * out, PyTorch's order, in one temporary
        return d


def _no_bool(op: str, a: Any) -> None:
    """PyTorch's clamping activations refuse bool tensors (a RuntimeError)."""
    if a.dtype.kind == "b":
        raise RuntimeError(f"{op}: bool inputs are not supported; convert with .float() or .long() first")


class ReLUFunction(Function):
    """max(x, 0) through the named kernels ``relu_forward`` / ``relu_backward``
    (tinyflow/kernels/activation.py): one kernel each way on the GPU, backward from the saved
    output with no bool temporary."""

    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        _no_bool("relu", a)
        out = ctx.kernels.relu_forward(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        (out,) = ctx.saved_tensors
        return ctx.kernels.relu_backward(g, out)  # NaN passes its gradient, as PyTorch's threshold_backward


class LeakyReLUFunction(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, slope: float = 0.01) -> Any:
        ctx.save_for_backward(a)
        ctx.slope = slope
        # bfloat16 * a Python float is float32 in NumPy: round back once (no copy for other dtypes)
        return ctx.xp.where(a > 0, a, a * slope).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (a,) = ctx.saved_tensors
        return ctx.xp.where(a > 0, g, g * ctx.slope).astype(g.dtype, copy=False), None


class GELUFunction(Function):
    """GELU, exact (erf) form as PyTorch's default, or the tanh approximation."""

    @staticmethod
    def forward(ctx: Context, a: Any, approximate: str = "none") -> Any:
        xp = ctx.xp
        ctx.save_for_backward(a)
        ctx.approximate = approximate
        if approximate == "tanh":
            inner = math.sqrt(2 / math.pi) * (a + 0.044715 * a**3)
            return (0.5 * a * (1 + xp.tanh(inner))).astype(a.dtype, copy=False)  # bfloat16 stays so
        out = 0.5 * a * (1 + _erf(xp, a / math.sqrt(2)))
        return xp.where(a == -math.inf, -0.0, out).astype(a.dtype, copy=False)  # x Phi(x) -> 0 as x -> -inf

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        (a,) = ctx.saved_tensors
        if ctx.approximate == "tanh":
            c = math.sqrt(2 / math.pi)
            inner = c * (a + 0.044715 * a**3)
            t = xp.tanh(inner)
            d = 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * c * (1 + 3 * 0.044715 * a * a)
            return (g * d).astype(g.dtype, copy=False), None
        cdf = 0.5 * (1 + _erf(xp, a / math.sqrt(2)))
        pdf = xp.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)
        gx = g * (cdf + xp.where(xp.isinf(a), 0, a * pdf))  # x phi(x) -> 0 as |x| -> inf
        return gx.astype(g.dtype, copy=False), None


def _wide(xp: Any, a: Any) -> Any:
    """``a`` in float64 for a series evaluation (half, bfloat16 and float32 alike)."""
    return a.astype(xp.float64)


def erf_array(xp: Any, a: Any) -> Any:
    """erf to double precision on any array module (NumPy has none; SciPy is not a dependency).

    |x| < 2: erf(x) = 2/sqrt(pi) exp(-x^2) sum_n (2x^2)^n x / (1*3*...*(2n+1)), all terms of one
    sign, so nothing cancels; 30 terms reach 1e-16 (the term ratio 2x^2/(2n+1) falls below 0.14).
    |x| >= 2: 1 - erfc(x), erfc from its continued fraction exp(-x^2)/sqrt(pi) / (x + 1/2/(x + 1/(x
    + 3/2/(x + ...)))) evaluated from 40 levels down. Within 2e-15 of math.erf everywhere.
    """
    x = _wide(xp, a)
    ax = xp.abs(x)
    small = xp.minimum(ax, 2.0)
    term = small.copy()
    total = small.copy()
    two_x2 = 2 * small * small
    for n in range(1, 30):
        term = term * two_x2 / (2 * n + 1)
        total = total + term
    series = (2 / math.sqrt(math.pi)) * xp.exp(-small * small) * total
    big = xp.maximum(ax, 2.0)
    frac = big
    for k in range(40, 0, -1):
        frac = big + (k / 2) / frac
    tail = 1 - xp.exp(-big * big) / math.sqrt(math.pi) / frac
    out = xp.where(ax < 2.0, series, tail)
    out = xp.where(xp.isnan(x), x, xp.copysign(out, x))
    return out.astype(a.dtype, copy=False)


def _erf(xp: Any, x: Any) -> Any:
    """erf on an array (NumPy has none). float64: to double precision (``erf_array``);
    other dtypes: Numerical Recipes' erfc Chebyshev fit, |error| < 1.2e-7, below float32
    resolution and 15x faster, which is what GELU is trained in."""
    if x.dtype == np.float64:
        return erf_array(xp, x)
    t = 1.0 / (1.0 + 0.5 * xp.abs(x))
    poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    y = 1 - t * xp.exp(-x * x + poly)
    return xp.where(x >= 0, y, -y).astype(x.dtype, copy=False)


def softmax_dim(op: str, dim: Any, ndim: int) -> int:
    """``dim`` checked and made non-negative (a 0-d tensor has dims -1 and 0): IndexError otherwise."""
    return normalize_dim(op, int(dim), ndim)


def _log_softmax(ctx: Context, x: Any, dim: int) -> Any:
    """The log_softmax kernel, or an empty result for an empty input (no reduction to run)."""
    if x.size == 0:
        return x.astype(x.dtype, copy=True)
    return ctx.kernels.log_softmax_forward(x, axis=dim)


class SoftmaxFunction(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, dim: int = -1) -> Any:
        floating_only("softmax", x)
        dim = softmax_dim("softmax", dim, x.ndim)
        out = ctx.xp.exp(_log_softmax(ctx, x, dim))
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (p,) = ctx.saved_tensors
        if not _fusable(g, p):
            return p * (g - (g * p).sum(axis=ctx.dim, keepdims=True)), None
        d = g * p
        total = d.sum(axis=ctx.dim, keepdims=True)
        ctx.xp.subtract(g, total, out=d)
        d *= p  # p * (g - sum(g * p)), in one temporary
        return d, None


class LogSoftmaxFunction(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, dim: int = -1) -> Any:
        floating_only("log_softmax", x)
        dim = softmax_dim("log_softmax", dim, x.ndim)
        out = _log_softmax(ctx, x, dim)
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (lp,) = ctx.saved_tensors
        xp = ctx.xp
        total = g.sum(axis=ctx.dim, keepdims=True)
        if not _fusable(g, lp):
            return g - xp.exp(lp) * total, None
        d = xp.exp(lp)
        d *= total
        xp.subtract(g, d, out=d)  # g - exp(lp) * sum(g), in one temporary
        return d, None


class LogSumExp(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, dim: int = -1, keepdim: bool = False) -> Any:
        xp = ctx.xp
        if not is_floating_or_complex(x.dtype):  # bool and integers in the default dtype, as PyTorch
            x = x.astype(get_default_dtype())
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


# ---------------------------------------------------------------------- the PyTorch activation set
# Each backward follows PyTorch's choice at the kinks (hardtanh passes no gradient at its
# bounds, hardswish none at -3 and all of it at +3, elu takes the negative branch at 0), so gradients
# match torch's exactly, not only almost everywhere.


