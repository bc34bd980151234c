"""im2col / col2im: the two data movements that turn a convolution into one GEMM (docs/convolution.md).

Layout contract (mirrored name for name by ``tinyflow_cuda/kernels/conv.py``)::

    im2col(x (N, C, H, W), ...) -> col (C*kh*kw, N*OH*OW)
    col[(c, i, j), (n, oh, ow)] = x_padded[n, c, oh*sh + i*dh, ow*sw + j*dw]

Rows follow a PyTorch weight ``(O, C, kh, kw) -> (O, C*kh*kw)`` (``W @ col``, no transposed copy;
a group's rows are one slab), columns the whole batch (one GEMM). Both kernels loop only over the
kh*kw kernel offsets, one (N, C, OH, OW) strided slab per offset, in per-thread workspaces, split
by channel over a few threads (``tinyflow.kernels._cpu``). The second half of this file is the
CPU's other algorithm, Winograd: NumPy only, no CUDA twin (``CPU_ONLY``, not in ``__all__``).
"""
from __future__ import annotations

import math

import numpy as np

from tinyflow.dtypes import is_half
from tinyflow.kernels._cpu import array_module, batched_matmul, give_buffer, parallel_for, take_buffer, workspace

__all__ = ["im2col", "col2im", "conv_output", "conv_output_grad"]  # mirrored by tinyflow_cuda/kernels/conv.py
CPU_ONLY = ("winograd_conv2d_forward", "winograd_conv2d_backward")  # kernels of NumPy arrays only: no twin

Pair = tuple[int, int]


def conv_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int = 1) -> int:
    """Output length of a convolution along one axis (PyTorch's rule); 0 when the kernel does not fit."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    return span // stride + 1 if span >= 0 else 0


def _window_slice(start: int, count: int, step: int) -> slice:
    """``count`` positions ``start, start + step, ...`` as a slice (one kernel offset of a slab)."""
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
    """Unfold every receptive field of ``x`` (N, C, H, W) into a column: (C*kh*kw, N*OH*OW), into
    ``out`` if given (a C-contiguous workspace; rows beyond C*kh*kw pad K and are zeroed)."""
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
    """The adjoint of :func:`im2col`: every entry of ``col`` (C*kh*kw, N*OH*OW) summed back onto its
    pixel of an ``x_shape`` (N, C, H, W) result, one vectorised add per kernel offset."""
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
    """The GEMM's result ``out`` (O, N*OH*OW) as the layer's output y (N, O, OH, OW), with ``bias``
    (O,) (or None) added and, when ``relu``, max(y, 0) taken in the copy the transpose needs anyway."""
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

    ``relu_out``: a fused ReLU's output, or None; gy is 0 where it is <= 0 (NaN passes, as torch's
    threshold_backward). ``gb`` (O,): the bias gradient when ``bias_grad`` (float32 sums for half
    dtypes), else None.
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


# ============================================================================ Winograd (CPU only)
# Winograd F(2x2, 3x3) and F(4x4, 3x3) (Lavin & Gray, 2015), the CPU's kernels for stride-1 ungrouped
# 3x3 layers, or larger kernels cut into 3x3 sub-kernels (winograd_parts); ops/conv.py's use_winograd
# says where they pay. Each m x m output tile comes from an (m+2) x (m+2) input tile, so the
# convolution is (m+2)^2 GEMMs, one per tile position xi:
#
#     V[xi] (C, T) = B^T d B        (input tiles, T = tiles in the batch)
#     U[xi] (O, C) = G w G^T        (weights)
#     M[xi] (O, T) = U[xi] @ V[xi]  and  y = A^T M A  per tile
#
# The transforms (ufuncs only) split over channels on the thread pool; the GEMMs keep BLAS's own
# threads. docs/convolution.md ("Winograd") has the accuracy of each tile size, the batch-innermost
# ((m+2)^2, channels, T) layout of the transformed arrays and the buffers the kernels own.

WINOGRAD_MAX_TILE = 4  # 2: F(2x2, 3x3) everywhere (exact to 8e-7 where F(4x4) is to 1.3e-5, slower)
# F(4x4)'s transforms cost ~2x F(2x2)'s per element; they pay only where the GEMMs dominate:
# GEMM dimensions (input channels x 3x3 sub-kernels, output channels) both at least this.
WINOGRAD_F4_MIN_CHANNELS = 64

# F(2x2, 3x3): 4x4 input tiles
_BT = ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1))  # input transform B^T
_AT = ((1, 1, 1, 0), (0, 1, -1, -1))  # output transform A^T
_G = ((1.0, 0.0, 0.0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0.0, 0.0, 1.0))  # weight transform
# F(4x4, 3x3): 6x6 input tiles (Lavin & Gray's matrices, interpolation points 0, +-1, +-2)
_BT4 = ((4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0),
        (0, -2, -1, 2, 1, 0), (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1))
_AT4 = ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1))
_G4 = ((1 / 4, 0, 0), (-1 / 6, -1 / 6, -1 / 6), (-1 / 6, 1 / 6, -1 / 6),
       (1 / 24, 1 / 12, 1 / 6), (1 / 24, -1 / 12, 1 / 6), (0, 0, 1))
_MATRICES = {2: (_BT, _AT, _G), 4: (_BT4, _AT4, _G4)}  # per tile side m


def _plan(coeffs) -> list[list[tuple[int, list[tuple[int, int]]]]]:
    """Each row of an integer matrix as groups of terms that share a coefficient's magnitude:
    [(|c|, [(sign, column), ...]), ...], positive terms first in each group. ``-4*d1 - 4*d2 + d3
    + d4`` is then ``(d3 + d4) - 4 * (d1 + d2)``: one scaling per magnitude, not per term. The
    group that starts the row is the cheapest to start with (two unit terms, else one scaled term)."""
    plan = []
    for row in coeffs:
        groups: dict[int, list[tuple[int, int]]] = {}
        for s, cf in enumerate(row):
            if cf:
                groups.setdefault(abs(int(cf)), []).append((1 if cf > 0 else -1, s))
        ordered = [(mag, sorted(terms, key=lambda t: t[0] < 0)) for mag, terms in groups.items()]
        ordered.sort(key=lambda g: 0 if g[0] == 1 and len(g[1]) > 1 else 1 if len(g[1]) == 1 and g[0] != 1 else 2)
        plan.append(ordered)
    return plan


def _transpose(m):
    return tuple(zip(*m))


_PLANS = {(name, tile): _plan(m)
          for tile, (bt, at, _) in _MATRICES.items()
          for name, m in (("BT", bt), ("B", _transpose(bt)), ("AT", at), ("A", _transpose(at)))}


def _signed_sum(terms, src, dst) -> int:
    """``dst = sign0 * sum(sign * src[s])`` over ``terms``, one ufunc per term (the first two
    fused); returns sign0, the sign of the first term, which the caller applies."""
    (s0, i0), rest = terms[0], terms[1:]
    if rest:
        s1, i1 = rest[0]
        (np.add if s1 == s0 else np.subtract)(src[i0], src[i1], out=dst)
        rest = rest[1:]
    else:
        dst[...] = src[i0]
    for sg, i in rest:
        (np.add if sg == s0 else np.subtract)(dst, src[i], out=dst)
    return s0


def _combine(plan, src, out) -> None:
    """``out[r] = sum_s M[r][s] * src[s]`` for the integer matrix ``M`` whose plan is given.

    Every step is one ufunc over a whole slab: a sum per coefficient magnitude, scaled once and
    added in (through a scratch array). 24 ufuncs for F(4x4)'s B^T where one per term takes 28."""
    scratch = None
    for dst, groups in zip(out, plan):
        (mag, terms), rest = groups[0], groups[1:]
        if len(terms) == 1 and (mag != 1 or terms[0][0] < 0):
            np.multiply(src[terms[0][1]], terms[0][0] * mag, out=dst)
        else:
            sign = _signed_sum(terms, src, dst)
            if mag != 1 or sign < 0:
                np.multiply(dst, sign * mag, out=dst)
        for mag, terms in rest:
            if mag == 1:
                for sg, i in terms:
                    (np.add if sg > 0 else np.subtract)(dst, src[i], out=dst)
                continue
            if scratch is None:
                scratch = workspace(np, "winograd.scratch", dst.shape, dst.dtype)
            if len(terms) == 1:
                sign = terms[0][0]
                np.multiply(src[terms[0][1]], mag, out=scratch)
            else:
                sign = _signed_sum(terms, src, scratch)
                np.multiply(scratch, mag, out=scratch)
            (np.add if sign > 0 else np.subtract)(dst, scratch, out=dst)


_BLOCK_ELEMS = 1 << 19  # temporaries per channel block: about 2 MB of float32, so they stay in cache


def _in_blocks(body, per_channel: int):
    """``body(c0, c1)`` run over channel blocks whose temporaries (``per_channel`` elements
    each) stay in cache between the passes of a transform; 30 % faster than whole ranges."""
    step = max(1, _BLOCK_ELEMS // max(1, per_channel))

    def run(c0: int, c1: int) -> None:
        for b0 in range(c0, c1, step):
            body(b0, min(c1, b0 + step))

    return run


def _to_batch_last(dst, src) -> None:
    """``dst (C, H, W, N) = src (N, C, H, W)`` moved batch-last. Where the images of ``src`` lie a
    multiple of 4 KiB apart (64 channels of 24x24, say), the same pixel of every image falls in
    one cache set; 16 images at a time then copy 2x faster."""
    n = src.shape[0]
    step = 16 if src.strides[0] % 4096 == 0 else max(n, 1)
    for n0 in range(0, n, step):
        dst[..., n0:n0 + step] = src[n0:n0 + step].transpose(1, 2, 3, 0)


def _to_batch_first(dst, src, bias=None) -> None:
    """``dst (N, C, H, W) = src (C, H, W, N)`` (+ ``bias`` (C,)) moved batch-first, a few channels
    at a time (about 1024 pixels each): 3x faster than one transposing copy, whose writes go to
    N lines at once."""
    c = src.shape[0]
    step = max(1, 1024 // max(1, src.shape[1] * src.shape[2]))
    for c0 in range(0, c, step):
        part = src[c0:c0 + step].transpose(3, 0, 1, 2)
        if bias is None:
            dst[:, c0:c0 + step] = part
        else:
            np.add(part, bias[c0:c0 + step].reshape(1, -1, 1, 1), out=dst[:, c0:c0 + step])


def winograd_tile(oh: int, ow: int, channels: int | None = None) -> int:
    """The output tile side m (2 or 4) for an (OH, OW) output: the one with fewer multiplications,
    counting the padding of the last tile; F(2x2) where ``channels``, the smaller GEMM dimension
    (min(C x sub-kernels, O)), is below WINOGRAD_F4_MIN_CHANNELS."""
    def cost(m: int) -> int:
        return (m + 2) ** 2 * -(-oh // m) * -(-ow // m)

    if channels is not None and channels < WINOGRAD_F4_MIN_CHANNELS:
        return 2
    return 4 if WINOGRAD_MAX_TILE >= 4 and cost(4) < cost(2) else 2


def winograd_tiles(h: int, w: int, padding: Pair, kernel_size: Pair = (3, 3),
                   tile: int = 2) -> tuple[int, int, int, int]:
    """(OH, OW, TH, TW): output size of a stride-1 convolution and its counts of tile x tile tiles."""
    oh, ow = h + 2 * padding[0] - kernel_size[0] + 1, w + 2 * padding[1] - kernel_size[1] + 1
    return oh, ow, -(-oh // tile), -(-ow // tile)


def winograd_parts(kernel_size: Pair) -> Pair:
    """(QH, QW): a kh x kw kernel, zero-padded to multiples of 3, is QH x QW 3x3 sub-kernels, each
    convolving the input shifted by (3*qi, 3*qj): a 5x5 layer is one GEMM per tile with K = 4*C."""
    return (-(-kernel_size[0] // 3), -(-kernel_size[1] // 3))


def _gg(dtype, tile: int = 2):
    """kron(G, G) ((m+2)^2, 9): U[(a, b)] = sum_(i, j) G[a, i] G[b, j] w[i, j]."""
    g = np.asarray(_MATRICES[tile][2], dtype=np.float64)
    return np.kron(g, g).astype(dtype)


def winograd_weight(w, tile: int = 2):
    """U = G w_q G^T for every 3x3 sub-kernel q: (O, C, kh, kw) -> ((m+2)^2, O, Q*C), one small GEMM."""
    o, c, kh, kw = w.shape
    qh, qw = winograd_parts((kh, kw))
    if (kh, kw) != (3 * qh, 3 * qw):
        w = np.pad(w, ((0, 0), (0, 0), (0, 3 * qh - kh), (0, 3 * qw - kw)))
    sub = w.reshape(o, c, qh, 3, qw, 3).transpose(3, 5, 0, 2, 4, 1).reshape(9, o * qh * qw * c)
    gg = _gg(w.dtype, tile)
    return np.matmul(gg, sub).reshape(len(gg), o, qh * qw * c)  # (16 or 36, O, (qi, qj, C))


def winograd_weight_grad(gu, kernel_shape: tuple[int, int, int, int], tile: int = 2):
    """The adjoint of :func:`winograd_weight`: gW = G^T gU_q G, ((m+2)^2, O, Q*C) -> (O, C, kh, kw)."""
    o, c, kh, kw = kernel_shape
    qh, qw = winograd_parts((kh, kw))
    gg = _gg(gu.dtype, tile)
    sub = np.matmul(gg.T, gu.reshape(len(gg), -1))  # (9, O*Q*C) = (3i, 3j, O, qh, qw, C)
    gw = sub.reshape(3, 3, o, qh, qw, c).transpose(2, 5, 3, 0, 4, 1).reshape(o, c, 3 * qh, 3 * qw)
    return np.ascontiguousarray(gw[:, :, :kh, :kw])


def winograd_input(x, padding: Pair, out, kernel_size: Pair = (3, 3), tile: int = 2):
    """V = B^T d B for every input tile and sub-kernel: x (N, C, H, W) -> out ((m+2)^2, Q*C, TH*TW*N)."""
    n, c, h, w = x.shape
    ph, pw = padding
    a = tile + 2
    qh, qw = winograd_parts(kernel_size)
    _, _, th, tw = winograd_tiles(h, w, padding, kernel_size, tile)
    # the padded input, with zero rows/columns beyond it for a cropped last tile and the kernel's padding to 3*Q
    hp, wp = tile * th + 3 * qh - 1, tile * tw + 3 * qw - 1
    xpad = workspace(np, "winograd.pad", (c, hp, wp, n), x.dtype)  # (C, Hp, Wp, N)
    v = out.reshape(a, a, qh, qw, c, th, tw, n)
    bt = _PLANS["BT", tile]

    def channels(c0: int, c1: int) -> None:
        dst = xpad[c0:c1]
        _to_batch_last(dst[:, ph:ph + h, pw:pw + w], x[:, c0:c1])
        dst[:, :ph] = 0
        dst[:, ph + h:] = 0
        dst[:, :, :pw] = 0
        dst[:, :, pw + w:] = 0
        rows = workspace(np, "winograd.rows", (a, c1 - c0, th, wp, n), x.dtype)
        for qi in range(qh):
            _combine(bt, [dst[:, _window_slice(3 * qi + k, th, tile)] for k in range(a)], rows)  # tile rows
            for qj in range(qw):  # tile columns, straight into V
                for i in range(a):
                    _combine(bt, [rows[i][:, :, _window_slice(3 * qj + k, tw, tile)] for k in range(a)],
                             [v[i, j, qi, qj, c0:c1] for j in range(a)])

    parallel_for(np, c, _in_blocks(channels, a * th * wp * n), work=out.size)
    return out


def winograd_output(m, out_shape: tuple[int, int, int, int], bias=None, tile: int = 2):
    """y = A^T M A for every tile, cropped to ``out_shape`` (N, O, OH, OW), plus the bias."""
    n, o, oh, ow = out_shape
    a = tile + 2
    th, tw = -(-oh // tile), -(-ow // tile)
    m6 = m.reshape(a, a, o, th, tw, n)
    y = np.empty(out_shape, dtype=m.dtype)
    at = _PLANS["AT", tile]

    def channels(o0: int, o1: int) -> None:
        rows = workspace(np, "winograd.rows", (tile, a, o1 - o0, th, tw, n), m.dtype)
        full = workspace(np, "winograd.full", (o1 - o0, th, tile, tw, tile, n), m.dtype)
        _combine(at, [m6[k, :, o0:o1] for k in range(a)], rows)
        for r in range(tile):  # output pixel (m*th + r, m*tw + s) of every tile, in image order
            _combine(at, [rows[r, k] for k in range(a)], [full[:, :, r, :, s] for s in range(tile)])
        full = full.reshape(o1 - o0, tile * th, tile * tw, n)
        _to_batch_first(y[:, o0:o1], full[:, :oh, :ow], None if bias is None else bias[o0:o1])  # cropped

    parallel_for(np, o, _in_blocks(channels, (tile * a + tile * tile) * th * tw * n), work=m.size)
    return y


def winograd_output_grad(gout, out, tile: int = 2):
    """The adjoint of :func:`winograd_output` (bias aside): gM = A gY A^T -> out ((m+2)^2, O, T).

    Returns ``(out, gfull)``: ``gfull`` is ``gout`` batch-last and zero-padded to whole tiles,
    (O, m*TH, m*TW, N) (a workspace, valid until the next call); it sums to the bias gradient.
    """
    n, o, oh, ow = gout.shape
    a = tile + 2
    th, tw = -(-oh // tile), -(-ow // tile)
    gm = out.reshape(a, a, o, th, tw, n)
    full = workspace(np, "winograd.gfull", (o, tile * th, tile * tw, n), gout.dtype)
    plan = _PLANS["A", tile]

    def channels(o0: int, o1: int) -> None:
        f = full[o0:o1]
        _to_batch_last(f[:, :oh, :ow], gout[:, o0:o1])
        f[:, oh:] = 0  # outputs not a multiple of the tile: the last tile's missing pixels
        f[:, :, ow:] = 0
        f6 = f.reshape(o1 - o0, th, tile, tw, tile, n)
        rows = workspace(np, "winograd.rows", (a, tile, o1 - o0, th, tw, n), gout.dtype)
        for s in range(tile):
            _combine(plan, [f6[:, :, r, :, s] for r in range(tile)], [rows[i, s] for i in range(a)])
        for i in range(a):
            _combine(plan, [rows[i, s] for s in range(tile)], [gm[i, j, o0:o1] for j in range(a)])

    parallel_for(np, o, _in_blocks(channels, (a * tile + tile * tile) * th * tw * n), work=out.size)
    return out, full


def winograd_input_grad(gv, x_shape: tuple[int, int, int, int], padding: Pair, kernel_size: Pair = (3, 3),
                        tile: int = 2):
    """The adjoint of :func:`winograd_input`: gd = B gV B^T, overlap-added onto (N, C, H, W)."""
    n, c, h, w = x_shape
    ph, pw = padding
    a = tile + 2
    qh, qw = winograd_parts(kernel_size)
    _, _, th, tw = winograd_tiles(h, w, padding, kernel_size, tile)
    gv8 = gv.reshape(a, a, qh, qw, c, th, tw, n)
    gpad = workspace(np, "winograd.pad", (c, tile * th + 3 * qh - 1, tile * tw + 3 * qw - 1, n), gv.dtype)
    gx = np.empty(x_shape, dtype=gv.dtype)
    plan = _PLANS["B", tile]

    def channels(c0: int, c1: int) -> None:
        rows = workspace(np, "winograd.rows", (a, a, c1 - c0, th, tw, n), gv.dtype)
        part = workspace(np, "winograd.tile", (a, c1 - c0, th, tw, n), gv.dtype)
        acc = gpad[c0:c1]
        acc.fill(0)
        for qi in range(qh):
            for qj in range(qw):
                for j in range(a):
                    _combine(plan, [gv8[i, j, qi, qj, c0:c1] for i in range(a)], [rows[k, j] for k in range(a)])
                for k in range(a):
                    _combine(plan, [rows[k, j] for j in range(a)], part)
                    r0 = _window_slice(3 * qi + k, th, tile)
                    for col in range(a):  # tiles overlap by two pixels: one strided add per tile position
                        acc[:, r0, _window_slice(3 * qj + col, tw, tile)] += part[col]
        _to_batch_first(gx[:, c0:c1], acc[:, ph:ph + h, pw:pw + w])

    parallel_for(np, c, _in_blocks(channels, (a * a + a) * th * tw * n), work=gv.size)
    return gx


# ------------------------------------------------------------------------------- the kernels
def winograd_conv2d_forward(x, w, b, padding: Pair, keep_v: bool = True):
    """y = conv2d(x, w) + b, stride 1: A^T [(G w G^T) * (B^T x B)] A per output tile.

    (m+2)^2 GEMMs (O, Q*C) @ (Q*C, T), m from :func:`winograd_tile`. Returns ``(y, v, u)``: y (N, O,
    OH, OW); v the transformed input ((m+2)^2, Q*C, T) for the weight gradient, in a recycled buffer
    that backward hands back (None unless ``keep_v``); u the transformed weight ((m+2)^2, O, Q*C).
    """
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = winograd_tiles(h, wd, padding, (kh, kw))[:2]
    qc = c * math.prod(winograd_parts((kh, kw)))  # input channels times 3x3 sub-kernels
    tile = winograd_tile(oh, ow, min(qc, o))
    th, tw = winograd_tiles(h, wd, padding, (kh, kw), tile)[2:]
    t = n * th * tw  # tiles in the batch
    xi = (tile + 2) ** 2  # tile positions: one GEMM each
    vbuf = take_buffer((xi, qc, t), x.dtype) if keep_v else workspace(np, "conv2d.col", (xi, qc, t), x.dtype)
    v = winograd_input(x, padding, vbuf, (kh, kw), tile)  # (xi, Q*C, T)
    u = winograd_weight(w, tile)  # (xi, O, Q*C)
    m = workspace(np, "conv2d.winograd.m", (xi, o, t), x.dtype)
    batched_matmul(u, v, m)  # (xi, O, T)
    if b is not None:  # A^T's column 1 is all ones: b at tile position (1, 1) adds b to every output
        m[tile + 3] += b.reshape(o, 1)
    return winograd_output(m, (n, o, oh, ow), None, tile), (v if keep_v else None), u  # y (N, O, OH, OW)


def winograd_conv2d_backward(gout, x, w, v, u, x_shape: tuple[int, int, int, int], kernel_size: Pair,
                             padding: Pair, needs_input_grad=(True, True, True)):
    """The adjoint of :func:`winograd_conv2d_forward`: (gx, gw, gb), None where not needed.

    ``v`` and ``u`` are what forward returned (None: rebuilt from ``x`` and ``w``); ``v``'s buffer is
    handed back for reuse, so it must not be used afterwards.
    """
    n, o, oh, ow = gout.shape
    c, h, wd = x_shape[1:]
    qc = c * math.prod(winograd_parts(kernel_size))
    tile = winograd_tile(oh, ow, min(qc, o))
    th, tw = winograd_tiles(h, wd, padding, kernel_size, tile)[2:]
    t = n * th * tw
    xi = (tile + 2) ** 2
    need_x, need_w, need_b = needs_input_grad
    gm, gfull = winograd_output_grad(gout, workspace(np, "conv2d.winograd.m", (xi, o, t), gout.dtype), tile)
    gb = gfull.reshape(o, -1).sum(axis=1) if need_b else None  # (O,)
    buf = v if v is not None else take_buffer((xi, qc, t), gout.dtype)  # V, then gV in its place
    gx = gw = None
    if need_w:
        if v is None:
            v = winograd_input(x, padding, buf, kernel_size, tile)  # (xi, Q*C, T)
        gu = batched_matmul(gm, v.transpose(0, 2, 1), np.empty((xi, o, qc), dtype=gout.dtype))  # (xi, O, Q*C)
        gw = winograd_weight_grad(gu, (o, c, *kernel_size), tile)
    if need_x:
        u = u if u is not None else winograd_weight(w, tile)
        batched_matmul(u.transpose(0, 2, 1), gm, buf)  # gV (xi, Q*C, T)
        gx = winograd_input_grad(buf, x_shape, padding, kernel_size, tile)  # (N, C, H, W)
    give_buffer(buf)
    return gx, gw, gb
