"""Resampling along one axis, the building block of F.interpolate (nearest, nearest-exact,
linear/bilinear/trilinear, bicubic) and F.grid-free upsampling.

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
from typing import Any

import numpy as np

from tinyflow.autograd import Context, Function
from tinyflow.ops.linalg import matmul_array

__all__ = ["ResampleFunction", "taps"]

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
         scale_factor: float | None) -> tuple[np.ndarray, np.ndarray | None]:
    """(index (O, T), weight (O, T) or None) of ``mode`` along one axis, as PyTorch computes them.

    nearest: ``floor(o * scale)`` with the scale in float32 (PyTorch's nearest kernels use float,
    and the rounding decides which pixel is picked); nearest-exact: ``floor((o + 0.5) * scale)``;
    linear: source ``(o + 0.5) * scale - 0.5`` clamped at 0 (``o * scale`` with align_corners);
    cubic: the same source unclamped, four taps with clamped indices.
    """
    o = np.arange(out_size)
    last = in_size - 1
    if mode in ("nearest", "nearest-exact"):
        scale = np.float32(1.0 / scale_factor) if scale_factor else np.float32(in_size) / np.float32(out_size)
        pos = o.astype(np.float32) + (np.float32(0.5) if mode == "nearest-exact" else np.float32(0))
        index = np.minimum(np.floor(pos * scale).astype(np.int64), last)
        if mode == "nearest" and out_size == in_size:
            index = o
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


def output_size(in_size: int, scale_factor: float) -> int:
    """PyTorch's output size for a scale factor: floor(in * scale) in double precision."""
    return int(math.floor(float(in_size) * scale_factor))
