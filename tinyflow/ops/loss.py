"""Losses: cross_entropy (fused with log_softmax; ignore_index, label_smoothing, weights,
reduction), nll_loss and mse_loss. Their argument checks are F's (tinyflow/nn/functional.py)."""
from __future__ import annotations

from typing import Any

from tinyflow.autograd import Context, Function

__all__ = ["CrossEntropy", "NLLLossFunction", "MSELossFunction"]


def _classes_last(x: Any) -> Any:
    """(N, C, d1, ...) -> (N*d1*..., C): the layout the fused kernel wants."""
    if x.ndim == 2:
        return x
    c = x.shape[1]
    return x.reshape(x.shape[0], c, -1).transpose(0, 2, 1).reshape(-1, c)


class CrossEntropy(Function):
    """cross_entropy on class-index targets, fused with log_softmax (one kernel each way)."""

    @staticmethod
    def forward(
        ctx: Context,
        logits: Any,  # (N, C) or (N, C, d1, ...)
        target: Any,  # (N,) or (N, d1, ...) int
        weight: Any = None,
        ignore_index: int = -100,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ) -> Any:
        xp = ctx.xp
        _validate_targets("cross_entropy", logits, target, ignore_index)
        z = _classes_last(logits)  # (M, C)
        t = target.reshape(-1)
        if weight is not None:
            weight = weight.astype(logits.dtype, copy=False)
        losses, lp = ctx.kernels.softmax_cross_entropy_forward(z, t, ignore_index, label_smoothing, weight)
        if reduction == "mean":
            valid = t != ignore_index
            denom = (weight[xp.where(valid, t, 0)] * valid).sum() if weight is not None else valid.sum()
            ctx.scale = _mean_scale(xp, denom)
            out = losses.sum() * ctx.scale
        elif reduction == "sum":
            out = losses.sum()
        else:
            out = losses.reshape(target.shape)
        ctx.save_for_backward(lp, t, weight)
        ctx.shape, ctx.reduction = logits.shape, reduction
        ctx.ignore_index, ctx.label_smoothing = ignore_index, label_smoothing
        return xp.asarray(out, dtype=logits.dtype)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        lp, t, weight = ctx.saved_tensors
        if ctx.reduction == "none":
            g_each = g.reshape(-1)
        else:
            scale = ctx.scale if ctx.reduction == "mean" else 1.0
            g_each = xp.broadcast_to(g * scale, t.shape).astype(lp.dtype)
        gz = ctx.kernels.softmax_cross_entropy_backward(lp, t, g_each, ctx.ignore_index, ctx.label_smoothing, weight)
        shape = ctx.shape
        if len(shape) > 2:  # back to (N, C, d1, ...)
            gz = gz.reshape(shape[0], -1, shape[1]).transpose(0, 2, 1).reshape(shape)
        return (gz,) + (None,) * 5


def _mean_scale(xp: Any, denom: Any) -> Any:
    """1 / denom for a 'mean' reduction, NaN when nothing counts (all targets ignored, as
    PyTorch), computed on the device: no ``if denom`` that would wait for the GPU every step."""
    positive = denom > 0
    return xp.where(positive, 1.0 / xp.where(positive, denom, 1), xp.nan)


def _validate_targets(op: str, logits: Any, target: Any, ignore_index: int) -> None:
    if logits.ndim < 2:
        raise ValueError(f"{op}: input must be (N, C) or (N, C, d1, ...), got shape {tuple(logits.shape)}")
    expected = (logits.shape[0],) + tuple(logits.shape[2:])
    if tuple(target.shape) != expected:
        raise ValueError(
            f"{op}: input of shape {tuple(logits.shape)} needs a target of shape {expected}, "
            f"got {tuple(target.shape)}"
        )
    if target.dtype.kind not in "iu":
        raise TypeError(f"{op}: class-index targets must be integers, got dtype {target.dtype}")
    c = logits.shape[1]
    if not target.size:
        return
    from tinyflow.device import device_check

    # At once on the CPU; on a device read at the next host read (no sync per call).
    bad = ((target != ignore_index) & ((target < 0) | (target >= c))).reshape(-1)

    def error(value: int) -> IndexError:
        return IndexError(f"{op}: target values must be in [0, {c}) (or ignore_index={ignore_index}); got {value}")

    device_check(bad.any(), target.reshape(-1)[bad.argmax()], error, key=(op, c, ignore_index))


class NLLLossFunction(Function):
    """Negative log-likelihood on log-probabilities (N, C) and class indices (N,)."""

    @staticmethod
    def forward(
        ctx: Context, lp: Any, target: Any, weight: Any = None, ignore_index: int = -100, reduction: str = "mean"
    ) -> Any:
        xp = ctx.xp
        _validate_targets("nll_loss", lp, target, ignore_index)
        z = _classes_last(lp)
        t = target.reshape(-1)
        valid = t != ignore_index
        safe = xp.where(valid, t, 0)
        w = weight[safe].astype(lp.dtype) if weight is not None else xp.ones(t.shape, lp.dtype)
        w = w * valid
        losses = -z[xp.arange(z.shape[0]), safe] * w
        ctx.save_for_backward(safe, w)
        ctx.shape, ctx.reduction, ctx.zshape = lp.shape, reduction, z.shape
        if reduction == "mean":
            ctx.scale = _mean_scale(xp, w.sum())
            return xp.asarray(losses.sum() * ctx.scale, dtype=lp.dtype)
        if reduction == "sum":
            return xp.asarray(losses.sum(), dtype=lp.dtype)
        return losses.reshape(target.shape)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        safe, w = ctx.saved_tensors
        if ctx.reduction == "none":
            g_each = g.reshape(-1)
        else:
            g_each = g * (ctx.scale if ctx.reduction == "mean" else 1.0)
        gz = xp.zeros(ctx.zshape, dtype=w.dtype)
        gz[xp.arange(gz.shape[0]), safe] = -w * g_each
        shape = ctx.shape
        if len(shape) > 2:
            gz = gz.reshape(shape[0], -1, shape[1]).transpose(0, 2, 1).reshape(shape)
        return (gz,) + (None,) * 4


class MSELossFunction(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any, reduction: str = "mean") -> Any:
        if a.shape != b.shape:
            raise ValueError(f"mse_loss: input shape {tuple(a.shape)} and target shape {tuple(b.shape)} differ")
        diff = a - b
        ctx.save_for_backward(diff)
        ctx.reduction = reduction
        sq = diff * diff
        if reduction == "mean":
            return ctx.xp.asarray(sq.mean(), dtype=a.dtype)
        if reduction == "sum":
            return ctx.xp.asarray(sq.sum(), dtype=a.dtype)
        return sq

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (diff,) = ctx.saved_tensors
        scale = 2.0 / diff.size if ctx.reduction == "mean" else 2.0
        gd = g * diff * scale
        return gd, -gd, None
