"""im2col / col2im: the two data movements that turn a convolution into one GEMM.

Layout contract (mirrored name for name by ``tinyflow_cuda.kernels``)::

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
"""
from __future__ import annotations

import math

from tinyflow.device import array_module
from tinyflow.kernels._dispatch import kernel

__all__ = ["conv_output_size", "im2col", "col2im"]

Pair = tuple[int, int]


def conv_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int = 1,
                     ceil_mode: bool = False) -> int:
    """Output length along one axis, with PyTorch's rule (also for pooling's ceil_mode).

    With ``ceil_mode`` the last window may hang over the right padding, but it must start inside
    the input or the left padding (PyTorch drops a window that would start in the right padding).
    """
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    if span < 0:
        return 0
    out = (math.ceil(span / stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def _window_slice(start: int, count: int, step: int) -> slice:
    """``count`` positions ``start, start+step, ...`` as a slice (used for every kernel offset)."""
    return slice(start, start + step * (count - 1) + 1, step)


@kernel
def im2col(x, kernel_size: Pair, stride: Pair = (1, 1), padding: Pair = (0, 0),
           dilation: Pair = (1, 1)):
    """Unfold every receptive field of ``x`` (N, C, H, W) into a column: (C*kh*kw, N*OH*OW)."""
    xp = array_module(x)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    oh = conv_output_size(h, kh, sh, ph, dh)
    ow = conv_output_size(w, kw, sw, pw, dw)
    if ph or pw:
        xpad = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=x.dtype)  # (N, C, Hp, Wp)
        xpad[:, :, ph:ph + h, pw:pw + w] = x
    else:
        xpad = x
    col = xp.empty((c, kh, kw, n, oh, ow), dtype=x.dtype)
    for i in range(kh):
        rows = _window_slice(i * dh, oh, sh)
        for j in range(kw):
            cols = _window_slice(j * dw, ow, sw)
            # (N, C, OH, OW) strided view -> the (C, N, OH, OW) slab of this kernel offset
            col[:, i, j] = xpad[:, :, rows, cols].transpose(1, 0, 2, 3)
    return col.reshape(c * kh * kw, n * oh * ow)


@kernel
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
    gpad = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=col.dtype)  # (N, C, Hp, Wp)
    for i in range(kh):
        rows = _window_slice(i * dh, oh, sh)
        for j in range(kw):
            cols = _window_slice(j * dw, ow, sw)
            gpad[:, :, rows, cols] += col6[:, i, j].transpose(1, 0, 2, 3)
    if ph or pw:
        return xp.ascontiguousarray(gpad[:, :, ph:ph + h, pw:pw + w])  # (N, C, H, W)
    return gpad
