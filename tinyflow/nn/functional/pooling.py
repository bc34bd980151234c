"""Pooling: max, average, adaptive, power-average (lp) and max-unpooling in 1, 2 and 3 dims.
The 2-d forms call the ops of tinyflow/ops/pool.py; 1-d pools a height-1 image, 3-d pools the
(H, W) planes and then along the depth."""
from __future__ import annotations

from typing import Any

from tinyflow.kernels.shapes import IntPair, _pair, pool_output_shape
from tinyflow.nn.functional._utils import FunctionalError, _single, _triple
from tinyflow.ops.pool import (
    AdaptiveAvgPool2dFunction,
    AdaptiveMaxPool2dFunction,
    AvgPool2dFunction,
    MaxPool2dFunction,
    MaxUnpool2dFunction,
)
from tinyflow.tensor import Tensor

__all__ = [
    "max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "max_pool1d", "avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_max_pool2d", "adaptive_avg_pool1d", "adaptive_max_pool1d", "max_pool3d", "avg_pool3d",
    "adaptive_avg_pool3d", "adaptive_max_pool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d",
    "max_unpool2d",
]


def _check_input(op: str, x: Tensor) -> None:
    if x.ndim not in (3, 4):
        raise FunctionalError(f"{op}: input must be (N, C, H, W) or (C, H, W), got shape {tuple(x.shape)}")


def _batched(x: Tensor) -> tuple[Tensor, bool]:
    return (x.reshape(1, *x.shape), True) if x.ndim == 3 else (x, False)


def _pool_geometry(op: str, x: Tensor, kernel_size, stride, padding, dilation, ceil_mode):
    _check_input(op, x)
    k = _pair(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _pair(stride, "stride", op)
    p, d = _pair(padding, "padding", op), _pair(dilation, "dilation", op)
    if min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
        raise FunctionalError(f"{op}: need kernel_size, stride, dilation >= 1 and padding >= 0; got "
                         f"kernel_size={k}, stride={s}, padding={p}, dilation={d}")
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise FunctionalError(f"{op}: padding {p} must be at most half of kernel_size {k} (as in PyTorch)")
    oh, ow = pool_output_shape(x.shape[-2], x.shape[-1], k, s, p, d, ceil_mode)
    if oh < 1 or ow < 1:
        raise FunctionalError(f"{op}: input {tuple(x.shape)} is too small for kernel_size {k} with "
                         f"padding {p} and dilation {d} (output would be {oh}x{ow})")
    return k, s, p, d


def max_pool2d(x: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
               padding: IntPair = 0, dilation: IntPair = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Any:
    """Max pooling over (N, C, H, W); stride defaults to kernel_size, as in PyTorch.

    With ``return_indices`` also the position of each maximum as a flat index into its
    (H, W) plane (int64), as ``max_unpool2d`` takes it.
    """
    k, s, p, d = _pool_geometry("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode)
    x, unbatched = _batched(x)
    out = MaxPool2dFunction.apply(x, k, s, p, d, bool(ceil_mode), bool(return_indices))
    if unbatched:
        out = tuple(o.reshape(*o.shape[1:]) for o in out) if return_indices else out.reshape(*out.shape[1:])
    return out


def max_pool2d_with_indices(x: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
                            padding: IntPair = 0, dilation: IntPair = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple[Tensor, Tensor]:
    return max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool2d(x: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
               padding: IntPair = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Average pooling over (N, C, H, W); padding counts in the divisor by default (PyTorch).

    ``divisor_override`` divides each window's sum by that number instead."""
    k, s, p, _ = _pool_geometry("avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None:
        if divisor_override == 0:
            raise FunctionalError("avg_pool2d: divisor_override must be non-zero")
        if ceil_mode:
            raise NotImplementedError("avg_pool2d: divisor_override with ceil_mode=True is not supported")
        return avg_pool2d(x, k, s, p, False, True) * (k[0] * k[1] / divisor_override)
    x, unbatched = _batched(x)
    y = AvgPool2dFunction.apply(x, k, s, p, bool(ceil_mode), bool(count_include_pad))
    return y.reshape(*y.shape[1:]) if unbatched else y


def _as_2d(op: str, x: Tensor) -> Tensor:
    """(N, C, L) or (C, L) as a height-1 image for the 1-D pools."""
    if x.ndim not in (2, 3):
        raise FunctionalError(f"{op}: input must be (N, C, L) or (C, L), got shape {tuple(x.shape)}")
    return x.reshape(*x.shape[:-1], 1, x.shape[-1])


def _from_2d(y: Tensor) -> Tensor:
    return y.reshape(*y.shape[:-2], y.shape[-1])


def max_pool1d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over (N, C, L): max_pool2d on a height-1 image."""
    op = "max_pool1d"
    k = _single(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _single(stride, "stride", op)
    out = max_pool2d(_as_2d(op, x), (1, k), (1, s), (0, _single(padding, "padding", op)),
                     (1, _single(dilation, "dilation", op)), ceil_mode, return_indices)
    return tuple(_from_2d(o) for o in out) if return_indices else _from_2d(out)


def avg_pool1d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """Average pooling over (N, C, L): avg_pool2d on a height-1 image."""
    op = "avg_pool1d"
    k = _single(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _single(stride, "stride", op)
    return _from_2d(avg_pool2d(_as_2d(op, x), (1, k), (1, s), (0, _single(padding, "padding", op)), ceil_mode,
                               count_include_pad))


def _adaptive_size(op: str, x: Tensor, output_size: Any) -> tuple[int, int]:
    _check_input(op, x)
    h, w = x.shape[-2:]
    if output_size is None or isinstance(output_size, int):
        output_size = (output_size, output_size)
    oh, ow = (h if output_size[0] is None else int(output_size[0]),
              w if output_size[1] is None else int(output_size[1]))
    if oh < 1 or ow < 1 or h < 1 or w < 1:
        raise FunctionalError(f"{op}: input {tuple(x.shape)} and output_size {(oh, ow)} must both be non-empty")
    return oh, ow


def adaptive_avg_pool2d(x: Tensor, output_size: int | None | tuple[int | None, int | None]) -> Tensor:
    """Average pooling to a fixed (OH, OW), windows as PyTorch's; None keeps that input size."""
    oh, ow = _adaptive_size("adaptive_avg_pool2d", x, output_size)
    if (oh, ow) == tuple(x.shape[-2:]):
        return x  # every window is one pixel: the identity (AlexNet's 6x6 -> 6x6 at 224)
    return AdaptiveAvgPool2dFunction.apply(x, (oh, ow))


def adaptive_max_pool2d(x: Tensor, output_size: int | None | tuple[int | None, int | None],
                        return_indices: bool = False) -> Any:
    """Max over PyTorch's adaptive windows to a fixed (OH, OW); indices as max_pool2d's."""
    oh, ow = _adaptive_size("adaptive_max_pool2d", x, output_size)
    out, indices = AdaptiveMaxPool2dFunction.apply(x, (oh, ow))
    return (out, indices) if return_indices else out


def adaptive_avg_pool1d(x: Tensor, output_size: Any) -> Tensor:
    op = "adaptive_avg_pool1d"
    return _from_2d(adaptive_avg_pool2d(_as_2d(op, x), (1, _single(output_size, "output_size", op))))


def adaptive_max_pool1d(x: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    op = "adaptive_max_pool1d"
    out = adaptive_max_pool2d(_as_2d(op, x), (1, _single(output_size, "output_size", op)), return_indices)
    return tuple(_from_2d(o) for o in out) if return_indices else _from_2d(out)


def _as_5d(op: str, x: Tensor) -> tuple[Tensor, bool]:
    if x.ndim not in (4, 5):
        raise FunctionalError(f"{op}: input must be (N, C, D, H, W) or (C, D, H, W), got shape {tuple(x.shape)}")
    return (x.unsqueeze(0), True) if x.ndim == 4 else (x, False)


def _depth_pass(fn: Any, x: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``fn`` (a 2-d pool) along the depth of (N, C, D, H, W), one (1, D) image per position."""
    n, c, d, h, w = x.shape
    rows = x.permute(0, 1, 3, 4, 2).reshape(n, c * h * w, 1, d)
    out = fn(rows, *args, **kwargs)
    values = out[0] if isinstance(out, tuple) else out
    od = values.shape[-1]

    def back(t: Tensor) -> Tensor:
        return t.reshape(n, c, h, w, od).permute(0, 1, 4, 2, 3)  # (N, C, OD, H, W)

    return tuple(back(t) for t in out) if isinstance(out, tuple) else back(out)


def _plane_pass(fn: Any, x: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``fn`` (a 2-d pool) over every depth slice of (N, C, D, H, W)."""
    n, c, d = x.shape[:3]
    out = fn(x.reshape(n, c * d, *x.shape[3:]), *args, **kwargs)

    def back(t: Tensor) -> Tensor:
        return t.reshape(n, c, d, *t.shape[2:])

    return tuple(back(t) for t in out) if isinstance(out, tuple) else back(out)


def _combine_indices(plane_idx: Tensor, depth_idx: Tensor, h: int, w: int) -> Tensor:
    """Flat (D*H*W) indices from the depth pass's argmax and the plane pass's argmaxes."""
    xp = plane_idx.device.xp
    d_idx = depth_idx.array  # (N, C, OD, OH, OW), an index into D
    hw = xp.take_along_axis(plane_idx.array, d_idx, axis=2)
    return Tensor._from_array(d_idx * (h * w) + hw, device=plane_idx.device)


def max_pool3d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over (N, C, D, H, W): the maximum of maxima, over (H, W) then over D."""
    op = "max_pool3d"
    x, unbatched = _as_5d(op, x)
    k = _triple(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _triple(stride, "stride", op)
    p, d = _triple(padding, "padding", op), _triple(dilation, "dilation", op)
    plane = _plane_pass(max_pool2d, x, k[1:], s[1:], p[1:], d[1:], ceil_mode, return_indices)
    values = plane[0] if return_indices else plane
    deep = _depth_pass(max_pool2d, values, (1, k[0]), (1, s[0]), (0, p[0]), (1, d[0]), ceil_mode, return_indices)
    if return_indices:
        out = (deep[0], _combine_indices(plane[1], deep[1], x.shape[3], x.shape[4]))
        return tuple(t.squeeze(0) for t in out) if unbatched else out
    return deep.squeeze(0) if unbatched else deep


def avg_pool3d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Average pooling over (N, C, D, H, W): over (H, W) then over D (the divisor is a product of
    per-axis counts, so the passes are exact)."""
    op = "avg_pool3d"
    x, unbatched = _as_5d(op, x)
    k = _triple(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _triple(stride, "stride", op)
    p = _triple(padding, "padding", op)
    if divisor_override is not None:
        if divisor_override == 0:
            raise FunctionalError(f"{op}: divisor must be not zero")
        if ceil_mode:
            raise NotImplementedError(f"{op}: divisor_override with ceil_mode=True is not supported")
        out = avg_pool3d(x, k, s, p, False, True) * (k[0] * k[1] * k[2] / divisor_override)
        return out.squeeze(0) if unbatched else out
    plane = _plane_pass(avg_pool2d, x, k[1:], s[1:], p[1:], ceil_mode, count_include_pad)
    out = _depth_pass(avg_pool2d, plane, (1, k[0]), (1, s[0]), (0, p[0]), ceil_mode, count_include_pad)
    return out.squeeze(0) if unbatched else out


def _adaptive_3d(op: str, x: Tensor, output_size: Any) -> tuple[Tensor, bool, tuple[int, int, int]]:
    x, unbatched = _as_5d(op, x)
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * 3
    if len(sizes) != 3:
        raise FunctionalError(f"{op}: output_size must be an int or 3 values, got {output_size}")
    out = tuple(x.shape[2 + i] if v is None else int(v) for i, v in enumerate(sizes))
    return x, unbatched, out  # type: ignore[return-value]


def adaptive_avg_pool3d(x: Tensor, output_size: Any) -> Tensor:
    """Average pooling to a fixed (OD, OH, OW) with PyTorch's adaptive windows, axis by axis."""
    x, unbatched, (od, oh, ow) = _adaptive_3d("adaptive_avg_pool3d", x, output_size)
    plane = _plane_pass(adaptive_avg_pool2d, x, (oh, ow))
    out = _depth_pass(adaptive_avg_pool2d, plane, (1, od))
    return out.squeeze(0) if unbatched else out


def adaptive_max_pool3d(x: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling to a fixed (OD, OH, OW) with PyTorch's adaptive windows, axis by axis."""
    x, unbatched, (od, oh, ow) = _adaptive_3d("adaptive_max_pool3d", x, output_size)
    plane = _plane_pass(adaptive_max_pool2d, x, (oh, ow), True)
    deep = _depth_pass(adaptive_max_pool2d, plane[0], (1, od), True)
    out = (deep[0], _combine_indices(plane[1], deep[1], x.shape[3], x.shape[4])) if return_indices else deep[0]
    if unbatched:
        return tuple(t.squeeze(0) for t in out) if return_indices else out.squeeze(0)
    return out


def _lp(out: Tensor, window: int, norm_type: float) -> Tensor:
    """PyTorch's lp_pool finish: (sign(mean) * relu(|mean|) * window) ** (1 / p)."""
    return (out.sign() * out.abs().relu() * float(window)) ** (1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Tensor:
    """(sum over each window of x**p) ** (1/p), as PyTorch computes it (through avg_pool)."""
    k = _single(kernel_size, "kernel_size", "lp_pool1d")
    return _lp(avg_pool1d(input**norm_type, k, stride, 0, ceil_mode), k, norm_type)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: IntPair, stride: IntPair | None = None,  # noqa: A002
              ceil_mode: bool = False) -> Tensor:
    kh, kw = _pair(kernel_size, "kernel_size", "lp_pool2d")
    return _lp(avg_pool2d(input**norm_type, (kh, kw), stride, 0, ceil_mode), kh * kw, norm_type)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Tensor:
    kd, kh, kw = _triple(kernel_size, "kernel_size", "lp_pool3d")
    return _lp(avg_pool3d(input**norm_type, (kd, kh, kw), stride, 0, ceil_mode), kd * kh * kw, norm_type)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
                 output_size: Any = None) -> Tensor:
    """max_unpool2d on a height-1 image: the partial inverse of max_pool1d."""
    op = "max_unpool1d"
    k = _single(kernel_size, "kernel_size", op)
    s = k if stride is None else _single(stride, "stride", op)
    size = None if output_size is None else (1, int(tuple(output_size)[-1]))
    out = max_unpool2d(_as_2d(op, input), _as_2d(op, indices), (1, k), (1, s),
                       (0, _single(padding, "padding", op)), size)
    return _from_2d(out)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size: IntPair, stride: IntPair | None = None,  # noqa: A002
                 padding: IntPair = 0, output_size: Any = None) -> Tensor:
    """The partial inverse of max_pool2d: each value put back at its index, zeros elsewhere."""
    op = "max_unpool2d"
    k = _pair(kernel_size, "kernel_size", op)
    s = k if stride is None else _pair(stride, "stride", op)
    p = _pair(padding, "padding", op)
    x, unbatched = _batched(input)
    idx = indices.reshape(*x.shape) if unbatched else indices
    if tuple(idx.shape) != tuple(x.shape):
        raise FunctionalError(f"{op}: indices {tuple(indices.shape)} must have the input's shape {tuple(input.shape)}")
    if output_size is None:
        size = tuple((n - 1) * s[i] - 2 * p[i] + k[i] for i, n in enumerate(x.shape[-2:]))
    else:
        size = tuple(int(v) for v in tuple(output_size)[-2:])
    y = MaxUnpool2dFunction.apply(x, idx.array, size)
    return y.reshape(*y.shape[1:]) if unbatched else y
