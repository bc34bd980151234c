"""Module: the base class of layers and models, with PyTorch's registration and naming rules.

Assigning a Parameter, a Module or (through ``register_buffer``) a buffer tensor to an attribute
registers it; ``named_parameters``/``state_dict`` walk the tree and name entries by their
attribute path (``features.0.weight``), so state dicts move between tinyflow and PyTorch.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tinyflow.autograd import no_grad
from tinyflow.device import Device
from tinyflow.dtypes import is_floating
from tinyflow.nn.parameter import Parameter
from tinyflow.tensor import Tensor, _resolve_dtype

__all__ = ["Module"]


class _IncompatibleKeys(tuple):
    """(missing_keys, unexpected_keys), as load_state_dict returns in PyTorch."""

    @property
    def missing_keys(self) -> list[str]:
        return self[0]

    @property
    def unexpected_keys(self) -> list[str]:
        return self[1]


class Module:
    """Base class for all layers. Subclasses set attributes in ``__init__`` and define ``forward``."""

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "training", True)

    # ------------------------------------------------------------------ registration
    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() is called: call super().__init__() "
                f"first in {type(self).__name__}.__init__"
            )
        params, mods, bufs = self._parameters, self._modules, self._buffers
        if isinstance(value, Parameter):
            self.__dict__.pop(name, None)
            mods.pop(name, None)
            bufs.pop(name, None)
            params[name] = value
        elif isinstance(value, Module):
            self.__dict__.pop(name, None)
            params.pop(name, None)
            bufs.pop(name, None)
            mods[name] = value
        elif name in bufs:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} as buffer {name!r} (a Tensor or None is required)")
            bufs[name] = value
        elif name in params or name in mods:
            if value is not None:
                kind = "parameter" if name in params else "child module"
                raise TypeError(f"cannot assign {type(value).__name__} as {kind} {name!r}; assign a "
                                f"{'Parameter' if kind == 'parameter' else 'Module'} or None")
            (params if name in params else mods)[name] = None
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be a Parameter or None, got {type(param).__name__}")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A tensor that is state but not learnable (e.g. BatchNorm's running mean)."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: {name!r} must be a Tensor or None, got {type(tensor).__name__}")
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        mod: Module = self
        for part in target.split(".") if target else []:
            if part not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no submodule {part!r} (looking up {target!r})")
            mod = mod._modules[part]
        return mod

    # ------------------------------------------------------------------ traversal
    def named_modules(self, prefix: str = "", memo: set | None = None) -> Iterator[tuple[str, Module]]:
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(f"{prefix}.{name}" if prefix else name, memo)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def _named(self, store: str, prefix: str, recurse: bool) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, value in getattr(mod, store).items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        return self._named("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ------------------------------------------------------------------ state
    def state_dict(self, prefix: str = "") -> OrderedDict[str, Tensor]:
        """Name -> tensor for every parameter and persistent buffer, named as PyTorch does."""
        out: OrderedDict[str, Tensor] = OrderedDict()
        for mod_prefix, mod in self.named_modules(prefix.rstrip(".")):
            dot = f"{mod_prefix}." if mod_prefix else ""
            for name, p in mod._parameters.items():
                if p is not None:
                    out[dot + name] = p.detach()
            for name, b in mod._buffers.items():
                if b is not None and name not in mod._non_persistent:
                    out[dot + name] = b.detach()
        return out

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> _IncompatibleKeys:
        """Copy arrays (Tensors, NumPy arrays, torch tensors, ...) into this module's state.

        With ``strict`` a missing or unexpected key, or a shape mismatch, raises a KeyError or
        ValueError listing every problem; without it, the lists are returned.
        """
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        mismatched = []
        for k, target in own.items():
            if k in state_dict:
                shape = tuple(_shape_of(state_dict[k]))
                if shape != target.shape:
                    mismatched.append(f"{k}: checkpoint {shape} vs model {target.shape}")
        if mismatched:
            raise ValueError(
                f"load_state_dict: shape mismatch for {type(self).__name__}: " + "; ".join(mismatched)
                + f". Missing keys: {missing or 'none'}. Unexpected keys: {unexpected or 'none'}."
                " Is this a checkpoint of another model or configuration?"
            )
        if strict and (missing or unexpected):
            raise KeyError(
                f"load_state_dict: the state dict does not match {type(self).__name__}. "
                f"Missing keys: {missing or 'none'}. Unexpected keys: {unexpected or 'none'}. "
                "Is this a checkpoint of another model? Pass strict=False to load the matching part."
            )
        named = dict(self.named_parameters())
        named.update(dict(self.named_buffers()))
        with no_grad():
            for k in own:
                if k in state_dict and k in named:
                    dst = named[k]
                    src = _to_numpy(state_dict[k])
                    dst.array[...] = dst.device.xp.asarray(src).astype(dst.dtype, copy=False)
                    dst._versions[0] += 1
        return _IncompatibleKeys((missing, unexpected))

    # ------------------------------------------------------------------ modes, devices, grads
    def train(self, mode: bool = True) -> Module:
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.array[...] = 0

    def _apply(self, fn: Callable[[Tensor], Tensor]) -> Module:
        """Replace every parameter's and buffer's data by ``fn(tensor)`` (keeps the objects)."""
        for mod in self.modules():
            for store in (mod._parameters, mod._buffers):
                for t in store.values():
                    if t is None:
                        continue
                    new = fn(t)
                    t.array, t._device = new.array, new.device
                    if t.grad is not None:
                        g = fn(t.grad)
                        t.grad.array, t.grad._device = g.array, g.device
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """Move (``to("cuda:0")``) and/or cast floating state (``to(tf.float64)``) in place."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        for a in args:
            if isinstance(a, Device) or (isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda")):
                device = a
            else:
                dtype = a
        dt = _resolve_dtype(dtype)

        def convert(t: Tensor) -> Tensor:
            out = t.detach()
            if dt is not None and is_floating(t.dtype):  # integer buffers keep their dtype
                out = out.to(dt)
            if device is not None:
                out = out.to(device)
            return out

        return self._apply(convert)

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, index: int = 0) -> Module:
        return self.to(f"cuda:{index}")

    def float(self) -> Module:
        return self.to(np.float32)

    def double(self) -> Module:
        return self.to(np.float64)

    def half(self) -> Module:
        return self.to(np.float16)

    def bfloat16(self) -> Module:
        """Cast floating parameters and buffers to bfloat16 (needs ml_dtypes)."""
        return self.to("bfloat16")

    def apply(self, fn: Callable[[Module], None]) -> Module:
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ calling
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for hook in self._forward_pre_hooks.values():
            new = hook(self, args)
            if new is not None:
                args = new if isinstance(new, tuple) else (new,)
        out = self.forward(*args, **kwargs)
        for hook in self._forward_hooks.values():
            new = hook(self, args, out)
            if new is not None:
                out = new
        return out

    def register_forward_hook(self, hook: Callable[..., Any]) -> Callable[[], None]:
        """``hook(module, inputs, output)`` after every forward; may return a new output."""
        key = id(hook)
        self._forward_hooks[key] = hook
        return lambda: self._forward_hooks.pop(key, None)

    def register_forward_pre_hook(self, hook: Callable[..., Any]) -> Callable[[], None]:
        """``hook(module, inputs)`` before every forward; may return new inputs."""
        key = id(hook)
        self._forward_pre_hooks[key] = hook
        return lambda: self._forward_pre_hooks.pop(key, None)

    # ------------------------------------------------------------------ printing
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, m in self._modules.items():
            body = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {body}")
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        head = f"{type(self).__name__}(" + (f"{extra}" if extra else "")
        return head + "\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._modules) | set(self._buffers))


def _to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, Tensor):
        return x.numpy()
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor
        return x.detach().cpu().numpy()
    if hasattr(x, "get") and not isinstance(x, dict):  # a cupy array
        return x.get()
    return np.asarray(x)


def _shape_of(x: Any) -> tuple[int, ...]:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
