"""Fused softmax + cross-entropy, the reference for the CUDA ``softmax_cross_entropy`` kernels.

Per sample i with log-probabilities ``lp = log_softmax(z_i)``, class weights ``w`` (ones when
None), target ``y`` and label smoothing ``eps`` over ``C`` classes:

    loss_i = (1 - eps) * (-w[y] * lp[y]) + eps * (-(w * lp).sum() / C)      (0 where y is ignored)
    dloss_i/dz_i = (1 - eps) * w[y] * (p - onehot(y)) + eps * (p * w.sum() - w) / C
"""
from __future__ import annotations

from typing import Any

from tinyflow.device import array_module

__all__ = ["log_softmax_forward", "softmax_cross_entropy_forward", "softmax_cross_entropy_backward"]


def log_softmax_forward(x: Any, axis: int = -1) -> Any:
    """log_softmax computed stably: x - max - log(sum(exp(x - max)))."""
    xp = array_module(x)
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))


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
    p = xp.exp(log_probs)
    valid = target != ignore_index
    safe = xp.where(valid, target, 0)
    grad = p.copy()
    grad[xp.arange(n), safe] -= 1
    if weight is not None:
        grad *= weight[safe][:, None]
    if label_smoothing:
        wsum = weight.sum() if weight is not None else c
        w = weight if weight is not None else 1.0
        grad = (1 - label_smoothing) * grad + label_smoothing * (p * wsum - w) / c
    scale = xp.where(valid, grad_loss, 0).astype(log_probs.dtype, copy=False)
    return grad * scale[:, None]
