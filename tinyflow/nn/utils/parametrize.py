"""``torch.nn.utils.parametrize``: a parameter or buffer recomputed as ``f(original)`` on every access.

``register_parametrization(module, "weight", f)`` moves ``module.weight`` to
``module.parametrizations.weight.original`` (``original0``, ``original1``, ... when ``f.right_inverse``
returns several tensors) and turns ``weight`` into a property of a per-instance subclass
(``ParametrizedLinear``), as PyTorch does: reading ``module.weight`` evaluates the chain of
parametrizations (differentiably, so gradients reach ``original``), assigning to it calls the
``right_inverse`` methods. State-dict keys are PyTorch's (``parametrizations.weight.original``).
"""
from __future__ import annotations

import collections.abc
import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tinyflow.autograd.grad_mode import no_grad
from tinyflow.nn.modules.container import ModuleDict, ModuleList
from tinyflow.nn.modules.module import Module
from tinyflow.nn.parameter import Parameter
from tinyflow.tensor import Tensor

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations", "transfer_parametrizations_and_params"]

_cache_enabled = 0
_cache: dict[tuple[int, str], Tensor] = {}


@contextmanager
def cached() -> Iterator[None]:
    """Within this context each parametrized tensor is computed once, on its first access, and the
    value reused until the outermost ``cached()`` exits (as PyTorch's ``parametrize.cached``)."""
    global _cache, _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register_parameter_or_buffer(module: Module, name: str, value: Tensor) -> None:
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _set_data(dest: Tensor, src: Tensor) -> None:
    """``dest.set_(src)``: ``dest`` (the same object, so optimizers keep tracking it) takes a copy of
    ``src``'s data, shape included."""
    if src is dest:
        return
    if src.device != dest.device:
        src = src.to(dest.device)
    dest.array = src.array.copy()
    dest._versions[0] += 1


def _check_same(what: str, name_a: str, a: Tensor, name_b: str, b: Tensor, unsafe_hint: bool) -> None:
    """PyTorch's consistency errors: ``b`` must keep the dtype and shape of ``a``."""
    tail = ", unless the `unsafe` flag is enabled" if unsafe_hint else ""
    if a.dtype != b.dtype:
        raise ValueError(f"{what} may not change the dtype of the tensor{tail}.\n"
                         f"{name_a}.dtype: {a.dtype}\n{name_b}.dtype: {b.dtype}")
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{what} may not change the shape of the tensor{tail}.\n"
                         f"{name_a}.shape: {tuple(a.shape)}\n{name_b}.shape: {tuple(b.shape)}")


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor and its unconstrained original(s), as
    ``module.parametrizations[tensor_name]``: ``original`` when the first parametrization's
    ``right_inverse`` returns one tensor (or is absent: the identity), ``original0``, ``original1``,
    ... when it returns a sequence. Calling it evaluates the chain. Made by
    :func:`register_parametrization`, not by users."""

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape, original_dtype = tuple(original.shape), original.dtype
        with no_grad():
            new: Any = original
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass  # no right inverse: the identity, as PyTorch assumes
        if not isinstance(new, (Tensor, collections.abc.Sequence)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                             f"Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            self._register_single(original, new)
        else:
            self._register_several(original, new)
        if not self.unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(z).__name__}.")
            if z.dtype != original_dtype:
                raise ValueError("Registering a parametrization may not change the dtype of the tensor, unless "
                                 f"`unsafe` flag is enabled.\nunparametrized dtype: {original_dtype}\n"
                                 f"parametrized dtype: {z.dtype}")
            if tuple(z.shape) != original_shape:
                raise ValueError("Registering a parametrization may not change the shape of the tensor, unless "
                                 f"`unsafe` flag is enabled.\nunparametrized shape: {original_shape}\n"
                                 f"parametrized shape: {tuple(z.shape)}")

    def _register_single(self, original: Tensor, new: Tensor) -> None:
        if original.dtype != new.dtype:
            raise ValueError("When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                             f"original.dtype: {original.dtype}\nright_inverse(original).dtype: {new.dtype}")
        if original.device != new.device:
            raise ValueError("When `right_inverse` outputs one tensor, it may not change the device.\n"
                             f"original.device: {original.device}\nright_inverse(original).device: {new.device}")
        with no_grad():
            _set_data(original, new)  # the same object: an optimizer holding it keeps working
        _register_parameter_or_buffer(self, "original", original)

    def _register_several(self, original: Tensor, new: Sequence[Any]) -> None:
        for i, value in enumerate(new):
            if not isinstance(value, Tensor):
                raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                                 f"Got element {i} of the sequence with type {type(value).__name__}.")
            value = value.detach()
            if isinstance(original, Parameter):
                value = Parameter(value, original.requires_grad)
            else:
                value.requires_grad_(original.requires_grad)
            _register_parameter_or_buffer(self, f"original{i}", value)

    def right_inverse(self, value: Tensor) -> None:
        """Apply the ``right_inverse`` of every parametrization, last registered first, and store the
        result in ``original`` (or ``original0``, ``original1``, ...)."""
        with no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype {value.dtype} "
                                     f"while `original` has dtype {self.original.dtype}")
                _set_data(self.original, value)
                return
            if not isinstance(value, collections.abc.Sequence):
                raise ValueError(f"'right_inverse' must return a sequence of tensors. Got {type(value).__name__}.")
            if len(value) != self.ntensors:
                raise ValueError(f"'right_inverse' must return a sequence of tensors of length {self.ntensors}. "
                                 f"Got a sequence of length {len(value)}.")
            for i, t in enumerate(value):
                original_i = getattr(self, f"original{i}")
                if not isinstance(t, Tensor):
                    raise ValueError(f"'right_inverse' must return a sequence of tensors. Got element {i} of type "
                                     f"{type(t).__name__}.")
                if original_i.dtype != t.dtype:
                    raise ValueError(f"Tensor {i} returned by `right_inverse` has dtype {t.dtype} "
                                     f"while `original{i}` has dtype {original_i.dtype}")
                _set_data(original_i, t)

    def forward(self) -> Tensor:
        """The parametrized tensor: the first parametrization applied to the original(s), then the
        others in registration order."""
        mods = list(self)
        if self.is_tensor:
            x = mods[0](self.original)
        else:
            x = mods[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in mods[1:]:
            x = m(x)
        return x


def _default_deepcopy(self: Module, memo: dict) -> Module:
    """A plain deepcopy (``__getstate__`` refuses pickling, which deepcopy would otherwise use)."""
    found = memo.get(id(self))
    if found is not None:
        return found
    replica = self.__new__(self.__class__)
    memo[id(self)] = replica
    object.__setattr__(replica, "__dict__", copy.deepcopy(self.__dict__, memo))
    return replica


def _inject_new_class(module: Module) -> None:
    """Give ``module`` a class of its own, ``Parametrized<Class>``, to hold the properties."""
    cls = module.__class__

    def getstate(self: Module) -> Any:
        raise RuntimeError("Serialization of parametrized modules is only supported through state_dict(). See:\n"
                           "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
                           "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training")

    def setattr_(self: Module, name: str, value: Any) -> None:
        # PyTorch's register_parameter refuses a Parameter under a name that is already an attribute
        if isinstance(value, Parameter) and isinstance(getattr(type(self), name, None), property):
            raise KeyError(f"attribute '{name}' already exists")
        cls.__setattr__(self, name, value)

    dct: dict[str, Any] = {"__getstate__": getstate, "__setattr__": setattr_}
    if not hasattr(cls, "__deepcopy__"):
        dct["__deepcopy__"] = _default_deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), dct)


def _inject_property(module: Module, tensor_name: str) -> None:
    """``tensor_name`` becomes a property of the module's (per-instance) class: read, it evaluates the
    ParametrizationList (once per ``cached()`` context); assigned, it runs the right inverses."""
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self: Module) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        if not _cache_enabled:
            return parametrization()
        key = (id(self), tensor_name)
        value = _cache.get(key)
        if value is None:
            value = _cache[key] = parametrization()
        return value

    def set_original(self: Module, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def _check_appended(module: Module, tensor_name: str, parametrization: Module) -> None:
    """A parametrization added to an already parametrized tensor must map its space to itself
    (same dtype and shape), and so must its right_inverse when it has one."""
    y = getattr(module, tensor_name)
    x = parametrization(y)
    if not isinstance(x, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(x).__name__}.")
    _check_same("Registering a parametrization", f"module.{tensor_name}", y,
                f"parametrization(module.{tensor_name})", x, True)
    if not hasattr(parametrization, "right_inverse"):
        return
    try:
        z = parametrization.right_inverse(x)
    except NotImplementedError:
        return
    if not isinstance(z, Tensor):
        raise ValueError(f"parametrization.right_inverse must return a tensor. Got: {type(z).__name__}")
    _check_same("The tensor returned by parametrization.right_inverse", f"module.{tensor_name}", y,
                "returned", z, True)


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Register ``parametrization`` on the parameter or buffer ``tensor_name`` of ``module``: from now
    on ``module.<tensor_name>`` is ``parametrization(original)``, recomputed on every access, with
    the unconstrained tensor in ``module.parametrizations[tensor_name].original`` (initialised by
    the parametrization's ``right_inverse`` when it has one). Registering on an already
    parametrized tensor chains the new parametrization after the others. Unless ``unsafe``, the
    parametrization may not change the tensor's shape or dtype (ValueError). Returns ``module``."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            _check_appended(module, tensor_name, parametrization)
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        if not isinstance(original, Tensor):
            raise ValueError(f"register_parametrization: {type(module).__name__}.{tensor_name} is None; "
                             "only a tensor can be parametrized")
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a parametrized element "
                         f"with name '{tensor_name}'")
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization on ``tensor_name`` (on any tensor when None)."""
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str, leave_parametrized: bool = True) -> Module:
    """Undo the parametrizations of ``tensor_name``: it becomes a plain parameter (or buffer) again,
    holding the current parametrized value when ``leave_parametrized`` (the original tensor object,
    so optimizers keep it, when there is a single original), or the unconstrained ``original``
    otherwise (only possible with a single original tensor). Returns ``module``."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
                _set_data(original, value)
    elif leave_parametrized:
        value = getattr(module, tensor_name)
        original = Parameter(value.detach()) if value.requires_grad else value.detach()
    else:
        raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized "
                         "in terms of a sequence of tensors.")
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class before any parametrization was registered (its class when none was)."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(from_module: Module, to_module: Module,
                                         tensor_name: str | None = None) -> Module:
    """Register on ``to_module`` the parametrizations of ``from_module`` (all, or those of
    ``tensor_name``), creating missing parameters, and share the original tensors. Returns
    ``to_module``."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name).detach()))
        src = from_module.parametrizations[name]
        for param_func in src:
            register_parametrization(to_module, name, param_func)
        dst = to_module.parametrizations[name]
        keys = ["original"] if src.is_tensor else [f"original{i}" for i in range(src.ntensors)]
        for key in keys:
            _register_parameter_or_buffer(dst, key, getattr(src, key))
    return to_module
