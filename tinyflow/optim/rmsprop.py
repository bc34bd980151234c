"""RMSprop (Hinton's lecture 6e; Graves 2013 for the centered form), as ``torch.optim.RMSprop``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinyflow.device import array_module
from tinyflow.optim.optimizer import Optimizer, ParamsT


class RMSprop(Optimizer):
    """Per parameter: ``v = alpha v + (1 - alpha) g^2``; centered: ``m = m + (1 - alpha)(g - m)``
    and ``avg = sqrt(v - m^2) + eps``, else ``avg = sqrt(v) + eps``; with momentum
    ``buf = momentum buf + g / avg`` and ``p -= lr buf``, else ``p -= lr g / avg``. State
    ``step``, ``square_avg``, ``momentum_buffer``, ``grad_avg`` (PyTorch's names)."""

    def __init__(self, params: ParamsT, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 capturable: bool = False, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        for name, value in (("learning rate lr", lr), ("eps", eps), ("momentum", momentum),
                            ("weight_decay", weight_decay), ("alpha", alpha)):
            if not 0.0 <= value:
                raise ValueError(f"RMSprop: invalid {name}={value}; it must be >= 0")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay,
                        capturable=capturable, foreach=foreach, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._run_closure(closure)
        for group in self.param_groups:
            alpha, eps, lr, momentum = group["alpha"], group["eps"], group["lr"], group["momentum"]
            for p, grad in self._gradients(group):
                state = self.state[p]
                xp, dtype = array_module(p.array), self._state_dtype(p)
                if "square_avg" not in state:
                    state["step"] = 0
                    state["square_avg"] = xp.zeros_like(p.array, dtype=dtype)
                if momentum > 0 and "momentum_buffer" not in state:
                    state["momentum_buffer"] = xp.zeros_like(p.array, dtype=dtype)
                if group["centered"] and "grad_avg" not in state:
                    state["grad_avg"] = xp.zeros_like(p.array, dtype=dtype)
                state["step"] += 1
                master = self._master_weight(p)
                if group["weight_decay"] != 0:
                    grad = grad + group["weight_decay"] * master
                square_avg = state["square_avg"]
                square_avg *= alpha
                square_avg += (1 - alpha) * grad * grad
                if group["centered"]:
                    grad_avg = state["grad_avg"]
                    grad_avg += (1 - alpha) * (grad - grad_avg)  # torch's lerp_(grad, 1 - alpha)
                    avg = xp.sqrt(square_avg - grad_avg * grad_avg) + eps
                else:
                    avg = xp.sqrt(square_avg) + eps
                if momentum > 0:
                    buf = state["momentum_buffer"]
                    buf *= momentum
                    buf += grad / avg
                    master -= lr * buf
                else:
                    master -= lr * (grad / avg)
                self._write_back(p, master)
        return loss
