"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay (PyTorch's rule)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyflow.capture import state as capture_state
from tinyflow.device import array_module, kernels_of
from tinyflow.kernels.optim import sgd_step_scalars
from tinyflow.optim.optimizer import Optimizer, ParamsT, required


class SGD(Optimizer):
    """``torch.optim.SGD``: the momentum buffer starts as the first gradient (no dampening then).

    The rule is the kernel's (``sgd_momentum_update`` in tinyflow/kernels/optim.py); float16/bfloat16
    parameters step in float32 (float32 buffer and master weight; see ``Optimizer``).

    ``foreach`` as in PyTorch (``Optimizer._use_foreach``): one multi-tensor kernel launch per dtype
    of a group, or one parameter at a time.

    Capturable in a CUDA graph: the kernels read each group's ``[lr, momentum, dampening,
    weight_decay]`` from a slot refilled from ``param_groups`` before each replay (_capture_scalars).
    """

    _capturable = True

    def __init__(self, params: ParamsT, lr: float = required,  # type: ignore[assignment]
                 momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 *, maximize: bool = False, foreach: bool | None = None) -> None:
        if lr is not required and lr < 0.0:
            raise ValueError(f"SGD: invalid learning rate lr={lr}; it must be >= 0")
        if momentum < 0.0:
            raise ValueError(f"SGD: invalid momentum={momentum}; it must be >= 0")
        if weight_decay < 0.0:
            raise ValueError(f"SGD: invalid weight_decay={weight_decay}; it must be >= 0")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(f"SGD: nesterov=True requires momentum > 0 and dampening == 0, got "
                             f"momentum={momentum}, dampening={dampening}")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach)
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None, *, found_inf: Any = None) -> Any:
        """One update of every parameter that has a gradient.

        ``found_inf`` (GradScaler's (1,) float32 device flag, or None): the multi-tensor kernels
        skip the whole update where it is non-zero, read on the device (no host read)."""
        loss = self._run_closure(closure)
        for group in self.param_groups:
            if found_inf is not None or self._use_foreach(group):
                self._step_multi_tensor(group, found_inf)
                continue
            momentum = group["momentum"]
            for p, grad in self._gradients(group):
                buf, first_step = self._momentum_buffer(p, momentum)
                master = self._master_weight(p)
                kernels_of(p.array).sgd_momentum_update(
                    master, grad, buf, lr=group["lr"], momentum=momentum, dampening=group["dampening"],
                    weight_decay=group["weight_decay"], nesterov=group["nesterov"], first_step=first_step)
                self._write_back(p, master)
        return loss

    def _momentum_buffer(self, p: Any, momentum: float) -> tuple[Any, bool]:
        """(p's momentum buffer or None without momentum, whether it is new: its first step)."""
        if momentum == 0:
            return None, False
        state = self.state[p]
        buf = state.get("momentum_buffer")
        if buf is not None:
            return buf, False
        self._missing_in_capture(p, "momentum buffer")
        buf = state["momentum_buffer"] = array_module(p.array).empty_like(p.array, dtype=self._state_dtype(p))
        return buf, True

    def _step_multi_tensor(self, group: dict[str, Any], found_inf: Any = None) -> None:
        """The group's update as one ``sgd_multi_tensor_update`` call per device (and, on the
        step that creates momentum buffers, apart for the parameters whose buffer is new)."""
        momentum = group["momentum"]
        capture = capture_state.capture
        items = []
        for p, grad in self._gradients(group, raw=True):
            buf, first_step = self._momentum_buffer(p, momentum)
            items.append((p, grad, buf, self._master_residual(p), first_step))
        for first_step, (params, grads, bufs, residuals, _) in self._batches(items, lambda i: i[4]):
            kernels_of(params[0].array).sgd_multi_tensor_update(
                [p.array for p in params], grads, bufs if momentum != 0 else None, residuals, lr=group["lr"],
                momentum=momentum, dampening=group["dampening"], weight_decay=group["weight_decay"],
                nesterov=group["nesterov"], maximize=group["maximize"], first_step=first_step,
                scalars=None if capture is None else self._capture_scalars(capture, group), found_inf=found_inf)

    def _capture_scalars(self, capture: Any, group: dict[str, Any]) -> Any:
        """A slot of ``capture`` holding ``group``'s [lr, momentum, dampening, weight_decay] at
        every replay (read from ``param_groups`` then, so schedulers reach the graph)."""
        index = self._group_index(group)
        keys = ("momentum", "nesterov", "maximize")  # fixed in the captured kernel (momentum != 0)
        captured = (group["momentum"] != 0, group["nesterov"], group["maximize"])

        def value() -> list[float]:
            g = self._check_structure(index, keys, captured)
            return sgd_step_scalars(g["lr"], g["momentum"], g["dampening"], g["weight_decay"])

        return capture.slot(value, np.float64, 4)
