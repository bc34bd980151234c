"""Pooling ops: max, average and adaptive pooling (NCHW, PyTorch semantics); max-unpooling is the
PyTorch surface, in pool_extra.py.

Max and average pooling call the pool kernels through ``ctx.kernels`` (``tinyflow.kernels.pool``
on the CPU, its CUDA twin of the same names on a GPU); adaptive average pooling is two small
GEMMs with averaging matrices, which handles PyTorch's uneven, overlapping adaptive windows
exactly with no loop at all. The argument checks are F's (tinyflow/nn/functional/pooling.py).
"""
from __future__ import annotations

import math

import numpy as np

from tinyflow.autograd import Function
from tinyflow.ops.elementwise import floating_only, floating_or_int64, not_implemented_for
from tinyflow.ops.linear import matmul_array

__all__ = ["MaxPool2dFunction", "AvgPool2dFunction", "AdaptiveAvgPool2dFunction", "AdaptiveMaxPool2dFunction"]


class MaxPool2dFunction(Function):
    """Max over sliding windows; backward routes each gradient to its window's argmax."""

    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices=False):
        if x.dtype.kind == "b":
            raise not_implemented_for("max_pool2d", x.dtype)
        out, argmax = ctx.kernels.maxpool2d_forward(x, kernel_size, stride, padding, dilation, ceil_mode)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(argmax)
        ctx.args = (x.shape, kernel_size, stride, padding, dilation)
        if return_indices:
            return out, _flat_indices(ctx.xp, argmax, x.shape, kernel_size, stride, padding, dilation)
        return out

    @staticmethod
    def backward(ctx, gout, *_):
        (argmax,) = ctx.saved_tensors
        return ctx.kernels.maxpool2d_backward(gout, argmax, *ctx.args)


def _flat_indices(xp, argmax, x_shape, kernel_size, stride, padding, dilation):
    """PyTorch's return_indices: each window's maximum as a flat index ``row * W + col`` into its
    input plane (int64), from the kernels' window offsets ``i * kw + j``."""
    h, w = x_shape[-2:]
    oh, ow = argmax.shape[-2:]
    kw = kernel_size[1]
    offset = argmax.astype(np.int64)
    rows = xp.arange(oh).reshape(-1, 1) * stride[0] - padding[0] + (offset // kw) * dilation[0]
    cols = xp.arange(ow).reshape(1, -1) * stride[1] - padding[1] + (offset % kw) * dilation[1]
    return rows * w + cols


class AvgPool2dFunction(Function):
    """Mean over sliding windows (divisor as PyTorch's count_include_pad / ceil_mode rules)."""

    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, ceil_mode, count_include_pad):
        floating_or_int64("avg_pool2d", x)  # int64 divides as C does (kernels/pool.py)
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
    """Mean over PyTorch's adaptive windows.

    Where the output tiles the input (H = k*OH, W = l*OW: AlexNet-224's 6x6 -> 6x6, global
    pooling) the windows are exactly avg_pool2d's with kernel = stride = (k, l), so both
    directions are the one pooling kernel of ``ctx.kernels``; otherwise out = A_h @ x @ A_w.T
    with averaging matrices A, and backward is the transposed products (no loop either way).
    """

    @staticmethod
    def forward(ctx, x, output_size):
        xp = ctx.xp
        floating_only("adaptive_avg_pool2d", x)
        h, w = x.shape[-2:]
        oh, ow = output_size
        ctx.shape = x.shape
        if h % oh == 0 and w % ow == 0:
            ctx.window = (h // oh, w // ow)
            planes = x.reshape(-1, 1, h, w)  # (N*C, 1, H, W): any leading dims
            out = ctx.kernels.avgpool2d_forward(planes, ctx.window, ctx.window)
            return out.reshape(*x.shape[:-2], oh, ow)  # (N, C, OH, OW)
        ctx.window = None
        ah = _adaptive_matrix(xp, h, oh, x.dtype)  # (OH, H)
        aw = _adaptive_matrix(xp, w, ow, x.dtype)  # (OW, W)
        ctx.mats = (ah, aw)
        return _left_right(xp, ah, x, aw.T)  # (N, C, OH, OW)

    @staticmethod
    def backward(ctx, gout):
        if ctx.window is not None:
            h, w = ctx.shape[-2:]
            planes = gout.reshape(-1, 1, *gout.shape[-2:])  # (N*C, 1, OH, OW)
            gx = ctx.kernels.avgpool2d_backward(planes, (planes.shape[0], 1, h, w), ctx.window, ctx.window)
            return gx.reshape(ctx.shape)  # (N, C, H, W)
        ah, aw = ctx.mats
        return _left_right(ctx.xp, ah.T, gout, aw)  # (N, C, H, W)


def _left_right(xp, left, x, right):
    """left @ x @ right for a batch x (..., H, W), each product one 2-D GEMM over the whole batch
    (``matmul_array`` also serves half precision, which CuPy's batched matmul cannot)."""
    y = matmul_array(xp, x, right)  # (..., H, W')
    return matmul_array(xp, y.swapaxes(-1, -2), left.T).swapaxes(-1, -2)  # (..., H', W')


def _adaptive_bounds(size: int, out: int, i: int) -> tuple[int, int]:
    """PyTorch's adaptive window i of ``out`` over ``size``: [floor(i*s/o), ceil((i+1)*s/o))."""
    return (i * size) // out, -(-((i + 1) * size) // out)


class AdaptiveMaxPool2dFunction(Function):
    """Max over PyTorch's adaptive windows; returns (values, flat indices into each H*W plane).

    One vectorised max per output cell (OH*OW is small: 1x1 to 7x7 in practice), over every
    image and channel at once; backward adds each cell's gradient at its argmax.
    """

    @staticmethod
    def forward(ctx, x, output_size):
        xp = ctx.xp
        floating_only("adaptive_max_pool2d", x)
        lead, (h, w) = x.shape[:-2], x.shape[-2:]
        oh, ow = output_size
        out = xp.empty(lead + (oh, ow), dtype=x.dtype)
        index = xp.empty(lead + (oh, ow), dtype=np.int64)
        cells = []
        for i in range(oh):
            h0, h1 = _adaptive_bounds(h, oh, i)
            for j in range(ow):
                w0, w1 = _adaptive_bounds(w, ow, j)
                window = x[..., h0:h1, w0:w1].reshape(lead + (-1,))
                arg = window.argmax(axis=-1)  # the first maximum (or the first NaN), as PyTorch
                out[..., i, j] = xp.take_along_axis(window, arg[..., None], axis=-1)[..., 0]
                index[..., i, j] = (h0 + arg // (w1 - w0)) * w + w0 + arg % (w1 - w0)
                cells.append((h0, h1, w0, w1, arg))
        ctx.cells, ctx.shape = cells, x.shape
        return out, index

    @staticmethod
    def backward(ctx, gout, *_):
        xp = ctx.xp
        gx = xp.zeros(ctx.shape, dtype=gout.dtype)
        ow = gout.shape[-1]
        for k, (h0, h1, w0, w1, arg) in enumerate(ctx.cells):
            size = (h1 - h0) * (w1 - w0)
            hot = (xp.arange(size) == arg[..., None]) * gout[..., k // ow, k % ow][..., None]
            gx[..., h0:h1, w0:w1] += hot.reshape(hot.shape[:-1] + (h1 - h0, w1 - w0)).astype(gout.dtype)
        return gx, None
