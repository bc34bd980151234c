"""The reference kernels of the adaptive optimizers (Adam/AdamW, Adadelta and their multi-tensor
forms) and of GradScaler's loss-scale update: the rest of the ``optim`` kernel family.

They are apart from optim.py so that an SGD step (``tinyflow train``'s default optimizer) loads
only SGD's kernels, not these, which it never runs. They stay the family's names: optim.py lists
them in its ``__all__`` and its ``attach`` table, so ``tinyflow.kernels.optim.adam_update`` (or
``tinyflow.kernels.adam_update``) imports this file on first use; call them by those names.
How the kernels work (in place, blocked on NumPy, master weights) is in optim.py's docstring, and
optim.py's helpers run them: ``_blocked`` (with optim.py's ``_BLOCK``), the list checks, the
master weights. Their CUDA twins are in tinyflow_cuda/kernels/optim.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyflow.kernels._cpu import array_module
from tinyflow.kernels.optim import _blocked, _check_lists, _device_scalars, _found_inf, _master, _step_grad, _write_back

__all__ = ["adam_update", "adadelta_update", "adam_multi_tensor_update", "amp_update_scale",
           "adam_bias_corrections", "adam_step_scalars"]


def adam_bias_corrections(lr: float, beta1: float, beta2: float, step: int) -> tuple[float, float]:
    """Adam's per-step scalars, ``(step_size, bias_correction2_sqrt)`` =
    ``(lr / (1 - beta1**step), sqrt(1 - beta2**step))``, in float64 on the host.

    The one place that computes them: the reference, the CUDA twins (kernel arguments today; a
    device array once CUDA graphs capture the step) and the multi-tensor kernels all use it.
    """
    return lr / (1 - beta1**step), math.sqrt(1 - beta2**step)


def adam_step_scalars(lr: float, beta1: float, beta2: float, eps: float, weight_decay: float,
                      step: int) -> list[float]:
    """What a captured Adam / AdamW step reads from its ``scalars`` device array (float64), in the
    order csrc/optim.cu reads it: ``[lr, beta1, beta2, eps, weight_decay, step_size,
    bias_correction2_sqrt]`` (the last two from ``adam_bias_corrections``)."""
    step_size, bias2_sqrt = adam_bias_corrections(lr, beta1, beta2, step)
    return [float(lr), float(beta1), float(beta2), float(eps), float(weight_decay), step_size,
            bias2_sqrt]


def adam_update(
    param: Any,
    grad: Any,
    exp_avg: Any,
    exp_avg_sq: Any,
    max_exp_avg_sq: Any,
    step: int,
    lr: float,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    amsgrad: bool = False,
    decoupled_weight_decay: bool = False,
) -> None:
    """One Adam / AdamW step in place, PyTorch's exact rule (``torch.optim.Adam``, single tensor).

    Signature (the CUDA twin mirrors it)::

        adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1=0.9,
                    beta2=0.999, eps=1e-8, weight_decay=0.0, amsgrad=False,
                    decoupled_weight_decay=False) -> None

    - ``param``, ``exp_avg``, ``exp_avg_sq``, ``max_exp_avg_sq`` are updated in place; ``grad``
      is read only; ``max_exp_avg_sq`` may be None unless ``amsgrad``.
    - ``step`` is the 1-based count of this step (already incremented), for bias correction.
    - ``decoupled_weight_decay=True`` is AdamW (``param *= 1 - lr * weight_decay``); otherwise
      weight decay is L2 added to the gradient (Adam).

    Rule: ``m = lerp(m, g, 1 - beta1)``; ``v = beta2 * v + (1 - beta2) * g * g``;
    ``vmax = max(vmax, v)`` (amsgrad); ``denom = sqrt(v or vmax) / sqrt(1 - beta2**step) + eps``;
    ``param -= lr / (1 - beta1**step) * m / denom``.
    """
    if amsgrad and max_exp_avg_sq is None:
        raise ValueError("adam_update: amsgrad=True needs a max_exp_avg_sq array")
    for name, arr in (("grad", grad), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
        if arr.shape != param.shape:
            raise ValueError(f"adam_update: {name} {arr.shape} must have param's shape {param.shape}")
    _adam_body(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq,
               adam_bias_corrections(lr, beta1, beta2, step), lr, beta1, beta2, eps, weight_decay,
               amsgrad, decoupled_weight_decay)


def _adam_body(param: Any, grad: Any, exp_avg: Any, exp_avg_sq: Any, max_exp_avg_sq: Any,
               corrections: Sequence[float], lr: float, beta1: float, beta2: float, eps: float,
               weight_decay: float, amsgrad: bool, decoupled_weight_decay: bool) -> None:
    """``adam_update`` with its bias corrections given (``adam_bias_corrections``'s pair)."""
    xp = array_module(param)
    step_size, bias_correction2_sqrt = corrections
    weight = 1 - beta1  # exp_avg.lerp_(grad, weight), with torch's two-sided lerp formula

    def body(p: Any, g: Any, m: Any, v: Any, vmax: Any, tmp: Any, tmp2: Any) -> None:
        if weight_decay != 0:
            if decoupled_weight_decay:
                p *= 1 - lr * weight_decay
            else:
                xp.multiply(p, weight_decay, out=tmp)  # grad.add(param, alpha=weight_decay)
                xp.add(g, tmp, out=tmp)
                g = tmp
        xp.subtract(g, m, out=tmp2)  # end - self
        if weight < 0.5:
            tmp2 *= weight
            m += tmp2  # self + weight * (end - self)
        else:
            tmp2 *= 1 - weight
            xp.subtract(g, tmp2, out=m)  # end - (end - self) * (1 - weight)
        v *= beta2
        xp.multiply(g, g, out=tmp2)
        tmp2 *= 1 - beta2
        v += tmp2  # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        if amsgrad:
            xp.maximum(vmax, v, out=vmax)
            v = vmax
        xp.sqrt(v, out=tmp2)
        tmp2 /= bias_correction2_sqrt
        tmp2 += eps  # denom
        xp.divide(m, tmp2, out=tmp2)
        tmp2 *= -step_size
        p += tmp2  # param.addcdiv_(exp_avg, denom, value=-step_size)

    _blocked([param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq], body)


def adadelta_update(
    param: Any,
    grad: Any,
    square_avg: Any,
    acc_delta: Any,
    lr: float,
    rho: float = 0.9,
    eps: float = 1e-6,
    weight_decay: float = 0.0,
) -> None:
    """One Adadelta step in place, PyTorch's exact rule (``torch.optim.Adadelta``, single tensor).

    Signature (the CUDA twin mirrors it)::

        adadelta_update(param, grad, square_avg, acc_delta, lr, rho=0.9, eps=1e-6,
                        weight_decay=0.0) -> None

    - ``param``, ``square_avg``, ``acc_delta`` are updated in place, ``grad`` is read only; all
      of one shape and dtype.

    Rule: ``g = grad + weight_decay * param``; ``v = rho * v + (1 - rho) * g * g``;
    ``delta = sqrt(u + eps) / sqrt(v + eps) * g``; ``u = rho * u + (1 - rho) * delta * delta``;
    ``param -= lr * delta``.
    """
    for name, arr in (("grad", grad), ("square_avg", square_avg), ("acc_delta", acc_delta)):
        if arr.shape != param.shape:
            raise ValueError(f"adadelta_update: {name} {arr.shape} must have param's shape {param.shape}")
    xp = array_module(param)

    def body(p: Any, g: Any, v: Any, u: Any, tmp: Any, tmp2: Any, delta: Any) -> None:
        if weight_decay != 0:
            xp.multiply(p, weight_decay, out=tmp)  # grad.add(param, alpha=weight_decay)
            xp.add(g, tmp, out=tmp)
            g = tmp
        v *= rho
        xp.multiply(g, 1 - rho, out=tmp2)
        tmp2 *= g
        v += tmp2  # square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        xp.add(v, eps, out=tmp2)
        xp.sqrt(tmp2, out=tmp2)  # std
        xp.add(u, eps, out=delta)
        xp.sqrt(delta, out=delta)
        delta /= tmp2
        delta *= g  # delta = sqrt(acc_delta + eps) / std * grad
        u *= rho
        xp.multiply(delta, 1 - rho, out=tmp2)
        tmp2 *= delta
        u += tmp2  # acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        delta *= lr
        p -= delta  # param.add_(delta, alpha=-lr)

    _blocked([param, grad, square_avg, acc_delta], body, scratches=3)


# ---- multi-tensor (foreach) updates ------------------------------------------------------------
def adam_multi_tensor_update(
    params: Sequence[Any],
    grads: Sequence[Any],
    exp_avgs: Sequence[Any],
    exp_avg_sqs: Sequence[Any],
    max_exp_avg_sqs: Sequence[Any] | None,
    residuals: Sequence[Any] | None,
    step: int,
    lr: float,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    amsgrad: bool = False,
    decoupled_weight_decay: bool = False,
    maximize: bool = False,
    scalars: Any = None,
    found_inf: Any = None,
) -> None:
    """``adam_update`` over lists of tensors (PyTorch's foreach Adam / AdamW), in place.

    Signature (the CUDA twin mirrors it; it launches one kernel per dtype of ``params``)::

        adam_multi_tensor_update(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
                                 residuals, step, lr, beta1=0.9, beta2=0.999, eps=1e-8,
                                 weight_decay=0.0, amsgrad=False,
                                 decoupled_weight_decay=False, maximize=False) -> None

    The lists pair up as in ``sgd_multi_tensor_update`` (states in the master weight's dtype,
    ``residuals`` for half-precision master weights, ``max_exp_avg_sqs`` needed with amsgrad);
    ``step`` (1-based, already incremented) is shared by every tensor of the call.
    ``scalars`` (a CUDA graph's captured step): None, or a (7,) float64 array
    ``adam_step_scalars(lr, beta1, beta2, eps, weight_decay, step)``, whose values replace those
    arguments (``step`` through its bias corrections); ``found_inf`` as in
    ``sgd_multi_tensor_update``.
    """
    if amsgrad and (max_exp_avg_sqs is None or any(v is None for v in max_exp_avg_sqs)):
        raise ValueError("adam_multi_tensor_update: amsgrad=True needs a max_exp_avg_sq array "
                         "for every parameter")
    _check_lists("adam_multi_tensor_update", params, grads=grads, exp_avgs=exp_avgs,
                 exp_avg_sqs=exp_avg_sqs, max_exp_avg_sqs=max_exp_avg_sqs, residuals=residuals)
    values = _device_scalars("adam_multi_tensor_update", scalars, 7)
    corrections = None
    if values is not None:
        lr, beta1, beta2, eps, weight_decay, *corrections = values
    if _found_inf("adam_multi_tensor_update", found_inf):
        return
    for i, (param, grad) in enumerate(zip(params, grads)):
        residual = None if residuals is None else residuals[i]
        vmax = max_exp_avg_sqs[i] if amsgrad else None
        master = _master(param, residual)
        _adam_body(master, _step_grad(grad, master, maximize), exp_avgs[i], exp_avg_sqs[i], vmax,
                   corrections or adam_bias_corrections(lr, beta1, beta2, step), lr, beta1, beta2,
                   eps, weight_decay, amsgrad, decoupled_weight_decay)
        _write_back(param, residual, master)


# ---- GradScaler ---------------------------------------------------------------------------------
def amp_update_scale(scale: Any, growth_tracker: Any, found_inf: Any, growth_factor: float,
                     backoff_factor: float, growth_interval: int) -> None:
    """GradScaler's update in place, on the device (PyTorch's ``_amp_update_scale_``).

    Signature (the CUDA twin mirrors it; one single-thread launch there)::

        amp_update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                         growth_interval) -> None

    - ``scale``: (1,) float32, the loss scale; ``growth_tracker``: (1,) int32, clean steps in a
      row; ``found_inf``: (1,) float32, non-zero after an overflow. All stay on the device: no
      host read, so a captured step replays it.

    Rule: after an overflow ``scale *= backoff_factor`` and the tracker restarts at 0; else the
    tracker counts one more clean step and at ``growth_interval`` the scale becomes
    ``scale * growth_factor`` (rounded to the scale's dtype; kept unless that is inf) and the
    tracker restarts.
    """
    xp = array_module(scale)
    found = found_inf != 0
    clean = growth_tracker + 1
    grow = ~found & (clean >= growth_interval)
    with np.errstate(over="ignore"):  # a scale grown past the dtype's range becomes inf: kept out
        grown = (scale.astype(np.float64) * growth_factor).astype(scale.dtype)
        backed = (scale.astype(np.float64) * backoff_factor).astype(scale.dtype)
    new_scale = xp.where(found, backed, xp.where(grow & xp.isfinite(grown), grown, scale))
    new_tracker = xp.where(found | grow, 0, clean).astype(growth_tracker.dtype)
    scale[...] = new_scale
    growth_tracker[...] = new_tracker
