"""Pooling ops: max, average and adaptive average pooling (NCHW, PyTorch semantics).

Max and average pooling call the pool kernels through ``ctx.kernels`` (``tinyflow.kernels.pool``
on the CPU, its CUDA twin of the same names on a GPU); adaptive average pooling is two small
GEMMs with averaging matrices, which handles PyTorch's uneven, overlapping adaptive windows
exactly with no loop at all. The argument checks are F's (tinyflow/nn/functional.py).
"""
from __future__ import annotations

import math

import numpy as np

from tinyflow.autograd import Function
from tinyflow.ops.linalg import matmul_array

__all__ = ["MaxPool2dFunction", "AvgPool2dFunction", "AdaptiveAvgPool2dFunction"]


class MaxPool2dFunction(Function):
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


class AvgPool2dFunction(Function):
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


class AdaptiveAvgPool2dFunction(Function):
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
