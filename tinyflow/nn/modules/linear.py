"""Linear and Identity layers. Bilinear is the PyTorch surface, in linear_extra.py."""
from __future__ import annotations

from typing import Any

from tinyflow._lazy_names import attach, by_module
from tinyflow.nn import functional as F
from tinyflow.nn import init
from tinyflow.nn.modules.module import Module
from tinyflow.nn.parameter import Parameter
from tinyflow.tensor import Tensor, empty

__all__ = ["Linear", "Identity"]


class Linear(Module):
    """y = x @ weight.T + bias, weight (out_features, in_features), PyTorch's initialisation."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(empty(out_features, in_features, device=device, dtype=dtype))
        self.bias = Parameter(empty(out_features, device=device, dtype=dtype)) if bias else None
        if not bias:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.default_linear_init_(self.weight, self.bias)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Identity(Module):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        return x


# PyTorch's module path names Bilinear too (torch.nn.modules.linear.Bilinear): it lives in linear_extra.py, the
# PyTorch surface, and loads from there the first time it is asked for here.
attach(__name__, by_module({"tinyflow.nn.modules.linear_extra": ("Bilinear",)}, submodules=False))
