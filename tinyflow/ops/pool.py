"""Pooling ops: max_pool2d, avg_pool2d, adaptive_avg_pool2d (NCHW, PyTorch semantics).

max and average pooling call the pool kernels through ``ctx.kernels`` (``tinyflow.kernels.pool``
on the CPU, its CUDA twin of the same names on a GPU); adaptive average pooling is two small GEMMs with averaging matrices, which
handles PyTorch's uneven, overlapping adaptive windows exactly with no loop at all.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Union

import numpy as np

from tinyflow.autograd import Function
from tinyflow.kernels.pool import pool_output_shape
from tinyflow.ops.conv import _pair
from tinyflow.ops.linalg import matmul_array

if TYPE_CHECKING:
    from tinyflow.tensor import Tensor

__all__ = ["MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "max_pool2d", "avg_pool2d",
           "adaptive_avg_pool2d"]

IntPair = Union[int, tuple[int, int]]


class MaxPool2d(Function):
    """Max over sliding windows; backward routes each gradient to its window's argmax."""

    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, dilation, ceil_mode):
        out, argmax = ctx.kernels.maxpool2d_forward(x, kernel_size, stride, padding, dilation, ceil_mode)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(argmax)
        ctx.args = (x.shape, kernel_size, stride, padding, dilation)
        return out

    @staticmethod
    def backward(ctx, gout):
        (argmax,) = ctx.saved_tensors
        return ctx.kernels.maxpool2d_backward(gout, argmax, *ctx.args)


class AvgPool2d(Function):
    """Mean over sliding windows (divisor as PyTorch's count_include_pad / ceil_mode rules)."""

    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, ceil_mode, count_include_pad):
        ctx.args = (x.shape, kernel_size, stride, padding, ceil_mode, count_include_pad)
        return ctx.kernels.avgpool2d_forward(x, kernel_size, stride, padding, ceil_mode, count_include_pad)

    @staticmethod
    def backward(ctx, gout):
        return ctx.kernels.avgpool2d_backward(gout, *ctx.args)


def _adaptive_matrix(xp, size: int, out: int, dtype):
    """(out, size) averaging matrix of PyTorch's adaptive windows [floor(i*s/o), ceil((i+1)*s/o))."""
    m = np.zeros((out, size), dtype=dtype)
    for i in range(out):  # out is a handful of rows (e.g. 6 or 1): built once per call
        start, end = (i * size) // out, math.ceil((i + 1) * size / out)
        m[i, start:end] = 1.0 / (end - start)
    return xp.asarray(m)


class AdaptiveAvgPool2d(Function):
    """out = A_h @ x @ A_w.T with averaging matrices A; backward is the transposed products."""

    @staticmethod
    def forward(ctx, x, output_size):
        xp = ctx.xp
        h, w = x.shape[-2:]
        ah = _adaptive_matrix(xp, h, output_size[0], x.dtype)  # (OH, H)
        aw = _adaptive_matrix(xp, w, output_size[1], x.dtype)  # (OW, W)
        ctx.mats = (ah, aw)
        return _left_right(xp, ah, x, aw.T)  # (N, C, OH, OW)

    @staticmethod
    def backward(ctx, gout):
        ah, aw = ctx.mats
        return _left_right(ctx.xp, ah.T, gout, aw)  # (N, C, H, W)


def _left_right(xp, left, x, right):
    """left @ x @ right for a batch x (..., H, W), each product one 2-D GEMM over the whole batch
    (``matmul_array`` also serves half precision, which CuPy's batched matmul cannot)."""
    y = matmul_array(xp, x, right)  # (..., H, W')
    return matmul_array(xp, y.swapaxes(-1, -2), left.T).swapaxes(-1, -2)  # (..., H', W')


def _check_input(op: str, x: Tensor) -> None:
    if x.ndim not in (3, 4):
        raise ValueError(f"{op}: input must be (N, C, H, W) or (C, H, W), got shape {tuple(x.shape)}")


def _batched(x: Tensor) -> tuple[Tensor, bool]:
    return (x.reshape(1, *x.shape), True) if x.ndim == 3 else (x, False)


def _pool_geometry(op: str, x: Tensor, kernel_size, stride, padding, dilation, ceil_mode):
    _check_input(op, x)
    k = _pair(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _pair(stride, "stride", op)
    p, d = _pair(padding, "padding", op), _pair(dilation, "dilation", op)
    if min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
        raise ValueError(f"{op}: need kernel_size, stride, dilation >= 1 and padding >= 0; got "
                         f"kernel_size={k}, stride={s}, padding={p}, dilation={d}")
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise ValueError(f"{op}: padding {p} must be at most half of kernel_size {k} (as in PyTorch)")
    oh, ow = pool_output_shape(x.shape[-2], x.shape[-1], k, s, p, d, ceil_mode)
    if oh < 1 or ow < 1:
        raise ValueError(f"{op}: input {tuple(x.shape)} is too small for kernel_size {k} with "
                         f"padding {p} and dilation {d} (output would be {oh}x{ow})")
    return k, s, p, d


def max_pool2d(x: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
               padding: IntPair = 0, dilation: IntPair = 1, ceil_mode: bool = False) -> Tensor:
    """Max pooling over (N, C, H, W); stride defaults to kernel_size, as in PyTorch."""
    k, s, p, d = _pool_geometry("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode)
    x, unbatched = _batched(x)
    y = MaxPool2d.apply(x, k, s, p, d, bool(ceil_mode))
    return y.reshape(*y.shape[1:]) if unbatched else y


def avg_pool2d(x: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
               padding: IntPair = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """Average pooling over (N, C, H, W); padding counts in the divisor by default (PyTorch)."""
    k, s, p, _ = _pool_geometry("avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode)
    x, unbatched = _batched(x)
    y = AvgPool2d.apply(x, k, s, p, bool(ceil_mode), bool(count_include_pad))
    return y.reshape(*y.shape[1:]) if unbatched else y


def adaptive_avg_pool2d(x: Tensor, output_size: Union[int, None, tuple[int | None, int | None]]) -> Tensor:
    """Average pooling to a fixed (OH, OW), windows as PyTorch's; None keeps that input size."""
    _check_input("adaptive_avg_pool2d", x)
    h, w = x.shape[-2:]
    if output_size is None or isinstance(output_size, int):
        output_size = (output_size, output_size)
    oh, ow = (h if output_size[0] is None else int(output_size[0]),
              w if output_size[1] is None else int(output_size[1]))
    if oh < 1 or ow < 1 or h < 1 or w < 1:
        raise ValueError(f"adaptive_avg_pool2d: input {tuple(x.shape)} and output_size {(oh, ow)} "
                         "must both be non-empty")
    if (oh, ow) == (h, w):
        return x  # every window is one pixel: the identity (AlexNet's 6x6 -> 6x6 at 224)
    return AdaptiveAvgPool2d.apply(x, (oh, ow))
