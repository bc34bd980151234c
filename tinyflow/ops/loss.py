"""Losses: cross_entropy (fused with log_softmax; ignore_index, label_smoothing, weights,
reduction), nll_loss, mse_loss, l1, binary_cross_entropy (on probabilities and on logits); smooth
L1, Huber and KL divergence are in loss_extra.py. Their argument checks are F's
(tinyflow/nn/functional/loss.py)."""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.autograd import Context, Function
from tinyflow.dtypes import is_floating_or_complex, is_half
from tinyflow.errors import ShapeError
from tinyflow.ops.elementwise import floating_only, not_implemented_for
from tinyflow.promotion import result_type

__all__ = [
    "CrossEntropy", "NLLLossFunction", "MSELossFunction", "L1LossFunction",
    "BinaryCrossEntropyFunction", "BinaryCrossEntropyWithLogitsFunction",
]


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
            denom = _sum(weight[xp.where(valid, t, 0)] * valid) if weight is not None else valid.sum()
            ctx.scale = _mean_scale(xp, denom)
            out = _sum(losses) * ctx.scale
        elif reduction == "sum":
            out = _sum(losses)
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


def _sum(x: Any) -> Any:
    """x.sum(), in float32 for half-precision x (as PyTorch reduces them): a bfloat16 running sum
    stops growing at 256 times its terms, so a batch's mean loss would come out wrong."""
    return x.sum(dtype=np.float32) if is_half(x.dtype) else x.sum()


def _mean_scale(xp: Any, denom: Any) -> Any:
    """1 / denom for a 'mean' reduction, NaN when nothing counts (all targets ignored, as
    PyTorch), computed on the device: no ``if denom`` that would wait for the GPU every step."""
    positive = denom > 0
    return xp.where(positive, 1.0 / xp.where(positive, denom, 1), xp.nan)


def _validate_targets(op: str, logits: Any, target: Any, ignore_index: int) -> None:
    """Class-index targets as PyTorch takes them (errors that ``except RuntimeError`` catches)."""
    floating_only(op, logits)
    if logits.ndim < 2:
        raise ShapeError(f"{op}: input must be (N, C) or (N, C, d1, ...), got shape {tuple(logits.shape)}")
    expected = (logits.shape[0],) + tuple(logits.shape[2:])
    if tuple(target.shape) != expected:
        raise ShapeError(
            f"{op}: input of shape {tuple(logits.shape)} needs a target of shape {expected}, "
            f"got {tuple(target.shape)}"
        )
    if target.dtype not in (np.int64, np.uint8):
        raise RuntimeError(f"{op}: expected target dtype to be int64 or uint8 (class indices), but got "
                           f"{target.dtype}; convert it with .long()")
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
            ctx.scale = _mean_scale(xp, _sum(w))
            return xp.asarray(_sum(losses) * ctx.scale, dtype=lp.dtype)
        if reduction == "sum":
            return xp.asarray(_sum(losses), dtype=lp.dtype)
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
        a, b = promoted("mse_loss", a, b)
        if a.shape != b.shape:
            raise ShapeError(f"mse_loss: input shape {tuple(a.shape)} and target shape {tuple(b.shape)} differ")
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


# ------------------------------------------------------------- pointwise losses (PyTorch's set)
# Input and target have one shape (F broadcasts them first, as PyTorch does). Each forward
# computes the per-element losses and reduces them; backward scales the incoming gradient by
# the reduction (1/numel for "mean") and returns gradients for the input and, where PyTorch has
# one, the target.


def promoted(op: str, a: Any, t: Any) -> tuple[Any, Any]:
    """Input and target in PyTorch's result dtype of the two, which must be a floating one."""
    dtype = result_type(a, t)
    if not is_floating_or_complex(dtype):
        raise not_implemented_for(op, dtype)
    if op != "mse_loss" and "b" in (a.dtype.kind, t.dtype.kind):  # these subtract, and torch's - refuses bool
        raise RuntimeError(f"{op}: subtraction with a bool tensor is not supported; convert it with .float()")
    return a.astype(dtype, copy=False), t.astype(dtype, copy=False)


def _reduce(xp: Any, losses: Any, reduction: str, dtype: Any) -> Any:
    if reduction == "mean":
        return xp.asarray(losses.mean() if losses.size else xp.nan, dtype=dtype)
    if reduction == "sum":
        return xp.asarray(losses.sum(), dtype=dtype)
    return losses.astype(dtype, copy=False)


def _per_element(g: Any, reduction: str, size: int) -> Any:
    """The incoming gradient as the gradient of each element's loss."""
    if reduction == "mean":
        return g / max(size, 1)
    return g


def _target_grad(ctx: Context, index: int, grad: Any) -> Any:
    return grad if ctx.needs_input_grad[index] else None


class L1LossFunction(Function):
    """|input - target|; the gradient is sign(input - target) (0 at a tie, as PyTorch)."""

    @staticmethod
    def forward(ctx: Context, a: Any, t: Any, reduction: str = "mean") -> Any:
        a, t = promoted("l1_loss", a, t)
        d = a - t
        ctx.save_for_backward(d)
        ctx.reduction = reduction
        return _reduce(ctx.xp, ctx.xp.abs(d), reduction, a.dtype)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (d,) = ctx.saved_tensors
        gd = _per_element(g, ctx.reduction, d.size) * ctx.xp.sign(d)
        return gd, _target_grad(ctx, 1, -gd), None


_BCE_EPSILON = float(np.float32(1e-12))  # PyTorch's clamp of p(1-p): 1e-12 as a C float, in any dtype


class BinaryCrossEntropyFunction(Function):
    """-w * (t * log(p) + (1 - t) * log(1 - p)) on probabilities p, each log clamped at -100 and
    the input gradient's denominator p(1-p) at 1e-12, as PyTorch (so p = 0 or 1 stays finite)."""

    @staticmethod
    def forward(ctx: Context, p: Any, t: Any, weight: Any = None, reduction: str = "mean") -> Any:
        xp = ctx.xp
        floating_only("binary_cross_entropy", p)
        _check_probabilities(xp, p)
        with np.errstate(divide="ignore"):  # log(0) = -inf, clamped to -100 below
            log_p = xp.maximum(xp.log(p), -100)
            log_q = xp.maximum(xp.log1p(-p), -100)
        losses = -(t * log_p + (1 - t) * log_q)
        if weight is not None:
            losses = losses * weight
        ctx.save_for_backward(p, t, weight)
        ctx.reduction = reduction
        return _reduce(xp, losses, reduction, p.dtype)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        p, t, weight = ctx.saved_tensors
        ge = _per_element(g, ctx.reduction, p.size)
        if weight is not None:
            ge = ge * weight
        gp = ge * (p - t) / xp.maximum((1 - p) * p, _BCE_EPSILON)
        gt = None
        if ctx.needs_input_grad[1]:  # -logit(p), unclamped as PyTorch's: +-inf at p = 0 or 1
            with np.errstate(divide="ignore"):
                gt = ge * (xp.log1p(-p) - xp.log(p))
        return gp, gt, None, None


def _check_probabilities(xp: Any, p: Any) -> None:
    if not p.size:
        return
    from tinyflow.device import device_check

    bad = ((p < 0) | (p > 1)).reshape(-1)  # NaN passes, as in PyTorch

    def error(_: int) -> RuntimeError:
        return RuntimeError("binary_cross_entropy: all elements of input should be between 0 and 1; "
                            "apply sigmoid first, or use binary_cross_entropy_with_logits on the logits")

    device_check(bad.any(), bad.argmax(), error, key=("binary_cross_entropy",))


class BinaryCrossEntropyWithLogitsFunction(Function):
    """binary cross-entropy on logits x, computed as (1 - t) x + lw * softplus(-x) with
    lw = 1 + (pos_weight - 1) t (PyTorch's stable form: no log of a rounded sigmoid)."""

    @staticmethod
    def forward(ctx: Context, x: Any, t: Any, weight: Any = None, pos_weight: Any = None,
                reduction: str = "mean") -> Any:
        xp = ctx.xp
        floating_only("binary_cross_entropy_with_logits", x)
        if not is_floating_or_complex(t.dtype):  # the loss has the target's dtype, as PyTorch's
            raise RuntimeError(f"binary_cross_entropy_with_logits: result type Float can't be cast to the target's "
                               f"dtype {t.dtype}; convert the target with .float()")
        softplus_neg = xp.maximum(-x, 0) + xp.log1p(xp.exp(-xp.abs(x)))  # log(1 + exp(-x))
        if pos_weight is not None:
            lw = (pos_weight - 1) * t + 1
            losses = (1 - t) * x + lw * softplus_neg
        else:
            losses = (1 - t) * x + softplus_neg
        if weight is not None:
            losses = losses * weight
        ctx.save_for_backward(x, t, weight, pos_weight)
        ctx.reduction = reduction
        return _reduce(xp, losses, reduction, t.dtype)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        from tinyflow.ops.activation import _sigmoid

        xp = ctx.xp
        x, t, weight, pos_weight = ctx.saved_tensors
        ge = _per_element(g, ctx.reduction, x.size)
        if weight is not None:
            ge = ge * weight
        s = _sigmoid(xp, x)
        if pos_weight is not None:
            pt = pos_weight * t
            gx = ge * ((pt + 1 - t) * s - pt)
        else:
            gx = ge * (s - t)
        gt = None
        if ctx.needs_input_grad[1]:  # d/dt = log(1 - s) - pos_weight * log(s)
            log_s = xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x)))
            log_1ms = log_s - x
            gt = ge * (log_1ms - (log_s if pos_weight is None else pos_weight * log_s))
        return gx, gt, None, None, None


