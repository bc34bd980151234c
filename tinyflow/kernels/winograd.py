"""Winograd F(2x2, 3x3) / F(4x4, 3x3) convolution: the CPU's kernels for stride-1, ungrouped layers.

``winograd_conv2d_forward`` / ``winograd_conv2d_backward`` compute conv2d and its gradients for
3x3 kernels (AlexNet's conv3-5), or larger ones cut into 3x3 sub-kernels (conv2's 5x5: see
winograd_parts); ``use_winograd`` says where that pays (enough channels and images). Each 2x2
block of outputs is computed from a 4x4 input tile with 16 multiplications instead of 36 (Lavin &
Gray, 2015). The convolution becomes 16 independent GEMMs, one per tile position xi = (a, b):

    V[xi] (C, T) = B^T d B        (input tiles, T = tiles in the batch)
    U[xi] (O, C) = G w G^T        (weights)
    M[xi] (O, T) = U[xi] @ V[xi]  and  y = A^T M A  per tile

The transforms only add and subtract (G halves), so the results agree with the direct
convolution to float rounding. Every transformed array is (4, 4, channels, TH, TW, N) - that
is (16, channels, T) - with the batch innermost, so that each add or subtract of the transforms
runs over N contiguous floats rather than over TW strided ones (4 at AlexNet-64's conv3-5).

Where the output is 3x3 or larger (:func:`winograd_tile`), the kernels use 6x6 tiles and 4x4
outputs instead, F(4x4, 3x3): 36 GEMMs, 2.25 multiplications per output and channel against 4,
with the transforms as small GEMMs (see the F(4x4, 3x3) section below).

The kernels own their buffers: V, kept from forward for the weight gradient, is a recycled
buffer (``take_buffer``) that backward hands back, and the products and transforms run in
per-thread workspaces, so a training step allocates nothing large. A CPU-only family
(``tinyflow.kernels.CPU_ONLY``): NumPy arrays only, and no CUDA twin, because on a GPU the
convolution is im2col + one cuBLAS GEMM and the op asks for Winograd on NumPy arrays only.
"""
from __future__ import annotations

import math

import numpy as np

from tinyflow.device import array_module
from tinyflow.kernels._cpu import give_buffer, parallel_for, take_buffer, workspace

__all__ = ["use_winograd", "winograd_conv2d_forward", "winograd_conv2d_backward"]


Pair = tuple[int, int]


# Stride-1 ungrouped 3x3 / 5x5 convolutions with at least this many input and output channels,
# and a batch of at least this many images, take the Winograd path (2.25x fewer multiplications
# for 3x3, 1.56x for 5x5, no im2col / col2im). With fewer channels its 16 small GEMMs lose to the
# one im2col GEMM; its transforms run over the batch innermost, so tiny batches lose too. Set
# WINOGRAD_MIN_CHANNELS to 0 to turn the path off.
WINOGRAD_MIN_CHANNELS = 16
WINOGRAD_MIN_BATCH = 8
WINOGRAD_KERNELS = (3, 5, 6)  # kernel sides that split into 3x3 sub-kernels without much waste

_BT = ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1))  # input transform B^T
_B = tuple(zip(*_BT))  # its transpose, for the input gradient
_AT = ((1, 1, 1, 0), (0, 1, -1, -1))  # output transform A^T
_A = tuple(zip(*_AT))  # its transpose, for the output gradient
_G = ((1.0, 0.0, 0.0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0.0, 0.0, 1.0))  # weight transform


def _plan(coeffs) -> list[list[tuple[int, int]]]:
    """Each row of a {-1, 0, 1} matrix as its (sign, column) terms, positive terms first."""
    return [sorted(((cf, s) for s, cf in enumerate(row) if cf), key=lambda t: t[0] < 0) for row in coeffs]


_PLANS = {name: _plan(m) for name, m in (("BT", _BT), ("B", _B), ("AT", _AT), ("A", _A))}


def _combine(plan: str, src, out) -> None:
    """``out[r] = sum_s M[r][s] * src[s]`` for the {-1, 0, 1} matrix ``M`` named by ``plan``."""
    xp = array_module(out[0])
    for dst, terms in zip(out, _PLANS[plan]):
        c0, s0 = terms[0]
        if len(terms) == 1:
            if c0 > 0:
                dst[...] = src[s0]
            else:
                xp.negative(src[s0], out=dst)
            continue
        c1, s1 = terms[1]
        (xp.add if c1 > 0 else xp.subtract)(src[s0], src[s1], out=dst)
        if c0 < 0:  # both negative
            xp.negative(dst, out=dst)
        for cf, s in terms[2:]:
            (xp.add if cf > 0 else xp.subtract)(dst, src[s], out=dst)


_BLOCK_ELEMS = 1 << 19  # temporaries per channel block: about 2 MB of float32, so they stay in cache


def _in_blocks(body, per_channel: int):
    """``body(c0, c1)`` run over channel blocks whose temporaries (``per_channel`` elements
    each) stay in cache between the passes of a transform; 30 % faster than whole ranges."""
    step = max(1, _BLOCK_ELEMS // max(1, per_channel))

    def run(c0: int, c1: int) -> None:
        for b0 in range(c0, c1, step):
            body(b0, min(c1, b0 + step))

    return run


def winograd_tiles(h: int, w: int, padding: Pair, kernel_size: Pair = (3, 3),
                   tile: int = 2) -> tuple[int, int, int, int]:
    """(OH, OW, TH, TW): output size of a stride-1 convolution and its counts of tile x tile tiles."""
    oh, ow = h + 2 * padding[0] - kernel_size[0] + 1, w + 2 * padding[1] - kernel_size[1] + 1
    return oh, ow, -(-oh // tile), -(-ow // tile)


def winograd_parts(kernel_size: Pair) -> Pair:
    """(QH, QW): a kh x kw kernel, zero-padded to multiples of 3, is QH x QW 3x3 sub-kernels.

    Sub-kernel q = (qi, qj) convolves the input shifted by (3*qi, 3*qj); their sum is the
    convolution, so a 5x5 layer is one Winograd F(2x2, 3x3) GEMM with K = 4*C
    (16 multiplications per output and channel instead of 25).
    """
    return (-(-kernel_size[0] // 3), -(-kernel_size[1] // 3))


def _gg(xp, dtype, tile: int = 2):
    """kron(G, G) ((tile+2)^2, 9): U[(a, b)] = sum_(i, j) G[a, i] G[b, j] w[i, j]."""
    g = np.asarray(_G if tile == 2 else _G4, dtype=np.float64)
    return xp.asarray(np.kron(g, g).astype(dtype))


def winograd_weight(w, tile: int = 2):
    """U = G w_q G^T for every 3x3 sub-kernel q: (O, C, kh, kw) -> ((tile+2)^2, O, Q*C), one small GEMM."""
    xp = array_module(w)
    o, c, kh, kw = w.shape
    qh, qw = winograd_parts((kh, kw))
    if (kh, kw) != (3 * qh, 3 * qw):
        w = xp.pad(w, ((0, 0), (0, 0), (0, 3 * qh - kh), (0, 3 * qw - kw)))
    sub = w.reshape(o, c, qh, 3, qw, 3).transpose(3, 5, 0, 2, 4, 1).reshape(9, o * qh * qw * c)
    gg = _gg(xp, w.dtype, tile)
    return xp.matmul(gg, sub).reshape(len(gg), o, qh * qw * c)  # (16 or 36, O, (qi, qj, C))


def winograd_weight_grad(gu, kernel_shape: tuple[int, int, int, int], tile: int = 2):
    """The adjoint of :func:`winograd_weight`: gW = G^T gU_q G, ((tile+2)^2, O, Q*C) -> (O, C, kh, kw)."""
    xp = array_module(gu)
    o, c, kh, kw = kernel_shape
    qh, qw = winograd_parts((kh, kw))
    gg = _gg(xp, gu.dtype, tile)
    sub = xp.matmul(gg.T, gu.reshape(len(gg), -1))  # (9, O*Q*C) = (3i, 3j, O, qh, qw, C)
    gw = sub.reshape(3, 3, o, qh, qw, c).transpose(2, 5, 3, 0, 4, 1).reshape(o, c, 3 * qh, 3 * qw)
    return xp.ascontiguousarray(gw[:, :, :kh, :kw])


def winograd_input(x, padding: Pair, out, kernel_size: Pair = (3, 3)):
    """V = B^T d B for every 4x4 input tile and sub-kernel: x (N, C, H, W) -> out (16, Q*C, TH*TW*N)."""
    xp = array_module(x)
    n, c, h, w = x.shape
    ph, pw = padding
    qh, qw = winograd_parts(kernel_size)
    _, _, th, tw = winograd_tiles(h, w, padding, kernel_size)
    # the padded input, with zero rows/columns beyond it for odd outputs and the kernel's padding to 3*Q
    hp, wp = 2 * th + 3 * qh - 1, 2 * tw + 3 * qw - 1
    xpad = workspace(xp, "winograd.pad", (c, hp, wp, n), x.dtype)  # (C, Hp, Wp, N)
    v = out.reshape(4, 4, qh, qw, c, th, tw, n)

    def channels(c0: int, c1: int) -> None:
        dst = xpad[c0:c1]
        dst[:, ph:ph + h, pw:pw + w] = x[:, c0:c1].transpose(1, 2, 3, 0)
        dst[:, :ph] = 0
        dst[:, ph + h:] = 0
        dst[:, :, :pw] = 0
        dst[:, :, pw + w:] = 0
        rows = workspace(xp, "winograd.rows", (4, c1 - c0, th, wp, n), x.dtype)
        for qi in range(qh):
            r0 = 3 * qi
            _combine("BT", [dst[:, r0 + k:r0 + k + 2 * th:2] for k in range(4)], rows)  # tile rows
            for qj in range(qw):  # tile columns, straight into V
                c0_ = 3 * qj
                for a in range(4):
                    _combine("BT", [rows[a][:, :, c0_ + k:c0_ + k + 2 * tw:2] for k in range(4)],
                             [v[a, b, qi, qj, c0:c1] for b in range(4)])

    parallel_for(xp, c, _in_blocks(channels, 4 * th * wp * n), work=out.size)
    return out


def winograd_output(m, out_shape: tuple[int, int, int, int], bias=None):
    """y = A^T M A for every tile, cropped to ``out_shape`` (N, O, OH, OW), plus the bias."""
    xp = array_module(m)
    n, o, oh, ow = out_shape
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    m6 = m.reshape(4, 4, o, th, tw, n)
    y = xp.empty(out_shape, dtype=m.dtype)

    def channels(o0: int, o1: int) -> None:
        rows = workspace(xp, "winograd.rows", (2, 4, o1 - o0, th, tw, n), m.dtype)
        tiles = workspace(xp, "winograd.tile", (2, 2, o1 - o0, th, tw, n), m.dtype)
        _combine("AT", [m6[a, :, o0:o1] for a in range(4)], rows)
        for r in range(2):
            _combine("AT", [rows[r, b] for b in range(4)], tiles[r])
        for r in range(2):  # output pixel (2*th + r, 2*tw + s) of every tile, back to NCHW
            for s in range(2):
                dst = y[:, o0:o1, r::2, s::2]  # (N, O', rows, cols): odd sizes crop the last tile
                src = tiles[r, s, :, :dst.shape[2], :dst.shape[3]].transpose(3, 0, 1, 2)
                if bias is None:
                    dst[...] = src
                else:
                    xp.add(src, bias[o0:o1].reshape(1, -1, 1, 1), out=dst)

    parallel_for(xp, o, _in_blocks(channels, 12 * th * tw * n), work=m.size)
    return y


def winograd_output_grad(gout, out):
    """The adjoint of :func:`winograd_output` (bias aside): gM = A gY A^T -> out (16, O, T).

    Returns ``(out, gtiles)``: ``gtiles`` is ``gout`` rearranged as zero-padded tiles
    (2, 2, O, TH, TW, N) (a workspace, valid until the next call); it sums to the bias gradient.
    """
    xp = array_module(gout)
    n, o, oh, ow = gout.shape
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    gm = out.reshape(4, 4, o, th, tw, n)
    gt = workspace(xp, "winograd.gtiles", (2, 2, o, th, tw, n), gout.dtype)

    def channels(o0: int, o1: int) -> None:
        for r in range(2):
            for s in range(2):
                src = gout[:, o0:o1, r::2, s::2]  # (N, O', rows, cols)
                dst = gt[r, s, o0:o1]  # (O', TH, TW, N)
                dst[:, :src.shape[2], :src.shape[3]] = src.transpose(1, 2, 3, 0)
                dst[:, src.shape[2]:] = 0  # odd output sizes: the missing row/column of the last tile
                dst[:, :, src.shape[3]:] = 0
        rows = workspace(xp, "winograd.rows", (4, 2, o1 - o0, th, tw, n), gout.dtype)
        for s in range(2):
            _combine("A", [gt[r, s, o0:o1] for r in range(2)], [rows[a, s] for a in range(4)])
        for a in range(4):
            _combine("A", [rows[a, s] for s in range(2)], [gm[a, b, o0:o1] for b in range(4)])

    parallel_for(xp, o, _in_blocks(channels, 8 * th * tw * n), work=out.size)
    return out, gt


def winograd_input_grad(gv, x_shape: tuple[int, int, int, int], padding: Pair, kernel_size: Pair = (3, 3)):
    """The adjoint of :func:`winograd_input`: gd = B gV B^T, overlap-added onto (N, C, H, W)."""
    xp = array_module(gv)
    n, c, h, w = x_shape
    ph, pw = padding
    qh, qw = winograd_parts(kernel_size)
    _, _, th, tw = winograd_tiles(h, w, padding, kernel_size)
    gv8 = gv.reshape(4, 4, qh, qw, c, th, tw, n)
    gpad = workspace(xp, "winograd.pad", (c, 2 * th + 3 * qh - 1, 2 * tw + 3 * qw - 1, n), gv.dtype)  # (C, Hp, Wp, N)
    gx = xp.empty(x_shape, dtype=gv.dtype)

    def channels(c0: int, c1: int) -> None:
        rows = workspace(xp, "winograd.rows", (4, 4, c1 - c0, th, tw, n), gv.dtype)
        tile = workspace(xp, "winograd.tile", (4, c1 - c0, th, tw, n), gv.dtype)
        acc = gpad[c0:c1]
        acc.fill(0)
        for qi in range(qh):
            for qj in range(qw):
                for b in range(4):
                    _combine("B", [gv8[a, b, qi, qj, c0:c1] for a in range(4)], [rows[k, b] for k in range(4)])
                for k in range(4):
                    _combine("B", [rows[k, b] for b in range(4)], tile)
                    r0 = 3 * qi + k
                    for j in range(4):  # tiles overlap by two pixels: one strided add per tile position
                        col0 = 3 * qj + j
                        acc[:, r0:r0 + 2 * th:2, col0:col0 + 2 * tw:2] += tile[j]
        gx[:, c0:c1] = acc[:, ph:ph + h, pw:pw + w].transpose(3, 0, 1, 2)

    parallel_for(xp, c, _in_blocks(channels, 20 * th * tw * n), work=gv.size)
    return gx


# ------------------------------------------------------------------- Winograd F(4x4, 3x3)
# 6x6 input tiles give 4x4 outputs with 36 multiplications instead of 144 (2.25 per output and
# channel, against 4 for F(2x2, 3x3)): 1.8x fewer GEMM flops where the tiles fit the output. The
# transforms have coefficients other than +-1 (Lavin & Gray's matrices), so they run as small
# GEMMs over the 6 tile rows, then the 6 tile columns, of a channel block; the layouts are the
# F(2x2) ones with 6 for 4: (6, 6, Q, C, TH, TW, N). Errors stay within a few float32 ulps of the
# output's scale (5e-6 relative, measured, against 5e-7 for F(2x2) and 2e-6 for PyTorch's).
_BT4 = ((4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0),
        (0, -2, -1, 2, 1, 0), (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1))  # input transform B^T
_G4 = ((1 / 4, 0, 0), (-1 / 6, -1 / 6, -1 / 6), (-1 / 6, 1 / 6, -1 / 6),
       (1 / 24, 1 / 12, 1 / 6), (1 / 24, -1 / 12, 1 / 6), (0, 0, 1))  # weight transform G
_AT4 = ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0), (0, 1, -1, 8, -8, 1))  # A^T



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


def winograd_tile(oh: int, ow: int) -> int:
    """The output tile side (2 or 4) for an (OH, OW) output: the one with fewer multiplications,
    counting the padding of the last tile (F(4x4) wins from 3x3 outputs up)."""
    def cost(m: int) -> int:
        return (m + 2) ** 2 * -(-oh // m) * -(-ow // m)

    return 4 if cost(4) < cost(2) else 2


def _mat(rows, dtype):
    return np.asarray(rows, dtype=np.float64).astype(dtype)


def _winograd4_input(x, padding: Pair, out, kernel_size: Pair):
    """F(4x4) V = B^T d B for every 6x6 tile and sub-kernel: x (N, C, H, W) -> out (36, Q*C, T)."""
    n, c, h, w = x.shape
    ph, pw = padding
    qh, qw = winograd_parts(kernel_size)
    _, _, th, tw = winograd_tiles(h, w, padding, kernel_size, 4)
    t = th * tw * n
    hp, wp = 4 * th + 3 * qh - 1, 4 * tw + 3 * qw - 1
    bt = _mat(_BT4, x.dtype)
    xpad = workspace(np, "winograd.pad", (c, hp, wp, n), x.dtype)  # (C, Hp, Wp, N)
    v = out.reshape(6, 6, qh, qw, c * t)  # channel blocks are column ranges of the last axis

    def channels(c0: int, c1: int) -> None:
        dst = xpad[c0:c1]
        _to_batch_last(dst[:, ph:ph + h, pw:pw + w], x[:, c0:c1])
        dst[:, :ph] = 0
        dst[:, ph + h:] = 0
        dst[:, :, :pw] = 0
        dst[:, :, pw + w:] = 0
        tiles = workspace(np, "winograd.tile", (6, 6, c1 - c0, th, tw, n), x.dtype)
        rows = workspace(np, "winograd.rows", (6, 6, (c1 - c0) * t), x.dtype)
        for qi in range(qh):
            for qj in range(qw):
                for k in range(6):
                    r0 = 3 * qi + k
                    for j in range(6):
                        c0_ = 3 * qj + j
                        tiles[k, j] = dst[:, r0:r0 + 4 * th - 3:4, c0_:c0_ + 4 * tw - 3:4]
                np.matmul(bt, tiles.reshape(6, -1), out=rows.reshape(6, -1))  # (a, j, C'T): the rows
                np.matmul(bt, rows, out=v[:, :, qi, qj, c0 * t:c1 * t])  # (a, b, C'T): the columns

    parallel_for(np, c, _in_blocks(channels, 72 * th * tw * n), work=out.size)
    return out


def _winograd4_input_grad(gv, x_shape: tuple[int, int, int, int], padding: Pair, kernel_size: Pair):
    """The adjoint of :func:`_winograd4_input`: gd = B gV B^T, overlap-added onto (N, C, H, W)."""
    n, c, h, w = x_shape
    ph, pw = padding
    qh, qw = winograd_parts(kernel_size)
    _, _, th, tw = winograd_tiles(h, w, padding, kernel_size, 4)
    t = th * tw * n
    b = _mat(_BT4, gv.dtype).T
    gv5 = gv.reshape(6, 6, qh, qw, c * t)
    gpad = workspace(np, "winograd.pad", (c, 4 * th + 3 * qh - 1, 4 * tw + 3 * qw - 1, n), gv.dtype)
    gx = np.empty(x_shape, dtype=gv.dtype)

    def channels(c0: int, c1: int) -> None:
        rows = workspace(np, "winograd.rows", (6, 6, (c1 - c0) * t), gv.dtype)
        tiles = workspace(np, "winograd.tile", (6, 6, c1 - c0, th, tw, n), gv.dtype)
        acc = gpad[c0:c1]
        acc.fill(0)
        for qi in range(qh):
            for qj in range(qw):
                np.matmul(b, gv5[:, :, qi, qj, c0 * t:c1 * t], out=rows)  # (a, j, C'T)
                np.matmul(b, rows.reshape(6, -1), out=tiles.reshape(6, -1))  # (k, j, C'T)
                for k in range(6):  # tiles overlap by two pixels: one strided add per tile position
                    r0 = 3 * qi + k
                    for j in range(6):
                        col0 = 3 * qj + j
                        acc[:, r0:r0 + 4 * th - 3:4, col0:col0 + 4 * tw - 3:4] += tiles[k, j]
        _to_batch_first(gx[:, c0:c1], acc[:, ph:ph + h, pw:pw + w])

    parallel_for(np, c, _in_blocks(channels, 72 * th * tw * n), work=gv.size)
    return gx


def _winograd4_output(m, out_shape: tuple[int, int, int, int], bias=None):
    """F(4x4) y = A^T M A for every tile, cropped to ``out_shape`` (N, O, OH, OW), plus the bias."""
    n, o, oh, ow = out_shape
    th, tw = -(-oh // 4), -(-ow // 4)
    t = th * tw * n
    at = _mat(_AT4, m.dtype)
    m3 = m.reshape(6, 6, o * t)
    y = np.empty(out_shape, dtype=m.dtype)

    def channels(o0: int, o1: int) -> None:
        rows = workspace(np, "winograd.rows", (6, 4, (o1 - o0) * t), m.dtype)
        tiles = workspace(np, "winograd.tile", (4, 4, o1 - o0, th, tw, n), m.dtype)
        np.matmul(at, m3[:, :, o0 * t:o1 * t], out=rows)  # (a, s, O'T)
        np.matmul(at, rows.reshape(6, -1), out=tiles.reshape(4, -1))  # (r, s, O'T)
        # output pixel (4*th + r, 4*tw + s) of every tile, then back to NCHW (the last tile cropped)
        full = workspace(np, "winograd.full", (o1 - o0, th, 4, tw, 4, n), m.dtype)
        full[...] = tiles.transpose(2, 3, 0, 4, 1, 5)
        full = full.reshape(o1 - o0, 4 * th, 4 * tw, n)
        _to_batch_first(y[:, o0:o1], full[:, :oh, :ow], None if bias is None else bias[o0:o1])

    parallel_for(np, o, _in_blocks(channels, 40 * th * tw * n), work=m.size)
    return y


def _winograd4_output_grad(gout, out):
    """The adjoint of :func:`_winograd4_output` (bias aside): gM = A gY A^T -> out (36, O, T).

    Returns ``(out, gb)``: gb (O,) is the bias gradient, summed from the tiles while in cache."""
    n, o, oh, ow = gout.shape
    th, tw = -(-oh // 4), -(-ow // 4)
    t = th * tw * n
    a = _mat(_AT4, gout.dtype).T
    gm = out.reshape(6, 6, o * t)
    gb = np.empty(o, dtype=gout.dtype)

    def channels(o0: int, o1: int) -> None:
        full = workspace(np, "winograd.full", (o1 - o0, 4 * th, 4 * tw, n), gout.dtype)
        _to_batch_last(full[:, :oh, :ow], gout[:, o0:o1])
        full[:, oh:] = 0  # outputs not a multiple of 4: the last tile's missing pixels
        full[:, :, ow:] = 0
        tiles = workspace(np, "winograd.tile", (4, 4, o1 - o0, th, tw, n), gout.dtype)
        tiles[...] = full.reshape(o1 - o0, th, 4, tw, 4, n).transpose(2, 4, 0, 1, 3, 5)
        gb[o0:o1] = tiles.reshape(16, o1 - o0, t).sum(axis=2).sum(axis=0)
        rows = workspace(np, "winograd.rows", (6, 4, (o1 - o0) * t), gout.dtype)
        np.matmul(a, tiles.reshape(4, -1), out=rows.reshape(6, -1))  # (a, s, O'T)
        np.matmul(a, rows, out=gm[:, :, o0 * t:o1 * t])  # (a, b, O'T)

    parallel_for(np, o, _in_blocks(channels, 40 * th * tw * n), work=out.size)
    return out, gb

# ------------------------------------------------------------------------------- the kernels
def use_winograd(x, w, stride: Pair, dilation: Pair, groups: int) -> bool:
    """Whether conv2d(x (N, C, H, W), w (O, C/groups, kh, kw)) runs on the Winograd kernels here."""
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    return (WINOGRAD_MIN_CHANNELS > 0 and np.dtype(x.dtype) in (np.float32, np.float64)
            and kh in WINOGRAD_KERNELS and kw in WINOGRAD_KERNELS
            and stride == (1, 1) and dilation == (1, 1) and groups == 1
            and n >= max(1, WINOGRAD_MIN_BATCH) and min(c, o) >= WINOGRAD_MIN_CHANNELS)


def winograd_conv2d_forward(x, w, b, padding: Pair, keep_v: bool = True):
    """y = conv2d(x, w) + b, stride 1: A^T [(G w G^T) * (B^T x B)] A per output tile.

    The tile is F(4x4, 3x3)'s or F(2x2, 3x3)'s (:func:`winograd_tile`): 36 or 16 GEMMs
    (O, Q*C) @ (Q*C, T). Returns ``(y, v, u)``: y (N, O, OH, OW); v the transformed input
    (36 or 16, Q*C, T) for the weight gradient, in a recycled buffer that
    :func:`winograd_conv2d_backward` hands back (None unless ``keep_v``: V is then built in the
    convolution's workspace); u the transformed weight (36 or 16, O, Q*C), for the input gradient.
    """
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = winograd_tiles(h, wd, padding, (kh, kw))[:2]
    tile = winograd_tile(oh, ow)
    th, tw = winograd_tiles(h, wd, padding, (kh, kw), tile)[2:]
    qc = c * math.prod(winograd_parts((kh, kw)))  # input channels times 3x3 sub-kernels
    t = n * th * tw  # tiles in the batch
    xi = (tile + 2) ** 2  # tile positions: one GEMM each
    vbuf = take_buffer((xi, qc, t), x.dtype) if keep_v else workspace(np, "conv2d.col", (xi, qc, t), x.dtype)
    if tile == 4:
        v = _winograd4_input(x, padding, vbuf, (kh, kw))
    else:
        v = winograd_input(x, padding, vbuf, (kh, kw))  # (16, Q*C, T)
    u = winograd_weight(w, tile)  # (xi, O, Q*C)
    m = workspace(np, "conv2d.winograd.m", (xi, o, t), x.dtype)
    np.matmul(u, v, out=m)  # (xi, O, T)
    if tile == 4:
        if b is not None:  # A^T's column 1 is all ones: b at tile position (1, 1) adds b to every output
            m[7] += b.reshape(o, 1)
        y = _winograd4_output(m, (n, o, oh, ow))
    else:
        y = winograd_output(m, (n, o, oh, ow), b)
    return y, (v if keep_v else None), u  # y (N, O, OH, OW)


def winograd_conv2d_backward(gout, x, w, v, u, x_shape: tuple[int, int, int, int], kernel_size: Pair,
                             padding: Pair, needs_input_grad=(True, True, True)):
    """The adjoint of :func:`winograd_conv2d_forward`: (gx, gw, gb), None where not needed.

    36 (or 16) GEMMs for gW, as many for gx, transforms around them. ``v`` and ``u`` are what
    forward returned (or None: then they are rebuilt from ``x`` and ``w``); ``v``'s buffer is
    handed back for reuse, so it must not be used afterwards.
    """
    n, o, oh, ow = gout.shape
    c, h, wd = x_shape[1:]
    tile = winograd_tile(oh, ow)
    th, tw = winograd_tiles(h, wd, padding, kernel_size, tile)[2:]
    qc = c * math.prod(winograd_parts(kernel_size))
    t = n * th * tw
    xi = (tile + 2) ** 2
    need_x, need_w, need_b = needs_input_grad
    gm = workspace(np, "conv2d.winograd.m", (xi, o, t), gout.dtype)
    if tile == 4:
        gm, gb = _winograd4_output_grad(gout, gm)
    else:
        gm, gtiles = winograd_output_grad(gout, gm)
        gb = gtiles.reshape(4, o, t).sum(axis=2).sum(axis=0)  # (O,)
    gb = gb if need_b else None
    buf = v if v is not None else take_buffer((xi, qc, t), gout.dtype)  # V, then gV in its place
    gx = gw = None
    if need_w:
        if v is None:
            v = (_winograd4_input if tile == 4 else winograd_input)(x, padding, buf, kernel_size)  # (xi, Q*C, T)
        gu = np.matmul(gm, v.transpose(0, 2, 1))  # (xi, O, Q*C)
        gw = winograd_weight_grad(gu, (o, c, *kernel_size), tile)
    if need_x:
        u = u if u is not None else winograd_weight(w, tile)
        np.matmul(u.transpose(0, 2, 1), gm, out=buf)  # gV (xi, Q*C, T)
        if tile == 4:
            gx = _winograd4_input_grad(buf, x_shape, padding, kernel_size)
        else:
            gx = winograd_input_grad(buf, x_shape, padding, kernel_size)  # (N, C, H, W)
    give_buffer(buf)
    return gx, gw, gb
