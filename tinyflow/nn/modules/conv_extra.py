"""The rest of PyTorch's convolution layers: Conv1d, Conv3d, ConvTranspose1d and ConvTranspose3d: the
PyTorch surface. The framework's image layers (Conv2d, ConvTranspose2d) and the parameters and
initialisation every convolution shares (_ConvNd) are in conv.py."""
from __future__ import annotations

from typing import Any

from tinyflow.nn import functional as F
from tinyflow.nn.modules.conv import _ConvNd, _ConvTransposeNd
from tinyflow.tensor import Tensor

__all__ = ["Conv1d", "Conv3d", "ConvTranspose1d", "ConvTranspose3d"]


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L): weight (O, C/groups, k) and bias (O,)."""

    _dims = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)

    _functional = staticmethod(F.conv1d)


class Conv3d(_ConvNd):
    """3-D convolution over (N, C, D, H, W): weight (O, C/groups, kd, kh, kw) and bias (O,)."""

    _dims = 3

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)

    _functional = staticmethod(F.conv3d)


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution: weight (C_in, C_out/groups, k) and bias (C_out,)."""

    _dims = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f"ConvTranspose1d: only 'zeros' padding mode is supported, got {padding_mode!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, output_padding)

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:  # noqa: A002
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-D convolution: weight (C_in, C_out/groups, kd, kh, kw) and bias (C_out,)."""

    _dims = 3

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f"ConvTranspose3d: only 'zeros' padding mode is supported, got {padding_mode!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, output_padding)

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:  # noqa: A002
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)
