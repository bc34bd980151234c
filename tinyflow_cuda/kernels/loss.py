"""CUDA twins of ``tinyflow/kernels/loss.py``: fused log-softmax and cross-entropy over
csrc/loss.cu (one block of 256 threads per row, forward and backward), for float32, float64,
float16 and bfloat16 logits (the half types computed in float32 and rounded once per store).
Other dtypes, mixed logits/weight dtypes and layouts the kernels do not take run the reference."""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.kernels import loss as reference
from tinyflow_cuda.kernels._launch import KernelCall

__all__ = ["log_softmax_forward", "softmax_cross_entropy_forward", "softmax_cross_entropy_backward"]

Array = Any


def log_softmax_forward(x: Array, axis: int = -1) -> Array:
    """log_softmax along the last axis in one fused pass (other axes use the reference)."""
    call = KernelCall("log_softmax_forward", x, op="log_softmax")
    if not call.supported or x.ndim == 0 or axis not in (-1, x.ndim - 1) or x.shape[-1] == 0:
        return reference.log_softmax_forward(x, axis)
    with call:
        x = call.contiguous(x)
        classes = x.shape[-1]
        rows = x.size // classes
        lp = call.empty(x.shape)
        call.launch_rows(rows, [x, lp, rows, classes])
        return lp


def softmax_cross_entropy_forward(logits: Array, target: Array, ignore_index: int = -100,
                                  label_smoothing: float = 0.0,
                                  weight: Array | None = None) -> tuple[Array, Array]:
    """Per-sample losses (N,) and the log-probabilities (N, C), one block per sample."""
    call = KernelCall("softmax_cross_entropy_forward", logits, weight, op="cross_entropy")
    if not call.supported or logits.ndim != 2:
        return reference.softmax_cross_entropy_forward(logits, target, ignore_index,
                                                       label_smoothing, weight)
    n, c = logits.shape
    if target.shape != (n,):
        raise ValueError(f"cross_entropy: target {tuple(target.shape)} must be (N,) = ({n},) "
                         f"for logits {tuple(logits.shape)}")
    with call:
        logits, weight = call.contiguous(logits, weight)
        target = call.contiguous(target.astype(np.int64, copy=False))
        lp = call.empty((n, c))
        loss = call.empty((n,))
        call.launch_rows(n, [logits, lp, target, weight, loss, n, c, ignore_index,
                             label_smoothing])
        return loss, lp


def softmax_cross_entropy_backward(log_probs: Array, target: Array, grad_loss: Array,
                                   ignore_index: int = -100, label_smoothing: float = 0.0,
                                   weight: Array | None = None) -> Array:
    """Gradient of the per-sample losses with respect to the logits, (N, C), one block per sample
    (with label smoothing and weights, each block also sums the weights: no separate launch)."""
    call = KernelCall("softmax_cross_entropy_backward", log_probs, weight,
                      op="cross_entropy backward")
    if not call.supported or log_probs.ndim != 2:
        return reference.softmax_cross_entropy_backward(log_probs, target, grad_loss,
                                                        ignore_index, label_smoothing, weight)
    n, c = log_probs.shape
    with call:
        xp = call.xp
        log_probs, weight = call.contiguous(log_probs, weight)
        target = call.contiguous(target.astype(np.int64, copy=False))
        scale = call.contiguous(xp.broadcast_to(xp.asarray(grad_loss, dtype=log_probs.dtype), (n,)))
        grad = call.empty((n, c))
        call.launch_rows(n, [log_probs, target, scale, weight, grad, n, c, ignore_index,
                             label_smoothing])
        return grad
