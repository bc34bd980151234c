"""CUDA twins of ``tinyflow/kernels/pool.py``: max and average pooling over csrc/pool.cu.

Every floating dtype (float32, float64, float16, bfloat16) has its kernel, so pooling never
falls back to the reference's per-tap slab loop on a GPU; fp16 / bf16 sum in fp32 and round
once. One thread per output element (forward) or per input element (backward, gathering from
the windows that cover it), flat over the tensor with 32-bit indices: the host computes the
magic numbers that decode a flat index without a division (``_fastdiv``), and launches a tensor
of 2^31 elements or more a run of whole planes at a time. The argmax of max pooling is the int32
offset ``i*kw + j`` of the winner inside its window (the CPU reference keeps uint8 where it fits).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.kernels import pool as reference
from tinyflow.kernels.shapes import pool_output_shape
from tinyflow_cuda.kernels import _fastdiv
from tinyflow_cuda.kernels._fastdiv import magic
from tinyflow_cuda.kernels._launch import KernelCall

__all__ = ["maxpool2d_forward", "maxpool2d_backward", "avgpool2d_forward", "avgpool2d_backward"]

Array = Any
Pair = tuple[int, int]


def maxpool2d_forward(x: Array, kernel_size: Pair, stride: Pair, padding: Pair = (0, 0),
                      dilation: Pair = (1, 1), ceil_mode: bool = False) -> tuple[Array, Array]:
    """Max over each window of ``x`` (N, C, H, W): (out, argmax int32 window offset i*kw+j)."""
    call = KernelCall("maxpool2d_forward", x, op="max_pool2d")
    if not call.supported:  # not a floating dtype
        return reference.maxpool2d_forward(x, kernel_size, stride, padding, dilation, ceil_mode)
    with call:
        x = call.contiguous(x)
        n, c, h, w = x.shape
        oh, ow = pool_output_shape(h, w, kernel_size, stride, padding, dilation, ceil_mode)
        out = call.empty((n, c, oh, ow))  # (N, C, OH, OW)
        argmax = call.empty((n, c, oh, ow), np.int32)
        if out.size == 0:
            return out, argmax
        geometry = [h, w, *kernel_size, *stride, *padding, *dilation, oh, ow, magic(ow), magic(oh * ow)]
        planes = (x.reshape(n * c, h, w), out.reshape(n * c, oh, ow), argmax.reshape(n * c, oh, ow))
        for p0, p1 in _fastdiv.chunks(n * c, max(h * w, oh * ow)):
            xs, os_, am = (a[p0:p1] for a in planes)
            call.launch(os_.size, [xs, os_, am, os_.size, *geometry])
        return out, argmax


def maxpool2d_backward(gout: Array, argmax: Array, x_shape: tuple[int, int, int, int],
                       kernel_size: Pair, stride: Pair, padding: Pair = (0, 0),
                       dilation: Pair = (1, 1)) -> Array:
    """Route each output gradient to its window's winner; returns (N, C, H, W)."""
    call = KernelCall("maxpool2d_backward", gout, op="max_pool2d backward")
    if not call.supported:  # not a floating dtype
        return reference.maxpool2d_backward(gout, argmax, x_shape, kernel_size, stride, padding,
                                            dilation)
    with call:
        gout, argmax = call.contiguous(gout, argmax)
        if np.dtype(argmax.dtype) != np.int32:  # the CPU reference's uint8 offsets, moved here
            argmax = argmax.astype(np.int32)
        n, c, h, w = x_shape
        oh, ow = gout.shape[2:]
        dx = call.empty(tuple(x_shape))  # (N, C, H, W)
        if dx.size == 0:
            return dx
        if gout.size == 0:
            dx.fill(0)
            return dx
        (sh, sw), (dh, dw) = stride, dilation
        geometry = [h, w, *kernel_size, *stride, *padding, *dilation, oh, ow,
                    magic(w), magic(h * w), magic(sh), magic(sw), magic(dh), magic(dw)]
        planes = (gout.reshape(n * c, oh, ow), argmax.reshape(n * c, oh, ow), dx.reshape(n * c, h, w))
        for p0, p1 in _fastdiv.chunks(n * c, max(h * w, oh * ow)):
            g, a, d = (arr[p0:p1] for arr in planes)
            call.launch(d.size, [g, a, d, d.size, *geometry])
        return dx


def avgpool2d_forward(x: Array, kernel_size: Pair, stride: Pair, padding: Pair = (0, 0),
                      ceil_mode: bool = False, count_include_pad: bool = True) -> Array:
    """Mean over each window of ``x`` (N, C, H, W) -> (N, C, OH, OW), PyTorch's divisors."""
    call = KernelCall("avgpool2d_forward", x, op="avg_pool2d")
    if not call.supported:  # not a floating dtype
        return reference.avgpool2d_forward(x, kernel_size, stride, padding, ceil_mode,
                                           count_include_pad)
    with call:
        x = call.contiguous(x)
        n, c, h, w = x.shape
        oh, ow = pool_output_shape(h, w, kernel_size, stride, padding, (1, 1), ceil_mode)
        out = call.empty((n, c, oh, ow))  # (N, C, OH, OW)
        if out.size == 0:
            return out
        geometry = [h, w, *kernel_size, *stride, *padding, oh, ow, int(count_include_pad),
                    magic(ow), magic(oh * ow)]
        planes = (x.reshape(n * c, h, w), out.reshape(n * c, oh, ow))
        for p0, p1 in _fastdiv.chunks(n * c, max(h * w, oh * ow)):
            xs, os_ = (a[p0:p1] for a in planes)
            call.launch(os_.size, [xs, os_, os_.size, *geometry])
        return out


def avgpool2d_backward(gout: Array, x_shape: tuple[int, int, int, int], kernel_size: Pair,
                       stride: Pair, padding: Pair = (0, 0), ceil_mode: bool = False,
                       count_include_pad: bool = True) -> Array:
    """Spread each output gradient evenly over its window; returns (N, C, H, W)."""
    call = KernelCall("avgpool2d_backward", gout, op="avg_pool2d backward")
    if not call.supported:  # not a floating dtype
        return reference.avgpool2d_backward(gout, x_shape, kernel_size, stride, padding,
                                            ceil_mode, count_include_pad)
    with call:
        gout = call.contiguous(gout)
        n, c, h, w = x_shape
        oh, ow = gout.shape[2:]
        dx = call.empty(tuple(x_shape))  # (N, C, H, W)
        if dx.size == 0:
            return dx
        if gout.size == 0:
            dx.fill(0)
            return dx
        sh, sw = stride
        geometry = [h, w, *kernel_size, *stride, *padding, oh, ow, int(count_include_pad),
                    magic(w), magic(h * w), magic(sh), magic(sw)]
        planes = (gout.reshape(n * c, oh, ow), dx.reshape(n * c, h, w))
        for p0, p1 in _fastdiv.chunks(n * c, max(h * w, oh * ow)):
            g, d = (a[p0:p1] for a in planes)
            call.launch(d.size, [g, d, d.size, *geometry])
        return dx
