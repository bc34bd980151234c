"""The rest of F's activations (elu, selu, celu, silu, mish, softplus, softsign, hardtanh, relu6,
hardsigmoid, hardswish, logsigmoid, prelu, rrelu, threshold, the shrinks, glu, gumbel_softmax,
softmin): the PyTorch surface. The framework's (relu, leaky_relu, gelu, sigmoid, tanh, softmax,
log_softmax, logsumexp) are in activation.py.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow import amp, promotion
from tinyflow.nn.functional._utils import FunctionalError, _as_constant
from tinyflow.nn.functional.activation import (
    _floating,
    _in_place,
    _softmax_dim,
    _softmax_input,
    _tensor_input,
    leaky_relu,
    softmax,
)
from tinyflow.ops.activation import SoftmaxFunction
from tinyflow.ops.activation_extra import (
    ELUFunction,
    HardsigmoidFunction,
    HardswishFunction,
    HardtanhFunction,
    LogSigmoidFunction,
    MishFunction,
    PReLUFunction,
    SiLUFunction,
    SoftplusFunction,
    SoftsignFunction,
)
from tinyflow.random import rng
from tinyflow.tensor import Tensor, tensor, where

__all__ = [
    "elu_", "celu_", "selu_", "hardtanh_", "threshold_", "rrelu_", "elu", "selu", "celu", "silu",
    "mish", "softplus", "softsign", "hardtanh", "relu6", "hardsigmoid", "hardswish", "logsigmoid",
    "prelu", "rrelu", "threshold", "hardshrink", "softshrink", "tanhshrink", "glu",
    "gumbel_softmax", "softmin",
]

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
    slopes = _as_constant(rng(None).uniform(lower, upper, size=input.shape), input)
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
    gumbels = _as_constant(-np.log(-np.log(np.maximum(u, 1e-300))), logits)  # Gumbel(0, 1) samples
    y_soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    xp = logits.device.xp
    index = xp.expand_dims(xp.argmax(y_soft.array, axis=dim), dim)
    hot = xp.zeros(y_soft.shape, dtype=y_soft.dtype)
    xp.put_along_axis(hot, index, 1.0, axis=dim)
    return Tensor._from_array(hot, device=logits.device) - y_soft.detach() + y_soft


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:  # noqa: A002
    dim = _softmax_dim("softmin", input.ndim) if dim is None else dim
    return SoftmaxFunction.apply(*amp.float32_inputs(_softmax_input(-input, dtype)), dim)
