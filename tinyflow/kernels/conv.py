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

Their large temporaries (the padded input, the padded gradient, and - through ``out=`` - the
column matrix itself) live in a per-thread workspace that is reused from call to call, and on
the CPU the work is split by channel over a few threads (``tinyflow.kernels._cpu``).
"""
from __future__ import annotations

from tinyflow.device import array_module
from tinyflow.kernels._cpu import parallel_for, workspace
from tinyflow.kernels.shapes import conv_output_size

__all__ = ["im2col", "col2im"]

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

    ``out``, if given, is a C-contiguous (C*kh*kw, N*OH*OW) array to write into (a workspace).
    """
    xp = array_module(x)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    oh = conv_output_size(h, kh, sh, ph, dh)
    ow = conv_output_size(w, kw, sw, pw, dw)
    if out is None:
        out = xp.empty((c * kh * kw, n * oh * ow), dtype=x.dtype)
    elif out.shape != (c * kh * kw, n * oh * ow) or not out.flags.c_contiguous or out.dtype != x.dtype:
        raise ValueError(f"im2col: out must be a C-contiguous {x.dtype} array of shape "
                         f"{(c * kh * kw, n * oh * ow)}, got {out.dtype} {tuple(out.shape)}")
    col = out.reshape(c, kh, kw, n, oh, ow)  # a view of out
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
