"""Image pooling layers with PyTorch's signatures: MaxPool2d (return_indices), AvgPool2d,
AdaptiveAvgPool2d and AdaptiveMaxPool2d. The 1-d and 3-d layers, LPPool and MaxUnpool are the PyTorch
surface, in pooling_extra.py."""
from __future__ import annotations

from typing import Any

from tinyflow._lazy_names import attach, by_module
from tinyflow.kernels.shapes import IntPair
from tinyflow.nn import functional as F
from tinyflow.nn.modules.module import Module
from tinyflow.tensor import Tensor

__all__ = ["MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d"]


class _MaxPoolNd(Module):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool2d(_MaxPoolNd):
    """Max over (possibly overlapping) windows: AlexNet's MaxPool2d(3, 2). With
    ``return_indices=True`` it returns (values, indices) for ``MaxUnpool2d``."""

    def forward(self, input: Tensor) -> Any:  # noqa: A002
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)


class AvgPool2d(Module):
    """Mean over windows; padding counts in the divisor unless count_include_pad=False."""

    def __init__(self, kernel_size: IntPair, stride: IntPair | None = None, padding: IntPair = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptiveNd(Module):
    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(_AdaptiveNd):
    """Average to a fixed output size whatever the input size (torchvision's (6, 6) / (1, 1))."""

    def __init__(self, output_size: int | None | tuple[int | None, int | None]) -> None:
        super().__init__(output_size)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveMaxPool2d(_AdaptiveNd):
    def forward(self, input: Tensor) -> Any:  # noqa: A002
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


# PyTorch's module path names the rest too (torch.nn.modules.pooling.<Name>): they live in pooling_extra.py,
# the PyTorch surface, and load from there the first time one of them is asked for here.
attach(__name__, by_module({"tinyflow.nn.modules.pooling_extra": (
    "MaxPool1d", "MaxPool3d", "AvgPool1d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
    "AdaptiveMaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "LPPool1d", "LPPool2d", "LPPool3d",
)}, submodules=False))  # and in __all__, as PyTorch lists them
