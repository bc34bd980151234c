"""im2col / col2im: the two data movements that turn a convolution into one GEMM.

Layout contract (mirrored name for name by ``tinyflow_cuda/kernels/conv.py``)::

    im2col(x (N, C, H, W), ...) -> col (C*kh*kw, N*OH*OW)
    col[(c, i, j), (n, oh, ow)] = x_padded[n, c, oh*sh + i*dh, ow*sw + j*dw]

Rows are (channel, kernel row, kernel column), matching the flattening of a PyTorch weight
``(O, C, kh, kw) -> (O, C*kh*kw)``, so the forward pass is ``W @ col`` with both operands
row-major and no transposed copy. Channels are the outermost row index, so the rows of group
``g`` of a grouped convolution are one contiguous slab ``col[g*C/G*kh*kw : (g+1)*C/G*kh*kw]``.
Columns are (image, output row, output column), so the whole batch is one GEMM, not one per
image. See docs/convolution.md for why this layout and not the others.

Both kernels loop only over the kh*kw kernel offsets; each iteration moves a whole
(N, C, OH, OW) strided slab with one vectorised copy (im2col) or one add (col2im), so there is
no Python loop over images or pixels, and col2im needs no scatter-add (``np.add.at``).

Around the GEMM, ``conv_output`` moves its (O, N*OH*OW) result to (N, O, OH, OW) with the bias
(and a ReLU, when the op fuses one) in the same copy, and ``conv_output_grad`` makes the way back,
with the ReLU's mask and the bias gradient in the same pass.

On the GPU the column matrix may have more rows than C*kh*kw (``out=`` with K rounded up to a
multiple of 8, so cuBLAS takes its aligned kernels): im2col zeroes them.

Their large temporaries (the padded input, the padded gradient, and - through ``out=`` - the
column matrix itself) live in a per-thread workspace that is reused from call to call, and on
the CPU the work is split by channel over a few threads (``tinyflow.kernels._cpu``).
"""
from __future__ import annotations

import numpy as np

from tinyflow.dtypes import is_half
from tinyflow.kernels._cpu import array_module, parallel_for, workspace
from tinyflow.kernels.shapes import conv_output_size

__all__ = ["im2col", "col2im", "conv_output", "conv_output_grad"]

Pair = tuple[int, int]


def _window_slice(start: int, count: int, step: int) -> slice:
    """``count`` positions ``start, start+step, ...`` as a slice (used for every kernel offset)."""
    return slice(start, start + step * (count - 1) + 1, step)


def _pad_transposed(x, xpad, ph: int, pw: int, c0: int, c1: int) -> None:
    """Channels c0:c1 of ``x`` (N, C, H, W) into ``xpad`` (C, N, H + 2ph, W + 2pw), zero borders."""
    h, w = x.shape[2:]
    dst = xpad[c0:c1]
    dst[:, :, ph:ph + h, pw:pw + w] = x[:, c0:c1].transpose(1, 0, 2, 3)
    if ph:
        dst[:, :, :ph] = 0
        dst[:, :, ph + h:] = 0
    if pw:
        dst[:, :, :, :pw] = 0
        dst[:, :, :, pw + w:] = 0


def im2col(x, kernel_size: Pair, stride: Pair = (1, 1), padding: Pair = (0, 0),
           dilation: Pair = (1, 1), out=None):
    """Unfold every receptive field of ``x`` (N, C, H, W) into a column: (C*kh*kw, N*OH*OW).

    ``out``, if given, is a C-contiguous (C*kh*kw, N*OH*OW) array to write into (a workspace);
    it may have more rows (a GEMM whose K is padded to an aligned size), which are zeroed.
    """
    xp = array_module(x)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    oh = conv_output_size(h, kh, sh, ph, dh)
    ow = conv_output_size(w, kw, sw, pw, dw)
    if out is None:
        out = xp.empty((c * kh * kw, n * oh * ow), dtype=x.dtype)
    else:
        check_columns_out(out, x.dtype, (c * kh * kw, n * oh * ow))
        if out.shape[0] > c * kh * kw:
            out[c * kh * kw:] = 0  # the rows that pad K
    col = out[:c * kh * kw].reshape(c, kh, kw, n, oh, ow)  # a view of out
    # One transposed copy to (C, N, Hp, Wp), padding included, so that every kernel offset
    # below is a plain strided slab copy in the order of ``col`` (no transpose per offset).
    xpad = workspace(xp, "im2col.pad", (c, n, h + 2 * ph, w + 2 * pw), x.dtype)

    def channels(c0: int, c1: int) -> None:
        _pad_transposed(x, xpad, ph, pw, c0, c1)
        for i in range(kh):
            rows = _window_slice(i * dh, oh, sh)
            for j in range(kw):
                col[c0:c1, i, j] = xpad[c0:c1, :, rows, _window_slice(j * dw, ow, sw)]  # (C', N, OH, OW)

    parallel_for(xp, c, channels, work=out.size)
    return out


def check_columns_out(out, dtype, shape: tuple[int, int]) -> None:
    """``out`` must be a C-contiguous ``dtype`` array of ``shape``, or with more rows (padding)."""
    if (out.ndim != 2 or out.shape[1] != shape[1] or out.shape[0] < shape[0] or not out.flags.c_contiguous
            or out.dtype != dtype):
        raise ValueError(f"im2col: out must be a C-contiguous {dtype} array of shape {shape} (or with more "
                         f"rows, which pad K and are zeroed), got {out.dtype} {tuple(out.shape)}")


def col2im(col, x_shape: tuple[int, int, int, int], kernel_size: Pair, stride: Pair = (1, 1),
           padding: Pair = (0, 0), dilation: Pair = (1, 1)):
    """The adjoint of :func:`im2col`: sum every column entry back onto its input pixel.

    ``col`` is (C*kh*kw, N*OH*OW); the result has ``x_shape`` (N, C, H, W). Overlapping windows
    are accumulated by one vectorised add per kernel offset, never by a scatter.
    """
    xp = array_module(col)
    n, c, h, w = x_shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    oh = conv_output_size(h, kh, sh, ph, dh)
    ow = conv_output_size(w, kw, sw, pw, dw)
    col6 = col.reshape(c, kh, kw, n, oh, ow)
    gpad = workspace(xp, "col2im.pad", (c, n, h + 2 * ph, w + 2 * pw), col.dtype)  # (C, N, Hp, Wp)
    gx = xp.empty((n, c, h, w), dtype=col.dtype)

    def channels(c0: int, c1: int) -> None:
        acc = gpad[c0:c1]
        acc.fill(0)
        for i in range(kh):
            rows = _window_slice(i * dh, oh, sh)
            for j in range(kw):
                acc[:, :, rows, _window_slice(j * dw, ow, sw)] += col6[c0:c1, i, j]
        gx[:, c0:c1] = acc[:, :, ph:ph + h, pw:pw + w].transpose(1, 0, 2, 3)  # crop, back to NCHW

    parallel_for(xp, c, channels, work=col.size)
    return gx


def conv_output(out, bias, shape: tuple[int, int, int, int], relu: bool = False):
    """The GEMM's result ``out`` (O, N*OH*OW) as the layer's output y (N, O, OH, OW), with
    ``bias`` (O,) (or None) added and, when ``relu``, max(y, 0) taken in the same copy.

    The transpose has to be copied anyway; fusing the bias (and a following ReLU) into it saves
    one or two passes over the output.
    """
    xp = array_module(out)
    n, o, oh, ow = shape
    src = out.reshape(o, n, oh, ow).transpose(1, 0, 2, 3)  # (N, O, OH, OW) strided view
    y = xp.empty((n, o, oh, ow), dtype=out.dtype)

    def channels(o0: int, o1: int) -> None:
        if bias is None:
            y[:, o0:o1] = src[:, o0:o1]
        else:
            xp.add(src[:, o0:o1], bias[o0:o1].reshape(1, -1, 1, 1), out=y[:, o0:o1])
        if relu:
            xp.maximum(y[:, o0:o1], 0, out=y[:, o0:o1])  # NaN stays NaN, as torch.relu

    parallel_for(xp, o, channels, work=y.size)
    return y


def conv_output_grad(gout, relu_out=None, bias_grad: bool = False):
    """The way back through :func:`conv_output`: ``gout`` (N, O, OH, OW) -> (gy (O, N*OH*OW), gb).

    ``relu_out``: the output of a fused ReLU (N, O, OH, OW), or None; gy is 0 where it is <= 0
    (NaN passes its gradient, as torch's threshold_backward). ``gb`` (O,) is the bias gradient,
    the sum of gy over images and pixels (float32 accumulation for half dtypes), when
    ``bias_grad``; else None.
    """
    xp = array_module(gout)
    n, o, oh, ow = gout.shape
    gy = xp.empty((o, n, oh, ow), dtype=gout.dtype)  # (O, N, OH, OW)
    zero = xp.zeros((), dtype=gout.dtype)

    def channels(o0: int, o1: int) -> None:
        src = gout[:, o0:o1].transpose(1, 0, 2, 3)
        if relu_out is not None:
            src = xp.where(relu_out[:, o0:o1].transpose(1, 0, 2, 3) <= 0, zero, src)
        gy[o0:o1] = src

    parallel_for(xp, o, channels, work=gy.size)
    gy = gy.reshape(o, n * oh * ow)
    gb = None
    if bias_grad:
        acc = np.float32 if is_half(gy.dtype) else None  # bfloat16 sums stall at 256 + 1 == 256
        gb = gy.sum(axis=1, dtype=acc).astype(gy.dtype, copy=False)
    return gy, gb
