"""Losses: the ops and F's loss functions, PyTorch's signatures (the deprecated ``size_average`` /
``reduce`` included) and reductions.

The ops: cross_entropy (fused with log_softmax; ignore_index, label_smoothing, weights,
reduction), nll_loss, mse_loss, l1, binary_cross_entropy (on probabilities and on logits), smooth
L1, Huber and KL divergence. The F functions at the end check the arguments and call them; the
margin, ranking, embedding and triplet losses and the Poisson and Gaussian NLL compose Tensor ops.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tinyflow.amp import autocast_mode as amp
from tinyflow.arg_parser import FunctionalError, broadcast_pair
from tinyflow.autograd.function import Context, Function
from tinyflow.creation import as_constant, target_array, tensor, where
from tinyflow.device import device_check
from tinyflow.dtypes import is_floating_or_complex, is_half
from tinyflow.errors import ShapeError
from tinyflow.ops.activation import _sigmoid, log_softmax, logsigmoid, softplus
from tinyflow.ops.distance import pairwise_distance
from tinyflow.ops.elementwise import floating_only, not_implemented_for
from tinyflow.promotion import result_type
from tinyflow.tensor import Tensor

__all__ = [
    "CrossEntropy", "NLLLossFunction", "MSELossFunction", "L1LossFunction", "BinaryCrossEntropyFunction",
    "BinaryCrossEntropyWithLogitsFunction", "SmoothL1LossFunction", "HuberLossFunction", "KLDivFunction",
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "smooth_l1_loss", "huber_loss", "kl_div", "soft_margin_loss", "margin_ranking_loss", "hinge_embedding_loss",
    "cosine_embedding_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss", "poisson_nll_loss",
    "gaussian_nll_loss", "multilabel_soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
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
        raise ShapeError(f"{op}: input of shape {tuple(logits.shape)} needs a target of shape {expected}, "
                         f"got {tuple(target.shape)}")
    if target.dtype not in (np.int64, np.uint8):
        raise RuntimeError(f"{op}: expected target dtype to be int64 or uint8 (class indices), but got "
                           f"{target.dtype}; convert it with .long()")
    c = logits.shape[1]
    if not target.size:
        return
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
            return _reduce(ctx.xp, sq, reduction, a.dtype)  # empty: NaN, without NumPy's warning
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
# Input and target have one shape (F broadcasts them first). Backward scales the incoming gradient
# by the reduction (1/numel for "mean"); the target gets a gradient where PyTorch gives it one.


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
        log_p = xp.maximum(xp.log(p), -100)  # log(0) = -inf, clamped to -100 below
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
            gt = ge * (xp.log1p(-p) - xp.log(p))
        return gp, gt, None, None


def _check_probabilities(xp: Any, p: Any) -> None:
    if not p.size:
        return
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
                gt = ge * (xp.where(t == 0, 0, xp.log(xp.where(t == 0, 1, t))) + t / t - a)
        return ga, gt if ctx.needs_input_grad[1] else None, None, None


# ======================================================================= F (tinyflow.nn.functional)


REDUCTIONS = ("mean", "sum", "none")


def _reduction(op: str, size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """``reduction``, checked, or PyTorch's mapping of its deprecated ``size_average`` / ``reduce``
    (every loss takes them, at PyTorch's positions)."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else "mean" if size_average else "sum"
    if reduction not in REDUCTIONS:
        raise FunctionalError(f"{op}: {reduction} is not a valid value for reduction; use one of {REDUCTIONS}")
    return reduction


def _as_target(t: Any, like: Tensor) -> Tensor:
    return t if isinstance(t, Tensor) else tensor(t, dtype=like.dtype, device=like.device)


def _reduced(losses: Tensor, reduction: str) -> Tensor:
    """Elementwise losses (Tensor) reduced as ``reduction`` says."""
    if reduction == "mean":
        return losses.mean()
    return losses.sum() if reduction == "sum" else losses


def cross_entropy(input: Tensor, target: Any, weight: Tensor | None = None,  # noqa: A002
                  size_average: bool | None = None, ignore_index: int = -100, reduce: bool | None = None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Softmax cross-entropy on logits (N, C), (N, C, d1, ...) or (C,) and class indices, or class
    probabilities (a float target shaped like the logits), as PyTorch."""
    reduction = _reduction("cross_entropy", size_average, reduce, reduction)
    logits, target = amp.float32_inputs(input, target)
    if not 0 <= label_smoothing <= 1:
        raise FunctionalError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    w = weight.array if isinstance(weight, Tensor) else weight
    if isinstance(target, Tensor) and target.is_floating_point():
        return _soft_cross_entropy(logits, target, weight, reduction, label_smoothing)
    if logits.ndim == 1:  # one unbatched sample (C,) with a 0-d target
        t = target_array(target, logits)
        out = CrossEntropy.apply(logits.reshape(1, -1), t.reshape(1), w, ignore_index, reduction,
                                     label_smoothing)
        return out.reshape() if reduction == "none" else out
    return CrossEntropy.apply(logits, target_array(target, logits), w, ignore_index, reduction, label_smoothing)


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
    return losses.mean() * 1.0 if reduction == "mean" else _reduced(losses, reduction)


def nll_loss(input: Tensor, target: Any, weight: Tensor | None = None,  # noqa: A002
             size_average: bool | None = None, ignore_index: int = -100, reduce: bool | None = None,
             reduction: str = "mean") -> Tensor:
    """The negative log-likelihood of class indices under log-probabilities (N, C, *) or (C,)."""
    reduction = _reduction("nll_loss", size_average, reduce, reduction)
    (log_probs,) = amp.float32_inputs(input)
    w = weight.array if isinstance(weight, Tensor) else weight
    if log_probs.ndim == 1:
        t = target_array(target, log_probs)
        out = NLLLossFunction.apply(log_probs.reshape(1, -1), t.reshape(1), w, ignore_index, reduction)
        return out.reshape() if reduction == "none" else out
    return NLLLossFunction.apply(log_probs, target_array(target, log_probs), w, ignore_index, reduction)


def _pointwise_pair(op: str, input: Tensor, target: Any) -> tuple[Tensor, Tensor]:  # noqa: A002
    """Input and target broadcast to one shape (with PyTorch's warning when they differ), in
    float32 inside autocast."""
    target = _as_target(target, input)
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({tuple(target.shape)}) that is different to the input size "
                      f"({tuple(input.shape)}). This will likely lead to incorrect results due to "
                      "broadcasting. Please ensure they have the same size.", UserWarning, stacklevel=3)
        input, target = broadcast_pair(op, input, target)
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
    """Binary cross-entropy between probabilities ``input`` in [0, 1] and ``target`` (same shape)."""
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
        return _reduced(HuberLossFunction.apply(a, t, "none", float(delta)) * weight, reduction)
    return HuberLossFunction.apply(a, t, reduction, float(delta))


def kl_div(input: Tensor, target: Any, size_average: bool | None = None, reduce: bool | None = None,  # noqa: A002
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """KL(target || prediction), ``input`` the prediction's log-probabilities; ``"batchmean"`` (the
    true KL divergence) divides the sum by the batch size, "mean" by the elements (PyTorch warns)."""
    op = "kl_div"
    if reduction != "batchmean":
        reduction = _reduction(op, size_average, reduce, reduction)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    a, t = _pointwise_pair(op, input, target)
    return KLDivFunction.apply(a, t, reduction, bool(log_target))


def soft_margin_loss(input: Tensor, target: Any, size_average: bool | None = None,  # noqa: A002
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target * input)) for targets of +-1."""
    reduction = _reduction("soft_margin_loss", size_average, reduce, reduction)
    a, t = _pointwise_pair("soft_margin_loss", input, target)
    return _reduced(softplus(-t * a), reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """max(0, -target * (input1 - input2) + margin)."""
    reduction = _reduction("margin_ranking_loss", size_average, reduce, reduction)
    t = _as_target(target, input1)
    return _reduced((-t * (input1 - input2) + margin).clip(0, None), reduction)


def hinge_embedding_loss(input: Tensor, target: Any, margin: float = 1.0, size_average: bool | None = None,  # noqa: A002
                         reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """input where target == 1, max(0, margin - input) where target == -1."""
    reduction = _reduction("hinge_embedding_loss", size_average, reduce, reduction)
    t = _as_target(target, input)
    losses = where(t != 1, (margin - input).clip(0, None), 0.0) + where(t != -1, input, 0.0)
    return _reduced(losses, reduction)


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
    return _reduced(losses, reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2.0,
                        eps: float = 1e-6, swap: bool = False, size_average: bool | None = None,
                        reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """max(d(a, p) - d(a, n) + margin, 0) with d the pairwise p-norm distance."""
    reduction = _reduction("triplet_margin_loss", size_average, reduce, reduction)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduced((d_pos - d_neg + margin).clip(0, None), reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Any = None, margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Tensor:
    """max(d(a, p) - d(a, n) + margin, 0) for any distance function (pairwise_distance by default)."""
    reduction = _reduction("triplet_margin_with_distance_loss", None, None, reduction)
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(dist(positive, negative))
    return _reduced((d_pos - d_neg + margin).clip(0, None), reduction)


def poisson_nll_loss(input: Tensor, target: Any, log_input: bool = True, full: bool = False,  # noqa: A002
                     size_average: bool | None = None, eps: float = 1e-8, reduce: bool | None = None,
                     reduction: str = "mean") -> Tensor:
    """Poisson negative log-likelihood: exp(input) - target * input (log_input), else
    input - target * log(input + eps); ``full`` adds Stirling's term where target > 1."""
    reduction = _reduction("poisson_nll_loss", size_average, reduce, reduction)
    t = _as_target(target, input)
    losses = input.exp() - t * input if log_input else input - t * (input + eps).log()
    if full:  # Stirling's approximation of log(target!), where target > 1
        stirling = t * t.log() - t + 0.5 * (2 * np.pi * t).log()
        losses = losses + where(t > 1, stirling, 0.0)
    return _reduced(losses, reduction)


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
    return _reduced(losses, reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Any, weight: Tensor | None = None,  # noqa: A002
                                size_average: bool | None = None, reduce: bool | None = None,
                                reduction: str = "mean") -> Tensor:
    """Mean over classes of the binary logistic loss of each class, per sample."""
    reduction = _reduction("multilabel_soft_margin_loss", size_average, reduce, reduction)
    t = _as_target(target, input)
    losses = -(t * logsigmoid(input) + (1 - t) * logsigmoid(-input))
    if weight is not None:
        losses = losses * weight
    return _reduced(losses.mean(dim=input.ndim - 1), reduction)


def multi_margin_loss(input: Tensor, target: Any, p: int = 1, margin: float = 1.0,  # noqa: A002
                      weight: Tensor | None = None, size_average: bool | None = None, reduce: bool | None = None,
                      reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss: sum over i != y of max(0, margin - x[y] + x[i])**p / C (times weight[y])."""
    reduction = _reduction("multi_margin_loss", size_average, reduce, reduction)
    if p not in (1, 2):
        raise FunctionalError(f"multi_margin_loss: only p == 1 and p == 2 supported, got {p}")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    y = np.asarray(target_array(target, input)).reshape(-1)
    c = x.shape[1]
    hot = np.zeros((x.shape[0], c))
    hot[np.arange(x.shape[0]), y] = 1.0
    mask = as_constant(hot, x)
    xy = (x * mask).sum(dim=1, keepdim=True)
    terms = (margin - xy + x).clip(0, None) * (1 - mask)
    if p == 2:
        terms = terms * terms
    if weight is not None:
        terms = terms * as_constant(np.asarray(weight.array)[y].reshape(-1, 1), x)
    losses = terms.sum(dim=1) / c
    return _reduced(losses if input.ndim == 2 else losses.reshape(()), reduction)


def multilabel_margin_loss(input: Tensor, target: Any, size_average: bool | None = None,  # noqa: A002
                           reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Hinge loss between each target class j (the ids before the first -1 of a target row) and
    each other class i: sum of max(0, 1 - (x[j] - x[i])) / C."""
    reduction = _reduction("multilabel_margin_loss", size_average, reduce, reduction)
    x = input if input.ndim == 2 else input.reshape(1, -1)
    ids = np.asarray(target_array(target, input)).reshape(x.shape)
    is_target = np.zeros(x.shape)
    for row, labels in enumerate(ids):
        for j in labels:
            if j < 0:
                break
            is_target[row, j] = 1.0
    pairs = as_constant(is_target[:, :, None] * (1 - is_target)[:, None, :], x)  # (N, j, i)
    hinge = (1 - x.reshape(*x.shape, 1) + x.reshape(x.shape[0], 1, x.shape[1])).clip(0, None)
    losses = (hinge * pairs).sum(dim=(1, 2)) / x.shape[1]
    return _reduced(losses if input.ndim == 2 else losses.reshape(()), reduction)
