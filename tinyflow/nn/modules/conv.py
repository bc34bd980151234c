"""Convolution layers: Conv1d, Conv2d, Conv3d and their transposes, with PyTorch's signatures,
parameter names and shapes, initialisation and padding modes, all on one _ConvNd."""
from __future__ import annotations

from typing import Any

from tinyflow.arg_parser import IntPair, pair, single, triple
from tinyflow.nn import functional as F
from tinyflow.nn import init
from tinyflow.nn.modules.module import Module
from tinyflow.nn.parameter import Parameter
from tinyflow.tensor import Tensor, empty

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(v: Any, n: int, name: str, op: str) -> tuple[int, ...]:
    if n == 3:
        return triple(v, name, op)
    if n == 2:
        return pair(v, name, op)
    return (single(v, name, op),)


class _ConvNd(Module):
    """The parameters and their initialisation, shared by every convolution layer.

    Initialised as PyTorch does (kaiming-uniform with a=sqrt(5), i.e. U(-1/sqrt(fan_in),
    1/sqrt(fan_in)) for both weight and bias), so a fresh layer behaves like torch's.
    """

    _dims = 2
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntPair, stride: IntPair = 1,
                 padding: IntPair | str = 0, dilation: IntPair = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self._build(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                    device, dtype, output_padding=0)

    def _build(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
               groups: int, bias: bool, padding_mode: str, device: Any, dtype: Any, output_padding: Any) -> None:
        name, n = type(self).__name__, self._dims
        if self._transposed and padding_mode != "zeros":
            raise ValueError(f"{name}: only 'zeros' padding mode is supported, got {padding_mode!r}")
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels={in_channels} and out_channels={out_channels} must "
                             f"both be divisible by groups={groups}")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got {padding_mode!r}")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"{name}: invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in _tuple(stride, n, "stride", name)):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            if self._transposed:
                raise ValueError(f"{name}: only int / tuple padding is supported")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _tuple(kernel_size, n, "kernel_size", name)
        self.stride = _tuple(stride, n, "stride", name)
        self.padding = padding if isinstance(padding, str) else _tuple(padding, n, "padding", name)
        self.dilation = _tuple(dilation, n, "dilation", name)
        self.output_padding = _tuple(output_padding, n, "output_padding", name)
        self.transposed = self._transposed
        self.padding_mode = padding_mode
        if self._transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = Parameter(empty(*shape, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.default_linear_init_(self.weight, self.bias)

    _functional: Any = None  # F.conv1d / conv2d / conv3d (or their transposes), set by each subclass

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:  # noqa: A002
        """The convolution of this dimensionality; a non-zero padding_mode pads first, as PyTorch."""
        if self.padding_mode != "zeros":
            input = F.pad(input, self._mode_padding(), mode=self.padding_mode)
            return self._functional(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return self._functional(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return self._conv_forward(input, self.weight, self.bias)

    def _mode_padding(self) -> tuple[int, ...]:
        """F.pad's widths (last dim first) for a padding_mode other than zeros."""
        widths: list[int] = []
        for i in reversed(range(self._dims)):
            if self.padding == "same":
                total = self.dilation[i] * (self.kernel_size[i] - 1)
                widths += [total // 2, total - total // 2]
            elif self.padding == "valid":
                widths += [0, 0]
            else:
                widths += [self.padding[i]] * 2
        return tuple(widths)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._dims:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._dims:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._dims:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W): weight (O, C/groups, kh, kw) and bias (O,)."""

    _functional = staticmethod(F.conv2d)


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntPair, stride: IntPair = 1,
                 padding: IntPair = 0, output_padding: IntPair = 0, groups: int = 1, bias: bool = True,
                 dilation: IntPair = 1, padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        Module.__init__(self)
        self._build(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                    device, dtype, output_padding)

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:  # noqa: A002
        return self._functional(input, self.weight, self.bias, self.stride, self.padding,
                                self._output_padding(input, output_size), self.groups, self.dilation)

    def _output_padding(self, input: Tensor, output_size: Any) -> tuple[int, ...]:  # noqa: A002
        """output_padding, or the one that gives ``output_size`` (PyTorch's rule and range)."""
        if output_size is None:
            return self.output_padding
        n = self._dims
        size = [int(s) for s in output_size]
        if len(size) > n:
            size = size[-n:]
        if len(size) != n:
            raise ValueError(f"{type(self).__name__}: output_size must have {n} or {n + 2} elements, got {output_size}")
        spatial = input.shape[-n:]
        pads = []
        for d in range(n):
            smallest = ((spatial[d] - 1) * self.stride[d] - 2 * self.padding[d]
                        + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            largest = smallest + self.stride[d] - 1
            if not smallest <= size[d] <= largest:
                raise ValueError(f"{type(self).__name__}: requested an output size of {size}, but valid sizes "
                                 f"range from {smallest} to {largest} (for an input of {list(spatial)})")
            pads.append(size[d] - smallest)
        return tuple(pads)


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-D convolution: weight (C_in, C_out/groups, kh, kw) and bias (C_out,)."""

    _functional = staticmethod(F.conv_transpose2d)


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L): weight (O, C/groups, k) and bias (O,)."""

    _dims = 1
    _functional = staticmethod(F.conv1d)


class Conv3d(_ConvNd):
    """3-D convolution over (N, C, D, H, W): weight (O, C/groups, kd, kh, kw) and bias (O,)."""

    _dims = 3
    _functional = staticmethod(F.conv3d)


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution: weight (C_in, C_out/groups, k) and bias (C_out,)."""

    _dims = 1
    _functional = staticmethod(F.conv_transpose1d)


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-D convolution: weight (C_in, C_out/groups, kd, kh, kw) and bias (C_out,)."""

    _dims = 3
    _functional = staticmethod(F.conv_transpose3d)
