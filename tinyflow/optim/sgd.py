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

    ``foreach`` as in PyTorch: None (the default) updates every parameter of a group in one
    multi-tensor kernel launch per dtype when they are all on a GPU, else one at a time;
    True / False force either path (True on the CPU runs the multi-tensor NumPy reference).
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
        foreach: bool | None = None,
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
            foreach=foreach,
        )
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._run_closure(closure)
        for group in self.param_groups:
            if self._use_foreach(group):
                self._step_multi_tensor(group)
                continue
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

    def _step_multi_tensor(self, group: dict[str, Any]) -> None:
        """The group's update as one ``sgd_multi_tensor_update`` call per device (and, on the
        step that creates momentum buffers, apart for the parameters whose buffer is new)."""
        momentum = group["momentum"]
        items = []
        for p, grad in self._gradients(group, raw=True):
            buf, first_step = None, False
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = array_module(p.array).empty_like(p.array, dtype=self._state_dtype(p))
                    state["momentum_buffer"] = buf
                    first_step = True
            items.append((p, grad, buf, self._master_residual(p), first_step))
        for first_step, (params, grads, bufs, residuals, _) in self._batches(items, lambda i: i[4]):
            kernels_of(params[0].array).sgd_multi_tensor_update(
                [p.array for p in params],
                grads,
                bufs if momentum != 0 else None,
                residuals,
                lr=group["lr"],
                momentum=momentum,
                dampening=group["dampening"],
                weight_decay=group["weight_decay"],
                nesterov=group["nesterov"],
                maximize=group["maximize"],
                first_step=first_step,
            )
