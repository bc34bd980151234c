"""CUDA twins of ``tinyflow/kernels/conv.py``: im2col and col2im over csrc/conv.cu.

Same layout as the reference: ``col`` is (C*kh*kw, N*OH*OW), rows (channel, kernel row, kernel
column), columns (image, output row, output column). The GEMMs around them are ``xp.matmul``
calls in ops/conv.py (cuBLAS through CuPy); see docs/cuda.md.
"""
from __future__ import annotations

from typing import Any

from tinyflow.kernels import conv as reference
from tinyflow.kernels.shapes import conv_output_size
from tinyflow_cuda.kernels._launch import KernelCall

__all__ = ["im2col", "col2im"]

Array = Any
Pair = tuple[int, int]


def _geometry(x_shape: tuple[int, ...], kernel_size: Pair, stride: Pair, padding: Pair,
              dilation: Pair) -> list[int]:
    """The kernels' shape arguments: N, C, H, W, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW."""
    n, c, h, w = x_shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    oh = conv_output_size(h, kh, sh, ph, dh)
    ow = conv_output_size(w, kw, sw, pw, dw)
    return [n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow]


def im2col(x: Array, kernel_size: Pair, stride: Pair = (1, 1), padding: Pair = (0, 0),
           dilation: Pair = (1, 1), out: Array | None = None) -> Array:
    """Unfold ``x`` (N, C, H, W) into the column matrix (C*kh*kw, N*OH*OW), one launch.

    ``out``, if given, is a C-contiguous workspace of that shape and dtype to write into.
    """
    call = KernelCall("im2col", x)
    if not call.supported or (out is not None and not out.flags.c_contiguous):
        return reference.im2col(x, kernel_size, stride, padding, dilation, out=out)
    with call:
        x = call.contiguous(x)
        geo = _geometry(x.shape, kernel_size, stride, padding, dilation)
        n, c, kh, kw, oh, ow = geo[0], geo[1], geo[4], geo[5], geo[12], geo[13]
        shape = (c * kh * kw, n * oh * ow)
        if out is None:
            out = call.empty(shape)
        elif tuple(out.shape) != shape or out.dtype != x.dtype:
            raise ValueError(f"im2col: out must be a {x.dtype} array of shape {shape}, "
                             f"got {out.dtype} {tuple(out.shape)}")
        # strides of (image n, row k, column l): column index is n * OH*OW + l
        call.launch(out.size, [x, out, *geo, oh * ow, n * oh * ow, 1])
        return out


def col2im(col: Array, x_shape: tuple[int, int, int, int], kernel_size: Pair,
           stride: Pair = (1, 1), padding: Pair = (0, 0), dilation: Pair = (1, 1)) -> Array:
    """The adjoint of :func:`im2col`: (C*kh*kw, N*OH*OW) -> (N, C, H, W), gathered per pixel."""
    call = KernelCall("col2im", col)
    if not call.supported:
        return reference.col2im(col, x_shape, kernel_size, stride, padding, dilation)
    with call:
        col = call.contiguous(col)
        geo = _geometry(tuple(x_shape), kernel_size, stride, padding, dilation)
        n, c, kh, kw, oh, ow = geo[0], geo[1], geo[4], geo[5], geo[12], geo[13]
        if col.shape != (c * kh * kw, n * oh * ow):
            raise ValueError(f"col2im: col {tuple(col.shape)} does not match x_shape "
                             f"{tuple(x_shape)} with kernel {kernel_size}: expected "
                             f"{(c * kh * kw, n * oh * ow)}")
        dx = call.empty(tuple(x_shape))
        call.launch(dx.size, [col, dx, *geo, oh * ow, n * oh * ow, 1])
        return dx
