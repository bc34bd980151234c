"""Adamax, NAdam and RAdam: the Adam variants of ``torch.optim``, step for step as PyTorch's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyflow.device import array_module
from tinyflow.optim.optimizer import Optimizer, ParamsT


def _lerp_(avg: Any, target: Any, weight: float) -> None:
    """``avg.lerp_(target, weight)`` as PyTorch evaluates it (two formulas around weight 0.5)."""
    if weight < 0.5:
        avg += weight * (target - avg)
    else:
        avg[...] = target - (target - avg) * (1 - weight)


def _check(name: str, lr: float, betas: tuple[float, float], eps: float, weight_decay: float) -> None:
    if not 0.0 <= lr:
        raise ValueError(f"{name}: invalid learning rate lr={lr}; it must be >= 0")
    if not 0.0 <= eps:
        raise ValueError(f"{name}: invalid eps={eps}; it must be >= 0")
    if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
        raise ValueError(f"{name}: invalid betas={betas}; both must be in [0, 1)")
    if not 0.0 <= weight_decay:
        raise ValueError(f"{name}: invalid weight_decay={weight_decay}; it must be >= 0")


class _AdamFamily(Optimizer):
    """The loop over parameters shared by the variants; ``_update`` does one parameter."""

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._run_closure(closure)
        for group in self.param_groups:
            for p, grad in self._gradients(group):
                state = self.state[p]
                xp, dtype = array_module(p.array), self._state_dtype(p)
                if "step" not in state:
                    self._init_state(state, xp, p.array, dtype)
                state["step"] += 1
                master = self._master_weight(p)
                self._update(group, state, xp, master, grad)
                self._write_back(p, master)
        return loss

    def _init_state(self, state: dict, xp: Any, like: Any, dtype: Any) -> None:
        state["step"] = 0
        state["exp_avg"] = xp.zeros_like(like, dtype=dtype)
        state["exp_avg_sq"] = xp.zeros_like(like, dtype=dtype)

    def _update(self, group: dict, state: dict, xp: Any, master: Any, grad: Any) -> None:
        raise NotImplementedError


class Adamax(_AdamFamily):
    """``torch.optim.Adamax``: Adam with the infinity norm, ``u = max(beta2 u, |g| + eps)``."""

    def __init__(self, params: ParamsT, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        _check("Adamax", lr, betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    def _init_state(self, state: dict, xp: Any, like: Any, dtype: Any) -> None:
        state["step"] = 0
        state["exp_avg"] = xp.zeros_like(like, dtype=dtype)
        state["exp_inf"] = xp.zeros_like(like, dtype=dtype)

    def _update(self, group: dict, state: dict, xp: Any, master: Any, grad: Any) -> None:
        beta1, beta2 = group["betas"]
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * master
        _lerp_(state["exp_avg"], grad, 1 - beta1)
        exp_inf = state["exp_inf"]
        exp_inf *= beta2
        xp.maximum(exp_inf, xp.abs(grad) + group["eps"], out=exp_inf)
        clr = group["lr"] / (1 - beta1 ** state["step"])
        master -= clr * (state["exp_avg"] / exp_inf)


class NAdam(_AdamFamily):
    """``torch.optim.NAdam``: Adam with Nesterov momentum and the momentum-decay schedule
    (``mu_product`` kept in float32, as PyTorch's state tensor)."""

    def __init__(self, params: ParamsT, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        _check("NAdam", lr, betas, eps, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"NAdam: invalid momentum_decay={momentum_decay}; it must be >= 0")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize, capturable=capturable,
                                      differentiable=differentiable))

    def _init_state(self, state: dict, xp: Any, like: Any, dtype: Any) -> None:
        super()._init_state(state, xp, like, dtype)
        state["mu_product"] = np.float32(1.0)

    def _update(self, group: dict, state: dict, xp: Any, master: Any, grad: Any) -> None:
        beta1, beta2 = group["betas"]
        lr, wd, step = group["lr"], group["weight_decay"], state["step"]
        bias_correction2 = 1 - beta2**step
        if wd != 0:
            if group["decoupled_weight_decay"]:
                master *= 1 - lr * wd
            else:
                grad = grad + wd * master
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * group["momentum_decay"]))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * group["momentum_decay"]))
        state["mu_product"] = np.float32(state["mu_product"]) * np.float32(mu)
        mu_product = float(state["mu_product"])
        _lerp_(state["exp_avg"], grad, 1 - beta1)
        exp_avg_sq = state["exp_avg_sq"]
        exp_avg_sq *= beta2
        exp_avg_sq += (1 - beta2) * grad * grad
        denom = xp.sqrt(exp_avg_sq / bias_correction2) + group["eps"]
        master += (-lr * (1.0 - mu) / (1.0 - mu_product)) * (grad / denom)
        master += (-lr * mu_next / (1.0 - mu_product * mu_next)) * (state["exp_avg"] / denom)


class RAdam(_AdamFamily):
    """``torch.optim.RAdam``: Adam whose adaptive step is switched on (and rectified) once the
    variance estimate is reliable (rho_t > 5)."""

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        _check("RAdam", lr, betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay, foreach=foreach,
                                      maximize=maximize, capturable=capturable, differentiable=differentiable))

    def _update(self, group: dict, state: dict, xp: Any, master: Any, grad: Any) -> None:
        beta1, beta2 = group["betas"]
        lr, wd, step = group["lr"], group["weight_decay"], state["step"]
        if wd != 0:
            if group["decoupled_weight_decay"]:
                master *= 1 - lr * wd
            else:
                grad = grad + wd * master
        _lerp_(state["exp_avg"], grad, 1 - beta1)
        exp_avg_sq = state["exp_avg_sq"]
        exp_avg_sq *= beta2
        exp_avg_sq += (1 - beta2) * grad * grad
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        corrected = state["exp_avg"] / bias_correction1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * beta2**step / bias_correction2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive = bias_correction2**0.5 / (xp.sqrt(exp_avg_sq) + group["eps"])
            master -= corrected * lr * adaptive * rect
        else:
            master -= corrected * lr
