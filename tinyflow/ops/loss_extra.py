"""The rest of PyTorch's loss ops (smooth L1, Huber, KL divergence): ops of the PyTorch surface.
The core's (cross-entropy, NLL, MSE, L1, binary cross-entropy) are in loss.py.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.autograd import Context, Function
from tinyflow.ops.elementwise import floating_only
from tinyflow.ops.loss import _per_element, _reduce, _target_grad, promoted

__all__ = [
    "SmoothL1LossFunction", "HuberLossFunction", "KLDivFunction",
]


class SmoothL1LossFunction(Function):
    """0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (the L1 loss when beta == 0)."""

    @staticmethod
    def forward(ctx: Context, a: Any, t: Any, reduction: str = "mean", beta: float = 1.0) -> Any:
        xp = ctx.xp
        a, t = promoted("smooth_l1_loss", a, t)
        d = a - t
        ctx.save_for_backward(d)
        ctx.reduction, ctx.beta = reduction, beta
        ad = xp.abs(d)
        if beta == 0:
            return _reduce(xp, ad, reduction, a.dtype)
        return _reduce(xp, xp.where(ad < beta, 0.5 * d * d / beta, ad - 0.5 * beta), reduction, a.dtype)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        (d,) = ctx.saved_tensors
        beta = ctx.beta
        slope = xp.sign(d) if beta == 0 else xp.clip(d / beta, -1, 1)
        gd = _per_element(g, ctx.reduction, d.size) * slope
        return gd, _target_grad(ctx, 1, -gd), None, None


class HuberLossFunction(Function):
    """0.5 d^2 where |d| < delta, delta * (|d| - 0.5 delta) elsewhere."""

    @staticmethod
    def forward(ctx: Context, a: Any, t: Any, reduction: str = "mean", delta: float = 1.0) -> Any:
        xp = ctx.xp
        a, t = promoted("huber_loss", a, t)
        d = a - t
        ctx.save_for_backward(d)
        ctx.reduction, ctx.delta = reduction, delta
        ad = xp.abs(d)
        return _reduce(xp, xp.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta)), reduction, a.dtype)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (d,) = ctx.saved_tensors
        gd = _per_element(g, ctx.reduction, d.size) * ctx.xp.clip(d, -ctx.delta, ctx.delta)
        return gd, _target_grad(ctx, 1, -gd), None, None


class KLDivFunction(Function):
    """kl_div(input, target): target * (log(target) - input) pointwise, input being
    log-probabilities; with log_target the target is too: exp(t) * (t - input)."""

    @staticmethod
    def forward(ctx: Context, a: Any, t: Any, reduction: str = "mean", log_target: bool = False) -> Any:
        xp = ctx.xp
        floating_only("kl_div", a)
        if log_target:
            losses = xp.exp(t) * (t - a)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                xlogx = xp.where(t == 0, 0, t * xp.log(xp.where(t == 0, 1, t)))
            losses = xlogx - t * a
        ctx.save_for_backward(a, t)
        ctx.reduction, ctx.log_target = reduction, log_target
        if reduction == "batchmean":
            batch = a.shape[0] if a.ndim else 1
            return xp.asarray(losses.sum() / batch, dtype=a.dtype)
        return _reduce(xp, losses, reduction, a.dtype)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        a, t = ctx.saved_tensors
        if ctx.reduction == "batchmean":
            ge = g / (a.shape[0] if a.ndim else 1)
        else:
            ge = _per_element(g, ctx.reduction, a.size)
        if ctx.log_target:
            e = xp.exp(t)
            ga, gt = -ge * e, ge * e * (t - a + 1)
        else:
            ga = -ge * t
            gt = None
            if ctx.needs_input_grad[1]:  # PyTorch's xlogy gradient: log(t) + t/t - input (NaN at t = 0)
                with np.errstate(divide="ignore", invalid="ignore"):
                    gt = ge * (xp.where(t == 0, 0, xp.log(xp.where(t == 0, 1, t))) + t / t - a)
        return ga, gt if ctx.needs_input_grad[1] else None, None, None
