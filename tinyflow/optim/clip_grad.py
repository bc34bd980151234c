"""Gradient clipping, in place on ``p.grad``: by total norm or by value (as ``torch.nn.utils``)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Union

import numpy as np

from tinyflow.creation import tensor
from tinyflow.device import array_module, to_host
from tinyflow.tensor import Tensor

ParamsOrTensor = Union[Tensor, Iterable[Tensor]]


def _grads(parameters: ParamsOrTensor) -> list[Any]:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p.grad.array for p in params if p.grad is not None]


def _vector_norm(xp: Any, g: Any, norm_type: float) -> Any:
    """The norm of all of ``g``'s elements, as a 0-d array on ``g``'s device (no host sync)."""
    flat = g.reshape(-1)
    if flat.size == 0:
        return xp.zeros((), dtype=g.dtype)
    if norm_type == math.inf:
        return xp.max(xp.abs(flat))
    if norm_type == 2.0:
        return xp.sqrt(xp.dot(flat, flat))
    if norm_type == 1.0:
        return xp.sum(xp.abs(flat))
    return xp.sum(xp.abs(flat) ** norm_type) ** (1.0 / norm_type)


def clip_grad_norm_(
    parameters: ParamsOrTensor,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
) -> Tensor:
    """Scale all gradients so that their joint ``norm_type``-norm is at most ``max_norm``.

    Returns the total norm before clipping (a 0-d Tensor on the gradients' device), like
    ``torch.nn.utils.clip_grad_norm_``: every gradient is multiplied by
    ``min(1, max_norm / (total_norm + 1e-6))``, computed on the device, so clipping never waits for
    it; only ``error_if_nonfinite=True`` reads the norm (a host read per call, as in PyTorch).
    """
    norm_type = float(norm_type)
    if not (norm_type == math.inf or norm_type > 0):
        raise ValueError(f"clip_grad_norm_: norm_type must be > 0 or inf, got {norm_type}")
    grads = _grads(parameters)
    if not grads:
        return tensor(0.0)
    xp = array_module(grads[0])
    dtype = np.result_type(*[g.dtype for g in grads])
    norms = xp.stack([_vector_norm(xp, g, norm_type).astype(dtype) for g in grads])
    total_norm = _vector_norm(xp, norms, norm_type)
    if error_if_nonfinite:
        norm = float(to_host(total_norm, "clip_grad_norm_(error_if_nonfinite=True)"))
        if not math.isfinite(norm):
            raise RuntimeError(
                f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
                f"{norm}, so they cannot be clipped; set error_if_nonfinite=False to "
                "clip anyway (the gradients become NaN)"
            )
    clip_coef = xp.minimum(max_norm / (total_norm + 1e-6), 1.0)
    # On the CPU skip the no-op multiply by 1 (a free look at a NumPy value, not a host read);
    # on a GPU reading the value would force a sync, so the multiply always runs there.
    if not (xp is np and float(clip_coef) >= 1.0):
        with np.errstate(invalid="ignore"):  # an infinite norm gives NaN grads, as in PyTorch
            for g in grads:
                g *= clip_coef.astype(g.dtype)
    return tensor(total_norm)


def clip_grad_norm(parameters: ParamsOrTensor, max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False) -> Tensor:
    """Deprecated alias of :func:`clip_grad_norm_` (as in PyTorch)."""
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite)


def clip_grad_value_(parameters: ParamsOrTensor, clip_value: float) -> None:
    """Clamp every gradient element into ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        array_module(g).clip(g, -clip_value, clip_value, out=g)
