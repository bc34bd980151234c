"""Fused softmax + cross-entropy, the reference for the CUDA ``softmax_cross_entropy`` kernels.

Per sample i with log-probabilities ``lp = log_softmax(z_i)``, class weights ``w`` (ones when
None), target ``y`` and label smoothing ``eps`` over ``C`` classes:

    loss_i = (1 - eps) * (-w[y] * lp[y]) + eps * (-(w * lp).sum() / C)      (0 where y is ignored)
    dloss_i/dz_i = (1 - eps) * w[y] * (p - onehot(y)) + eps * (p * w.sum() - w) / C

Over a large vocabulary (word-level language models: (700, 33278) logits, 93 MB) the cost is
memory traffic, so each kernel allocates one (N, C) array and works in place on it: the forward
takes exp row block by row block in a small scratch buffer that stays in cache, the backward
turns exp(lp) into the gradient in place. The results are those of the plain formulas, bit for bit.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.device import array_module

__all__ = ["log_softmax_forward", "softmax_cross_entropy_forward", "softmax_cross_entropy_backward"]

_BLOCK_BYTES = 1 << 18  # the exp scratch of log_softmax_forward on NumPy: 256 KiB, in L2


def _row_sums_of_exp(shifted: Any) -> Any:
    """sum(exp(shifted), axis=-1, keepdims=True) of a C-contiguous NumPy (N, C) array, taken
    block of rows by block of rows through one small scratch buffer instead of an (N, C) one."""
    n, c = shifted.shape
    rows = max(1, _BLOCK_BYTES // max(1, c * shifted.itemsize))
    if rows >= n:
        return np.exp(shifted).sum(axis=1, keepdims=True)
    scratch = np.empty((rows, c), dtype=shifted.dtype)
    sums = np.empty((n, 1), dtype=shifted.dtype)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        block = scratch[: stop - start]
        np.exp(shifted[start:stop], out=block)
        block.sum(axis=1, keepdims=True, out=sums[start:stop])  # row by row, as without blocks
    return sums


def log_softmax_forward(x: Any, axis: int = -1) -> Any:
    """log_softmax computed stably: x - max - log(sum(exp(x - max))), in one new array."""
    xp = array_module(x)
    shifted = x - x.max(axis=axis, keepdims=True)  # the result, made in place below
    if xp is np and shifted.ndim == 2 and axis in (-1, 1) and shifted.flags.c_contiguous:
        sums = _row_sums_of_exp(shifted)
    else:
        sums = xp.exp(shifted).sum(axis=axis, keepdims=True)
    shifted -= xp.log(sums)
    return shifted


def softmax_cross_entropy_forward(
    logits: Any,  # (N, C) float
    target: Any,  # (N,) int64
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    weight: Any = None,  # (C,) or None
) -> tuple[Any, Any]:
    """Per-sample losses (N,) and the log-probabilities (N, C) that backward needs."""
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
    xp = array_module(log_probs)
    n, c = log_probs.shape
    grad = xp.exp(log_probs)  # (N, C) the softmax p: the one new array, made the gradient in place
    valid = target != ignore_index
    safe = xp.where(valid, target, 0)
    scale = xp.where(valid, grad_loss, 0).astype(log_probs.dtype, copy=False)
    if label_smoothing:
        p = grad.copy()
        grad[xp.arange(n), safe] -= 1
        if weight is not None:
            grad *= weight[safe][:, None]
        wsum = weight.sum() if weight is not None else c
        w = weight if weight is not None else 1.0
        grad = (1 - label_smoothing) * grad + label_smoothing * (p * wsum - w) / c
    else:
        grad[xp.arange(n), safe] -= 1
        if weight is not None:
            grad *= weight[safe][:, None]
    grad *= scale[:, None]
    return grad
