"""2-D max and average pooling, forward and backward (NCHW), with PyTorch's semantics.

Every kernel loops only over the kh*kw window offsets, one (N, C, OH, OW) strided slab per offset
(no Python loop over pixels), except max pooling's backward on NumPy: one ``np.add.at`` onto the
winners. ``maxpool2d_forward``'s argmax is the *window offset* ``i*kw + j`` of the winner (uint8,
or int32 past 256 elements; ties to the first, as PyTorch); the CUDA twins in
``tinyflow_cuda.kernels`` keep the names, signatures and index meaning. float16 / bfloat16 sums
run in float32 and round once, as the CUDA kernels and PyTorch do.
"""
from __future__ import annotations

import math

import numpy as np

from tinyflow.dtypes import is_half
from tinyflow.kernels._cpu import array_module, parallel_for

__all__ = ["maxpool2d_forward", "maxpool2d_backward", "avgpool2d_forward", "avgpool2d_backward"]

Pair = tuple[int, int]


def pool_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int = 1,
                     ceil_mode: bool = False) -> int:
    """Output length of a window sweep along one axis, with PyTorch's rule.

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


def pool_output_shape(h: int, w: int, kernel_size: Pair, stride: Pair, padding: Pair,
                      dilation: Pair = (1, 1), ceil_mode: bool = False) -> Pair:
    """(OH, OW) of a pooling window sweep, PyTorch's rule including ceil_mode."""
    return (pool_output_size(h, kernel_size[0], stride[0], padding[0], dilation[0], ceil_mode),
            pool_output_size(w, kernel_size[1], stride[1], padding[1], dilation[1], ceil_mode))


def _window_slice(start: int, count: int, step: int) -> slice:
    """``count`` positions ``start, start+step, ...`` as a slice (used for every window offset)."""
    return slice(start, start + step * (count - 1) + 1, step)


def _padded_extent(size: int, out: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """Length of the padded axis that every window fits in (ceil_mode windows may overhang)."""
    return max(size + 2 * padding, (out - 1) * stride + dilation * (kernel - 1) + 1)


def _pad(x, ph: int, pw: int, hp: int, wp: int, fill: float):
    """``x`` (N, C, H, W) placed at (ph, pw) inside an (N, C, hp, wp) array filled with ``fill``."""
    n, c, h, w = x.shape
    if (ph, pw, hp, wp) == (0, 0, h, w):
        return x
    xp = array_module(x)
    out = xp.full((n, c, hp, wp), fill, dtype=x.dtype)
    out[:, :, ph:ph + h, pw:pw + w] = x
    return out


def maxpool2d_forward(x, kernel_size: Pair, stride: Pair, padding: Pair = (0, 0),
                      dilation: Pair = (1, 1), ceil_mode: bool = False):
    """Max over each window of ``x`` (N, C, H, W): returns (out, argmax), both (N, C, OH, OW)."""
    xp = array_module(x)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    oh, ow = pool_output_shape(h, w, kernel_size, stride, padding, dilation, ceil_mode)
    hp = _padded_extent(h, oh, kh, sh, ph, dh)
    wp = _padded_extent(w, ow, kw, sw, pw, dw)
    index_dtype = xp.uint8 if kh * kw <= 256 else xp.int32
    out = xp.empty((n, c, oh, ow), dtype=x.dtype)
    argmax = xp.zeros((n, c, oh, ow), dtype=index_dtype)

    lowest = xp.iinfo(x.dtype).min if x.dtype.kind in "iu" else -xp.inf  # what padding is: it never wins

    def channels(c0: int, c1: int) -> None:
        xpad = _pad(x[:, c0:c1], ph, pw, hp, wp, lowest)  # (N, C', Hp, Wp)
        best, arg = out[:, c0:c1], argmax[:, c0:c1]
        best[...] = xpad[:, :, _window_slice(0, oh, sh), _window_slice(0, ow, sw)]  # offset (0, 0)
        better = xp.empty(best.shape, dtype=bool)
        candidate = xp.empty(best.shape, dtype=index_dtype)
        for i in range(kh):
            rows = _window_slice(i * dh, oh, sh)
            for j in range(kw):
                if i == 0 and j == 0:
                    continue
                v = xpad[:, :, rows, _window_slice(j * dw, ow, sw)]  # (N, C', OH, OW)
                xp.greater(v, best, out=better)  # strict: the first maximum in row-major order wins
                xp.maximum(best, v, out=best)
                # offsets only grow, so "take this offset where it is better" is a max with
                # 0 / offset: two cheap integer ops instead of a masked copy
                xp.multiply(better, index_dtype(i * kw + j), out=candidate)
                xp.maximum(arg, candidate, out=arg)

    parallel_for(xp, c, channels, work=x.size * kh * kw // max(sh * sw, 1))
    return out, argmax


def maxpool2d_backward(gout, argmax, x_shape: tuple[int, int, int, int], kernel_size: Pair,
                       stride: Pair, padding: Pair = (0, 0), dilation: Pair = (1, 1)):
    """Route each output gradient to the input pixel that won its window; (N, C, H, W)."""
    if is_half(gout.dtype):  # overlapping windows add: in float32, rounded once
        return maxpool2d_backward(gout.astype(np.float32), argmax, x_shape, kernel_size, stride, padding,
                                  dilation).astype(gout.dtype)
    xp = array_module(gout)
    n, c, h, w = x_shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    oh, ow = gout.shape[2:]
    hp = _padded_extent(h, oh, kh, sh, ph, dh)
    wp = _padded_extent(w, ow, kw, sw, pw, dw)
    padded = (hp, wp) != (h, w)
    gx = xp.empty((n, c, h, w), dtype=gout.dtype)
    if xp is np and SCATTER_ON_CPU:
        return _maxpool2d_backward_scatter(gout, argmax, gx, hp, wp, kernel_size, stride, padding, dilation)

    def channels(c0: int, c1: int) -> None:
        g, arg = gout[:, c0:c1], argmax[:, c0:c1]
        # accumulate straight into the output unless ceil_mode / padding need a wider canvas
        gpad = xp.zeros((n, c1 - c0, hp, wp), dtype=gout.dtype) if padded else gx[:, c0:c1]
        if not padded:
            gpad.fill(0)
        won = xp.empty(g.shape, dtype=bool)
        routed = xp.empty(g.shape, dtype=gout.dtype)
        for i in range(kh):
            rows = _window_slice(i * dh, oh, sh)
            for j in range(kw):
                xp.equal(arg, i * kw + j, out=won)
                xp.multiply(g, won, out=routed)  # the gradient of the windows this offset won
                gpad[:, :, rows, _window_slice(j * dw, ow, sw)] += routed
        if padded:
            gx[:, c0:c1] = gpad[:, :, ph:ph + h, pw:pw + w]

    parallel_for(xp, c, channels, work=gout.size * kh * kw)
    return gx


SCATTER_ON_CPU = True  # False: NumPy takes the slab path too (the one CuPy's fallback runs)


def _maxpool2d_backward_scatter(gout, argmax, gx, hp: int, wp: int, kernel_size: Pair, stride: Pair,
                                padding: Pair, dilation: Pair):
    """NumPy's maxpool2d_backward: one ``np.add.at`` of every output gradient onto its winner (the
    window's corner in the padded canvas plus a per-offset delta looked up from ``argmax``). Since
    NumPy 2 ``add.at`` is a tight, ordered loop, 3-5x faster than the kh*kw masked slab adds."""
    n, c, h, w = gx.shape
    oh, ow = gout.shape[2:]
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    padded = (hp, wp) != (h, w)
    delta = np.array([i * dh * wp + j * dw for i in range(kh) for j in range(kw)], dtype=np.intp)
    corner = (np.arange(oh, dtype=np.intp) * (sh * wp)).reshape(oh, 1) + np.arange(ow, dtype=np.intp) * sw

    def images(n0: int, n1: int) -> None:
        canvas = np.zeros((n1 - n0, c, hp, wp), dtype=gx.dtype) if padded else gx[n0:n1]
        if not padded:
            canvas.fill(0)
        plane = (np.arange((n1 - n0) * c, dtype=np.intp) * (hp * wp)).reshape(n1 - n0, c, 1, 1)
        index = plane + corner + delta[argmax[n0:n1]]  # (N', C, OH, OW) flat canvas indices
        np.add.at(canvas.reshape(-1), index.reshape(-1), np.ascontiguousarray(gout[n0:n1]).reshape(-1))
        if padded:
            gx[n0:n1] = canvas[:, :, ph:ph + h, pw:pw + w]

    parallel_for(np, n, images, work=gx.size)
    return gx


def _avg_divisor(xp, size: int, out: int, kernel: int, stride: int, padding: int,
                 count_include_pad: bool, dtype):
    """Per-output-position element count along one axis, as PyTorch's avg_pool2d divides.

    With count_include_pad the padding counts but the ceil_mode overhang beyond it does not.
    """
    start = xp.arange(out) * stride - padding
    if count_include_pad:
        count = xp.minimum(start + kernel, size + padding) - start
    else:
        count = xp.minimum(start + kernel, size) - xp.maximum(start, 0)
    return count.astype(dtype)


def _avg_count(xp, h, w, oh, ow, kernel_size, stride, padding, count_include_pad, dtype):
    """Each window's element count (OH, OW), broadcastable to (N, C, OH, OW)."""
    ch = _avg_divisor(xp, h, oh, kernel_size[0], stride[0], padding[0], count_include_pad, dtype)
    cw = _avg_divisor(xp, w, ow, kernel_size[1], stride[1], padding[1], count_include_pad, dtype)
    return ch[:, None] * cw[None, :]


def avgpool2d_forward(x, kernel_size: Pair, stride: Pair, padding: Pair = (0, 0),
                      ceil_mode: bool = False, count_include_pad: bool = True):
    """Mean over each window of ``x`` (N, C, H, W) -> (N, C, OH, OW)."""
    if is_half(x.dtype):  # sum in float32, round once
        return avgpool2d_forward(x.astype(np.float32), kernel_size, stride, padding, ceil_mode,
                                 count_include_pad).astype(x.dtype)
    xp = array_module(x)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw) = kernel_size, stride, padding
    oh, ow = pool_output_shape(h, w, kernel_size, stride, padding, (1, 1), ceil_mode)
    hp = _padded_extent(h, oh, kh, sh, ph, 1)
    wp = _padded_extent(w, ow, kw, sw, pw, 1)
    xpad = _pad(x, ph, pw, hp, wp, 0)
    out = xp.zeros((n, c, oh, ow), dtype=x.dtype)
    for i in range(kh):
        rows = _window_slice(i, oh, sh)
        for j in range(kw):
            out += xpad[:, :, rows, _window_slice(j, ow, sw)]
    count = _avg_count(xp, h, w, oh, ow, kernel_size, stride, padding, count_include_pad, out.dtype)
    if x.dtype.kind == "i":  # int64 (PyTorch's one integer type here): C's sum / count, toward zero
        return xp.sign(out) * (xp.abs(out) // count)
    out *= 1 / count
    return out


def avgpool2d_backward(gout, x_shape: tuple[int, int, int, int], kernel_size: Pair, stride: Pair,
                       padding: Pair = (0, 0), ceil_mode: bool = False,
                       count_include_pad: bool = True):
    """Spread each output gradient evenly over its window; returns (N, C, H, W)."""
    if is_half(gout.dtype):  # overlapping windows add: in float32, rounded once
        return avgpool2d_backward(gout.astype(np.float32), x_shape, kernel_size, stride, padding,
                                  ceil_mode, count_include_pad).astype(gout.dtype)
    xp = array_module(gout)
    n, c, h, w = x_shape
    (kh, kw), (sh, sw), (ph, pw) = kernel_size, stride, padding
    oh, ow = gout.shape[2:]
    hp = _padded_extent(h, oh, kh, sh, ph, 1)
    wp = _padded_extent(w, ow, kw, sw, pw, 1)
    g = gout * (1 / _avg_count(xp, h, w, oh, ow, kernel_size, stride, padding, count_include_pad, gout.dtype))
    gpad = xp.zeros((n, c, hp, wp), dtype=gout.dtype)
    for i in range(kh):
        rows = _window_slice(i, oh, sh)
        for j in range(kw):
            gpad[:, :, rows, _window_slice(j, ow, sw)] += g
    if (hp, wp) != (h, w):
        return xp.ascontiguousarray(gpad[:, :, ph:ph + h, pw:pw + w])  # (N, C, H, W)
    return gpad
