"""The framework's activation functions (relu, leaky_relu, gelu, sigmoid, tanh; PyTorch's names,
defaults and dtype rules), softmax and its kin, and the in-place forms (``relu_``, ...). The rest
of PyTorch's activations are in activation_extra.py."""
from __future__ import annotations

import warnings
from typing import Any

from tinyflow import amp
from tinyflow.nn.functional._utils import FunctionalError
from tinyflow.ops.activation import (
    GELUFunction,
    LeakyReLUFunction,
    LogSoftmaxFunction,
    LogSumExp,
    ReLUFunction,
    SoftmaxFunction,
)
from tinyflow.tensor import Tensor

__all__ = [
    "relu", "relu_", "leaky_relu_", "leaky_relu", "gelu", "sigmoid", "tanh", "softmax",
    "log_softmax", "logsumexp",
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


def _softmax_dim(op: str, ndim: int) -> int:
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
    dim = _softmax_dim("softmax", input.ndim) if dim is None else dim
    return SoftmaxFunction.apply(*amp.float32_inputs(_softmax_input(input, dtype)), dim)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:  # noqa: A002
    dim = _softmax_dim("log_softmax", input.ndim) if dim is None else dim
    return LogSoftmaxFunction.apply(*amp.float32_inputs(_softmax_input(input, dtype)), dim)


def logsumexp(input: Tensor, dim: int = -1, keepdim: bool = False) -> Tensor:  # noqa: A002
    return LogSumExp.apply(input, dim, keepdim)
