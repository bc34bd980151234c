"""``nn.utils.weight_norm`` and ``nn.utils.spectral_norm`` (PyTorch's hook-based forms): the
weight becomes a function of new parameters, recomputed before every forward by a pre-hook.

weight_norm: ``weight = g * v / ||v||`` with ``weight_g`` and ``weight_v`` parameters (the norm
over every dim but ``dim``). spectral_norm: ``weight = weight_orig / sigma`` with sigma the
largest singular value of the weight as a matrix, estimated by power iteration on the buffers
``weight_u`` and ``weight_v`` (updated in training, as PyTorch's).
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tinyflow.autograd.grad_mode import no_grad
from tinyflow.nn.modules.module import Module
from tinyflow.nn.parameter import Parameter
from tinyflow.ops.distance import VectorNormFunction
from tinyflow.random import rng
from tinyflow.tensor import Tensor, tensor

__all__ = ["weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm"]


def _norm_except_dim(v: Tensor, dim: int | None) -> Tensor:
    """The 2-norm of ``v`` over every dim but ``dim`` (over all of it when dim is None / -1),
    shaped to broadcast against ``v``."""
    if dim is None or dim == -1:
        return VectorNormFunction.apply(v, 2.0, None, False)
    dim = dim % v.ndim
    axes = tuple(i for i in range(v.ndim) if i != dim)
    return VectorNormFunction.apply(v, 2.0, axes, True)


class WeightNorm:
    """The forward pre-hook of weight_norm: rebuilds ``module.<name>`` from ``_g`` and ``_v``."""

    def __init__(self, name: str, dim: int | None) -> None:
        self.name, self.dim = name, dim

    def compute_weight(self, module: Module) -> Tensor:
        g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    def __call__(self, module: Module, inputs: Any) -> None:
        object.__setattr__(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparameterise ``module.<name>`` as ``g * v / ||v||`` (parameters ``<name>_g``, ``<name>_v``)."""
    warnings.warn("torch.nn.utils.weight_norm is deprecated in favor of torch.nn.utils.parametrizations.weight_norm.",
                  FutureWarning, stacklevel=2)
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, WeightNorm) and hook.name == name:
            raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"weight_norm: {type(module).__name__} has no parameter {name!r}")
    fn = WeightNorm(name, dim)
    with no_grad():
        g = _norm_except_dim(weight.detach(), dim)
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(g.detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach().clone()))
    object.__setattr__(module, name, fn.compute_weight(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo weight_norm: ``<name>`` is a plain parameter again, with its current value."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            with no_grad():
                weight = hook.compute_weight(module).detach()
            del module._parameters[name + "_g"]
            del module._parameters[name + "_v"]
            module.__dict__.pop(name, None)
            module.register_parameter(name, Parameter(weight))
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of {name!r} not found in {module}")


class SpectralNorm:
    """The forward pre-hook of spectral_norm: ``module.<name> = <name>_orig / sigma``."""

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got n_power_iterations="
                             f"{n_power_iterations}")
        self.name, self.n_power_iterations, self.dim, self.eps = name, n_power_iterations, dim, eps

    def matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.ndim) if d != self.dim])
        return weight.reshape(weight.shape[0], -1)

    def _normalize_(self, target: Tensor, value: Any) -> None:
        xp = target.device.xp
        target.array[...] = value / max(float(xp.sqrt((value * value).sum())), self.eps)
        target._versions[0] += 1

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        mat = self.matrix(weight)
        if do_power_iteration:
            m = mat.array
            for _ in range(self.n_power_iterations):  # in place on the buffers, outside autograd
                self._normalize_(v, m.T @ u.array)
                self._normalize_(u, m @ v.array)
        u_c, v_c = u.detach().clone(), v.detach().clone()
        sigma = (u_c * (mat @ v_c)).sum()
        return weight / sigma

    def __call__(self, module: Module, inputs: Any) -> None:
        object.__setattr__(module, self.name, self.compute_weight(module, do_power_iteration=module.training))


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Divide ``module.<name>`` by its spectral norm before every forward (``<name>_orig`` is
    the parameter; ``<name>_u``, ``<name>_v`` the power-iteration buffers)."""
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
    fn = SpectralNorm(name, n_power_iterations, dim, eps)
    h, w = fn.matrix(weight).shape
    g = rng(None)
    u = tensor(np.zeros(h), dtype=weight.dtype, device=weight.device)
    v = tensor(np.zeros(w), dtype=weight.dtype, device=weight.device)
    fn._normalize_(u, u.device.xp.asarray(g.standard_normal(h).astype(weight.dtype)))
    fn._normalize_(v, v.device.xp.asarray(g.standard_normal(w).astype(weight.dtype)))
    del module._parameters[name]
    module.register_parameter(name + "_orig", weight)
    object.__setattr__(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undo spectral_norm: ``<name>`` is a plain parameter again, with its current value."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            with no_grad():
                weight = hook.compute_weight(module, do_power_iteration=False).detach()
            del module._parameters[name + "_orig"]
            del module._buffers[name + "_u"]
            del module._buffers[name + "_v"]
            module.__dict__.pop(name, None)
            module.register_parameter(name, Parameter(weight))
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"spectral_norm of {name!r} not found in {module}")
