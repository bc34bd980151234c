"""Rprop and ASGD, step for step as ``torch.optim.Rprop`` / ``torch.optim.ASGD``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyflow.device import array_module
from tinyflow.optim.optimizer import Optimizer, ParamsT


class Rprop(Optimizer):
    """Resilient backpropagation: each weight's step size grows by ``etas[1]`` while its gradient
    keeps its sign and shrinks by ``etas[0]`` when it flips (then that step is skipped)."""

    def __init__(self, params: ParamsT, lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Rprop: invalid learning rate lr={lr}; it must be >= 0")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Rprop: invalid eta values {etas}; need 0 < etaminus < 1 < etaplus")
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), capturable=capturable,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable))

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._run_closure(closure)
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            lo, hi = group["step_sizes"]
            for p, grad in self._gradients(group):
                state = self.state[p]
                xp, dtype = array_module(p.array), self._state_dtype(p)
                if "prev" not in state:
                    state["step"] = 0
                    state["prev"] = xp.zeros_like(p.array, dtype=dtype)
                    state["step_size"] = xp.full(p.array.shape, group["lr"], dtype=dtype)
                state["step"] += 1
                sign = xp.sign(grad * state["prev"])
                factor = xp.where(sign > 0, etaplus, xp.where(sign < 0, etaminus, 1.0)).astype(dtype)
                step_size = state["step_size"]
                step_size *= factor
                xp.clip(step_size, lo, hi, out=step_size)
                grad = xp.where(factor == np.float32(etaminus).astype(dtype), 0, grad).astype(dtype, copy=False)
                master = self._master_weight(p)
                master -= xp.sign(grad) * step_size
                state["prev"][...] = grad
                self._write_back(p, master)
        return loss


class ASGD(Optimizer):
    """Averaged SGD (Polyak-Ruppert): an SGD step with a decaying rate ``eta`` and the running
    average ``ax`` of the iterates after step ``t0`` (``eta`` and ``mu`` kept in float32, as
    PyTorch's state tensors)."""

    def __init__(self, params: ParamsT, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75, t0: float = 1e6,
                 weight_decay: float = 0.0, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"ASGD: invalid learning rate lr={lr}; it must be >= 0")
        if not 0.0 <= weight_decay:
            raise ValueError(f"ASGD: invalid weight_decay={weight_decay}; it must be >= 0")
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._run_closure(closure)
        for group in self.param_groups:
            lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
            for p, grad in self._gradients(group):
                state = self.state[p]
                xp, dtype = array_module(p.array), self._state_dtype(p)
                if "ax" not in state:
                    state["step"] = 0
                    state["eta"] = float(np.float32(lr))
                    state["mu"] = 1.0
                    state["ax"] = xp.zeros_like(p.array, dtype=dtype)
                state["step"] += 1
                master = self._master_weight(p)
                if group["weight_decay"] != 0:
                    grad = grad + group["weight_decay"] * master
                eta = state["eta"]
                master *= 1 - lambd * eta
                master -= eta * grad
                if state["mu"] != 1:
                    state["ax"] += (master - state["ax"]) * state["mu"]
                else:
                    state["ax"][...] = master
                step = state["step"]
                state["eta"] = float(np.float32(lr / (1 + lambd * lr * step) ** alpha))
                state["mu"] = float(np.float32(1 / max(1, step - t0)))
                self._write_back(p, master)
        return loss
