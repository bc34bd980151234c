"""Adadelta (Zeiler 2012), step for step as ``torch.optim.Adadelta``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinyflow.device import array_module, kernels_of
from tinyflow.optim.optimizer import Optimizer, ParamsT


class Adadelta(Optimizer):
    """Per parameter: ``v = rho v + (1 - rho) g^2``; ``delta = sqrt(u + eps) / sqrt(v + eps) * g``;
    ``u = rho u + (1 - rho) delta^2``; ``p -= lr * delta``. State ``step``, ``square_avg``,
    ``acc_delta`` (PyTorch's names). float16/bfloat16 parameters step in float32."""

    def __init__(self, params: ParamsT, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Adadelta: invalid learning rate lr={lr}; it must be >= 0")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Adadelta: invalid rho={rho}; it must be in [0, 1]")
        if not 0.0 <= eps:
            raise ValueError(f"Adadelta: invalid eps={eps}; it must be >= 0")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Adadelta: invalid weight_decay={weight_decay}; it must be >= 0")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        capturable=capturable, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._run_closure(closure)
        for group in self.param_groups:
            rho, eps, lr, wd = group["rho"], group["eps"], group["lr"], group["weight_decay"]
            for p, grad in self._gradients(group):
                state = self.state[p]
                xp, dtype = array_module(p.array), self._state_dtype(p)
                if "square_avg" not in state:
                    state["step"] = 0
                    state["square_avg"] = xp.zeros_like(p.array, dtype=dtype)
                    state["acc_delta"] = xp.zeros_like(p.array, dtype=dtype)
                state["step"] += 1
                master = self._master_weight(p)
                kernels_of(p.array).adadelta_update(
                    master, grad, state["square_avg"], state["acc_delta"], lr=lr, rho=rho, eps=eps,
                    weight_decay=wd,
                )
                self._write_back(p, master)
        return loss
