"""Optimizer update kernels: in-place parameter updates over raw arrays, each PyTorch's exact rule.

The per-tensor kernels update their arrays (one shape and dtype per call) in place and return None;
the multi-tensor kernels take lists, as PyTorch's foreach path does, and own the half-precision
master weights (a float16/bfloat16 parameter steps as ``param + residual`` in float32 and is
rounded back). ``tinyflow_cuda/kernels/optim.py`` defines fused twins with the same names and
signatures (one launch per update, or per dtype for a list). On NumPy the bodies walk large arrays
in cache-sized blocks, so the several passes of an update read each element from DRAM once.

Top-down: SGD's kernels with what every update shares (the blocked walk, the per-step scalars, the
list checks, the master weights), then Adam/AdamW's, Adadelta's and GradScaler's scale update.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tinyflow.dtypes import is_floating
from tinyflow.kernels._cpu import array_module, parallel_for

__all__ = ["sgd_momentum_update", "adam_update", "adadelta_update", "sgd_multi_tensor_update",
           "adam_multi_tensor_update", "amp_update_scale"]

# 256K elements = 1 MiB of fp32 per array: the 4-7 arrays of one block stay in the L2/L3 caches
# and a 14M-parameter model takes ~60 blocks. Measured on FCN-R's parameters: SGD-momentum
# 1.6-2x faster than whole-array passes (smaller blocks lose it again to per-call overhead).
_BLOCK = 1 << 18


def _blocked(arrays: list[Any], body: Callable[..., None], scratches: int = 2) -> None:
    """Run ``body(*blocks, scratch, scratch2, ...)`` (``scratches`` scratch arrays) over matching
    blocks of ``arrays`` (None allowed): large contiguous NumPy arrays block by block through flat
    views, over the CPU threads; anything else (small, strided, CuPy) as one whole-array call."""
    first = arrays[0]
    present = [a for a in arrays if a is not None]
    contiguous = all(a.flags.c_contiguous for a in present)
    if array_module(first) is not np or first.size <= _BLOCK or not contiguous:
        xp = array_module(first)
        body(*arrays, *(xp.empty_like(first) for _ in range(scratches)))
        return
    flats = [None if a is None else a.reshape(-1) for a in arrays]
    n = first.size

    def run(first_block: int, stop_block: int) -> None:  # on one thread, with its own scratch
        scratch_full = [np.empty(_BLOCK, dtype=first.dtype) for _ in range(scratches)]
        for start in range(first_block * _BLOCK, min(stop_block * _BLOCK, n), _BLOCK):
            stop = min(start + _BLOCK, n)
            m = stop - start
            blocks = [None if f is None else f[start:stop] for f in flats]
            body(*blocks, *(s[:m] for s in scratch_full))

    # Blocks are independent (element-wise updates), so they spread over the CPU threads.
    parallel_for(np, -(-n // _BLOCK), run, work=n * len(present))


def sgd_step_scalars(lr: float, momentum: float, dampening: float, weight_decay: float) -> list[float]:
    """What a captured SGD step reads from its ``scalars`` device array (float64), in the order
    csrc/optim.cu reads it: ``[lr, momentum, dampening, weight_decay]``."""
    return [float(lr), float(momentum), float(dampening), float(weight_decay)]


def _device_scalars(op: str, scalars: Any, size: int) -> list[float] | None:
    """The values of a ``scalars`` array (None: none given), checked to be ``size`` float64s."""
    if scalars is None:
        return None
    if getattr(scalars, "shape", None) != (size,) or scalars.dtype != np.float64:
        raise ValueError(f"{op}: scalars must be a ({size},) float64 array, got shape "
                         f"{getattr(scalars, 'shape', None)} dtype {getattr(scalars, 'dtype', None)}")
    return [float(v) for v in _host(op, scalars)]


def _host(op: str, arr: Any) -> np.ndarray:
    """A NumPy array as it is (the references run on the host; the CUDA twins read device arrays
    through their pointers and never hand one here)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{op}: the reference reads its scalars on the host, got a {type(arr).__name__}")
    return arr


def _found_inf(op: str, found_inf: Any) -> bool:
    """Whether GradScaler's ``found_inf`` flag (a (1,) float32 array, or None) says skip."""
    if found_inf is None:
        return False
    if getattr(found_inf, "shape", None) != (1,) or found_inf.dtype != np.float32:
        raise ValueError(f"{op}: found_inf must be a (1,) float32 array, got shape "
                         f"{getattr(found_inf, 'shape', None)} dtype {getattr(found_inf, 'dtype', None)}")
    return bool(_host(op, found_inf)[0] != 0)


def sgd_momentum_update(param: Any, grad: Any, momentum_buffer: Any, lr: float, momentum: float = 0.0,
                        dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                        first_step: bool = False) -> None:
    """One SGD step in place (``torch.optim.SGD``, single-tensor path).

    ``param`` and ``momentum_buffer`` (None when ``momentum == 0``) are updated, ``grad`` is read.
    ``first_step=True``: the buffer holds no history yet and is set to the (decayed) gradient
    itself, with no dampening, as PyTorch does on its first step.

    Rule: ``d = grad + weight_decay * param``; if momentum: ``buf = d`` on the first step else
    ``buf = momentum * buf + (1 - dampening) * d``, then ``d = d + momentum * buf`` (nesterov)
    or ``d = buf``; finally ``param -= lr * d``.
    """
    if momentum != 0 and momentum_buffer is None:
        raise ValueError("sgd_momentum_update: momentum != 0 needs a momentum_buffer array")
    if grad.shape != param.shape or (momentum_buffer is not None and momentum_buffer.shape != param.shape):
        raise ValueError(f"sgd_momentum_update: param {param.shape}, grad {grad.shape} and momentum_buffer "
                         f"{None if momentum_buffer is None else momentum_buffer.shape} must have one shape")
    xp = array_module(param)

    def body(p: Any, g: Any, buf: Any, tmp: Any, tmp2: Any) -> None:
        d = g
        if weight_decay != 0:
            xp.multiply(p, weight_decay, out=tmp)  # grad.add(param, alpha=weight_decay)
            xp.add(g, tmp, out=tmp)
            d = tmp
        if momentum != 0:
            if first_step:
                buf[...] = d
            else:
                buf *= momentum
                if dampening == 0:
                    buf += d
                else:
                    xp.multiply(d, 1 - dampening, out=tmp2)
                    buf += tmp2
            if nesterov:
                xp.multiply(buf, momentum, out=tmp2)  # d = d + momentum * buf
                xp.add(d, tmp2, out=tmp2)
                d = tmp2
            else:
                d = buf
        xp.multiply(d, -lr, out=tmp2)  # param.add_(d, alpha=-lr)
        p += tmp2

    _blocked([param, grad, momentum_buffer], body)


# ---- multi-tensor (foreach) updates ------------------------------------------------------------
def _check_lists(op: str, params: Sequence[Any], **lists: Sequence[Any] | None) -> None:
    """Every list as long as ``params``, and each present array shaped as its parameter."""
    for name, values in lists.items():
        if values is None:
            continue
        if len(values) != len(params):
            raise ValueError(f"{op}: {len(params)} params but {len(values)} {name}; pass one "
                             f"entry per parameter (None where a state is absent)")
        for i, (p, a) in enumerate(zip(params, values)):
            if a is not None and a.shape != p.shape:
                raise ValueError(f"{op}: {name}[{i}] has shape {a.shape} but params[{i}] has "
                                 f"shape {p.shape}; they must match")


def _master(param: Any, residual: Any) -> Any:
    """The array a step updates: ``param`` itself (in place), or for a float16/bfloat16 param a
    float32 master weight, ``param + residual`` (``param`` alone without a residual)."""
    if not (param.dtype.itemsize == 2 and is_floating(param.dtype)):
        return param
    master = param.astype(np.float32)
    if residual is not None:
        master += residual
    return master


def _write_back(param: Any, residual: Any, master: Any) -> None:
    """Round ``master`` into ``param`` (nearest even) and keep what rounding dropped."""
    if master is param:
        return
    param[...] = master
    if residual is not None:
        array_module(master).subtract(master, param.astype(master.dtype), out=residual)


def _step_grad(grad: Any, master: Any, maximize: bool) -> Any:
    """``grad`` in the master weight's dtype, negated when maximizing."""
    if grad.dtype != master.dtype:
        grad = grad.astype(master.dtype)
    return -grad if maximize else grad


def sgd_multi_tensor_update(params: Sequence[Any], grads: Sequence[Any], momentum_buffers: Sequence[Any] | None,
                            residuals: Sequence[Any] | None, lr: float, momentum: float = 0.0, dampening: float = 0.0,
                            weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False,
                            first_step: bool = False, scalars: Any = None, found_inf: Any = None) -> None:
    """``sgd_momentum_update`` over lists of tensors (PyTorch's foreach SGD), in place.

    - ``params[i]`` (in place) and ``grads[i]`` (read only) share a shape; a grad of another
      dtype than its parameter is cast first.
    - ``momentum_buffers[i]`` (in place; the list or an entry may be None when momentum == 0)
      has the master weight's dtype: float32 for a half-precision parameter, else its own.
    - ``residuals[i]`` (in place; the list or an entry may be None) is a float16/bfloat16
      parameter's float32 master-weight remainder: the step runs on ``params[i] + residuals[i]``
      and keeps the new remainder (``tinyflow.optim.Optimizer``'s master weights).
    - ``maximize`` negates every gradient; ``first_step`` applies to every tensor of the call.
    - ``scalars`` (a CUDA graph's captured step): None, or a (4,) float64 array
      ``sgd_step_scalars(lr, momentum, dampening, weight_decay)`` whose values replace those
      arguments (the kernel reads them from device memory, refilled before each replay).
    - ``found_inf``: None, or GradScaler's (1,) float32 overflow flag; non-zero skips the update.
    """
    _check_lists("sgd_multi_tensor_update", params, grads=grads,
                 momentum_buffers=momentum_buffers, residuals=residuals)
    values = _device_scalars("sgd_multi_tensor_update", scalars, 4)
    if values is not None:
        lr, momentum, dampening, weight_decay = values
    if _found_inf("sgd_multi_tensor_update", found_inf):
        return
    for i, (param, grad) in enumerate(zip(params, grads)):
        residual = None if residuals is None else residuals[i]
        buf = None if momentum_buffers is None else momentum_buffers[i]
        master = _master(param, residual)
        sgd_momentum_update(master, _step_grad(grad, master, maximize), buf, lr, momentum,
                            dampening, weight_decay, nesterov, first_step)
        _write_back(param, residual, master)


# ---- Adam / AdamW and Adadelta -----------------------------------------------------------------
def adam_bias_corrections(lr: float, beta1: float, beta2: float, step: int) -> tuple[float, float]:
    """Adam's per-step scalars, ``(step_size, bias_correction2_sqrt)`` =
    ``(lr / (1 - beta1**step), sqrt(1 - beta2**step))``, in float64 on the host: the one place that
    computes them (the references, the CUDA twins and ``adam_step_scalars`` use it)."""
    return lr / (1 - beta1**step), math.sqrt(1 - beta2**step)


def adam_step_scalars(lr: float, beta1: float, beta2: float, eps: float, weight_decay: float,
                      step: int) -> list[float]:
    """What a captured Adam / AdamW step reads from its ``scalars`` device array (float64), in the
    order csrc/optim.cu reads it: ``[lr, beta1, beta2, eps, weight_decay, step_size,
    bias_correction2_sqrt]`` (the last two from ``adam_bias_corrections``)."""
    step_size, bias2_sqrt = adam_bias_corrections(lr, beta1, beta2, step)
    return [float(lr), float(beta1), float(beta2), float(eps), float(weight_decay), step_size,
            bias2_sqrt]


def adam_update(param: Any, grad: Any, exp_avg: Any, exp_avg_sq: Any, max_exp_avg_sq: Any, step: int, lr: float,
                beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0,
                amsgrad: bool = False, decoupled_weight_decay: bool = False) -> None:
    """One Adam / AdamW step in place (``torch.optim.Adam``, single tensor).

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


def adadelta_update(param: Any, grad: Any, square_avg: Any, acc_delta: Any, lr: float, rho: float = 0.9,
                    eps: float = 1e-6, weight_decay: float = 0.0) -> None:
    """One Adadelta step in place (``torch.optim.Adadelta``, single tensor): ``param``,
    ``square_avg`` and ``acc_delta`` are updated, ``grad`` is read.

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
def adam_multi_tensor_update(params: Sequence[Any], grads: Sequence[Any], exp_avgs: Sequence[Any],
                             exp_avg_sqs: Sequence[Any], max_exp_avg_sqs: Sequence[Any] | None,
                             residuals: Sequence[Any] | None, step: int, lr: float, beta1: float = 0.9,
                             beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False,
                             decoupled_weight_decay: bool = False, maximize: bool = False, scalars: Any = None,
                             found_inf: Any = None) -> None:
    """``adam_update`` over lists of tensors (PyTorch's foreach Adam / AdamW), in place.

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

    ``scale`` (1,) float32, ``growth_tracker`` (1,) int32 (clean steps in a row) and ``found_inf``
    (1,) float32 stay on the device (no host read: a captured step replays it). After an overflow
    ``scale *= backoff_factor`` and the tracker restarts; else at ``growth_interval`` clean steps
    ``scale *= growth_factor`` (kept unless that is inf) and the tracker restarts.
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
