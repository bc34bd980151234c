"""The framework's losses (cross_entropy, nll_loss, mse_loss, l1_loss, binary_cross_entropy and
its logits form), with PyTorch's signatures (the deprecated ``size_average`` / ``reduce``
included) and reductions, over the ops of tinyflow/ops/loss.py. The rest of PyTorch's losses are
in loss_extra.py."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tinyflow import amp
from tinyflow.nn.functional._utils import FunctionalError, _broadcast_pair, _target
from tinyflow.ops.activation import log_softmax
from tinyflow.ops.loss import (
    BinaryCrossEntropyFunction,
    BinaryCrossEntropyWithLogitsFunction,
    CrossEntropy,
    L1LossFunction,
    MSELossFunction,
    NLLLossFunction,
)
from tinyflow.tensor import Tensor, tensor

__all__ = [
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
]


REDUCTIONS = ("mean", "sum", "none")


# Every loss takes PyTorch's deprecated ``size_average`` / ``reduce`` too, at PyTorch's positions,
# and maps them to ``reduction`` as PyTorch does.
def _reduction(op: str, size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else "mean" if size_average else "sum"
    if reduction not in REDUCTIONS:
        raise FunctionalError(f"{op}: {reduction} is not a valid value for reduction; use one of {REDUCTIONS}")
    return reduction


def _as_target(t: Any, like: Tensor) -> Tensor:
    return t if isinstance(t, Tensor) else tensor(t, dtype=like.dtype, device=like.device)


def _reduce(losses: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return losses.mean()
    return losses.sum() if reduction == "sum" else losses


def cross_entropy(input: Tensor, target: Any, weight: Tensor | None = None,  # noqa: A002
                  size_average: bool | None = None, ignore_index: int = -100, reduce: bool | None = None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Softmax cross-entropy on logits (N, C), (N, C, d1, ...) or (C,) and class indices, as PyTorch.

    Targets that are class probabilities (a float tensor shaped like the logits) are supported too.
    """
    reduction = _reduction("cross_entropy", size_average, reduce, reduction)
    logits, target = amp.float32_inputs(input, target)
    if not 0 <= label_smoothing <= 1:
        raise FunctionalError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    w = weight.array if isinstance(weight, Tensor) else weight
    if isinstance(target, Tensor) and target.is_floating_point():
        return _soft_cross_entropy(logits, target, weight, reduction, label_smoothing)
    if logits.ndim == 1:  # one unbatched sample (C,) with a 0-d target
        t = _target(target, logits)
        out = CrossEntropy.apply(logits.reshape(1, -1), t.reshape(1), w, ignore_index, reduction,
                                     label_smoothing)
        return out.reshape() if reduction == "none" else out
    return CrossEntropy.apply(logits, _target(target, logits), w, ignore_index, reduction, label_smoothing)


def _soft_cross_entropy(logits: Tensor, target: Tensor, weight: Tensor | None, reduction: str,
                        label_smoothing: float) -> Tensor:
    if target.shape != logits.shape:
        raise FunctionalError(f"cross_entropy: probability targets must have the logits' shape "
                              f"{logits.shape}, got {target.shape}")
    dim = 1 if logits.ndim > 1 else 0
    c = logits.shape[dim]
    if label_smoothing:
        target = target * (1 - label_smoothing) + label_smoothing / c
    lp = log_softmax(logits, dim=dim)
    if weight is not None:
        lp = lp * (weight.reshape((1, c) + (1,) * (logits.ndim - 2)) if dim else weight)
    losses = -(lp * target).sum(dim=dim)
    if reduction == "mean":
        return losses.mean() * 1.0
    return losses.sum() if reduction == "sum" else losses


def nll_loss(input: Tensor, target: Any, weight: Tensor | None = None,  # noqa: A002
             size_average: bool | None = None, ignore_index: int = -100, reduce: bool | None = None,
             reduction: str = "mean") -> Tensor:
    """The negative log-likelihood of class indices under log-probabilities (N, C, *) or (C,)."""
    reduction = _reduction("nll_loss", size_average, reduce, reduction)
    (log_probs,) = amp.float32_inputs(input)
    w = weight.array if isinstance(weight, Tensor) else weight
    if log_probs.ndim == 1:
        t = _target(target, log_probs)
        out = NLLLossFunction.apply(log_probs.reshape(1, -1), t.reshape(1), w, ignore_index, reduction)
        return out.reshape() if reduction == "none" else out
    return NLLLossFunction.apply(log_probs, _target(target, log_probs), w, ignore_index, reduction)


def _pointwise_pair(op: str, input: Tensor, target: Any) -> tuple[Tensor, Tensor]:  # noqa: A002
    """Input and target broadcast to one shape (with PyTorch's warning when they differ), in
    float32 inside autocast."""
    target = _as_target(target, input)
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({tuple(target.shape)}) that is different to the input size "
                      f"({tuple(input.shape)}). This will likely lead to incorrect results due to "
                      "broadcasting. Please ensure they have the same size.", UserWarning, stacklevel=3)
        input, target = _broadcast_pair(op, input, target)
    return tuple(amp.float32_inputs(input, target))  # type: ignore[return-value]


def _weighted(op: str, losses: Tensor, input: Tensor, weight: Tensor, reduction: str) -> Tensor:  # noqa: A002
    """Elementwise ``losses`` scaled by ``weight`` (input's shape); 'mean' is the weighted mean
    sum(w * loss) / sum(w), as PyTorch's mse_loss and l1_loss compute it."""
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"{op}: weight of shape {tuple(weight.shape)} must have the input's shape "
                         f"{tuple(input.shape)} (Weights and input must have the same size.)")
    weighted = losses * weight
    if reduction == "mean":
        return weighted.sum() / weight.sum()
    return weighted.sum() if reduction == "sum" else weighted


def mse_loss(input: Tensor, target: Any, size_average: bool | None = None, reduce: bool | None = None,  # noqa: A002
             reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """The mean (or sum) of squared differences."""
    reduction = _reduction("mse_loss", size_average, reduce, reduction)
    a, t = _pointwise_pair("mse_loss", input, target)
    if weight is not None:
        return _weighted("mse_loss", MSELossFunction.apply(a, t, "none"), input, weight, reduction)
    return MSELossFunction.apply(a, t, reduction)


def l1_loss(input: Tensor, target: Any, size_average: bool | None = None, reduce: bool | None = None,  # noqa: A002
            reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """The mean (or sum) of absolute differences (each scaled by ``weight`` when given, as mse_loss)."""
    reduction = _reduction("l1_loss", size_average, reduce, reduction)
    a, t = _pointwise_pair("l1_loss", input, target)
    if weight is not None:
        return _weighted("l1_loss", L1LossFunction.apply(a, t, "none"), input, weight, reduction)
    return L1LossFunction.apply(a, t, reduction)


def _weight_array(op: str, weight: Any, like: Tensor) -> Any:
    """An optional rescaling weight as a raw array broadcastable to ``like`` (no gradient)."""
    if weight is None:
        return None
    w = weight.array if isinstance(weight, Tensor) else np.asarray(weight)
    try:
        np.broadcast_shapes(tuple(w.shape), tuple(like.shape))
    except ValueError:
        raise FunctionalError(f"{op}: weight of shape {tuple(w.shape)} cannot be broadcast to the input shape "
                              f"{tuple(like.shape)}") from None
    return w.astype(like.dtype, copy=False)


def binary_cross_entropy(input: Tensor, target: Any, weight: Tensor | None = None,  # noqa: A002
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """Binary cross-entropy between probabilities ``input`` in [0, 1] and ``target`` (same shape);
    each log is clamped at -100, as in PyTorch."""
    op = "binary_cross_entropy"
    reduction = _reduction(op, size_average, reduce, reduction)
    target = _as_target(target, input)
    if tuple(target.shape) != tuple(input.shape):
        raise FunctionalError(f"{op}: using a target size ({tuple(target.shape)}) that is different to the input size "
                         f"({tuple(input.shape)}) is deprecated. Please ensure they have the same size.")
    p, t = amp.float32_inputs(input, target)
    return BinaryCrossEntropyFunction.apply(p, t, _weight_array(op, weight, p), reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Any, weight: Tensor | None = None,  # noqa: A002
                                     size_average: bool | None = None, reduce: bool | None = None,
                                     reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross-entropy on logits, stable for any logit; ``pos_weight`` (broadcast over the
    last dim, one per class) weighs the positive term."""
    op = "binary_cross_entropy_with_logits"
    reduction = _reduction(op, size_average, reduce, reduction)
    target = _as_target(target, input)
    if tuple(target.shape) != tuple(input.shape):
        raise FunctionalError(f"{op}: target size ({tuple(target.shape)}) must be the same as input size "
                         f"({tuple(input.shape)})")
    x, t = amp.float32_inputs(input, target)
    return BinaryCrossEntropyWithLogitsFunction.apply(
        x, t, _weight_array(op, weight, x), _weight_array(op, pos_weight, x), reduction)


