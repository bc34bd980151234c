"""Adagrad (Duchi et al. 2011), step for step as ``torch.optim.Adagrad``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinyflow.device import array_module
from tinyflow.optim.optimizer import Optimizer, ParamsT


class Adagrad(Optimizer):
    """Per parameter: ``sum += g^2``; ``p -= clr * g / (sqrt(sum) + eps)`` with
    ``clr = lr / (1 + (step - 1) * lr_decay)``. State ``step`` and ``sum`` (PyTorch's names),
    created with the optimizer (``sum`` starts at ``initial_accumulator_value``)."""

    def __init__(self, params: ParamsT, lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None) -> None:
        for name, value in (("learning rate lr", lr), ("lr_decay", lr_decay), ("weight_decay", weight_decay),
                            ("initial_accumulator_value", initial_accumulator_value), ("eps", eps)):
            if not 0.0 <= value:
                raise ValueError(f"Adagrad: invalid {name}={value}; it must be >= 0")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p: Any, group: dict[str, Any]) -> dict[str, Any]:
        state = self.state[p]
        if "sum" not in state:
            xp = array_module(p.array)
            state["step"] = 0
            state["sum"] = xp.full(p.array.shape, group["initial_accumulator_value"], dtype=self._state_dtype(p))
        return state

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._run_closure(closure)
        for group in self.param_groups:
            for p, grad in self._gradients(group):
                state = self._init_state(p, group)
                xp = array_module(p.array)
                state["step"] += 1
                master = self._master_weight(p)
                if group["weight_decay"] != 0:
                    grad = grad + group["weight_decay"] * master
                clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
                state["sum"] += grad * grad
                master -= clr * (grad / (xp.sqrt(state["sum"]) + group["eps"]))
                self._write_back(p, master)
        return loss
