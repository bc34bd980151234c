"""Pooling: the ops (max, average and adaptive pooling over NCHW images, max-unpooling; PyTorch
semantics) and F's pooling functions.

Max and average pooling call the pool kernels through ``ctx.kernels``. The F functions at the end
check the arguments: the 2-d forms call the ops, and the 1-d and 3-d forms, lp pooling and
max-unpooling are built on them (1-d pools a height-1 image, 3-d pools the (H, W) planes and then
along the depth).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.arg_parser import FunctionalError, IntPair, pair, single, triple
from tinyflow.autograd.function import Function
from tinyflow.creation import where
from tinyflow.device import device_check, matmul_array
from tinyflow.kernels.pool import pool_output_shape
from tinyflow.ops.elementwise import floating_only, floating_or_int64, not_implemented_for
from tinyflow.tensor import Tensor

__all__ = [
    "MaxPool2dFunction", "AvgPool2dFunction", "AdaptiveAvgPool2dFunction", "AdaptiveMaxPool2dFunction",
    "MaxUnpool2dFunction", "max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "adaptive_avg_pool2d",
    "adaptive_max_pool2d", "max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d", "max_pool3d",
    "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d",
    "max_unpool2d",
]


class MaxPool2dFunction(Function):
    """Max over sliding windows; backward routes each gradient to its window's argmax."""

    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices=False):
        if x.dtype.kind == "b":
            raise not_implemented_for("max_pool2d", x.dtype)
        out, argmax = ctx.kernels.maxpool2d_forward(x, kernel_size, stride, padding, dilation, ceil_mode)
        if ctx.needs_input_grad[0]:
            ctx.save_for_backward(argmax)
        ctx.args = (x.shape, kernel_size, stride, padding, dilation)
        if return_indices:
            return out, _flat_indices(ctx.xp, argmax, x.shape, kernel_size, stride, padding, dilation)
        return out

    @staticmethod
    def backward(ctx, gout, *_):
        (argmax,) = ctx.saved_tensors
        return ctx.kernels.maxpool2d_backward(gout, argmax, *ctx.args)


def _flat_indices(xp, argmax, x_shape, kernel_size, stride, padding, dilation):
    """PyTorch's return_indices: each window's maximum as a flat index ``row * W + col`` into its
    input plane (int64), from the kernels' window offsets ``i * kw + j``."""
    h, w = x_shape[-2:]
    oh, ow = argmax.shape[-2:]
    kw = kernel_size[1]
    offset = argmax.astype(np.int64)
    rows = xp.arange(oh).reshape(-1, 1) * stride[0] - padding[0] + (offset // kw) * dilation[0]
    cols = xp.arange(ow).reshape(1, -1) * stride[1] - padding[1] + (offset % kw) * dilation[1]
    return rows * w + cols


class AvgPool2dFunction(Function):
    """Mean over sliding windows (divisor as PyTorch's count_include_pad / ceil_mode rules)."""

    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, ceil_mode, count_include_pad):
        floating_or_int64("avg_pool2d", x)  # int64 divides as C does (kernels/pool.py)
        ctx.args = (x.shape, kernel_size, stride, padding, ceil_mode, count_include_pad)
        return ctx.kernels.avgpool2d_forward(x, kernel_size, stride, padding, ceil_mode, count_include_pad)

    @staticmethod
    def backward(ctx, gout):
        return ctx.kernels.avgpool2d_backward(gout, *ctx.args)


def _adaptive_bounds(size: int, out: int, i: int) -> tuple[int, int]:
    """PyTorch's adaptive window i of ``out`` over ``size``: [floor(i*s/o), ceil((i+1)*s/o))."""
    return (i * size) // out, -(-((i + 1) * size) // out)


def _adaptive_matrix(xp, size: int, out: int, dtype):
    """(out, size) averaging matrix of the adaptive windows."""
    m = np.zeros((out, size), dtype=dtype)
    for i in range(out):  # out is a handful of rows (e.g. 6 or 1): built once per call
        start, end = _adaptive_bounds(size, out, i)
        m[i, start:end] = 1.0 / (end - start)
    return xp.asarray(m)


class AdaptiveAvgPool2dFunction(Function):
    """Mean over PyTorch's adaptive windows: where the output tiles the input (H = k*OH, W = l*OW,
    global pooling) avg_pool2d's kernel with kernel = stride = (k, l); otherwise A_h @ x @ A_w.T with
    averaging matrices A (uneven, overlapping windows exactly), and backward the transposed products."""

    @staticmethod
    def forward(ctx, x, output_size):
        xp = ctx.xp
        floating_only("adaptive_avg_pool2d", x)
        h, w = x.shape[-2:]
        oh, ow = output_size
        ctx.shape = x.shape
        if h % oh == 0 and w % ow == 0:
            ctx.window = (h // oh, w // ow)
            planes = x.reshape(-1, 1, h, w)  # (N*C, 1, H, W): any leading dims
            out = ctx.kernels.avgpool2d_forward(planes, ctx.window, ctx.window)
            return out.reshape(*x.shape[:-2], oh, ow)  # (N, C, OH, OW)
        ctx.window = None
        ah = _adaptive_matrix(xp, h, oh, x.dtype)  # (OH, H)
        aw = _adaptive_matrix(xp, w, ow, x.dtype)  # (OW, W)
        ctx.mats = (ah, aw)
        return _left_right(xp, ah, x, aw.T)  # (N, C, OH, OW)

    @staticmethod
    def backward(ctx, gout):
        if ctx.window is not None:
            h, w = ctx.shape[-2:]
            planes = gout.reshape(-1, 1, *gout.shape[-2:])  # (N*C, 1, OH, OW)
            gx = ctx.kernels.avgpool2d_backward(planes, (planes.shape[0], 1, h, w), ctx.window, ctx.window)
            return gx.reshape(ctx.shape)  # (N, C, H, W)
        ah, aw = ctx.mats
        return _left_right(ctx.xp, ah.T, gout, aw)  # (N, C, H, W)


def _left_right(xp, left, x, right):
    """left @ x @ right for a batch x (..., H, W), each product one 2-D GEMM over the whole batch
    (``matmul_array`` also serves half precision, which CuPy's batched matmul cannot)."""
    y = matmul_array(xp, x, right)  # (..., H, W')
    return matmul_array(xp, y.swapaxes(-1, -2), left.T).swapaxes(-1, -2)  # (..., H', W')


class AdaptiveMaxPool2dFunction(Function):
    """Max over PyTorch's adaptive windows; returns (values, flat indices into each H*W plane). One
    vectorised max per output cell (OH*OW is small) over every image and channel at once."""

    @staticmethod
    def forward(ctx, x, output_size):
        xp = ctx.xp
        floating_only("adaptive_max_pool2d", x)
        lead, (h, w) = x.shape[:-2], x.shape[-2:]
        oh, ow = output_size
        out = xp.empty(lead + (oh, ow), dtype=x.dtype)
        index = xp.empty(lead + (oh, ow), dtype=np.int64)
        cells = []
        for i in range(oh):
            h0, h1 = _adaptive_bounds(h, oh, i)
            for j in range(ow):
                w0, w1 = _adaptive_bounds(w, ow, j)
                window = x[..., h0:h1, w0:w1].reshape(lead + (-1,))
                arg = window.argmax(axis=-1)  # the first maximum (or the first NaN), as PyTorch
                out[..., i, j] = xp.take_along_axis(window, arg[..., None], axis=-1)[..., 0]
                index[..., i, j] = (h0 + arg // (w1 - w0)) * w + w0 + arg % (w1 - w0)
                cells.append((h0, h1, w0, w1, arg))
        ctx.cells, ctx.shape = cells, x.shape
        return out, index

    @staticmethod
    def backward(ctx, gout, *_):
        xp = ctx.xp
        gx = xp.zeros(ctx.shape, dtype=gout.dtype)
        ow = gout.shape[-1]
        for k, (h0, h1, w0, w1, arg) in enumerate(ctx.cells):
            size = (h1 - h0) * (w1 - w0)
            hot = (xp.arange(size) == arg[..., None]) * gout[..., k // ow, k % ow][..., None]
            gx[..., h0:h1, w0:w1] += hot.reshape(hot.shape[:-1] + (h1 - h0, w1 - w0)).astype(gout.dtype)
        return gx, None


class MaxUnpool2dFunction(Function):
    """max_unpool2d: each value written at its flat index into a zero (OH, OW) plane."""

    @staticmethod
    def forward(ctx, x, indices, output_size):
        xp = ctx.xp
        n, c = x.shape[:2]
        oh, ow = output_size
        flat = indices.reshape(n * c, -1)
        if flat.size:
            bad = (flat < 0) | (flat >= oh * ow)

            def error(index: int) -> IndexError:
                return IndexError(f"max_unpool2d: index {index} is outside the output plane of size {oh}x{ow}; "
                                  "check output_size (it must be the size of the pooled input)")

            device_check(bad.any(), flat.reshape(-1)[bad.reshape(-1).argmax()], error, key=("max_unpool2d", oh, ow))
        out = xp.zeros((n * c, oh * ow), dtype=x.dtype)
        xp.put_along_axis(out, flat, x.reshape(n * c, -1), axis=1)
        ctx.save_for_backward(flat)
        ctx.shape = x.shape
        return out.reshape(n, c, oh, ow)

    @staticmethod
    def backward(ctx, gout):
        (flat,) = ctx.saved_tensors
        n, c = gout.shape[:2]
        g = ctx.xp.take_along_axis(gout.reshape(n * c, -1), flat, axis=1)
        return g.reshape(ctx.shape), None, None


# ======================================================================= F (tinyflow.nn.functional)


def _check_input(op: str, x: Tensor) -> None:
    if x.ndim not in (3, 4):
        raise FunctionalError(f"{op}: input must be (N, C, H, W) or (C, H, W), got shape {tuple(x.shape)}")


def _batched(x: Tensor) -> tuple[Tensor, bool]:
    return (x.reshape(1, *x.shape), True) if x.ndim == 3 else (x, False)


def _each(fn: Any, out: Any) -> Any:
    """``fn`` of a pool's result, or of each tensor of its (values, indices) pair."""
    return tuple(fn(t) for t in out) if isinstance(out, tuple) else fn(out)


def _pool_geometry(op: str, x: Tensor, kernel_size, stride, padding, dilation, ceil_mode):
    _check_input(op, x)
    k = pair(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else pair(stride, "stride", op)
    p, d = pair(padding, "padding", op), pair(dilation, "dilation", op)
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


def max_pool2d(input: Tensor, kernel_size: IntPair, stride: IntPair | None = None,  # noqa: A002
               padding: IntPair = 0, dilation: IntPair = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Any:
    """Max pooling over (N, C, H, W); stride defaults to kernel_size, as in PyTorch. With
    ``return_indices`` also each maximum's flat index into its (H, W) plane, as max_unpool2d takes it."""
    k, s, p, d = _pool_geometry("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode)
    x, unbatched = _batched(input)
    out = MaxPool2dFunction.apply(x, k, s, p, d, bool(ceil_mode), bool(return_indices))
    return _each(lambda t: t.reshape(*t.shape[1:]), out) if unbatched else out


def max_pool2d_with_indices(input: Tensor, kernel_size: IntPair, stride: IntPair | None = None,  # noqa: A002
                            padding: IntPair = 0, dilation: IntPair = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple[Tensor, Tensor]:
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool2d(input: Tensor, kernel_size: IntPair, stride: IntPair | None = None,  # noqa: A002
               padding: IntPair = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Average pooling over (N, C, H, W); padding counts in the divisor by default (PyTorch).

    ``divisor_override`` divides each window's sum by that number instead."""
    k, s, p, _ = _pool_geometry("avg_pool2d", input, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None:
        if divisor_override == 0:
            raise FunctionalError("avg_pool2d: divisor_override must be non-zero")
        if ceil_mode:
            raise NotImplementedError("avg_pool2d: divisor_override with ceil_mode=True is not supported")
        if input.dtype == "int64":  # PyTorch divides the integer window sum, toward zero
            total = (avg_pool2d(input.double(), k, s, p, False, True) * (k[0] * k[1])).round()
            return (total / divisor_override).trunc().to(input.dtype)
        return avg_pool2d(input, k, s, p, False, True) * (k[0] * k[1] / divisor_override)
    x, unbatched = _batched(input)
    y = AvgPool2dFunction.apply(x, k, s, p, bool(ceil_mode), bool(count_include_pad))
    return y.reshape(*y.shape[1:]) if unbatched else y


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


def adaptive_avg_pool2d(input: Tensor, output_size: int | None | tuple[int | None, int | None]) -> Tensor:  # noqa: A002
    """Average pooling to a fixed (OH, OW), windows as PyTorch's; None keeps that input size."""
    oh, ow = _adaptive_size("adaptive_avg_pool2d", input, output_size)
    if (oh, ow) == tuple(input.shape[-2:]) and input.is_floating_point():
        return input  # every window is one pixel: the identity (AlexNet's 6x6 -> 6x6 at 224)
    return AdaptiveAvgPool2dFunction.apply(input, (oh, ow))


def adaptive_max_pool2d(input: Tensor, output_size: int | None | tuple[int | None, int | None],  # noqa: A002
                        return_indices: bool = False) -> Any:
    """Max over PyTorch's adaptive windows to a fixed (OH, OW); indices as max_pool2d's."""
    oh, ow = _adaptive_size("adaptive_max_pool2d", input, output_size)
    out, indices = AdaptiveMaxPool2dFunction.apply(input, (oh, ow))
    return (out, indices) if return_indices else out


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
    k = single(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else single(stride, "stride", op)
    out = max_pool2d(_as_2d(op, input), (1, k), (1, s), (0, single(padding, "padding", op)),
                     (1, single(dilation, "dilation", op)), ceil_mode, return_indices)
    return _each(_from_2d, out)


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """Average pooling over (N, C, L): avg_pool2d on a height-1 image."""
    op = "avg_pool1d"
    k = single(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else single(stride, "stride", op)
    return _from_2d(avg_pool2d(_as_2d(op, input), (1, k), (1, s), (0, single(padding, "padding", op)), ceil_mode,
                               count_include_pad))


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002
    op = "adaptive_avg_pool1d"
    return _from_2d(adaptive_avg_pool2d(_as_2d(op, input), (1, single(output_size, "output_size", op))))


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:  # noqa: A002
    op = "adaptive_max_pool1d"
    out = adaptive_max_pool2d(_as_2d(op, input), (1, single(output_size, "output_size", op)), return_indices)
    return _each(_from_2d, out)


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
    return _each(lambda t: t.reshape(n, c, h, w, od).permute(0, 1, 4, 2, 3), out)  # (N, C, OD, H, W)


def _plane_pass(fn: Any, x: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``fn`` (a 2-d pool) over every depth slice of (N, C, D, H, W)."""
    n, c, d = x.shape[:3]
    out = fn(x.reshape(n, c * d, *x.shape[3:]), *args, **kwargs)
    return _each(lambda t: t.reshape(n, c, d, *t.shape[2:]), out)


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
    k = triple(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else triple(stride, "stride", op)
    p, d = triple(padding, "padding", op), triple(dilation, "dilation", op)
    plane = _plane_pass(max_pool2d, x, k[1:], s[1:], p[1:], d[1:], ceil_mode, return_indices)
    values = plane[0] if return_indices else plane
    deep = _depth_pass(max_pool2d, values, (1, k[0]), (1, s[0]), (0, p[0]), (1, d[0]), ceil_mode, return_indices)
    out = (deep[0], _combine_indices(plane[1], deep[1], x.shape[3], x.shape[4])) if return_indices else deep
    return _each(lambda t: t.squeeze(0), out) if unbatched else out


def avg_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Average pooling over (N, C, D, H, W): over (H, W) then over D (the divisor is a product of
    per-axis counts, so the passes are exact)."""
    op = "avg_pool3d"
    x, unbatched = _as_5d(op, input)
    k = triple(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else triple(stride, "stride", op)
    p = triple(padding, "padding", op)
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
    return _each(lambda t: t.squeeze(0), out) if unbatched else out


def _lp(out: Tensor, window: int, norm_type: float) -> Tensor:
    """PyTorch's lp_pool finish: (sign(mean) * relu(|mean|) * window) ** (1 / p)."""
    return (out.sign() * out.abs().relu() * float(window)) ** (1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Tensor:
    """(sum over each window of x**p) ** (1/p), as PyTorch computes it (through avg_pool)."""
    k = single(kernel_size, "kernel_size", "lp_pool1d")
    return _lp(avg_pool1d(input**norm_type, k, stride, 0, ceil_mode), k, norm_type)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: IntPair, stride: IntPair | None = None,  # noqa: A002
              ceil_mode: bool = False) -> Tensor:
    kh, kw = pair(kernel_size, "kernel_size", "lp_pool2d")
    return _lp(avg_pool2d(input**norm_type, (kh, kw), stride, 0, ceil_mode), kh * kw, norm_type)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Tensor:
    kd, kh, kw = triple(kernel_size, "kernel_size", "lp_pool3d")
    return _lp(avg_pool3d(input**norm_type, (kd, kh, kw), stride, 0, ceil_mode), kd * kh * kw, norm_type)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
                 output_size: Any = None) -> Tensor:
    """max_unpool2d on a height-1 image: the partial inverse of max_pool1d."""
    op = "max_unpool1d"
    k = single(kernel_size, "kernel_size", op)
    s = k if stride is None else single(stride, "stride", op)
    size = None if output_size is None else (1, int(tuple(output_size)[-1]))
    out = max_unpool2d(_as_2d(op, input), _as_2d(op, indices), (1, k), (1, s),
                       (0, single(padding, "padding", op)), size)
    return _from_2d(out)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size: IntPair, stride: IntPair | None = None,  # noqa: A002
                 padding: IntPair = 0, output_size: Any = None) -> Tensor:
    """The partial inverse of max_pool2d: each value put back at its index, zeros elsewhere."""
    op = "max_unpool2d"
    k = pair(kernel_size, "kernel_size", op)
    s = k if stride is None else pair(stride, "stride", op)
    p = pair(padding, "padding", op)
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
