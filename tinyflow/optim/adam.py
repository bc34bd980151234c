"""Adam and AdamW, with optional AMSGrad and PyTorch's exact bias correction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinyflow.device import array_module, kernels_of
from tinyflow.optim.optimizer import Optimizer, ParamsT


class Adam(Optimizer):
    """``torch.optim.Adam``: L2 weight decay added to the gradient (decoupled for AdamW).

    State per parameter: ``step`` (int), ``exp_avg``, ``exp_avg_sq`` and, with amsgrad,
    ``max_exp_avg_sq``, as in PyTorch's state_dict. float16/bfloat16 parameters step in float32
    (float32 buffers and master weight, see ``Optimizer``).

    ``foreach`` as in PyTorch: None (the default) updates every parameter of a group in one
    multi-tensor kernel launch per dtype when they are all on a GPU, else one at a time;
    True / False force either path (True on the CPU runs the multi-tensor NumPy reference).
    """

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

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._run_closure(closure)
        for group in self.param_groups:
            if self._use_foreach(group):
                self._step_multi_tensor(group)
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
        if "exp_avg" not in state:
            state["step"] = 0
            state["exp_avg"] = xp.zeros_like(p.array, dtype=dtype)
            state["exp_avg_sq"] = xp.zeros_like(p.array, dtype=dtype)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = xp.zeros_like(p.array, dtype=dtype)
        elif group["amsgrad"] and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = xp.zeros_like(p.array, dtype=dtype)
        return state

    def _step_multi_tensor(self, group: dict[str, Any]) -> None:
        """The group's update as one ``adam_multi_tensor_update`` call per device and step count
        (one call in all, unless parameters joined the group later)."""
        beta1, beta2 = group["betas"]
        amsgrad = group["amsgrad"]
        items = []
        for p, grad in self._gradients(group, raw=True):
            state = self._init_state(p, group)
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
            )


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
