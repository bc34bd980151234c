"""Adam and AdamW, with optional AMSGrad and PyTorch's exact bias correction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyflow.capture import state as capture_state
from tinyflow.device import array_module, kernels_of
from tinyflow.kernels.optim import adam_step_scalars
from tinyflow.optim.optimizer import Optimizer, ParamsT


class Adam(Optimizer):
    """``torch.optim.Adam``: L2 weight decay added to the gradient (decoupled for AdamW).

    State per parameter: ``step`` (int), ``exp_avg``, ``exp_avg_sq`` and, with amsgrad,
    ``max_exp_avg_sq``, as in PyTorch's state_dict. float16/bfloat16 parameters step in float32
    (float32 buffers and master weight, see ``Optimizer``).

    ``foreach`` as in PyTorch: None (the default) updates every parameter of a group in one
    multi-tensor kernel launch per dtype when they are all on a GPU, else one at a time;
    True / False force either path (True on the CPU runs the multi-tensor NumPy reference).

    Inside a CUDA graph capture the step is capturable: the kernels read ``[lr, beta1, beta2,
    eps, weight_decay, step_size, bias_correction2_sqrt]`` from a slot of the capture whose
    refill before each replay advances ``state["step"]`` by one (so state_dict stays right) and
    computes the bias corrections for it. With ``found_inf`` (GradScaler) a skipped update is
    skipped on the device, but its step still counts there (the count is on the host).
    """

    _capturable = True

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        decoupled_weight_decay: bool = False,
    ) -> None:
        name = type(self).__name__
        if lr < 0.0:
            raise ValueError(f"{name}: invalid learning rate lr={lr}; it must be >= 0")
        if eps < 0.0:
            raise ValueError(f"{name}: invalid eps={eps}; it must be >= 0")
        if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"{name}: invalid betas={betas}; both must be in [0, 1)")
        if weight_decay < 0.0:
            raise ValueError(f"{name}: invalid weight_decay={weight_decay}; it must be >= 0")
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            foreach=foreach,
            maximize=maximize,
            decoupled_weight_decay=decoupled_weight_decay,
        )
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None, *, found_inf: Any = None) -> Any:
        """One update of every parameter that has a gradient.

        ``found_inf`` (GradScaler's (1,) float32 device flag, or None): the multi-tensor kernels
        skip the whole update where it is non-zero, read on the device (no host read); the step
        count advances either way."""
        loss = self._run_closure(closure)
        for group in self.param_groups:
            if found_inf is not None or self._use_foreach(group):
                self._step_multi_tensor(group, found_inf)
                continue
            beta1, beta2 = group["betas"]
            for p, grad in self._gradients(group):
                state = self._init_state(p, group)
                state["step"] += 1
                master = self._master_weight(p)
                kernels_of(p.array).adam_update(
                    master,
                    grad,
                    state["exp_avg"],
                    state["exp_avg_sq"],
                    state.get("max_exp_avg_sq") if group["amsgrad"] else None,
                    step=state["step"],
                    lr=group["lr"],
                    beta1=beta1,
                    beta2=beta2,
                    eps=group["eps"],
                    weight_decay=group["weight_decay"],
                    amsgrad=group["amsgrad"],
                    decoupled_weight_decay=group["decoupled_weight_decay"],
                )
                self._write_back(p, master)
        return loss

    def _init_state(self, p: Any, group: dict[str, Any]) -> dict[str, Any]:
        """``p``'s state, its buffers created (zeros, the master weight's dtype) on first use."""
        state = self.state[p]
        xp, dtype = array_module(p.array), self._state_dtype(p)
        if "exp_avg" not in state or (group["amsgrad"] and "max_exp_avg_sq" not in state):
            self._missing_in_capture(p, "Adam state")
        if "exp_avg" not in state:
            state["step"] = 0
            state["exp_avg"] = xp.zeros_like(p.array, dtype=dtype)
            state["exp_avg_sq"] = xp.zeros_like(p.array, dtype=dtype)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = xp.zeros_like(p.array, dtype=dtype)
        elif group["amsgrad"] and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = xp.zeros_like(p.array, dtype=dtype)
        return state

    def _step_multi_tensor(self, group: dict[str, Any], found_inf: Any = None) -> None:
        """The group's update as one ``adam_multi_tensor_update`` call per device and step count
        (one call in all, unless parameters joined the group later)."""
        beta1, beta2 = group["betas"]
        amsgrad = group["amsgrad"]
        capture = capture_state.capture
        items = []
        for p, grad in self._gradients(group, raw=True):
            state = self._init_state(p, group)
            if capture is None:  # captured: each replay's slot refill counts it
                state["step"] += 1
            items.append((p, grad, state["exp_avg"], state["exp_avg_sq"],
                          state.get("max_exp_avg_sq") if amsgrad else None,
                          self._master_residual(p), state["step"]))
        for step, (params, grads, m, v, vmax, residuals, _) in self._batches(items, lambda i: i[6]):
            kernels_of(params[0].array).adam_multi_tensor_update(
                [p.array for p in params],
                grads,
                m,
                v,
                vmax if amsgrad else None,
                residuals,
                step=step,
                lr=group["lr"],
                beta1=beta1,
                beta2=beta2,
                eps=group["eps"],
                weight_decay=group["weight_decay"],
                amsgrad=amsgrad,
                decoupled_weight_decay=group["decoupled_weight_decay"],
                maximize=group["maximize"],
                scalars=None if capture is None else self._capture_scalars(capture, group, params),
                found_inf=found_inf,
            )

    def _capture_scalars(self, capture: Any, group: dict[str, Any], params: list[Any]) -> Any:
        """A slot of ``capture`` whose refill before each replay counts one step for ``params``
        (``state["step"] += 1``, as the eager step does) and holds that step's scalars."""
        index = self._group_index(group)
        keys = ("amsgrad", "maximize", "decoupled_weight_decay")  # fixed in the captured kernel
        captured = tuple(group[k] for k in keys)

        def value() -> list[float]:
            g = self._check_structure(index, keys, captured)
            for p in params:
                self.state[p]["step"] += 1
            beta1, beta2 = g["betas"]
            return adam_step_scalars(g["lr"], beta1, beta2, g["eps"], g["weight_decay"],
                                     self.state[params[0]]["step"])

        return capture.slot(value, np.float64, 7)


class AdamW(Adam):
    """``torch.optim.AdamW``: Adam with decoupled weight decay (``p *= 1 - lr * weight_decay``)."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        super().__init__(
            params,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            foreach=foreach,
            maximize=maximize,
            decoupled_weight_decay=True,
        )
