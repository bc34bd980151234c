"""CUDA twins of ``tinyflow/kernels/optim.py``: fused SGD and Adam/AdamW steps (csrc/optim.cu),
one launch over the whole parameter instead of a chain of element-wise CuPy calls. Adadelta runs
the reference's body on CuPy arrays (whole-array in-place passes, no temporaries beyond three
scratch buffers): it has no fused kernel yet."""
from __future__ import annotations

import math
from typing import Any

from tinyflow.kernels import optim as reference
from tinyflow_cuda.kernels._launch import KernelCall, all_contiguous

__all__ = ["sgd_momentum_update", "adam_update", "adadelta_update"]

Array = Any


def sgd_momentum_update(param: Array, grad: Array, momentum_buffer: Array | None, lr: float,
                        momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
                        nesterov: bool = False, first_step: bool = False) -> None:
    """One fused SGD step in place (PyTorch's rule), one launch over the whole buffer."""
    if momentum != 0 and momentum_buffer is None:
        raise ValueError("sgd_momentum_update: momentum != 0 needs a momentum_buffer array")
    if grad.shape != param.shape or (momentum_buffer is not None
                                     and momentum_buffer.shape != param.shape):
        raise ValueError(
            f"sgd_momentum_update: param {param.shape}, grad {grad.shape} and momentum_buffer "
            f"{None if momentum_buffer is None else momentum_buffer.shape} must have one shape")
    call = KernelCall("sgd_momentum_update", param, grad, momentum_buffer, op="SGD.step")
    if not call.supported or not all_contiguous(param, momentum_buffer):
        return reference.sgd_momentum_update(param, grad, momentum_buffer, lr, momentum,
                                             dampening, weight_decay, nesterov, first_step)
    with call:
        buf = momentum_buffer if momentum != 0 else None
        call.launch(param.size, [param, call.contiguous(grad), buf, lr, momentum, dampening,
                                 weight_decay, int(nesterov), int(first_step), param.size])
    return None


def adam_update(param: Array, grad: Array, exp_avg: Array, exp_avg_sq: Array,
                max_exp_avg_sq: Array | None, step: int, lr: float, beta1: float = 0.9,
                beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0,
                amsgrad: bool = False, decoupled_weight_decay: bool = False) -> None:
    """One fused Adam / AdamW step in place (PyTorch's rule), one launch over the buffer."""
    if amsgrad and max_exp_avg_sq is None:
        raise ValueError("adam_update: amsgrad=True needs a max_exp_avg_sq array")
    for name, arr in (("grad", grad), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
        if arr.shape != param.shape:
            raise ValueError(f"adam_update: {name} {arr.shape} must have param's shape {param.shape}")
    vmax = max_exp_avg_sq if amsgrad else None
    call = KernelCall("adam_update", param, grad, exp_avg, exp_avg_sq, vmax, op="Adam.step")
    if not call.supported or not all_contiguous(param, exp_avg, exp_avg_sq, vmax):
        return reference.adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr,
                                     beta1, beta2, eps, weight_decay, amsgrad,
                                     decoupled_weight_decay)
    step_size = lr / (1 - beta1**step)
    bias2_sqrt = math.sqrt(1 - beta2**step)
    with call:
        call.launch(param.size, [param, call.contiguous(grad), exp_avg, exp_avg_sq, vmax,
                                 int(amsgrad), lr, beta1, beta2, eps, weight_decay,
                                 int(decoupled_weight_decay), step_size, bias2_sqrt, param.size])
    return None


def adadelta_update(param: Array, grad: Array, square_avg: Array, acc_delta: Array, lr: float,
                    rho: float = 0.9, eps: float = 1e-6, weight_decay: float = 0.0) -> None:
    """One Adadelta step in place (PyTorch's rule): the reference's in-place passes, on CuPy."""
    return reference.adadelta_update(param, grad, square_avg, acc_delta, lr, rho, eps, weight_decay)
