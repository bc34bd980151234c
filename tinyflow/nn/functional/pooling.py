"""Pooling over images: max_pool2d, avg_pool2d and the adaptive forms, which check their arguments
and call the differentiable ops of tinyflow/ops/pool.py. The 1-d and 3-d forms, lp pooling and
max-unpooling are the PyTorch surface, in pooling_extra.py (built on these)."""
from __future__ import annotations

from typing import Any

from tinyflow.kernels.shapes import IntPair, _pair, pool_output_shape
from tinyflow.nn.functional._utils import FunctionalError
from tinyflow.ops.pool import AdaptiveAvgPool2dFunction, AdaptiveMaxPool2dFunction, AvgPool2dFunction, MaxPool2dFunction
from tinyflow.tensor import Tensor

__all__ = ["max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d"]


def _check_input(op: str, x: Tensor) -> None:
    if x.ndim not in (3, 4):
        raise FunctionalError(f"{op}: input must be (N, C, H, W) or (C, H, W), got shape {tuple(x.shape)}")


def _batched(x: Tensor) -> tuple[Tensor, bool]:
    return (x.reshape(1, *x.shape), True) if x.ndim == 3 else (x, False)


def _pool_geometry(op: str, x: Tensor, kernel_size, stride, padding, dilation, ceil_mode):
    _check_input(op, x)
    k = _pair(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _pair(stride, "stride", op)
    p, d = _pair(padding, "padding", op), _pair(dilation, "dilation", op)
    if min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
        raise FunctionalError(f"{op}: need kernel_size, stride, dilation >= 1 and padding >= 0; got "
                         f"kernel_size={k}, stride={s}, padding={p}, dilation={d}")
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise FunctionalError(f"{op}: padding {p} must be at most half of kernel_size {k} (as in PyTorch)")
    oh, ow = pool_output_shape(x.shape[-2], x.shape[-1], k, s, p, d, ceil_mode)
    if oh < 1 or ow < 1:
        raise FunctionalError(f"{op}: input {tuple(x.shape)} is too small for kernel_size {k} with "
                         f"padding {p} and dilation {d} (output would be {oh}x{ow})")
    return k, s, p, d


def max_pool2d(input: Tensor, kernel_size: IntPair, stride: IntPair | None = None,  # noqa: A002
               padding: IntPair = 0, dilation: IntPair = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Any:
    """Max pooling over (N, C, H, W); stride defaults to kernel_size, as in PyTorch.

    With ``return_indices`` also the position of each maximum as a flat index into its
    (H, W) plane (int64), as ``max_unpool2d`` takes it.
    """
    k, s, p, d = _pool_geometry("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode)
    x, unbatched = _batched(input)
    out = MaxPool2dFunction.apply(x, k, s, p, d, bool(ceil_mode), bool(return_indices))
    if unbatched:
        out = tuple(o.reshape(*o.shape[1:]) for o in out) if return_indices else out.reshape(*out.shape[1:])
    return out


def max_pool2d_with_indices(input: Tensor, kernel_size: IntPair, stride: IntPair | None = None,  # noqa: A002
                            padding: IntPair = 0, dilation: IntPair = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple[Tensor, Tensor]:
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool2d(input: Tensor, kernel_size: IntPair, stride: IntPair | None = None,  # noqa: A002
               padding: IntPair = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Average pooling over (N, C, H, W); padding counts in the divisor by default (PyTorch).

    ``divisor_override`` divides each window's sum by that number instead."""
    k, s, p, _ = _pool_geometry("avg_pool2d", input, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None:
        if divisor_override == 0:
            raise FunctionalError("avg_pool2d: divisor_override must be non-zero")
        if ceil_mode:
            raise NotImplementedError("avg_pool2d: divisor_override with ceil_mode=True is not supported")
        if input.dtype == "int64":  # PyTorch divides the integer window sum, toward zero
            total = (avg_pool2d(input.double(), k, s, p, False, True) * (k[0] * k[1])).round()
            return (total / divisor_override).trunc().to(input.dtype)
        return avg_pool2d(input, k, s, p, False, True) * (k[0] * k[1] / divisor_override)
    x, unbatched = _batched(input)
    y = AvgPool2dFunction.apply(x, k, s, p, bool(ceil_mode), bool(count_include_pad))
    return y.reshape(*y.shape[1:]) if unbatched else y


def _adaptive_size(op: str, x: Tensor, output_size: Any) -> tuple[int, int]:
    _check_input(op, x)
    h, w = x.shape[-2:]
    if output_size is None or isinstance(output_size, int):
        output_size = (output_size, output_size)
    oh, ow = (h if output_size[0] is None else int(output_size[0]),
              w if output_size[1] is None else int(output_size[1]))
    if oh < 1 or ow < 1 or h < 1 or w < 1:
        raise FunctionalError(f"{op}: input {tuple(x.shape)} and output_size {(oh, ow)} must both be non-empty")
    return oh, ow


def adaptive_avg_pool2d(input: Tensor, output_size: int | None | tuple[int | None, int | None]) -> Tensor:  # noqa: A002
    """Average pooling to a fixed (OH, OW), windows as PyTorch's; None keeps that input size."""
    oh, ow = _adaptive_size("adaptive_avg_pool2d", input, output_size)
    if (oh, ow) == tuple(input.shape[-2:]) and input.is_floating_point():
        return input  # every window is one pixel: the identity (AlexNet's 6x6 -> 6x6 at 224)
    return AdaptiveAvgPool2dFunction.apply(input, (oh, ow))


def adaptive_max_pool2d(input: Tensor, output_size: int | None | tuple[int | None, int | None],  # noqa: A002
                        return_indices: bool = False) -> Any:
    """Max over PyTorch's adaptive windows to a fixed (OH, OW); indices as max_pool2d's."""
    oh, ow = _adaptive_size("adaptive_max_pool2d", input, output_size)
    out, indices = AdaptiveMaxPool2dFunction.apply(input, (oh, ow))
    return (out, indices) if return_indices else out
