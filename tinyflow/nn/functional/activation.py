"""The activation functions (PyTorch's names, defaults and dtype rules), softmax and its kin,
and the in-place forms (``relu_``, ``elu_``, ...)."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tinyflow import amp, promotion
from tinyflow.nn.functional._utils import FunctionalError, _as_constant
from tinyflow.ops.activation import (
    ELUFunction,
    GELUFunction,
    HardsigmoidFunction,
    HardswishFunction,
    HardtanhFunction,
    LeakyReLUFunction,
    LogSigmoidFunction,
    LogSoftmaxFunction,
    LogSumExp,
    MishFunction,
    PReLUFunction,
    ReLUFunction,
    SiLUFunction,
    SoftmaxFunction,
    SoftplusFunction,
    SoftsignFunction,
)
from tinyflow.random import rng
from tinyflow.tensor import Tensor, tensor, where

__all__ = [
    "relu", "relu_", "elu_", "celu_", "selu_", "leaky_relu_", "hardtanh_", "threshold_", "rrelu_", "leaky_relu",
    "gelu", "sigmoid", "tanh", "elu", "selu", "celu", "silu", "mish", "softplus", "softsign", "hardtanh", "relu6",
    "hardsigmoid", "hardswish", "logsigmoid", "prelu", "rrelu", "threshold", "hardshrink", "softshrink",
    "tanhshrink", "glu", "gumbel_softmax", "softmax", "softmin", "log_softmax", "logsumexp",
]


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
    """``input`` overwritten with ``result`` (recorded by autograd, as PyTorch's in-place ops)."""
    return input.copy_(result)


def relu_(input: Tensor) -> Tensor:  # noqa: A002
    """relu in place: ``input`` is overwritten and returned."""
    return _in_place(input, relu(input))


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    return _in_place(input, elu(input, alpha))


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    return _in_place(input, celu(input, alpha))


def selu_(input: Tensor) -> Tensor:  # noqa: A002
    return _in_place(input, selu(input))


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:  # noqa: A002
    return _in_place(input, leaky_relu(input, negative_slope))


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:  # noqa: A002
    return _in_place(input, hardtanh(input, min_val, max_val))


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:  # noqa: A002
    return _in_place(input, globals()["threshold"](input, threshold, value))


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:  # noqa: A002
    return _in_place(input, rrelu(input, lower, upper, training))


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


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    _floating("elu", input)
    return ELUFunction.apply(input, float(alpha), 1.0, 1.0)


_SELU_ALPHA = 1.6732632423543772848170429916717


_SELU_SCALE = 1.0507009873554804934193349852946


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


def _softmax_dim(op: str, ndim: int) -> int:
    """PyTorch's legacy choice of dim when none is given (with its warning)."""
    warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call to include dim=X "
                  "as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def _softmax_input(input: Tensor, dtype: Any) -> Tensor:  # noqa: A002
    """The input in ``dtype`` if given; integer input in the default float dtype (PyTorch
    refuses it without ``dtype=``; tinyflow computes in float32 rather than raising)."""
    if dtype is None and not input.is_floating_point():
        from tinyflow.tensor import get_default_dtype

        dtype = get_default_dtype()
    return input if dtype is None else input.to(dtype)


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:  # noqa: A002
    """Softmax along ``dim`` (computed in ``dtype`` when given); in float32 inside
    ``tf.amp.autocast`` (as log_softmax and the losses)."""
    dim = _softmax_dim("softmax", input.ndim) if dim is None else dim
    return SoftmaxFunction.apply(*amp.float32_inputs(_softmax_input(input, dtype)), dim)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:  # noqa: A002
    dim = _softmax_dim("softmin", input.ndim) if dim is None else dim
    return SoftmaxFunction.apply(*amp.float32_inputs(_softmax_input(-input, dtype)), dim)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:  # noqa: A002
    dim = _softmax_dim("log_softmax", input.ndim) if dim is None else dim
    return LogSoftmaxFunction.apply(*amp.float32_inputs(_softmax_input(input, dtype)), dim)


def logsumexp(x: Tensor, dim: int = -1, keepdim: bool = False) -> Tensor:
    return LogSumExp.apply(x, dim, keepdim)
