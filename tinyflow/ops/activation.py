"""Activations: each op's Function class and its F function (``tinyflow.nn.functional``), one file.

The ops: ReLU, LeakyReLU, GELU, sigmoid, tanh and the softmax family, each computed stably, then
the rest of PyTorch's set (elu / selu / celu, silu, mish, softplus, ..., prelu). Below them the F
functions: each checks its arguments and calls its op (``F.relu`` -> ``ReLUFunction``; the
``Function`` suffix where an nn layer shares the name), or composes Tensor ops where no op of its
own is needed (rrelu, threshold, the shrinks, glu, gumbel_softmax).
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from tinyflow import promotion
from tinyflow.amp import autocast_mode as amp
from tinyflow.arg_parser import FunctionalError, normalize_axis, normalize_dim
from tinyflow.autograd.function import Context, Function
from tinyflow.creation import as_constant, tensor, where
from tinyflow.dtypes import get_default_dtype, is_floating_or_complex
from tinyflow.ops.elementwise import floating_only
from tinyflow.random import rng
from tinyflow.tensor import Tensor

__all__ = [
    "ReLUFunction", "LeakyReLUFunction", "GELUFunction", "SigmoidFunction", "TanhFunction",
    "SoftmaxFunction", "LogSoftmaxFunction", "LogSumExp", "ELUFunction", "SiLUFunction", "MishFunction",
    "SoftplusFunction", "SoftsignFunction", "HardtanhFunction", "HardsigmoidFunction", "HardswishFunction",
    "LogSigmoidFunction", "PReLUFunction", "erf_array",
    "relu", "relu_", "leaky_relu_", "leaky_relu", "gelu", "sigmoid", "tanh", "softmax", "log_softmax",
    "logsumexp", "elu_", "celu_", "selu_", "hardtanh_", "threshold_", "rrelu_", "elu", "selu", "celu", "silu",
    "mish", "softplus", "softsign", "hardtanh", "relu6", "hardsigmoid", "hardswish", "logsigmoid",
    "prelu", "rrelu", "threshold", "hardshrink", "softshrink", "tanhshrink", "glu",
    "gumbel_softmax", "softmin",
]


def _fusable(g: Any, saved: Any) -> bool:
    """Whether a backward can build its result in one temporary of ``saved``'s kind: same dtype,
    and not 0-d (NumPy turns 0-d results into scalars, which cannot be written into)."""
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
    """Numerically stable logistic function on a raw array, in place on one temporary: with
    e = exp(-|a|) in (0, 1] (never overflows), 1/(1+e) for a >= 0 and e/(1+e) for a < 0."""
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
    """max(x, 0) through the kernels ``relu_forward`` / ``relu_backward`` (one each way on the GPU;
    backward from the saved output with no bool temporary)."""

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
        x = _opmath(xp, a)
        if approximate == "tanh":
            inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
            return (0.5 * x * (1 + xp.tanh(inner))).astype(a.dtype, copy=False)  # bfloat16 stays so
        out = 0.5 * x * (1 + _erf(xp, x / math.sqrt(2)))
        return xp.where(x == -math.inf, -0.0, out).astype(a.dtype, copy=False)  # x Phi(x) -> 0 as x -> -inf

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        a = _opmath(xp, ctx.saved_tensors[0])
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


def _opmath(xp: Any, a: Any) -> Any:
    """``a`` in float32 if it is float16 or bfloat16, as PyTorch computes half ops (1 + erf(x) cancels)."""
    return a.astype(xp.float32) if a.dtype.itemsize < 4 else a


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
        dim = normalize_axis("logsumexp", dim, x.ndim) or tuple(range(x.ndim))  # torch's errors for bad dims
        m = x.max(axis=dim, keepdims=True) if x.size else x.sum(axis=dim, keepdims=True)  # empty: log(0) = -inf
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


# ======================================================================= F (tinyflow.nn.functional)


def _tensor_input(op: str, input: Any) -> None:  # noqa: A002
    """PyTorch's TypeError for an activation given something other than a Tensor."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")


def _floating(op: str, input: Tensor) -> None:  # noqa: A002
    """PyTorch computes these activations for floating inputs only (NotImplementedError otherwise)."""
    _tensor_input(op, input)
    if not input.is_floating_point():
        raise NotImplementedError(f'"{op}" not implemented for {input.dtype} inputs; convert with .float()')


# ``inplace=True`` is accepted everywhere PyTorch has it; tinyflow returns a new tensor and leaves
# the input alone (see docs/pytorch.md), which is what ``x = F.relu(x, inplace=True)`` needs.
def relu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """max(x, 0); keeps the input's dtype (bool input is an error, as in PyTorch)."""
    _tensor_input("relu", input)
    return ReLUFunction.apply(input)


def _in_place(input: Tensor, result: Tensor) -> Tensor:  # noqa: A002
    """``input`` overwritten with ``result`` and returned (recorded by autograd, as PyTorch's
    in-place forms ``relu_``, ``elu_``, ...)."""
    return input.copy_(result)


def relu_(input: Tensor) -> Tensor:  # noqa: A002
    return _in_place(input, relu(input))


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:  # noqa: A002
    return _in_place(input, leaky_relu(input, negative_slope))


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:  # noqa: A002
    _floating("leaky_relu", input)
    return LeakyReLUFunction.apply(input, float(negative_slope))


def gelu(input: Tensor, approximate: str = "none") -> Tensor:  # noqa: A002
    if approximate not in ("none", "tanh"):
        raise FunctionalError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    _floating("gelu", input)
    return GELUFunction.apply(input, approximate)


def sigmoid(input: Tensor) -> Tensor:  # noqa: A002
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:  # noqa: A002
    return input.tanh()


def _implicit_dim(op: str, ndim: int) -> int:
    """PyTorch's legacy choice of dim when none is given (with its warning)."""
    warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call to include dim=X "
                  "as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def _softmax_input(input: Tensor, dtype: Any) -> Tensor:  # noqa: A002
    """The input in ``dtype`` if given (integer input needs it: the op refuses integers, as PyTorch)."""
    return input if dtype is None else input.to(dtype)


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:  # noqa: A002
    """Softmax along ``dim`` (computed in ``dtype`` when given); in float32 inside
    ``tf.amp.autocast`` (as log_softmax and the losses)."""
    dim = _implicit_dim("softmax", input.ndim) if dim is None else dim
    return SoftmaxFunction.apply(*amp.float32_inputs(_softmax_input(input, dtype)), dim)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:  # noqa: A002
    dim = _implicit_dim("log_softmax", input.ndim) if dim is None else dim
    return LogSoftmaxFunction.apply(*amp.float32_inputs(_softmax_input(input, dtype)), dim)


def logsumexp(input: Tensor, dim: int = -1, keepdim: bool = False) -> Tensor:  # noqa: A002
    return LogSumExp.apply(input, dim, keepdim)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    return _in_place(input, elu(input, alpha))


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    return _in_place(input, celu(input, alpha))


def selu_(input: Tensor) -> Tensor:  # noqa: A002
    return _in_place(input, selu(input))


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:  # noqa: A002
    return _in_place(input, hardtanh(input, min_val, max_val))


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:  # noqa: A002
    return _in_place(input, globals()["threshold"](input, threshold, value))


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:  # noqa: A002
    return _in_place(input, rrelu(input, lower, upper, training))


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    _floating("elu", input)
    return ELUFunction.apply(input, float(alpha), 1.0, 1.0)


def selu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """scale * elu(x, alpha) with the self-normalising constants."""
    _floating("selu", input)
    return ELUFunction.apply(input, _SELU_ALPHA, _SELU_SCALE, 1.0)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise RuntimeError("celu: alpha cannot be 0 (it divides the input)")
    _floating("celu", input)
    return ELUFunction.apply(input, float(alpha), 1.0, 1.0 / alpha)


def silu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    _floating("silu", input)
    return SiLUFunction.apply(input)


def mish(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    _floating("mish", input)
    return MishFunction.apply(input)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: A002
    """log(1 + exp(beta * x)) / beta; linear where beta * x > threshold."""
    _floating("softplus", input)
    return SoftplusFunction.apply(input, float(beta), float(threshold))


def softsign(input: Tensor) -> Tensor:  # noqa: A002
    """x / (1 + |x|); integer input gives the default float dtype, as PyTorch's composite."""
    if input.dtype == np.bool_:
        raise NotImplementedError('"softsign" not implemented for bool inputs (abs of bool); convert with .float()')
    return SoftsignFunction.apply(promotion.float_operand(input))


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    if min_val > max_val:
        raise FunctionalError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    _tensor_input("hardtanh", input)
    return HardtanhFunction.apply(input, float(min_val), float(max_val))


def relu6(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """min(max(x, 0), 6): hardtanh(x, 0, 6)."""
    _tensor_input("relu6", input)
    return HardtanhFunction.apply(input, 0.0, 6.0)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    _floating("hardsigmoid", input)
    return HardsigmoidFunction.apply(input)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    _floating("hardswish", input)
    return HardswishFunction.apply(input)


def logsigmoid(input: Tensor) -> Tensor:  # noqa: A002
    _floating("logsigmoid", input)
    return LogSigmoidFunction.apply(input)


def prelu(input: Tensor, weight: Tensor) -> Tensor:  # noqa: A002
    """x for x > 0, weight * x otherwise; weight has 1 element or one per channel (dim 1)."""
    n = weight.numel()
    channels = input.shape[1] if input.ndim >= 2 else 1
    if n != 1 and n != channels:
        raise FunctionalError(f"prelu: weight has {n} elements but input {tuple(input.shape)} has {channels} "
                         "channels (dim 1); use 1 or num_channels parameters")
    return PReLUFunction.apply(input, weight)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,  # noqa: A002
          inplace: bool = False) -> Tensor:
    """leaky_relu with slope (lower + upper) / 2; in training a slope drawn per element from U(lower, upper)."""
    if not training:
        return leaky_relu(input, (lower + upper) / 2)
    slopes = as_constant(rng(None).uniform(lower, upper, size=input.shape), input)
    return where(input >= 0, input, input * slopes)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:  # noqa: A002
    """x where x > threshold, else value, in the input's dtype (NaN stays NaN, as PyTorch)."""
    _tensor_input("threshold", input)
    if input.dtype == np.bool_:
        raise NotImplementedError('"threshold" not implemented for bool inputs; convert with .float() or .long()')
    return where(input <= threshold, tensor(value, dtype=input.dtype, device=input.device), input)


def _nan_or_zero(input: Tensor) -> Tensor:  # noqa: A002
    """0 where ``input`` is a number, NaN (without a gradient) where it is NaN: the shrink
    functions' middle branch, which lets NaN through as PyTorch does."""
    return where(input.isnan(), input.detach(), tensor(0.0, dtype=input.dtype, device=input.device))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:  # noqa: A002
    """x where |x| > lambd, else 0."""
    _floating("hardshrink", input)
    return where((input > lambd) | (input < -lambd), input, _nan_or_zero(input))


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:  # noqa: A002
    """x - lambd where x > lambd, x + lambd where x < -lambd, else 0."""
    if lambd < 0:
        raise FunctionalError(f"softshrink: lambda must be >= 0, got {lambd}")
    _floating("softshrink", input)
    return where(input > lambd, input - lambd, where(input < -lambd, input + lambd, _nan_or_zero(input)))


def tanhshrink(input: Tensor) -> Tensor:  # noqa: A002
    """x - tanh(x)."""
    if input.dtype == np.bool_:
        raise RuntimeError("tanhshrink: subtraction of bool tensors is not supported; convert with .float()")
    return input - input.tanh()


def glu(input: Tensor, dim: int = -1) -> Tensor:  # noqa: A002
    """a * sigmoid(b) for the two halves a, b of ``input`` along ``dim``."""
    if input.ndim == 0 or input.shape[dim] % 2:
        raise FunctionalError(f"glu: halving dimension {dim} of input {tuple(input.shape)} needs an even size")
    _floating("glu", input)
    a, b = input.chunk(2, dim)
    return a * b.sigmoid()


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """softmax((logits + Gumbel noise) / tau); with ``hard`` the one-hot of its argmax in the
    forward pass and the soft sample's gradient (straight-through), as PyTorch."""
    u = rng(None).random(tuple(logits.shape))
    gumbels = as_constant(-np.log(-np.log(np.maximum(u, 1e-300))), logits)  # Gumbel(0, 1) samples
    y_soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    xp = logits.device.xp
    index = xp.expand_dims(xp.argmax(y_soft.array, axis=dim), dim)
    hot = xp.zeros(y_soft.shape, dtype=y_soft.dtype)
    xp.put_along_axis(hot, index, 1.0, axis=dim)
    return Tensor._from_array(hot, device=logits.device) - y_soft.detach() + y_soft


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:  # noqa: A002
    dim = _implicit_dim("softmin", input.ndim) if dim is None else dim
    return SoftmaxFunction.apply(*amp.float32_inputs(_softmax_input(-input, dtype)), dim)
