"""The rest of F's losses (smooth L1, Huber, KL divergence, the margin, ranking, embedding and
triplet losses, Poisson and Gaussian NLL): the PyTorch surface. The framework's (cross_entropy,
nll_loss, mse_loss, l1_loss, binary_cross_entropy[_with_logits]) are in loss.py.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tinyflow import amp
from tinyflow.nn.functional._utils import FunctionalError, _as_constant, _target
from tinyflow.ops.activation import logsigmoid, softplus
from tinyflow.nn.functional.loss import _as_target, _pointwise_pair, _reduce, _reduction
from tinyflow.ops.loss_extra import HuberLossFunction, KLDivFunction, SmoothL1LossFunction
from tinyflow.tensor import Tensor, where

__all__ = [
    "smooth_l1_loss", "huber_loss", "kl_div", "soft_margin_loss", "margin_ranking_loss",
    "hinge_embedding_loss", "cosine_embedding_loss", "triplet_margin_loss",
    "triplet_margin_with_distance_loss", "poisson_nll_loss", "gaussian_nll_loss",
    "multilabel_soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
]


def smooth_l1_loss(input: Tensor, target: Any, size_average: bool | None = None,  # noqa: A002
                   reduce: bool | None = None, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """Squared below ``beta`` (scaled by 1/beta), absolute above: 0.5 d^2/beta or |d| - 0.5 beta."""
    reduction = _reduction("smooth_l1_loss", size_average, reduce, reduction)
    if beta < 0:
        raise FunctionalError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    return SmoothL1LossFunction.apply(*_pointwise_pair("smooth_l1_loss", input, target), reduction, float(beta))


def huber_loss(input: Tensor, target: Any, reduction: str = "mean", delta: float = 1.0,  # noqa: A002
               weight: Tensor | None = None) -> Tensor:
    """0.5 d^2 below ``delta``, delta * (|d| - 0.5 delta) above."""
    reduction = _reduction("huber_loss", None, None, reduction)
    if delta <= 0:
        raise FunctionalError(f"huber_loss: delta must be positive, got {delta}")
    a, t = _pointwise_pair("huber_loss", input, target)
    if weight is not None:
        losses = HuberLossFunction.apply(a, t, "none", float(delta)) * weight
        return losses if reduction == "none" else losses.mean() if reduction == "mean" else losses.sum()
    return HuberLossFunction.apply(a, t, reduction, float(delta))


def kl_div(input: Tensor, target: Any, size_average: bool | None = None, reduce: bool | None = None,  # noqa: A002
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """KL(target || prediction) with ``input`` the prediction's log-probabilities: pointwise
    target * (log(target) - input). ``reduction="batchmean"`` (the true KL divergence) divides
    the sum by the batch size; "mean" divides by the number of elements (with PyTorch's warning)."""
    op = "kl_div"
    if reduction != "batchmean":
        reduction = _reduction(op, size_average, reduce, reduction)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    a, t = _pointwise_pair(op, input, target) if tuple(_as_target(target, input).shape) != tuple(input.shape) \
        else amp.float32_inputs(input, _as_target(target, input))
    return KLDivFunction.apply(a, t, reduction, bool(log_target))


def soft_margin_loss(input: Tensor, target: Any, size_average: bool | None = None,  # noqa: A002
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target * input)) for targets of +-1."""
    reduction = _reduction("soft_margin_loss", size_average, reduce, reduction)
    a, t = _pointwise_pair("soft_margin_loss", input, target)
    return _reduce(softplus(-t * a), reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """max(0, -target * (input1 - input2) + margin)."""
    reduction = _reduction("margin_ranking_loss", size_average, reduce, reduction)
    t = _as_target(target, input1)
    return _reduce((-t * (input1 - input2) + margin).clip(0, None), reduction)


def hinge_embedding_loss(input: Tensor, target: Any, margin: float = 1.0, size_average: bool | None = None,  # noqa: A002
                         reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """input where target == 1, max(0, margin - input) where target == -1."""
    reduction = _reduction("hinge_embedding_loss", size_average, reduce, reduction)
    t = _as_target(target, input)
    losses = where(t != 1, (margin - input).clip(0, None), 0.0) + where(t != -1, input, 0.0)
    return _reduce(losses, reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0,
                          size_average: bool | None = None, reduce: bool | None = None,
                          reduction: str = "mean") -> Tensor:
    """1 - cos(x1, x2) for target 1, max(0, cos(x1, x2) - margin) for target -1 (cos along dim 1
    of (N, D), or of the one vector pair)."""
    reduction = _reduction("cosine_embedding_loss", size_average, reduce, reduction)
    prod = (input1 * input2).sum(dim=-1)
    cos = prod / (((input1 * input1).sum(dim=-1) + 1e-12) * ((input2 * input2).sum(dim=-1) + 1e-12)).sqrt()
    t = _as_target(target, cos)
    losses = where(t == 1, 1 - cos, where(t == -1, (cos - margin).clip(0, None), 0.0))
    return _reduce(losses, reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2.0,
                        eps: float = 1e-6, swap: bool = False, size_average: bool | None = None,
                        reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """max(d(a, p) - d(a, n) + margin, 0) with d the pairwise p-norm distance."""
    from tinyflow.ops.distance import pairwise_distance  # here: only the triplet losses need it

    reduction = _reduction("triplet_margin_loss", size_average, reduce, reduction)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce((d_pos - d_neg + margin).clip(0, None), reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Any = None, margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Tensor:
    """max(d(a, p) - d(a, n) + margin, 0) for any distance function (pairwise_distance by default)."""
    from tinyflow.ops.distance import pairwise_distance  # here: only the triplet losses need it

    reduction = _reduction("triplet_margin_with_distance_loss", None, None, reduction)
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(dist(positive, negative))
    return _reduce((d_pos - d_neg + margin).clip(0, None), reduction)


def poisson_nll_loss(input: Tensor, target: Any, log_input: bool = True, full: bool = False,  # noqa: A002
                     size_average: bool | None = None, eps: float = 1e-8, reduce: bool | None = None,
                     reduction: str = "mean") -> Tensor:
    """Poisson negative log-likelihood: exp(input) - target * input (log_input), else
    input - target * log(input + eps); ``full`` adds Stirling's term where target > 1."""
    reduction = _reduction("poisson_nll_loss", size_average, reduce, reduction)
    t = _as_target(target, input)
    losses = input.exp() - t * input if log_input else input - t * (input + eps).log()
    if full:  # Stirling's approximation of log(target!), where target > 1
        with np.errstate(divide="ignore", invalid="ignore"):
            stirling = t * t.log() - t + 0.5 * (2 * np.pi * t).log()
        losses = losses + where(t > 1, stirling, 0.0)
    return _reduce(losses, reduction)


def gaussian_nll_loss(input: Tensor, target: Any, var: Any, full: bool = False, eps: float = 1e-6,  # noqa: A002
                      reduction: str = "mean") -> Tensor:
    """0.5 * (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) if full)."""
    reduction = _reduction("gaussian_nll_loss", None, None, reduction)
    t = _as_target(target, input)
    v = var if isinstance(var, Tensor) else _as_target(var, input)
    if v.ndim == input.ndim - 1 and tuple(v.shape) == tuple(input.shape[:-1]):
        v = v.unsqueeze(-1)
    v = v.clip(eps, None)
    losses = 0.5 * (v.log() + (input - t) ** 2 / v)
    if full:
        losses = losses + 0.5 * float(np.log(2 * np.pi))
    return _reduce(losses, reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Any, weight: Tensor | None = None,  # noqa: A002
                                size_average: bool | None = None, reduce: bool | None = None,
                                reduction: str = "mean") -> Tensor:
    """Mean over classes of the binary logistic loss of each class, per sample."""
    reduction = _reduction("multilabel_soft_margin_loss", size_average, reduce, reduction)
    t = _as_target(target, input)
    losses = -(t * logsigmoid(input) + (1 - t) * logsigmoid(-input))
    if weight is not None:
        losses = losses * weight
    return _reduce(losses.mean(dim=input.ndim - 1), reduction)


def multi_margin_loss(input: Tensor, target: Any, p: int = 1, margin: float = 1.0,  # noqa: A002
                      weight: Tensor | None = None, size_average: bool | None = None, reduce: bool | None = None,
                      reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss: sum over i != y of max(0, margin - x[y] + x[i])**p / C (times weight[y])."""
    reduction = _reduction("multi_margin_loss", size_average, reduce, reduction)
    if p not in (1, 2):
        raise FunctionalError(f"multi_margin_loss: only p == 1 and p == 2 supported, got {p}")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    y = np.asarray(_target(target, input)).reshape(-1)
    c = x.shape[1]
    hot = np.zeros((x.shape[0], c))
    hot[np.arange(x.shape[0]), y] = 1.0
    mask = _as_constant(hot, x)
    xy = (x * mask).sum(dim=1, keepdim=True)
    terms = (margin - xy + x).clip(0, None) * (1 - mask)
    if p == 2:
        terms = terms * terms
    if weight is not None:
        terms = terms * _as_constant(np.asarray(weight.array)[y].reshape(-1, 1), x)
    losses = terms.sum(dim=1) / c
    return _reduce(losses if input.ndim == 2 else losses.reshape(()), reduction)


def multilabel_margin_loss(input: Tensor, target: Any, size_average: bool | None = None,  # noqa: A002
                           reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Hinge loss between each target class j (the ids before the first -1 of a target row) and
    each other class i: sum of max(0, 1 - (x[j] - x[i])) / C."""
    reduction = _reduction("multilabel_margin_loss", size_average, reduce, reduction)
    x = input if input.ndim == 2 else input.reshape(1, -1)
    ids = np.asarray(_target(target, input)).reshape(x.shape)
    is_target = np.zeros(x.shape)
    for row, labels in enumerate(ids):
        for j in labels:
            if j < 0:
                break
            is_target[row, j] = 1.0
    pairs = _as_constant(is_target[:, :, None] * (1 - is_target)[:, None, :], x)  # (N, j, i)
    hinge = (1 - x.reshape(*x.shape, 1) + x.reshape(x.shape[0], 1, x.shape[1])).clip(0, None)
    losses = (hinge * pairs).sum(dim=(1, 2)) / x.shape[1]
    return _reduce(losses if input.ndim == 2 else losses.reshape(()), reduction)
