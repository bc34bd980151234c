"""Resampling and rearranging images (PyTorch's "vision functions"): interpolate and the upsample
aliases, grid_sample and affine_grid, pixel_shuffle / pixel_unshuffle, channel_shuffle, and
unfold / fold (im2col and col2im).

PyTorch surface: no framework layer, optimizer, recipe or model calls these; the layers that do
(Upsample, PixelShuffle, ChannelShuffle, Fold, Unfold) are surface layers too. ``F`` loads this
file on first use of one of its names.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tinyflow.kernels.shapes import IntPair, _pair, conv_output_size
from tinyflow.nn.functional._utils import FunctionalError, _as_constant
from tinyflow.ops.conv import conv2d, conv_transpose2d
from tinyflow.ops.pool import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
from tinyflow.ops.elementwise import not_implemented_for
from tinyflow.ops.interpolate import GridSample2dFunction, ResampleFunction, ResampleUint8Function, taps
from tinyflow.ops.interpolate import output_size as resampled_size
from tinyflow.tensor import Tensor, tensor

__all__ = [
    "unfold", "fold", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "affine_grid",
    "grid_sample", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
]


def unfold(input: Tensor, kernel_size: IntPair, dilation: IntPair = 1, padding: IntPair = 0,  # noqa: A002
           stride: IntPair = 1) -> Tensor:
    """im2col as PyTorch lays it out: (N, C, H, W) -> (N, C*kh*kw, L), L = OH*OW sliding blocks."""
    op = "unfold"
    if input.ndim != 4:
        raise FunctionalError(f"{op}: input must be 4-D (N, C, H, W), got shape {tuple(input.shape)}")
    k, d = _pair(kernel_size, "kernel_size", op), _pair(dilation, "dilation", op)
    p, s = _pair(padding, "padding", op), _pair(stride, "stride", op)
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
    k, d = _pair(kernel_size, "kernel_size", op), _pair(dilation, "dilation", op)
    p, s = _pair(padding, "padding", op), _pair(stride, "stride", op)
    oh, ow = _pair(output_size, "output_size", op)
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
# in fixed point and round, ops/interpolate.py's ResampleUint8Function); other integer and bool
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
    return (_as_constant(base, theta) @ theta.transpose(1, 2)).reshape(n, h, w, 2)


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
