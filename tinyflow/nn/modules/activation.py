"""Activation layers: ReLU, LeakyReLU, Tanh, Sigmoid, GELU, Softmax and LogSoftmax, with PyTorch's
constructor signatures, attributes and reprs (the rest of PyTorch's set is in activation_extra.py).

Each calls its ``F`` function; ``inplace=True`` is accepted and remembered (tinyflow computes a
new tensor, which is what a layer's caller uses).
"""
from __future__ import annotations

from tinyflow._lazy_names import attach, by_module
from tinyflow.nn import functional as F
from tinyflow.nn.modules.module import Module
from tinyflow.tensor import Tensor

__all__ = [
    "ReLU", "LeakyReLU", "Tanh", "Sigmoid", "GELU", "Softmax", "LogSoftmax",
]


class _Inplace(Module):
    """An activation with only PyTorch's ``inplace`` flag."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_Inplace):
    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.relu(input)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Tanh(Module):
    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return input.tanh()


class Sigmoid(Module):
    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return input.sigmoid()


class GELU(Module):
    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softmax(Module):
    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.log_softmax(input, self.dim)


# PyTorch's module path names the rest too (torch.nn.modules.activation.<Name>): they live in activation_extra.py,
# the PyTorch surface, and load from there the first time one of them is asked for here.
attach(__name__, by_module({"tinyflow.nn.modules.activation_extra": (
    "Softmin", "ELU", "SELU", "CELU", "SiLU", "Mish", "Softplus", "Softsign", "Hardtanh", "ReLU6",
    "Hardswish", "Hardsigmoid", "LogSigmoid", "PReLU", "RReLU", "Threshold", "Hardshrink",
    "Softshrink", "Tanhshrink", "GLU", "Softmax2d", "MultiheadAttention",
)}, submodules=False))  # and in __all__, as PyTorch lists them
