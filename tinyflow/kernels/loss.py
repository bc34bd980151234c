"""Fused softmax + cross-entropy, the reference for the CUDA ``softmax_cross_entropy`` kernels.

Per sample i with log-probabilities ``lp = log_softmax(z_i)``, class weights ``w`` (ones when
None), target ``y`` and label smoothing ``eps`` over ``C`` classes:

    loss_i = (1 - eps) * (-w[y] * lp[y]) + eps * (-(w * lp).sum() / C)      (0 where y is ignored)
    dloss_i/dz_i = (1 - eps) * w[y] * (p - onehot(y)) + eps * (p * w.sum() - w) / C

Over a large vocabulary (a word-level language model's (700, 33278) logits, 93 MB) the cost is
memory traffic, so each kernel allocates one (N, C) array and works in place on it (the forward's
exp through a small scratch that stays in cache); on NumPy both split their rows over the CPU
threads. The results are those of the plain formulas, bit for bit.

Half-precision inputs are computed in float32 and rounded once, as the CUDA kernels and PyTorch do.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.dtypes import is_half
from tinyflow.kernels._cpu import array_module, parallel_for

__all__ = ["log_softmax_forward", "softmax_cross_entropy_forward", "softmax_cross_entropy_backward"]

_BLOCK_BYTES = 1 << 18  # the exp scratch of log_softmax_forward on NumPy: 256 KiB, in L2


def _log_softmax_rows(x: np.ndarray, out: np.ndarray, start: int, stop: int) -> None:
    """out[start:stop] = log_softmax(x[start:stop]) along rows (C-contiguous NumPy (N, C) arrays),
    exp taken block of rows by block of rows through a small scratch that stays in cache."""
    c = x.shape[1]
    rows = max(1, _BLOCK_BYTES // max(1, c * x.itemsize))
    scratch = np.empty((min(rows, stop - start), c), dtype=x.dtype)
    for r0 in range(start, stop, rows):
        r1 = min(stop, r0 + rows)
        part, block = out[r0:r1], scratch[: r1 - r0]
        np.subtract(x[r0:r1], x[r0:r1].max(axis=1, keepdims=True), out=part)
        np.exp(part, out=block)
        sums = block.sum(axis=1, keepdims=True)  # row by row, as without blocks
        part -= np.log(sums)


def _widen(a: Any) -> Any:
    """A half-precision array as float32 (exact); None and other dtypes unchanged."""
    return a.astype(np.float32) if a is not None and is_half(a.dtype) else a


def log_softmax_forward(x: Any, axis: int = -1) -> Any:
    """log_softmax computed stably: x - max - log(sum(exp(x - max))), in one new array."""
    if is_half(x.dtype):  # in float32, rounded once
        return log_softmax_forward(_widen(x), axis).astype(x.dtype)
    xp = array_module(x)
    if xp is np and x.ndim == 2 and axis in (-1, 1) and x.flags.c_contiguous:
        out = np.empty_like(x)
        parallel_for(np, x.shape[0], lambda a, b: _log_softmax_rows(x, out, a, b), work=x.size)
        return out
    shifted = x - x.max(axis=axis, keepdims=True)  # the result, made in place below
    shifted -= xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))
    return shifted


def softmax_cross_entropy_forward(
    logits: Any,  # (N, C) float
    target: Any,  # (N,) int64
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    weight: Any = None,  # (C,) or None
) -> tuple[Any, Any]:
    """Per-sample losses (N,) and the log-probabilities (N, C) that backward needs."""
    if is_half(logits.dtype):  # in float32, each result rounded once
        loss, lp = softmax_cross_entropy_forward(_widen(logits), target, ignore_index,
                                                 label_smoothing, _widen(weight))
        return loss.astype(logits.dtype), lp.astype(logits.dtype)
    xp = array_module(logits)
    n, c = logits.shape
    lp = log_softmax_forward(logits, axis=1)  # (N, C)
    valid = target != ignore_index
    safe = xp.where(valid, target, 0)
    picked = lp[xp.arange(n), safe]  # (N,)
    w_y = weight[safe] if weight is not None else 1.0
    loss = -(w_y * picked)
    if label_smoothing:
        smooth = -((lp * weight).sum(axis=1) if weight is not None else lp.sum(axis=1)) / c
        loss = (1 - label_smoothing) * loss + label_smoothing * smooth
    return xp.where(valid, loss, 0).astype(logits.dtype, copy=False), lp


def softmax_cross_entropy_backward(
    log_probs: Any,  # (N, C)
    target: Any,  # (N,)
    grad_loss: Any,  # (N,) gradient of each per-sample loss
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    weight: Any = None,
) -> Any:
    """Gradient of the per-sample losses with respect to the logits, (N, C)."""
    if is_half(log_probs.dtype):  # in float32, rounded once
        grad = softmax_cross_entropy_backward(_widen(log_probs), target, _widen(grad_loss),
                                              ignore_index, label_smoothing, _widen(weight))
        return grad.astype(log_probs.dtype)
    xp = array_module(log_probs)
    n, c = log_probs.shape
    valid = target != ignore_index
    safe = xp.where(valid, target, 0)
    scale = xp.where(valid, grad_loss, 0).astype(log_probs.dtype, copy=False)
    if xp is np and not label_smoothing and log_probs.flags.c_contiguous:
        grad = np.empty_like(log_probs)  # the one new array

        def rows(a: int, b: int) -> None:  # the formula below, for rows a..b
            part = grad[a:b]
            np.exp(log_probs[a:b], out=part)
            part[np.arange(b - a), safe[a:b]] -= 1
            if weight is not None:
                part *= weight[safe[a:b]][:, None]
            part *= scale[a:b, None]

        parallel_for(np, n, rows, work=log_probs.size)
        return grad
    grad = xp.exp(log_probs)  # (N, C) the softmax p: the one new array, made the gradient in place
    p = grad.copy() if label_smoothing else None
    grad[xp.arange(n), safe] -= 1
    if weight is not None:
        grad *= weight[safe][:, None]
    if label_smoothing:
        wsum = weight.sum() if weight is not None else c
        w = weight if weight is not None else 1.0
        grad = (1 - label_smoothing) * grad + label_smoothing * (p * wsum - w) / c
    grad *= scale[:, None]
    return grad
