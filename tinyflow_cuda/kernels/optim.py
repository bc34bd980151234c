"""CUDA twins of ``tinyflow/kernels/optim.py``: fused SGD and Adam/AdamW steps (csrc/optim.cu).

The per-tensor twins are one launch over one parameter instead of a chain of element-wise CuPy
calls; the multi-tensor twins are one launch over every parameter of a dtype (PyTorch's foreach
path), reading the tensors from a device table of pointers (``_TableCache``). Adadelta runs the
reference's body on CuPy arrays (whole-array in-place passes, no temporaries beyond three
scratch buffers): it has no fused kernel yet."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyflow.capture import state as capture_state
from tinyflow.kernels import optim as reference
from tinyflow_cuda.kernels._launch import KernelCall, all_contiguous, dtype_suffix
from tinyflow_cuda.runtime import THREADS

__all__ = ["sgd_momentum_update", "adam_update", "adadelta_update", "sgd_multi_tensor_update",
           "adam_multi_tensor_update", "amp_update_scale"]

Array = Any

CHUNK = 4096
"""Elements per block of a multi-tensor launch (16 per thread): AlexNet's 61M parameters are
15k blocks, a 64-element bias one block."""
MAX_TENSOR = 2**31 - CHUNK  # the multi-tensor kernels index a tensor in 32 bits (i + blockDim.x included)


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
    step_size, bias2_sqrt = reference.adam_bias_corrections(lr, beta1, beta2, step)
    with call:
        call.launch(param.size, [param, call.contiguous(grad), exp_avg, exp_avg_sq, vmax,
                                 int(amsgrad), lr, beta1, beta2, eps, weight_decay,
                                 int(decoupled_weight_decay), step_size, bias2_sqrt, param.size])
    return None


def adadelta_update(param: Array, grad: Array, square_avg: Array, acc_delta: Array, lr: float,
                    rho: float = 0.9, eps: float = 1e-6, weight_decay: float = 0.0) -> None:
    """One Adadelta step in place (PyTorch's rule): the reference's in-place passes, on CuPy."""
    return reference.adadelta_update(param, grad, square_avg, acc_delta, lr, rho, eps, weight_decay)


# ---- multi-tensor ------------------------------------------------------------------------------
class _TableCache:
    """Device copies of the small uint64 tables the multi-tensor kernels read, by content.

    A table holds addresses and sizes only, so a cached copy stays right for as long as the same
    numbers describe the tensors: the parameters' and states' table is uploaded on the first step
    and reused while none of them moves; the gradients' table (one address per tensor) is reused
    whenever the memory pool hands the gradients the same addresses again, else uploaded (one
    host-to-device copy of 8 bytes per tensor). Nothing is ever read back from the device.
    The oldest entries go beyond ``size`` tables.
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._tables: OrderedDict[tuple, Array] = OrderedDict()
        self._lock = threading.Lock()  # thread ranks step their optimizers side by side
        self.uploads = 0  # host-to-device copies so far (tests and benchmarks read it)

    def get(self, call: KernelCall, values: tuple[int, ...]) -> Array:
        """The device array holding ``values`` as uint64, on ``call``'s device."""
        # the array module (a module: never collected, so its id stays unique) and the device
        key = (id(call.xp), str(getattr(call.anchor, "device", "")), values)
        with self._lock:
            hit = self._tables.get(key)
            if hit is not None:
                self._tables.move_to_end(key)
                return hit
        table = call.xp.asarray(np.array(values, dtype=np.uint64))
        with self._lock:
            self.uploads += 1
            self._tables[key] = table
            while len(self._tables) > self.size:
                self._tables.popitem(last=False)
        return table


TABLES = _TableCache()


def _is_half(arr: Array) -> bool:
    return arr.dtype.itemsize == 2 and dtype_suffix(arr) in ("f16", "bf16")


def _fits_kernel(call: KernelCall, param: Array, grad: Array, states: list[Array | None]) -> bool:
    """Whether the multi-tensor kernel can take this tensor: a .cu dtype shared by param and grad,
    on this runtime, contiguous, below 2^31 elements, states in the master weight's dtype."""
    if dtype_suffix(param, grad) is None or not call.runtime.owns(param) or param.size > MAX_TENSOR:
        return False
    state_dtype = np.dtype(np.float32) if _is_half(param) else param.dtype
    return all_contiguous(param, *states) and all(s is None or s.dtype == state_dtype for s in states)


def _table(call: KernelCall, values: tuple[int, ...]) -> Array:
    """The device table holding ``values``: from the cache eagerly; inside a CUDA graph capture a
    constant slot of the capture (the values never change, but an upload while capturing would be
    baked into the graph or refused: the slot is filled before the first replay, outside the graph)."""
    capture = capture_state.capture
    if capture is None:
        return TABLES.get(call, values)
    return capture.slot(lambda: values, np.uint64, len(values), constant=True)  # addresses the graph fixes


def _check_device_values(op: str, call_args: dict[str, Array | None], left: list[int]) -> None:
    """Tensors the kernel cannot take run the reference, which would read ``scalars`` /
    ``found_inf`` on the host: refuse that for device arrays (a captured step, in one line)."""
    given = [k for k, v in call_args.items() if v is not None]
    if left and given:
        raise RuntimeError(
            f"{op}: {len(left)} tensor(s) cannot take the multi-tensor kernel (a dtype without one, "
            f"strided or over 2^31 elements) and {' and '.join(given)} are device values it would "
            "read on the host; inside a CUDA graph capture every parameter must be a contiguous "
            "float32/float64/float16/bfloat16 tensor")


def _launch_multi_tensor(name: str, op: str, params: Sequence[Array], grads: Sequence[Array],
                         states: list[list[Array | None]], scalars: list[Any],
                         pointers_after: Sequence[Array | None] = ()) -> list[int]:
    """Launch kernel ``name`` once per dtype over the tensors it takes; the indices it left out
    (dtypes without a kernel, strided or oversized tensors) are returned for the reference.

    ``states`` are the table's rows after the parameters (one entry per tensor, None for absent);
    the last is the residual row, used for half-precision parameters only. ``pointers_after``
    are the kernel's last arguments (the ``scalars`` and ``found_inf`` device arrays, or None).
    """
    groups: dict[str, list[int]] = {}
    left: list[int] = []
    probe: dict[str, KernelCall] = {}
    for i, (param, grad) in enumerate(zip(params, grads)):
        if param.size == 0:
            continue  # nothing to update
        suffix = dtype_suffix(param, grad)
        call = probe.get(suffix) if suffix is not None else None
        if suffix is not None and call is None:
            call = probe[suffix] = KernelCall(name, param, grad, op=op)
        row = [s[i] for s in states]
        if call is not None and call.supported and _fits_kernel(call, param, grad, row):
            groups.setdefault(suffix, []).append(i)
        else:
            left.append(i)
    for suffix, members in groups.items():
        call = KernelCall(name, params[members[0]], op=op)
        with call:
            grads_c = [grads[i] if grads[i].flags.c_contiguous else call.contiguous(grads[i])
                       for i in members]  # copies (of strided grads) alive until the launch
            address = call.runtime.address
            pointers: list[int] = [address(params[i]) for i in members]
            for r, row in enumerate(states):
                last = r == len(states) - 1
                for i in members:
                    keep = row[i] is not None and (not last or _is_half(params[i]))
                    pointers.append(address(row[i]) if keep else 0)
            sizes = [int(params[i].size) for i in members]
            first_chunk = [0]
            for n in sizes:
                first_chunk.append(first_chunk[-1] + -(-n // CHUNK))
            table = _table(call, tuple(pointers + sizes + first_chunk))
            grad_table = _table(call, tuple(address(g) for g in grads_c))
            call.launch_grid(first_chunk[-1], THREADS,
                             [table, grad_table, len(members), CHUNK, *scalars, *pointers_after])
    return left


def _pick(values: Sequence[Any] | None, indices: list[int]) -> list[Any] | None:
    return None if values is None else [values[i] for i in indices]


def _column(values: Sequence[Any] | None, n: int) -> list[Any]:
    return [None] * n if values is None else list(values)


def sgd_multi_tensor_update(params: Sequence[Array], grads: Sequence[Array],
                            momentum_buffers: Sequence[Array] | None,
                            residuals: Sequence[Array] | None, lr: float, momentum: float = 0.0,
                            dampening: float = 0.0, weight_decay: float = 0.0,
                            nesterov: bool = False, maximize: bool = False,
                            first_step: bool = False, scalars: Array | None = None,
                            found_inf: Array | None = None) -> None:
    """SGD over lists of tensors in place: one launch per dtype (see the reference). ``scalars``
    (lr, momentum, dampening, weight_decay) and ``found_inf`` are read by the kernel from device
    memory when given (a captured step); the scalar arguments are then not used."""
    reference._check_lists("sgd_multi_tensor_update", params, grads=grads,
                           momentum_buffers=momentum_buffers, residuals=residuals)
    n = len(params)
    bufs = _column(momentum_buffers, n) if momentum != 0 else [None] * n
    if momentum != 0 and any(b is None for b, p in zip(bufs, params) if p.size):
        raise ValueError("sgd_multi_tensor_update: momentum != 0 needs a momentum buffer for "
                         "every parameter")
    _check_pointer_array("sgd_multi_tensor_update", "scalars", scalars, 4, np.float64)
    _check_pointer_array("sgd_multi_tensor_update", "found_inf", found_inf, 1, np.float32)
    left = _launch_multi_tensor(
        "sgd_multi_tensor_update", "SGD.step", params, grads, [bufs, _column(residuals, n)],
        [lr, momentum, dampening, weight_decay, int(nesterov), int(maximize), int(first_step)],
        [scalars, found_inf])
    if left:
        _check_device_values("SGD.step", {"scalars": scalars, "found_inf": found_inf}, left)
        reference.sgd_multi_tensor_update(
            _pick(params, left), _pick(grads, left), _pick(momentum_buffers, left),
            _pick(residuals, left), lr, momentum, dampening, weight_decay, nesterov, maximize,
            first_step)


def adam_multi_tensor_update(params: Sequence[Array], grads: Sequence[Array],
                             exp_avgs: Sequence[Array], exp_avg_sqs: Sequence[Array],
                             max_exp_avg_sqs: Sequence[Array] | None,
                             residuals: Sequence[Array] | None, step: int, lr: float,
                             beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                             weight_decay: float = 0.0, amsgrad: bool = False,
                             decoupled_weight_decay: bool = False, maximize: bool = False,
                             scalars: Array | None = None, found_inf: Array | None = None) -> None:
    """Adam / AdamW over lists of tensors in place: one launch per dtype (see the reference).
    ``scalars`` (lr, betas, eps, weight_decay and the step's bias corrections) and ``found_inf``
    are read by the kernel from device memory when given (a captured step); the scalar
    arguments are then not used."""
    if amsgrad and (max_exp_avg_sqs is None or any(v is None for v in max_exp_avg_sqs)):
        raise ValueError("adam_multi_tensor_update: amsgrad=True needs a max_exp_avg_sq array "
                         "for every parameter")
    reference._check_lists("adam_multi_tensor_update", params, grads=grads, exp_avgs=exp_avgs,
                           exp_avg_sqs=exp_avg_sqs, max_exp_avg_sqs=max_exp_avg_sqs,
                           residuals=residuals)
    n = len(params)
    _check_pointer_array("adam_multi_tensor_update", "scalars", scalars, 7, np.float64)
    _check_pointer_array("adam_multi_tensor_update", "found_inf", found_inf, 1, np.float32)
    # with scalars the kernel reads the step's corrections there (step may be a stale count)
    step_size, bias2_sqrt = (reference.adam_bias_corrections(lr, beta1, beta2, step)
                             if scalars is None else (0.0, 1.0))
    vmax = _column(max_exp_avg_sqs, n) if amsgrad else [None] * n
    left = _launch_multi_tensor(
        "adam_multi_tensor_update", "Adam.step", params, grads,
        [list(exp_avgs), list(exp_avg_sqs), vmax, _column(residuals, n)],
        [lr, beta1, beta2, eps, weight_decay, int(amsgrad), int(decoupled_weight_decay),
         int(maximize), step_size, bias2_sqrt], [scalars, found_inf])
    if left:
        _check_device_values("Adam.step", {"scalars": scalars, "found_inf": found_inf}, left)
        reference.adam_multi_tensor_update(
            _pick(params, left), _pick(grads, left), _pick(exp_avgs, left),
            _pick(exp_avg_sqs, left), _pick(max_exp_avg_sqs, left), _pick(residuals, left), step,
            lr, beta1, beta2, eps, weight_decay, amsgrad, decoupled_weight_decay, maximize)


def _check_pointer_array(op: str, name: str, arr: Array | None, size: int, dtype: Any) -> None:
    """A device-value argument is None or a contiguous (size,) array of ``dtype``."""
    if arr is None:
        return
    if getattr(arr, "shape", None) != (size,) or arr.dtype != dtype:
        raise ValueError(f"{op}: {name} must be a ({size},) {np.dtype(dtype).name} array, got "
                         f"shape {getattr(arr, 'shape', None)} dtype {getattr(arr, 'dtype', None)}")


# ---- GradScaler ---------------------------------------------------------------------------------
def amp_update_scale(scale: Array, growth_tracker: Array, found_inf: Array, growth_factor: float,
                     backoff_factor: float, growth_interval: int) -> None:
    """GradScaler's update in place on the device: one single-thread launch (see the reference)."""
    call = KernelCall("amp_update_scale", scale, op="GradScaler.update")
    if (not call.supported or growth_tracker.dtype != np.int32 or found_inf.dtype != np.float32
            or scale.shape != (1,) or growth_tracker.shape != (1,) or found_inf.shape != (1,)):
        return reference.amp_update_scale(scale, growth_tracker, found_inf, growth_factor,
                                          backoff_factor, growth_interval)
    with call:
        call.launch_grid(1, 32, [scale, growth_tracker, found_inf, float(growth_factor),
                                 float(backoff_factor), int(growth_interval)])
