"""PyTorch's "vision functions": resampling and rearranging images. The ops resample along one
axis, the building block of F.interpolate (nearest, nearest-exact, linear/bilinear/trilinear,
bicubic), and at arbitrary points (F.grid_sample); the F functions at the end are interpolate and
the upsample aliases, grid_sample and affine_grid, pixel_shuffle / pixel_unshuffle,
channel_shuffle, and unfold / fold (im2col and col2im, as convolutions with one-hot kernels).

Every one of PyTorch's separable modes is, along each spatial axis, a fixed set of taps: output
entry ``o`` is ``sum_t weight[o, t] * x[index[o, t]]`` (one tap for nearest, two for linear, four
for cubic). :func:`taps` computes PyTorch's source indices and weights for a mode;
``ResampleFunction`` applies them along one axis, so a bilinear resize is two ops (H, then W).

Forward gathers the taps (``xp.take``), so an inf or NaN only reaches the outputs that read it,
as in PyTorch. Backward is the transposed resampling as one GEMM with the small (O, I) matrix
of the taps, which sums the gradients of every output that read an input entry.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from tinyflow.arg_parser import FunctionalError, IntPair, pair
from tinyflow.autograd.function import Context, Function
from tinyflow.creation import as_constant, tensor
from tinyflow.kernels.conv import conv_output_size
from tinyflow.ops.conv import conv2d, conv_transpose2d
from tinyflow.ops.elementwise import floating_only, not_implemented_for
from tinyflow.device import matmul_array
from tinyflow.ops.pool import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
from tinyflow.tensor import Tensor

__all__ = [
    "ResampleFunction", "ResampleUint8Function", "GridSample2dFunction", "taps", "resample_uint8",
    "unfold", "fold", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "affine_grid",
    "grid_sample", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
]

_CUBIC_A = -0.75  # PyTorch's (and OpenCV's) bicubic convolution parameter


def _source_scale(in_size: int, out_size: int, align_corners: bool, scale_factor: float | None) -> float:
    """PyTorch's area_pixel_compute_scale: input pixels per output pixel."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if scale_factor is not None and scale_factor > 0:
        return 1.0 / scale_factor
    return in_size / out_size


def _cubic_weights(t: np.ndarray) -> np.ndarray:
    """(O, 4) weights of the four taps at offsets -1, 0, 1, 2 for fractional positions ``t``."""
    a = _CUBIC_A

    def near(x: np.ndarray) -> np.ndarray:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: np.ndarray) -> np.ndarray:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=1)


def taps(mode: str, in_size: int, out_size: int, align_corners: bool,
         scale_factor: float | None, shortcuts: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """(index (O, T), weight (O, T) or None) of ``mode`` along one axis, as PyTorch computes them.

    nearest: ``floor(o * scale)`` with the scale in float32 (PyTorch's nearest kernels use float,
    and the rounding decides which pixel is picked), or with ``shortcuts`` (the kernel PyTorch
    runs for 2-d outputs with H + W <= 128) ``o`` where the size is kept and ``o // 2`` where it
    doubles, whatever the scale factor; nearest-exact: ``floor((o + 0.5) * scale)``;
    linear: source ``(o + 0.5) * scale - 0.5`` clamped at 0 (``o * scale`` with align_corners);
    cubic: the same source unclamped, four taps with clamped indices.
    """
    o = np.arange(out_size)
    last = in_size - 1
    if mode in ("nearest", "nearest-exact"):
        scale = np.float32(1.0 / scale_factor) if scale_factor else np.float32(in_size) / np.float32(out_size)
        pos = o.astype(np.float32) + (np.float32(0.5) if mode == "nearest-exact" else np.float32(0))
        index = np.minimum(np.floor(pos * scale).astype(np.int64), last)
        if mode == "nearest" and shortcuts and out_size in (in_size, 2 * in_size):
            index = o * in_size // out_size
        return index[:, None], None
    scale = _source_scale(in_size, out_size, align_corners, scale_factor)
    src = o * scale if align_corners else (o + 0.5) * scale - 0.5
    if mode == "linear":
        src = np.maximum(src, 0.0)
        i0 = np.floor(src).astype(np.int64)
        i1 = np.minimum(i0 + 1, last)
        frac = src - i0
        return np.stack([i0, i1], axis=1), np.stack([1 - frac, frac], axis=1)
    if mode == "cubic":
        i = np.floor(src).astype(np.int64)
        index = np.clip(i[:, None] + np.arange(-1, 3), 0, last)
        return index, _cubic_weights(src - i)
    raise ValueError(f"interpolate: unknown resampling mode {mode!r}")


class ResampleFunction(Function):
    """Resample ``a`` along ``axis`` to ``index.shape[0]`` entries with the given taps."""

    @staticmethod
    def forward(ctx: Context, a: Any, axis: int, index: np.ndarray, weight: np.ndarray | None) -> Any:
        xp = ctx.xp
        ctx.axis, ctx.taps, ctx.in_size = axis, (index, weight), a.shape[axis]
        idx = xp.asarray(index)
        if weight is None:
            return xp.take(a, idx[:, 0], axis=axis)
        shape = [1] * a.ndim
        shape[axis] = index.shape[0]
        w = xp.asarray(weight.astype(a.dtype))
        out = None
        for t in range(index.shape[1]):
            term = xp.take(a, idx[:, t], axis=axis) * w[:, t].reshape(shape)
            out = term if out is None else out + term
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        index, weight = ctx.taps
        rows = np.broadcast_to(np.arange(index.shape[0])[:, None], index.shape)
        matrix = np.zeros((index.shape[0], ctx.in_size), dtype=np.float64)  # (O, I)
        np.add.at(matrix, (rows, index), 1.0 if weight is None else weight)
        gm = xp.moveaxis(g, ctx.axis, -1)  # (..., O)
        gx = matmul_array(xp, gm, xp.asarray(matrix.astype(g.dtype)))  # (..., I)
        return xp.moveaxis(gx, -1, ctx.axis), None, None, None


class ResampleUint8Function(Function):
    """Bilinear or bicubic resampling of a uint8 (N, C, H, W) image as PyTorch computes it: one pass
    per axis whose size changes, W first, each pass rounded back to uint8 (:func:`resample_uint8`).
    Integer results carry no gradient."""

    @staticmethod
    def forward(ctx: Context, a: Any, cubic: bool, out_hw: tuple[int, int], align_corners: bool,
                scales: tuple[float | None, float | None]) -> Any:
        for axis in (3, 2):  # W, then H, as PyTorch (and Pillow) order the passes
            if out_hw[axis - 2] != a.shape[axis]:
                a = resample_uint8(ctx.xp, a, axis, out_hw[axis - 2], cubic, align_corners, scales[axis - 2])
        return a

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        raise RuntimeError("interpolate: a uint8 result has no gradient")


def _uint8_taps(in_size: int, out_size: int, cubic: bool, align_corners: bool,
                scale_factor: float | None) -> tuple[np.ndarray, np.ndarray, int]:
    """PyTorch's fixed-point taps for uint8 input (its compute_index_ranges_int16_weights): the
    first source index of each output (O,), the int16 weights (O, T) and their precision in bits.

    The float weights are PyTorch's (and :func:`taps`'), but border taps that would read a clamped
    index are summed into the nearest valid one, and the weights are scaled by 2**precision (the
    most bits that keep the largest weight below 2**15) and rounded half away from zero.
    """
    t = 4 if cubic else 2
    support = t // 2
    scale = _source_scale(in_size, out_size, align_corners, scale_factor)
    first = np.zeros(out_size, dtype=np.int64)
    weights = np.zeros((out_size, t))
    largest = 0.0
    for o in range(out_size):  # O is an image side: a few hundred iterations at most
        src = scale * o if align_corners else scale * (o + 0.5) - 0.5
        if not cubic and not align_corners:
            src = max(src, 0.0)
        i = min(int(np.floor(np.float32(src))), in_size - 1)  # PyTorch's floorf: the float32 floor
        frac = min(max(src - i, 0.0), 1.0)
        low = i - support + 1  # the unclamped first tap
        first[o] = max(low, 0)
        size = min(max(min(i + support + 1, in_size) - first[o], 0), t)
        slot = 0
        for j in range(t):
            x = abs(j + 1 - support - frac)
            if cubic:
                a = _CUBIC_A
                w = ((a + 2) * x - (a + 3)) * x * x + 1 if x < 1 else (((a * x - 5 * a) * x + 8 * a) * x - 4 * a
                                                                          if x < 2 else 0.0)
            else:
                w = max(1.0 - x, 0.0)
            if low + j <= 0:
                slot = 0
            elif low + j >= in_size - 1:
                slot = size - 1
            weights[o, slot] += w
            largest = max(largest, weights[o, slot])
            slot += 1
    precision = 0
    while precision < 22 and int(0.5 + largest * (1 << (precision + 1))) < 1 << 15:
        precision += 1
    scaled = weights * (1 << precision)
    return first, np.trunc(scaled + np.where(scaled < 0, -0.5, 0.5)).astype(np.int32), precision


def resample_uint8(xp: Any, a: Any, axis: int, out_size: int, cubic: bool, align_corners: bool,
                   scale_factor: float | None) -> Any:
    """One fixed-point pass of ``a`` (uint8) along ``axis``: the int16 taps times the pixels summed
    in int32 with half of the last place added, shifted down by the precision, clamped to 0..255."""
    first, weights, precision = _uint8_taps(a.shape[axis], out_size, cubic, align_corners, scale_factor)
    src = xp.moveaxis(a, axis, -1).astype(np.int32)  # (..., I)
    last = a.shape[axis] - 1
    acc = xp.full(src.shape[:-1] + (out_size,), 1 << (precision - 1), dtype=np.int32)  # (..., O)
    for j in range(weights.shape[1]):
        index = xp.asarray(np.minimum(first + j, last))  # past the border the weight is 0
        acc += xp.take(src, index, axis=-1) * xp.asarray(weights[:, j])
    out = xp.clip(acc >> precision, 0, 255).astype(np.uint8)
    return xp.moveaxis(out, -1, axis)


def resampled_size(in_size: int, scale_factor: float) -> int:
    """PyTorch's output size for a scale factor: floor(in * scale) in double precision."""
    return int(math.floor(float(in_size) * scale_factor))


# ---------------------------------------------------------------------------------- grid_sample
def _unnormalize(xp: Any, coord: Any, size: int, align_corners: bool) -> tuple[Any, float]:
    """Grid coordinates in [-1, 1] as pixel positions, and d(position)/d(coordinate)."""
    if align_corners:
        return (coord + 1) / 2 * (size - 1), (size - 1) / 2
    return ((coord + 1) * size - 1) / 2, size / 2


def _reflect(xp: Any, pos: Any, twice_low: float, twice_high: float) -> tuple[Any, Any]:
    """PyTorch's reflect_coordinates: fold ``pos`` into [low, high]; and d(out)/d(pos) (+-1)."""
    if twice_low == twice_high:
        return xp.zeros_like(pos), xp.zeros_like(pos)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    shifted = pos - low
    sign = xp.where(shifted < 0, -1.0, 1.0)
    dist = xp.abs(shifted)
    extra = xp.fmod(dist, span)
    flips = xp.floor(dist / span)
    even = flips % 2 == 0
    out = xp.where(even, extra + low, span - extra + low)
    return out, sign * xp.where(even, 1.0, -1.0)


def _source_positions(xp: Any, coord: Any, size: int, padding_mode: str, align_corners: bool) -> tuple[Any, Any]:
    """Pixel positions for one axis of the grid under ``padding_mode``, and their derivative
    with respect to the grid coordinate."""
    pos, scale = _unnormalize(xp, coord, size, align_corners)
    grad = xp.full(pos.shape, scale, dtype=pos.dtype)
    if padding_mode == "reflection":
        if align_corners:
            pos, d = _reflect(xp, pos, 0.0, 2.0 * (size - 1))
        else:
            pos, d = _reflect(xp, pos, -1.0, 2.0 * size - 1)
        grad = grad * d
    if padding_mode in ("border", "reflection"):
        inside = (pos > 0) & (pos < size - 1)
        grad = grad * inside
        pos = xp.clip(pos, 0, size - 1)
    return pos, grad


class GridSample2dFunction(Function):
    """F.grid_sample on (N, C, H, W) with a (N, Ho, Wo, 2) grid of (x, y) in [-1, 1]: bilinear or
    nearest sampling, zeros / border / reflection padding, PyTorch's align_corners rule.
    Gradients for the input (scatter-added to the sampled pixels) and, bilinear, the grid."""

    @staticmethod
    def forward(ctx: Context, x: Any, grid: Any, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool = False) -> Any:
        xp = ctx.xp
        floating_only("grid_sample", x)
        n, c, h, w = x.shape
        ho, wo = grid.shape[1:3]
        ix, dix = _source_positions(xp, grid[..., 0].reshape(n, -1), w, padding_mode, align_corners)
        iy, diy = _source_positions(xp, grid[..., 1].reshape(n, -1), h, padding_mode, align_corners)
        flat = x.reshape(n, c, h * w).transpose(0, 2, 1)  # (N, H*W, C)
        if mode == "nearest":
            cx, cy = xp.rint(ix).astype(np.int64), xp.rint(iy).astype(np.int64)  # half to even, as nearbyint
            corners = [(cx, cy, xp.ones(ix.shape, dtype=x.dtype))]
        else:
            x0, y0 = xp.floor(ix).astype(np.int64), xp.floor(iy).astype(np.int64)
            fx, fy = (ix - x0).astype(x.dtype), (iy - y0).astype(x.dtype)
            corners = [(x0, y0, (1 - fx) * (1 - fy)), (x0 + 1, y0, fx * (1 - fy)),
                       (x0, y0 + 1, (1 - fx) * fy), (x0 + 1, y0 + 1, fx * fy)]
        out = xp.zeros((n, ho * wo, c), dtype=x.dtype)
        gathered = []
        for cx, cy, weight in corners:
            valid = (cx >= 0) & (cx < w) & (cy >= 0) & (cy < h)
            index = xp.where(valid, cy * w + cx, 0)
            values = xp.take_along_axis(flat, index[..., None], axis=1) * valid[..., None]  # (N, P, C)
            out += values * weight[..., None]
            gathered.append((index, valid, weight, values))
        ctx.state = (gathered, mode, x.shape, (ix, iy, dix, diy), corners)
        return out.transpose(0, 2, 1).reshape(n, c, ho, wo).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        gathered, mode, shape, (ix, iy, dix, diy), corners = ctx.state
        n, c, h, w = shape
        gp = g.reshape(n, c, -1).transpose(0, 2, 1)  # (N, P, C)
        gx = None
        if ctx.needs_input_grad[0]:
            acc = xp.zeros((n, h * w, c), dtype=g.dtype)
            batch = xp.broadcast_to(xp.arange(n)[:, None], gathered[0][0].shape)
            for index, valid, weight, _ in gathered:
                xp.add.at(acc, (batch, index), gp * (weight * valid)[..., None])
            gx = acc.transpose(0, 2, 1).reshape(shape)
        ggrid = None
        if ctx.needs_input_grad[1]:
            ggrid = xp.zeros(ix.shape + (2,), dtype=g.dtype)
            if mode != "nearest":
                (v00, v10, v01, v11) = [item[3] for item in gathered]  # (N, P, C), 0 outside
                fx, fy = ix - xp.floor(ix), iy - xp.floor(iy)
                d_ix = (((v10 - v00) * (1 - fy)[..., None] + (v11 - v01) * fy[..., None]) * gp).sum(-1)
                d_iy = (((v01 - v00) * (1 - fx)[..., None] + (v11 - v10) * fx[..., None]) * gp).sum(-1)
                ggrid[..., 0] = d_ix * dix
                ggrid[..., 1] = d_iy * diy
            ggrid = ggrid.reshape(g.shape[0], g.shape[2], g.shape[3], 2)
        return gx, ggrid, None, None, None


# ======================================================================= F (tinyflow.nn.functional)


def unfold(input: Tensor, kernel_size: IntPair, dilation: IntPair = 1, padding: IntPair = 0,  # noqa: A002
           stride: IntPair = 1) -> Tensor:
    """im2col as PyTorch lays it out: (N, C, H, W) -> (N, C*kh*kw, L), L = OH*OW sliding blocks."""
    op = "unfold"
    if input.ndim != 4:
        raise FunctionalError(f"{op}: input must be 4-D (N, C, H, W), got shape {tuple(input.shape)}")
    k, d = pair(kernel_size, "kernel_size", op), pair(dilation, "dilation", op)
    p, s = pair(padding, "padding", op), pair(stride, "stride", op)
    n, c, h, w = input.shape
    eye = tensor(_identity_kernels(k), dtype=input.dtype, device=input.device)  # (kh*kw, 1, kh, kw)
    y = conv2d(input.reshape(n * c, 1, h, w), eye, None, s, p, d)  # (N*C, kh*kw, OH, OW)
    return y.reshape(n, c * k[0] * k[1], -1)


def fold(input: Tensor, output_size: IntPair, kernel_size: IntPair, dilation: IntPair = 1,  # noqa: A002
         padding: IntPair = 0, stride: IntPair = 1) -> Tensor:
    """col2im, the adjoint of unfold: (N, C*kh*kw, L) -> (N, C, H, W), overlapping blocks summed."""
    op = "fold"
    if input.ndim != 3:
        raise FunctionalError(f"{op}: input must be 3-D (N, C*kh*kw, L), got shape {tuple(input.shape)}")
    k, d = pair(kernel_size, "kernel_size", op), pair(dilation, "dilation", op)
    p, s = pair(padding, "padding", op), pair(stride, "stride", op)
    oh, ow = pair(output_size, "output_size", op)
    n, ckk, length = input.shape
    kk = k[0] * k[1]
    bh = conv_output_size(oh, k[0], s[0], p[0], d[0])
    bw = conv_output_size(ow, k[1], s[1], p[1], d[1])
    if ckk % kk or bh * bw != length:
        raise FunctionalError(f"{op}: input {tuple(input.shape)} does not hold C*{kk} rows of {bh}x{bw} = "
                              f"{bh * bw} blocks for output_size {(oh, ow)}, kernel_size {k}")
    c = ckk // kk
    eye = tensor(_identity_kernels(k), dtype=input.dtype, device=input.device)  # (kh*kw, 1, kh, kw)
    x = input.reshape(n * c, kk, bh, bw)
    hout = (bh - 1) * s[0] - 2 * p[0] + d[0] * (k[0] - 1) + 1
    wout = (bw - 1) * s[1] - 2 * p[1] + d[1] * (k[1] - 1) + 1
    # output_padding (< stride) restores the rows and columns the last block only partly covers
    y = conv_transpose2d(x, eye, None, s, p, (oh - hout, ow - wout), 1, d)  # (N*C, 1, OH, OW)
    return y.reshape(n, c, oh, ow)


def _identity_kernels(k: tuple[int, int]) -> Any:
    """(kh*kw, 1, kh, kw) one-hot kernels: a convolution with them copies each window offset."""
    kk = k[0] * k[1]
    return np.eye(kk).reshape(kk, 1, k[0], k[1])


_RESAMPLE = {"nearest": ("nearest", None), "nearest-exact": ("nearest-exact", None), "area": ("area", None),
             "linear": ("linear", 1), "bilinear": ("linear", 2), "trilinear": ("linear", 3), "bicubic": ("cubic", 2)}
# The modes PyTorch resamples uint8 images in (nearest copies pixels; bilinear and bicubic compute
# in fixed point and round, ResampleUint8Function above); other integer and bool
# input, and uint8 in the other modes, it refuses.
_UINT8_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic")


def _spatial(op: str, value: Any, dims: int, name: str, x: Tensor) -> list[Any]:
    values = list(value) if isinstance(value, (tuple, list)) else [value] * dims
    if len(values) != dims:
        raise FunctionalError(f"{op}: input with spatial dimensions {list(x.shape[2:])} needs {dims} values of "
                              f"{name}, got {value}; give the input as (N, C, d1, ...) and one {name} per spatial dim")
    return values


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",  # noqa: A002
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize (N, C, L), (N, C, H, W) or (N, C, D, H, W) to ``size`` or by ``scale_factor``, with
    PyTorch's source-pixel rules: nearest, nearest-exact, (bi/tri)linear with or without
    align_corners, bicubic and area (adaptive average pooling)."""
    op = "interpolate"
    if mode not in _RESAMPLE:
        raise NotImplementedError(f"{op}: mode {mode!r} is not supported; use one of {sorted(_RESAMPLE)}")
    kind, needs = _RESAMPLE[mode]
    dims = input.ndim - 2
    if dims not in (1, 2, 3):
        raise NotImplementedError(f"{op}: input must be 3-D, 4-D or 5-D (N, C, d1, ...), got shape "
                                  f"{tuple(input.shape)} for mode {mode!r}")
    if needs is not None and needs != dims:
        raise NotImplementedError(f"{op}: got {input.ndim}D input, but {mode} mode needs {needs + 2}D input")
    if align_corners is not None and kind not in ("linear", "cubic"):
        raise FunctionalError(f"{op}: align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if antialias:
        raise NotImplementedError(f"{op}: antialias=True is not supported")
    if size is not None and scale_factor is not None:
        raise FunctionalError(f"{op}: only one of size or scale_factor should be defined")
    in_sizes = list(input.shape[2:])
    if size is not None:
        out_sizes = [int(v) for v in _spatial(op, size, dims, "size", input)]
        scales: list[float | None] = [None] * dims
    elif scale_factor is not None:
        factors = [float(v) for v in _spatial(op, scale_factor, dims, "scale_factor", input)]
        out_sizes = [resampled_size(n, f) for n, f in zip(in_sizes, factors)]
        scales = [None] * dims if recompute_scale_factor else factors
    else:
        raise FunctionalError(f"{op}: either size or scale_factor should be defined")
    if min(out_sizes + in_sizes) < 1:
        raise FunctionalError(f"{op}: input and output sizes should be greater than 0, but got input "
                              f"{in_sizes} and output {out_sizes}")
    if not input.is_floating_point() and not (input.dtype == np.uint8 and mode in _UINT8_MODES):
        raise not_implemented_for(f"interpolate (mode={mode!r})", input.dtype)
    if input.dtype == np.uint8 and kind in ("linear", "cubic"):
        return ResampleUint8Function.apply(input, kind == "cubic", tuple(out_sizes), bool(align_corners), tuple(scales))
    if kind == "area":
        pool = {1: adaptive_avg_pool1d, 2: adaptive_avg_pool2d, 3: adaptive_avg_pool3d}[dims]
        return pool(input, out_sizes[0] if dims == 1 else tuple(out_sizes))
    out = input
    for i in range(dims):
        index, weight = taps(kind, in_sizes[i], out_sizes[i], bool(align_corners), scales[i],
                             shortcuts=dims == 2 and sum(out_sizes) <= 128)
        out = ResampleFunction.apply(out, 2 + i, index, weight)
    return out


def upsample(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",  # noqa: A002
             align_corners: bool | None = None) -> Tensor:
    """Deprecated alias of interpolate (as in PyTorch)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:  # noqa: A002
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:  # noqa: A002
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def _align_corners_default(op: str, align_corners: bool | None) -> bool:
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since "
                      "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
                      "documentation of grid_sample for details.", UserWarning, stacklevel=3)
        return False
    return bool(align_corners)


def affine_grid(theta: Tensor, size: Any, align_corners: bool | None = None) -> Tensor:
    """The (N, H, W, 2) sampling grid of the affine maps ``theta`` (N, 2, 3) for an output of
    ``size`` (N, C, H, W), in grid_sample's [-1, 1] coordinates."""
    op = "affine_grid"
    align = _align_corners_default(op, align_corners)
    if len(size) != 4:
        raise NotImplementedError(f"{op}: only 4-D sizes (N, C, H, W) are supported, got {list(size)}")
    n, _, h, w = (int(v) for v in size)
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3) or theta.shape[0] != n:
        raise FunctionalError(f"{op}: expected a batch of 2-D affine matrices of shape Nx2x3 for size {list(size)}, "
                              f"got {tuple(theta.shape)}")

    def axis(k: int) -> np.ndarray:
        if k <= 1:
            return np.zeros(k)
        points = np.linspace(-1, 1, k)
        return points if align else points * (k - 1) / k

    xs, ys = np.meshgrid(axis(w), axis(h))
    base = np.stack([xs, ys, np.ones_like(xs)], axis=-1).reshape(h * w, 3)  # (H*W, 3)
    return (as_constant(base, theta) @ theta.transpose(1, 2)).reshape(n, h, w, 2)


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",  # noqa: A002
                align_corners: bool | None = None) -> Tensor:
    """Sample (N, C, H, W) at the (x, y) points of ``grid`` (N, Ho, Wo, 2) in [-1, 1]: bilinear or
    nearest, with zeros, border or reflection padding; differentiable in input and grid."""
    op = "grid_sample"
    if mode not in ("bilinear", "nearest"):
        raise NotImplementedError(f"{op}: mode {mode!r} is not supported; use 'bilinear' or 'nearest'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise FunctionalError(f"{op}: expected padding_mode to be 'zeros', 'border', or 'reflection', "
                              f"but got: {padding_mode!r}")
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise FunctionalError(f"{op}: expected input (N, C, H, W) and grid (N, Ho, Wo, 2) with the same N, got "
                              f"{tuple(input.shape)} and {tuple(grid.shape)}")
    align = _align_corners_default(op, align_corners)
    return GridSample2dFunction.apply(input, grid.to(input.dtype), mode, padding_mode, align)


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:  # noqa: A002
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    r = int(upscale_factor)
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise FunctionalError(f"pixel_shuffle: {c} channels of input {tuple(input.shape)} are not divisible "
                              f"by upscale_factor**2 = {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)  # (*, C, H, r, W, r)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:  # noqa: A002
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W)."""
    r = int(downscale_factor)
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise FunctionalError(f"pixel_unshuffle: height and width of input {tuple(input.shape)} must be "
                              f"divisible by downscale_factor {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)  # (*, C, r, r, H, W)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:  # noqa: A002
    """(N, C, *) with the C channels read as (groups, C/groups) and transposed (ShuffleNet)."""
    n, c = input.shape[:2]
    if c % groups:
        raise FunctionalError(f"channel_shuffle: {c} channels of input {tuple(input.shape)} are not divisible "
                              f"by groups={groups}")
    rest = tuple(input.shape[2:])
    return input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(n, c, *rest)
