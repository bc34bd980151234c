"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay (PyTorch's rule)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinyflow.device import array_module, kernels_of
from tinyflow.optim.optimizer import Optimizer, ParamsT, required


class SGD(Optimizer):
    """``torch.optim.SGD``: the momentum buffer starts as the first gradient (no dampening then).

    Per parameter: ``d = g + weight_decay * p``; ``buf = momentum * buf + (1 - dampening) * d``;
    ``d = d + momentum * buf`` (nesterov) or ``buf``; ``p -= lr * d``. float16/bfloat16
    parameters step in float32 (float32 buffer and master weight; see ``Optimizer``).
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = required,  # type: ignore[assignment]
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        if lr is not required and lr < 0.0:
            raise ValueError(f"SGD: invalid learning rate lr={lr}; it must be >= 0")
        if momentum < 0.0:
            raise ValueError(f"SGD: invalid momentum={momentum}; it must be >= 0")
        if weight_decay < 0.0:
            raise ValueError(f"SGD: invalid weight_decay={weight_decay}; it must be >= 0")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(
                f"SGD: nesterov=True requires momentum > 0 and dampening == 0, got "
                f"momentum={momentum}, dampening={dampening}"
            )
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._run_closure(closure)
        for group in self.param_groups:
            momentum = group["momentum"]
            for p, grad in self._gradients(group):
                buf = None
                first_step = False
                if momentum != 0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = array_module(p.array).empty_like(p.array, dtype=self._state_dtype(p))
                        state["momentum_buffer"] = buf
                        first_step = True
                master = self._master_weight(p)
                kernels_of(p.array).sgd_momentum_update(
                    master,
                    grad,
                    buf,
                    lr=group["lr"],
                    momentum=momentum,
                    dampening=group["dampening"],
                    weight_decay=group["weight_decay"],
                    nesterov=group["nesterov"],
                    first_step=first_step,
                )
                self._write_back(p, master)
        return loss
