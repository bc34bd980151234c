"""CUDA twins of ``tinyflow/kernels/pool.py``: max and average pooling over csrc/pool.cu.

One thread per output element (forward) or per input element (backward, gathering from the
windows that cover it), so neither direction needs an atomic add. The argmax of max pooling is
the int32 offset ``i*kw + j`` of the winner inside its window (the CPU reference keeps uint8).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.kernels import pool as reference
from tinyflow.kernels.shapes import pool_output_shape
from tinyflow_cuda.kernels._launch import KernelCall

__all__ = ["maxpool2d_forward", "maxpool2d_backward", "avgpool2d_forward", "avgpool2d_backward"]

Array = Any
Pair = tuple[int, int]


def maxpool2d_forward(x: Array, kernel_size: Pair, stride: Pair, padding: Pair = (0, 0),
                      dilation: Pair = (1, 1), ceil_mode: bool = False) -> tuple[Array, Array]:
    """Max over each window of ``x`` (N, C, H, W): (out, argmax int32 window offset i*kw+j)."""
    call = KernelCall("maxpool2d_forward", x, op="max_pool2d")
    if not call.supported:
        return reference.maxpool2d_forward(x, kernel_size, stride, padding, dilation, ceil_mode)
    with call:
        x = call.contiguous(x)
        n, c, h, w = x.shape
        oh, ow = pool_output_shape(h, w, kernel_size, stride, padding, dilation, ceil_mode)
        out = call.empty((n, c, oh, ow))  # (N, C, OH, OW)
        argmax = call.empty((n, c, oh, ow), np.int32)
        call.launch(out.size, [x, out, argmax, n, c, h, w, *kernel_size, *stride, *padding,
                               *dilation, oh, ow])
        return out, argmax


def maxpool2d_backward(gout: Array, argmax: Array, x_shape: tuple[int, int, int, int],
                       kernel_size: Pair, stride: Pair, padding: Pair = (0, 0),
                       dilation: Pair = (1, 1)) -> Array:
    """Route each output gradient to its window's winner; returns (N, C, H, W)."""
    call = KernelCall("maxpool2d_backward", gout, op="max_pool2d backward")
    if not call.supported or np.dtype(argmax.dtype) != np.int32:
        return reference.maxpool2d_backward(gout, argmax, x_shape, kernel_size, stride, padding,
                                            dilation)
    with call:
        gout, argmax = call.contiguous(gout, argmax)
        n, c, h, w = x_shape
        oh, ow = gout.shape[2:]
        dx = call.empty(tuple(x_shape))
        call.launch(dx.size, [gout, argmax, dx, n, c, h, w, *kernel_size, *stride, *padding,
                              *dilation, oh, ow])
        return dx


def avgpool2d_forward(x: Array, kernel_size: Pair, stride: Pair, padding: Pair = (0, 0),
                      ceil_mode: bool = False, count_include_pad: bool = True) -> Array:
    """Mean over each window of ``x`` (N, C, H, W) -> (N, C, OH, OW), PyTorch's divisors."""
    call = KernelCall("avgpool2d_forward", x, op="avg_pool2d")
    if not call.supported:
        return reference.avgpool2d_forward(x, kernel_size, stride, padding, ceil_mode,
                                           count_include_pad)
    with call:
        x = call.contiguous(x)
        n, c, h, w = x.shape
        oh, ow = pool_output_shape(h, w, kernel_size, stride, padding, (1, 1), ceil_mode)
        out = call.empty((n, c, oh, ow))
        call.launch(out.size, [x, out, n, c, h, w, *kernel_size, *stride, *padding, oh, ow,
                               int(count_include_pad)])
        return out


def avgpool2d_backward(gout: Array, x_shape: tuple[int, int, int, int], kernel_size: Pair,
                       stride: Pair, padding: Pair = (0, 0), ceil_mode: bool = False,
                       count_include_pad: bool = True) -> Array:
    """Spread each output gradient evenly over its window; returns (N, C, H, W)."""
    call = KernelCall("avgpool2d_backward", gout, op="avg_pool2d backward")
    if not call.supported:
        return reference.avgpool2d_backward(gout, x_shape, kernel_size, stride, padding,
                                            ceil_mode, count_include_pad)
    with call:
        gout = call.contiguous(gout)
        n, c, h, w = x_shape
        oh, ow = gout.shape[2:]
        dx = call.empty(tuple(x_shape))
        call.launch(dx.size, [gout, dx, n, c, h, w, *kernel_size, *stride, *padding, oh, ow,
                              int(count_include_pad)])
        return dx
