"""The rest of F's pooling: 1-d and 3-d max / average / adaptive pooling, power-average (lp) pooling
and max-unpooling: the PyTorch surface. The framework's 2-d forms (max_pool2d, avg_pool2d,
adaptive_avg_pool2d, adaptive_max_pool2d), which AlexNet-style CNNs use, are in pooling.py; these are
built on them: 1-d pools a height-1 image, 3-d pools the (H, W) planes and then along the depth.
"""
from __future__ import annotations

from typing import Any

from tinyflow.creation import where
from tinyflow.kernels.shapes import IntPair, _pair
from tinyflow.nn.functional._utils import FunctionalError, _single, _triple
from tinyflow.nn.functional.pooling import _batched, adaptive_avg_pool2d, adaptive_max_pool2d, avg_pool2d, max_pool2d
from tinyflow.ops.elementwise import not_implemented_for
from tinyflow.ops.pool_extra import MaxUnpool2dFunction
from tinyflow.tensor import Tensor

__all__ = [
    "max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d", "max_pool3d", "avg_pool3d",
    "adaptive_avg_pool3d", "adaptive_max_pool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d",
    "max_unpool2d",
]


def _as_2d(op: str, x: Tensor) -> Tensor:
    """(N, C, L) or (C, L) as a height-1 image for the 1-D pools."""
    if x.ndim not in (2, 3):
        raise FunctionalError(f"{op}: input must be (N, C, L) or (C, L), got shape {tuple(x.shape)}")
    return x.reshape(*x.shape[:-1], 1, x.shape[-1])


def _from_2d(y: Tensor) -> Tensor:
    return y.reshape(*y.shape[:-2], y.shape[-1])


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,  # noqa: A002
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over (N, C, L): max_pool2d on a height-1 image."""
    op = "max_pool1d"
    if not input.is_floating_point():  # PyTorch's max_pool1d has no integer kernel (max_pool2d has)
        raise not_implemented_for("max_pool1d_impl", input.dtype)
    k = _single(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _single(stride, "stride", op)
    out = max_pool2d(_as_2d(op, input), (1, k), (1, s), (0, _single(padding, "padding", op)),
                     (1, _single(dilation, "dilation", op)), ceil_mode, return_indices)
    return tuple(_from_2d(o) for o in out) if return_indices else _from_2d(out)


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """Average pooling over (N, C, L): avg_pool2d on a height-1 image."""
    op = "avg_pool1d"
    k = _single(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _single(stride, "stride", op)
    return _from_2d(avg_pool2d(_as_2d(op, input), (1, k), (1, s), (0, _single(padding, "padding", op)), ceil_mode,
                               count_include_pad))


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002
    op = "adaptive_avg_pool1d"
    return _from_2d(adaptive_avg_pool2d(_as_2d(op, input), (1, _single(output_size, "output_size", op))))


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:  # noqa: A002
    op = "adaptive_max_pool1d"
    out = adaptive_max_pool2d(_as_2d(op, input), (1, _single(output_size, "output_size", op)), return_indices)
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


def max_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,  # noqa: A002
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over (N, C, D, H, W): the maximum of maxima, over (H, W) then over D."""
    op = "max_pool3d"
    x, unbatched = _as_5d(op, input)
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


def avg_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Average pooling over (N, C, D, H, W): over (H, W) then over D (the divisor is a product of
    per-axis counts, so the passes are exact)."""
    op = "avg_pool3d"
    x, unbatched = _as_5d(op, input)
    k = _triple(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _triple(stride, "stride", op)
    p = _triple(padding, "padding", op)
    if x.dtype == "int64":  # one integer division of each window's sum, not one per pass (PyTorch)
        mean = avg_pool3d(x.double(), k, s, p, ceil_mode, count_include_pad, divisor_override)
        out = _truncated_quotient(mean).to(x.dtype)
        return out.squeeze(0) if unbatched else out
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


def _truncated_quotient(q: Tensor) -> Tensor:
    """An integer sum / count computed in float64, truncated toward zero as C's integer division:
    a quotient within rounding of a whole number is that number (the passes round in between)."""
    nearest = q.round()
    close = (q - nearest).abs() <= 1e-9 * nearest.abs().clamp_min(1.0)
    return where(close, nearest, q.trunc())


def _adaptive_3d(op: str, x: Tensor, output_size: Any) -> tuple[Tensor, bool, tuple[int, int, int]]:
    x, unbatched = _as_5d(op, x)
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * 3
    if len(sizes) != 3:
        raise FunctionalError(f"{op}: output_size must be an int or 3 values, got {output_size}")
    out = tuple(x.shape[2 + i] if v is None else int(v) for i, v in enumerate(sizes))
    return x, unbatched, out  # type: ignore[return-value]


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002
    """Average pooling to a fixed (OD, OH, OW) with PyTorch's adaptive windows, axis by axis."""
    x, unbatched, (od, oh, ow) = _adaptive_3d("adaptive_avg_pool3d", input, output_size)
    plane = _plane_pass(adaptive_avg_pool2d, x, (oh, ow))
    out = _depth_pass(adaptive_avg_pool2d, plane, (1, od))
    return out.squeeze(0) if unbatched else out


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:  # noqa: A002
    """Max pooling to a fixed (OD, OH, OW) with PyTorch's adaptive windows, axis by axis."""
    x, unbatched, (od, oh, ow) = _adaptive_3d("adaptive_max_pool3d", input, output_size)
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
