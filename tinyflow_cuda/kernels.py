"""CUDA twins of the reference kernels in ``tinyflow/kernels/``: same names, same signatures,
same return values.

``tinyflow.kernels._dispatch`` calls ``tinyflow_cuda.kernels.<name>`` when a kernel receives
CuPy arrays. Each twin here launches the hand-written kernel of csrc/<family>.cu; where a
case is outside what the .cu kernel handles (half precision, a non-contiguous output buffer,
log-softmax over a middle axis), it runs the reference body, which is written against ``xp``
and so runs on CuPy too. CuPy itself is never imported here: arrays are allocated through the
runtime's ``xp`` (tinyflow_cuda.runtime), which is CuPy on a GPU and NumPy under the CPU
emulator that the tests use on machines without one.

The GEMMs of convolution and of the recurrent layers are not here: they are ``xp.matmul``
calls in the ops (cuBLAS through CuPy). See docs/cuda.md for the layouts.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tinyflow_cuda import catch_oom
from tinyflow_cuda.runtime import THREADS, current, grid_for

__all__ = [
    "im2col",
    "col2im",
    "maxpool2d_forward",
    "maxpool2d_backward",
    "avgpool2d_forward",
    "avgpool2d_backward",
    "lrn_forward",
    "lrn_backward",
    "lstm_cell_forward",
    "lstm_cell_backward",
    "gru_cell_forward",
    "gru_cell_backward",
    "embedding_backward",
    "log_softmax_forward",
    "softmax_cross_entropy_forward",
    "softmax_cross_entropy_backward",
    "dropout_mask",
    "sgd_momentum_update",
    "adam_update",
    "reduce_add",
    "reduce_scale",
]

Array = Any
Pair = tuple[int, int]

_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}


def _suffix(*arrays: Array) -> str | None:
    """'f32' or 'f64' when every array has that one dtype, else None (use the reference)."""
    dtypes = {np.dtype(a.dtype) for a in arrays if a is not None}
    if len(dtypes) != 1:
        return None
    return _SUFFIX.get(dtypes.pop())


_FAMILIES = ("conv", "pool", "lrn", "rnn", "loss", "random", "optim")


def _reference(name: str) -> Callable[..., Any]:
    """The NumPy/xp reference body of kernel ``name`` (it runs on CuPy arrays as well)."""
    import importlib

    from tinyflow.kernels._dispatch import REGISTRY

    if name not in REGISTRY:
        for family in _FAMILIES:  # import each family module once, registering its kernels
            importlib.import_module(f"tinyflow.kernels.{family}")
    return REGISTRY[name]


def _contiguous(xp: Any, a: Array | None) -> Array | None:
    return None if a is None else xp.ascontiguousarray(a)


def _all_contiguous(*arrays: Array | None) -> bool:
    return all(a is None or a.flags.c_contiguous for a in arrays)


def _empty(xp: Any, op: str, shape: tuple[int, ...], dtype: Any) -> Array:
    """xp.empty that turns a device out-of-memory into an error naming the op and shape."""
    with catch_oom(op, shape):
        return xp.empty(shape, dtype=dtype)


def _launch_1d(name: str, n: int, args: list[Any]) -> None:
    current().launch(name, grid_for(n), THREADS, args)


# ---- convolution: im2col / col2im ---------------------------------------------------------
def _conv_geometry(x_shape: tuple[int, ...], kernel_size: Pair, stride: Pair, padding: Pair,
                   dilation: Pair) -> list[int]:
    from tinyflow.kernels.conv import conv_output_size

    n, c, h, w = x_shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    oh = conv_output_size(h, kh, sh, ph, dh)
    ow = conv_output_size(w, kw, sw, pw, dw)
    return [n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow]


def im2col(x: Array, kernel_size: Pair, stride: Pair = (1, 1), padding: Pair = (0, 0),
           dilation: Pair = (1, 1), out: Array | None = None) -> Array:
    """Unfold ``x`` (N, C, H, W) into the column matrix (C*kh*kw, N*OH*OW), one launch.

    ``out``, if given, is a C-contiguous workspace of that shape to write into.
    """
    suffix = _suffix(x)
    if suffix is None or (out is not None and not out.flags.c_contiguous):
        return _reference("im2col")(x, kernel_size, stride, padding, dilation, out=out)
    rt = current()
    with rt.on_device_of(x):
        x = rt.xp.ascontiguousarray(x)
        geo = _conv_geometry(x.shape, kernel_size, stride, padding, dilation)
        n, c, kh, kw, oh, ow = geo[0], geo[1], geo[4], geo[5], geo[12], geo[13]
        shape = (c * kh * kw, n * oh * ow)
        if out is None:
            cols = _empty(rt.xp, "im2col", shape, x.dtype)
        elif tuple(out.shape) != shape or out.dtype != x.dtype:
            raise ValueError(f"im2col: out must be a {x.dtype} array of shape {shape}, got {out.dtype} {tuple(out.shape)}")
        else:
            cols = out
        # strides of (image n, row k, column l): column index is n * OH*OW + l
        strides = [oh * ow, n * oh * ow, 1]
        _launch_1d(f"im2col_{suffix}", cols.size, [x, cols, *geo, *strides])
        return cols


def col2im(col: Array, x_shape: tuple[int, int, int, int], kernel_size: Pair,
           stride: Pair = (1, 1), padding: Pair = (0, 0), dilation: Pair = (1, 1)) -> Array:
    """The adjoint of :func:`im2col`: (C*kh*kw, N*OH*OW) -> (N, C, H, W), gathered per pixel."""
    suffix = _suffix(col)
    if suffix is None:
        return _reference("col2im")(col, x_shape, kernel_size, stride, padding, dilation)
    rt = current()
    with rt.on_device_of(col):
        col = rt.xp.ascontiguousarray(col)
        geo = _conv_geometry(tuple(x_shape), kernel_size, stride, padding, dilation)
        n, c, kh, kw, oh, ow = geo[0], geo[1], geo[4], geo[5], geo[12], geo[13]
        if col.shape != (c * kh * kw, n * oh * ow):
            raise ValueError(f"col2im: col {tuple(col.shape)} does not match x_shape "
                             f"{tuple(x_shape)} with kernel {kernel_size}: expected "
                             f"{(c * kh * kw, n * oh * ow)}")
        dx = _empty(rt.xp, "col2im", tuple(x_shape), col.dtype)
        _launch_1d(f"col2im_{suffix}", dx.size, [col, dx, *geo, oh * ow, n * oh * ow, 1])
        return dx


# ---- pooling --------------------------------------------------------------------------------
def maxpool2d_forward(x: Array, kernel_size: Pair, stride: Pair, padding: Pair = (0, 0),
                      dilation: Pair = (1, 1), ceil_mode: bool = False) -> tuple[Array, Array]:
    """Max over each window of ``x`` (N, C, H, W): (out, argmax int32 window offset i*kw+j)."""
    suffix = _suffix(x)
    if suffix is None:
        return _reference("maxpool2d_forward")(x, kernel_size, stride, padding, dilation,
                                               ceil_mode)
    from tinyflow.kernels.pool import pool_output_shape

    rt = current()
    with rt.on_device_of(x):
        x = rt.xp.ascontiguousarray(x)
        n, c, h, w = x.shape
        oh, ow = pool_output_shape(h, w, kernel_size, stride, padding, dilation, ceil_mode)
        out = _empty(rt.xp, "max_pool2d", (n, c, oh, ow), x.dtype)  # (N, C, OH, OW)
        argmax = _empty(rt.xp, "max_pool2d", (n, c, oh, ow), np.int32)
        _launch_1d(f"maxpool2d_forward_{suffix}", out.size,
                   [x, out, argmax, n, c, h, w, *kernel_size, *stride, *padding, *dilation,
                    oh, ow])
        return out, argmax


def maxpool2d_backward(gout: Array, argmax: Array, x_shape: tuple[int, int, int, int],
                       kernel_size: Pair, stride: Pair, padding: Pair = (0, 0),
                       dilation: Pair = (1, 1)) -> Array:
    """Route each output gradient to its window's winner; returns (N, C, H, W)."""
    suffix = _suffix(gout)
    if suffix is None or np.dtype(argmax.dtype) != np.int32:
        return _reference("maxpool2d_backward")(gout, argmax, x_shape, kernel_size, stride,
                                                padding, dilation)
    rt = current()
    with rt.on_device_of(gout):
        gout = rt.xp.ascontiguousarray(gout)
        argmax = rt.xp.ascontiguousarray(argmax)
        n, c, h, w = x_shape
        oh, ow = gout.shape[2:]
        dx = _empty(rt.xp, "max_pool2d backward", tuple(x_shape), gout.dtype)
        _launch_1d(f"maxpool2d_backward_{suffix}", dx.size,
                   [gout, argmax, dx, n, c, h, w, *kernel_size, *stride, *padding, *dilation,
                    oh, ow])
        return dx


def avgpool2d_forward(x: Array, kernel_size: Pair, stride: Pair, padding: Pair = (0, 0),
                      ceil_mode: bool = False, count_include_pad: bool = True) -> Array:
    """Mean over each window of ``x`` (N, C, H, W) -> (N, C, OH, OW), PyTorch's divisors."""
    suffix = _suffix(x)
    if suffix is None:
        return _reference("avgpool2d_forward")(x, kernel_size, stride, padding, ceil_mode,
                                               count_include_pad)
    from tinyflow.kernels.pool import pool_output_shape

    rt = current()
    with rt.on_device_of(x):
        x = rt.xp.ascontiguousarray(x)
        n, c, h, w = x.shape
        oh, ow = pool_output_shape(h, w, kernel_size, stride, padding, (1, 1), ceil_mode)
        out = _empty(rt.xp, "avg_pool2d", (n, c, oh, ow), x.dtype)
        _launch_1d(f"avgpool2d_forward_{suffix}", out.size,
                   [x, out, n, c, h, w, *kernel_size, *stride, *padding, oh, ow,
                    int(count_include_pad)])
        return out


def avgpool2d_backward(gout: Array, x_shape: tuple[int, int, int, int], kernel_size: Pair,
                       stride: Pair, padding: Pair = (0, 0), ceil_mode: bool = False,
                       count_include_pad: bool = True) -> Array:
    """Spread each output gradient evenly over its window; returns (N, C, H, W)."""
    suffix = _suffix(gout)
    if suffix is None:
        return _reference("avgpool2d_backward")(gout, x_shape, kernel_size, stride, padding,
                                                ceil_mode, count_include_pad)
    rt = current()
    with rt.on_device_of(gout):
        gout = rt.xp.ascontiguousarray(gout)
        n, c, h, w = x_shape
        oh, ow = gout.shape[2:]
        dx = _empty(rt.xp, "avg_pool2d backward", tuple(x_shape), gout.dtype)
        _launch_1d(f"avgpool2d_backward_{suffix}", dx.size,
                   [gout, dx, n, c, h, w, *kernel_size, *stride, *padding, oh, ow,
                    int(count_include_pad)])
        return dx


# ---- local response normalisation ---------------------------------------------------------
def lrn_forward(x: Array, size: int, alpha: float = 1e-4, beta: float = 0.75,
                k: float = 1.0) -> tuple[Array, Array]:
    """Normalise ``x`` (N, C, *) by its channel neighbourhood; returns (out, scale)."""
    suffix = _suffix(x)
    if suffix is None:
        return _reference("lrn_forward")(x, size, alpha, beta, k)
    rt = current()
    with rt.on_device_of(x):
        x = rt.xp.ascontiguousarray(x)
        n, c = x.shape[:2]
        spatial = int(np.prod(x.shape[2:], dtype=np.int64))
        out = _empty(rt.xp, "local_response_norm", x.shape, x.dtype)
        scale = _empty(rt.xp, "local_response_norm", x.shape, x.dtype)
        _launch_1d(f"lrn_forward_{suffix}", x.size,
                   [x, out, scale, n, c, spatial, size, alpha, beta, k])
        return out, scale


def lrn_backward(gout: Array, x: Array, out: Array, scale: Array, size: int,
                 alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Array:
    """Gradient of :func:`lrn_forward` with respect to ``x`` from its saved out and scale."""
    suffix = _suffix(gout, x, out, scale)
    if suffix is None:
        return _reference("lrn_backward")(gout, x, out, scale, size, alpha, beta, k)
    rt = current()
    with rt.on_device_of(x):
        xp = rt.xp
        gout, x, out, scale = (xp.ascontiguousarray(a) for a in (gout, x, out, scale))
        n, c = x.shape[:2]
        spatial = int(np.prod(x.shape[2:], dtype=np.int64))
        gx = _empty(xp, "local_response_norm backward", x.shape, x.dtype)
        _launch_1d(f"lrn_backward_{suffix}", x.size,
                   [gout, x, out, scale, gx, n, c, spatial, size, alpha, beta])
        return gx


# ---- recurrent cells (feature-major: gates (G*H, B), states (H, B)) -------------------------
def lstm_cell_forward(gates: Array, c_prev: Array, h_out: Array | None = None,
                      c_out: Array | None = None) -> tuple[Array, Array, Array]:
    """One fused LSTM step; ``gates`` (4H, B) becomes the activated gates. Returns (h, c, gates)."""
    suffix = _suffix(gates, c_prev, h_out, c_out)
    if suffix is None or not _all_contiguous(gates, h_out, c_out):
        return _reference("lstm_cell_forward")(gates, c_prev, h_out, c_out)
    hidden = gates.shape[0] // 4
    if gates.ndim != 2 or gates.shape[0] != 4 * hidden or tuple(c_prev.shape) != (hidden, gates.shape[1]):
        raise ValueError(f"lstm_cell_forward: gates {tuple(gates.shape)} must be (4H, B) with "
                         f"c_prev {tuple(c_prev.shape)} = (H, B)")
    batch = gates.shape[1]
    rt = current()
    with rt.on_device_of(gates):
        c_prev = rt.xp.ascontiguousarray(c_prev)
        if h_out is None:
            h_out = _empty(rt.xp, "lstm_cell", (hidden, batch), gates.dtype)
        if c_out is None:
            c_out = _empty(rt.xp, "lstm_cell", (hidden, batch), gates.dtype)
        _launch_1d(f"lstm_cell_forward_{suffix}", hidden * batch,
                   [gates, c_prev, h_out, c_out, hidden, batch])
        return h_out, c_out, gates


def lstm_cell_backward(dh: Array, dc: Array | None, acts: Array, c_prev: Array, c: Array,
                       dgates_out: Array | None = None) -> tuple[Array, Array]:
    """Gradients of one LSTM step: (dgates (4H, B), dc_prev (H, B)); ``dc`` None means zero."""
    suffix = _suffix(dh, dc, acts, c_prev, c, dgates_out)
    if suffix is None or not _all_contiguous(dgates_out):
        return _reference("lstm_cell_backward")(dh, dc, acts, c_prev, c, dgates_out)
    rt = current()
    with rt.on_device_of(acts):
        xp = rt.xp
        dh, dc, acts, c_prev, c = (_contiguous(xp, a) for a in (dh, dc, acts, c_prev, c))
        hidden, batch = c.shape
        if dgates_out is None:
            dgates_out = _empty(xp, "lstm_cell backward", acts.shape, acts.dtype)
        dc_prev = _empty(xp, "lstm_cell backward", c.shape, c.dtype)
        _launch_1d(f"lstm_cell_backward_{suffix}", hidden * batch,
                   [dh, dc, int(dc is not None), acts, c_prev, c, dgates_out, dc_prev, hidden,
                    batch])
        return dgates_out, dc_prev


def gru_cell_forward(gi: Array, gh: Array, h_prev: Array,
                     h_out: Array | None = None) -> tuple[Array, Array]:
    """One fused GRU step; ``gi`` (3H, B) becomes the activated gates (r, z, n). Returns (h, gi)."""
    suffix = _suffix(gi, gh, h_prev, h_out)
    if suffix is None or not _all_contiguous(gi, h_out):
        return _reference("gru_cell_forward")(gi, gh, h_prev, h_out)
    hidden = gi.shape[0] // 3
    if gi.ndim != 2 or gi.shape != gh.shape or gi.shape[0] != 3 * hidden \
            or tuple(h_prev.shape) != (hidden, gi.shape[1]):
        raise ValueError(f"gru_cell_forward: gi {tuple(gi.shape)} and gh {tuple(gh.shape)} must "
                         f"both be (3H, B) with h_prev {tuple(h_prev.shape)} = (H, B)")
    batch = gi.shape[1]
    rt = current()
    with rt.on_device_of(gi):
        gh = rt.xp.ascontiguousarray(gh)
        h_prev = rt.xp.ascontiguousarray(h_prev)
        if h_out is None:
            h_out = _empty(rt.xp, "gru_cell", (hidden, batch), gi.dtype)
        _launch_1d(f"gru_cell_forward_{suffix}", hidden * batch,
                   [gi, gh, h_prev, h_out, hidden, batch])
        return h_out, gi


def gru_cell_backward(dh: Array, acts: Array, gh: Array, h_prev: Array,
                      dgi_out: Array | None = None,
                      dgh_out: Array | None = None) -> tuple[Array, Array, Array]:
    """Gradients of one GRU step: (dgi (3H, B), dgh (3H, B), the direct part of dh_prev (H, B))."""
    suffix = _suffix(dh, acts, gh, h_prev, dgi_out, dgh_out)
    if suffix is None or not _all_contiguous(dgi_out, dgh_out):
        return _reference("gru_cell_backward")(dh, acts, gh, h_prev, dgi_out, dgh_out)
    rt = current()
    with rt.on_device_of(acts):
        xp = rt.xp
        dh, acts, gh, h_prev = (xp.ascontiguousarray(a) for a in (dh, acts, gh, h_prev))
        hidden, batch = h_prev.shape
        if dgi_out is None:
            dgi_out = _empty(xp, "gru_cell backward", acts.shape, acts.dtype)
        if dgh_out is None:
            dgh_out = _empty(xp, "gru_cell backward", acts.shape, acts.dtype)
        dh_prev = _empty(xp, "gru_cell backward", h_prev.shape, h_prev.dtype)
        _launch_1d(f"gru_cell_backward_{suffix}", hidden * batch,
                   [dh, acts, gh, h_prev, dgi_out, dgh_out, dh_prev, hidden, batch])
        return dgi_out, dgh_out, dh_prev


def embedding_backward(grad: Array, indices: Array, num_embeddings: int,
                       padding_idx: int | None = None) -> Array:
    """Scatter-add the rows of ``grad`` (N, D) into a (num_embeddings, D) gradient at ``indices``."""
    suffix = _suffix(grad)
    if suffix is None or grad.ndim != 2:
        return _reference("embedding_backward")(grad, indices, num_embeddings, padding_idx)
    rt = current()
    with rt.on_device_of(grad):
        xp = rt.xp
        grad = xp.ascontiguousarray(grad)
        indices = xp.ascontiguousarray(indices.reshape(-1).astype(np.int64, copy=False))
        n, d = grad.shape
        if indices.shape[0] != n:
            raise ValueError(f"embedding_backward: {indices.shape[0]} indices for {n} gradient rows")
        with catch_oom("embedding backward", (num_embeddings, d)):
            out = xp.zeros((num_embeddings, d), dtype=grad.dtype)  # (V, D)
        if n:
            pad = -1 if padding_idx is None else int(padding_idx) % num_embeddings
            _launch_1d(f"embedding_backward_{suffix}", n * d,
                       [grad, indices, out, n, d, num_embeddings, pad])
        return out


# ---- softmax cross-entropy ----------------------------------------------------------------
def _row_launch(name: str, rows: int, args: list[Any]) -> None:
    """One block of 256 threads per row (the kernels loop when rows exceed the grid)."""
    current().launch(name, max(1, min(rows, 65535)), THREADS, args)


def log_softmax_forward(x: Array, axis: int = -1) -> Array:
    """log_softmax along the last axis in one fused pass (other axes use the reference)."""
    suffix = _suffix(x)
    if suffix is None or x.ndim == 0 or axis not in (-1, x.ndim - 1) or x.shape[-1] == 0:
        return _reference("log_softmax_forward")(x, axis)
    rt = current()
    with rt.on_device_of(x):
        x = rt.xp.ascontiguousarray(x)
        classes = x.shape[-1]
        rows = x.size // classes
        lp = _empty(rt.xp, "log_softmax", x.shape, x.dtype)
        _row_launch(f"softmax_xent_forward_{suffix}", rows,
                    [x, lp, None, None, None, rows, classes, -100, 0.0])
        return lp


def softmax_cross_entropy_forward(logits: Array, target: Array, ignore_index: int = -100,
                                  label_smoothing: float = 0.0,
                                  weight: Array | None = None) -> tuple[Array, Array]:
    """Per-sample losses (N,) and the log-probabilities (N, C), one block per sample."""
    suffix = _suffix(logits, weight)
    if suffix is None or logits.ndim != 2:
        return _reference("softmax_cross_entropy_forward")(logits, target, ignore_index,
                                                           label_smoothing, weight)
    rt = current()
    with rt.on_device_of(logits):
        xp = rt.xp
        n, c = logits.shape
        if target.shape != (n,):
            raise ValueError(f"cross_entropy: target {tuple(target.shape)} must be (N,) = ({n},) "
                             f"for logits {tuple(logits.shape)}")
        logits = xp.ascontiguousarray(logits)
        target = xp.ascontiguousarray(target.astype(np.int64, copy=False))
        weight = _contiguous(xp, weight)
        lp = _empty(xp, "cross_entropy", (n, c), logits.dtype)
        loss = _empty(xp, "cross_entropy", (n,), logits.dtype)
        _row_launch(f"softmax_xent_forward_{suffix}", n,
                    [logits, lp, target, weight, loss, n, c, ignore_index, label_smoothing])
        return loss, lp


def softmax_cross_entropy_backward(log_probs: Array, target: Array, grad_loss: Array,
                                   ignore_index: int = -100, label_smoothing: float = 0.0,
                                   weight: Array | None = None) -> Array:
    """Gradient of the per-sample losses with respect to the logits, (N, C)."""
    suffix = _suffix(log_probs, weight)
    if suffix is None or log_probs.ndim != 2:
        return _reference("softmax_cross_entropy_backward")(log_probs, target, grad_loss,
                                                            ignore_index, label_smoothing, weight)
    rt = current()
    with rt.on_device_of(log_probs):
        xp = rt.xp
        n, c = log_probs.shape
        log_probs = xp.ascontiguousarray(log_probs)
        target = xp.ascontiguousarray(target.astype(np.int64, copy=False))
        scale = xp.ascontiguousarray(
            xp.broadcast_to(xp.asarray(grad_loss, dtype=log_probs.dtype), (n,)))
        weight = _contiguous(xp, weight)
        wsum = None if weight is None else xp.ascontiguousarray(weight.sum(keepdims=True))
        grad = _empty(xp, "cross_entropy backward", (n, c), log_probs.dtype)
        _launch_1d(f"softmax_xent_backward_{suffix}", n * c,
                   [log_probs, target, scale, weight, wsum, grad, n, c, ignore_index,
                    label_smoothing])
        return grad


# ---- dropout --------------------------------------------------------------------------------
def dropout_mask(x: Array, p: float, seed: int) -> Array:
    """A mask shaped and typed like ``x``: 1/(1-p) where kept, 0 where dropped.

    Drawn on the device by a counter-based hash of (seed, element index): the same seed gives
    the same mask on every GPU and grid, but not the mask the CPU reference draws.
    """
    if not 0 <= p < 1:
        raise ValueError(f"dropout_mask: p must be in [0, 1), got {p}")
    rt = current()
    with rt.on_device_of(x):
        suffix = _suffix(x)
        dtype = x.dtype if suffix is not None else np.float32
        mask = _empty(rt.xp, "dropout", x.shape, dtype)
        threshold = min(int(round(p * 2**32)), 2**32)
        _launch_1d(f"dropout_mask_{suffix or 'f32'}", mask.size,
                   [mask, int(seed) % 2**64, threshold, 1.0 / (1.0 - p), mask.size])
        return mask if suffix is not None else mask.astype(x.dtype)


# ---- optimizers -----------------------------------------------------------------------------
def sgd_momentum_update(param: Array, grad: Array, momentum_buffer: Array | None, lr: float,
                        momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
                        nesterov: bool = False, first_step: bool = False) -> None:
    """One fused SGD step in place (PyTorch's rule), one launch over the whole buffer."""
    if momentum != 0 and momentum_buffer is None:
        raise ValueError("sgd_momentum_update: momentum != 0 needs a momentum_buffer array")
    if grad.shape != param.shape or (momentum_buffer is not None
                                     and momentum_buffer.shape != param.shape):
        raise ValueError(
            f"sgd_momentum_update: param {param.shape}, grad {grad.shape} and momentum_buffer "
            f"{None if momentum_buffer is None else momentum_buffer.shape} must have one shape")
    suffix = _suffix(param, grad, momentum_buffer)
    if suffix is None or not _all_contiguous(param, momentum_buffer):
        return _reference("sgd_momentum_update")(param, grad, momentum_buffer, lr, momentum,
                                                 dampening, weight_decay, nesterov, first_step)
    rt = current()
    with rt.on_device_of(param):
        grad = rt.xp.ascontiguousarray(grad)
        buf = momentum_buffer if momentum != 0 else None
        _launch_1d(f"sgd_momentum_update_{suffix}", param.size,
                   [param, grad, buf, lr, momentum, dampening, weight_decay, int(nesterov),
                    int(first_step), param.size])
    return None


def adam_update(param: Array, grad: Array, exp_avg: Array, exp_avg_sq: Array,
                max_exp_avg_sq: Array | None, step: int, lr: float, beta1: float = 0.9,
                beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0,
                amsgrad: bool = False, decoupled_weight_decay: bool = False) -> None:
    """One fused Adam / AdamW step in place (PyTorch's rule), one launch over the buffer."""
    if amsgrad and max_exp_avg_sq is None:
        raise ValueError("adam_update: amsgrad=True needs a max_exp_avg_sq array")
    for name, arr in (("grad", grad), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
        if arr.shape != param.shape:
            raise ValueError(f"adam_update: {name} {arr.shape} must have param's shape {param.shape}")
    vmax = max_exp_avg_sq if amsgrad else None
    suffix = _suffix(param, grad, exp_avg, exp_avg_sq, vmax)
    if suffix is None or not _all_contiguous(param, exp_avg, exp_avg_sq, vmax):
        return _reference("adam_update")(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step,
                                         lr, beta1, beta2, eps, weight_decay, amsgrad,
                                         decoupled_weight_decay)
    step_size = lr / (1 - beta1**step)
    bias2_sqrt = math.sqrt(1 - beta2**step)
    rt = current()
    with rt.on_device_of(param):
        grad = rt.xp.ascontiguousarray(grad)
        _launch_1d(f"adam_update_{suffix}", param.size,
                   [param, grad, exp_avg, exp_avg_sq, vmax, int(amsgrad), lr, beta1, beta2, eps,
                    weight_decay, int(decoupled_weight_decay), step_size, bias2_sqrt,
                    param.size])
    return None


# ---- all-reduce arithmetic ----------------------------------------------------------------
def reduce_add(dst: Array, src: Array) -> Array:
    """dst += src on the device (a received all-reduce chunk into the local one); returns dst."""
    if dst.shape != src.shape:
        raise ValueError(f"reduce_add: dst {dst.shape} and src {src.shape} must have one shape")
    suffix = _suffix(dst, src)
    if suffix is None or not dst.flags.c_contiguous:
        dst += src
        return dst
    rt = current()
    with rt.on_device_of(dst):
        _launch_1d(f"reduce_add_{suffix}", dst.size, [dst, rt.xp.ascontiguousarray(src), dst.size])
    return dst


def reduce_scale(x: Array, factor: float) -> Array:
    """x *= factor on the device (the sum of N ranks into their mean); returns x."""
    suffix = _suffix(x)
    if suffix is None or not x.flags.c_contiguous:
        x *= factor
        return x
    rt = current()
    with rt.on_device_of(x):
        _launch_1d(f"reduce_scale_{suffix}", x.size, [x, factor, x.size])
    return x
