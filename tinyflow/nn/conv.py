"""Conv2d: the convolution layer, with PyTorch's signature, parameter names and initialisation."""
from __future__ import annotations

from typing import Any

from tinyflow.kernels.shapes import IntPair, _pair
from tinyflow.nn import functional as F
from tinyflow.nn import init
from tinyflow.nn.module import Module
from tinyflow.nn.parameter import Parameter
from tinyflow.tensor import Tensor, empty

__all__ = ["Conv2d"]


class Conv2d(Module):
    """2-D convolution over (N, C, H, W): weight (O, C/groups, kh, kw) and bias (O,).

    Initialised as PyTorch does (kaiming-uniform with a=sqrt(5), i.e. U(-1/sqrt(fan_in),
    1/sqrt(fan_in)) for both weight and bias), so a fresh layer behaves like torch's.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntPair, stride: IntPair = 1,
                 padding: IntPair | str = 0, dilation: IntPair = 1, groups: int = 1,
                 bias: bool = True, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels={in_channels} and out_channels={out_channels} must "
                             f"both be divisible by groups={groups}")
        if padding_mode != "zeros":
            raise ValueError(f"Conv2d: only padding_mode='zeros' is supported, got {padding_mode!r}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _pair(kernel_size, "kernel_size", "Conv2d")
        self.stride = _pair(stride, "stride", "Conv2d")
        self.padding = padding if isinstance(padding, str) else _pair(padding, "padding", "Conv2d")
        self.dilation = _pair(dilation, "dilation", "Conv2d")
        self.padding_mode = padding_mode
        shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = Parameter(empty(*shape, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.default_linear_init_(self.weight, self.bias)

    def forward(self, x: Tensor) -> Tensor:
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding not in ((0, 0), "valid"):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s
