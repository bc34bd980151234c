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

from tinyflow.autograd.grad_mode import no_grad
from tinyflow.device import Device
from tinyflow.dtypes import is_floating
from tinyflow.errors import ShapeError
from tinyflow.nn.modules.hooks import BackwardHookState
from tinyflow.nn.parameter import Parameter
from tinyflow.tensor import Tensor, _resolve_dtype

__all__ = ["Module", "RemovableHandle", "StateDictError"]


class StateDictError(KeyError, RuntimeError):
    """Missing or unexpected keys in ``load_state_dict``: a RuntimeError (PyTorch's) and a KeyError."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class RemovableHandle:
    """What the ``register_*_hook`` methods return, as in PyTorch: ``handle.remove()`` (or
    ``handle()``) removes the hook; also a context manager."""

    _next_id = 0

    def __init__(self, *stores: dict) -> None:
        self._stores = stores
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self) -> None:
        for store in self._stores:
            store.pop(self.id, None)

    __call__ = remove

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


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
        object.__setattr__(self, "_hooks_with_kwargs", {})  # handle id -> True for hook(..., kwargs) forms
        object.__setattr__(self, "_backward_hooks", OrderedDict())
        object.__setattr__(self, "_backward_pre_hooks", OrderedDict())
        object.__setattr__(self, "training", True)

    # ------------------------------------------------------------------ registration
    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {name!r} before Module.__init__() is called: call super().__init__() "
                                 f"first in {type(self).__name__}.__init__")
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
            found = d.get(store)
            if found is not None and name in found:
                return found[name]
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

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at the dotted path ``target`` (``"features.0.weight"``)."""
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters or mod._parameters[name] is None:
            raise AttributeError(f"{type(mod).__name__} has no parameter {name!r} (looking up {target!r})")
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at the dotted path ``target`` (``"bn1.running_mean"``)."""
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers or mod._buffers[name] is None:
            raise AttributeError(f"{type(mod).__name__} has no buffer {name!r} (looking up {target!r})")
        return mod._buffers[name]

    def get_submodule(self, target: str) -> Module:
        mod: Module = self
        for part in target.split(".") if target else []:
            if part not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no submodule {part!r} (looking up {target!r})")
            mod = mod._modules[part]
        return mod

    # ------------------------------------------------------------------ traversal
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """(dotted name, module) for this module and every descendant, each once unless
        ``remove_duplicate=False`` (PyTorch's argument order)."""
        memo = set() if memo is None else memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        return (m for _, m in self.named_modules())

    def named_children(self) -> Iterator[tuple[str, Module]]:
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self) -> Iterator[Module]:
        return (m for _, m in self.named_children())

    def _named(self, store: str, prefix: str, recurse: bool, remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, value in getattr(mod, store).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        return self._named("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        return (b for _, b in self.named_buffers(recurse=recurse))

    # ------------------------------------------------------------------ state
    def state_dict(self, *args: Any, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> OrderedDict[str, Tensor]:
        """Name -> tensor for every parameter and persistent buffer, named as PyTorch does
        (detached, or the Parameters themselves with ``keep_vars``); into ``destination`` if given."""
        if args:  # PyTorch's deprecated positional form state_dict(destination, prefix, keep_vars)
            destination = args[0]
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        out: Any = OrderedDict() if destination is None else destination
        for mod_prefix, mod in self.named_modules(prefix=prefix.rstrip(".")):
            dot = f"{mod_prefix}." if mod_prefix else ""
            for name, p in mod._parameters.items():
                if p is not None:
                    out[dot + name] = p if keep_vars else p.detach()
            for name, b in mod._buffers.items():
                if b is not None and name not in mod._non_persistent:
                    out[dot + name] = b if keep_vars else b.detach()
        return out

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True, assign: bool = False) -> _IncompatibleKeys:
        """Copy arrays (Tensors, NumPy arrays, torch tensors, ...) into this module's state (with
        ``assign``, the given arrays themselves). A shape mismatch raises a ShapeError, and with
        ``strict`` a missing or unexpected key a StateDictError, each listing every problem."""
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
            raise ShapeError(f"load_state_dict: shape mismatch for {type(self).__name__}: " + "; ".join(mismatched)
                             + f". Missing keys: {missing or 'none'}. Unexpected keys: {unexpected or 'none'}."
                             " Is this a checkpoint of another model or configuration?")
        if strict and (missing or unexpected):
            raise StateDictError(f"load_state_dict: the state dict does not match {type(self).__name__}. "
                                 f"Missing keys: {missing or 'none'}. Unexpected keys: {unexpected or 'none'}. "
                                 "Is this a checkpoint of another model? Pass strict=False to load the matching part.")
        named = dict(self.named_parameters())
        named.update(dict(self.named_buffers()))
        with no_grad():
            for k in own:
                if k in state_dict and k in named:
                    dst = named[k]
                    src = _to_numpy(state_dict[k])
                    if assign:
                        dst.array = dst.device.xp.array(src, dtype=dst.dtype)
                    else:
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
        """Move (``to("cuda:0")``) and/or cast floating state (``to(tf.float64)``) in place.
        ``non_blocking`` and ``memory_format`` are accepted (the layout stays the default one)."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None), kwargs.pop("memory_format", None)
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

    def type(self, dst_type: Any) -> Module:
        """Cast every parameter and buffer to ``dst_type`` (PyTorch's Module.type)."""
        return self._apply(lambda t: t.detach().to(_resolve_dtype(dst_type)))

    def share_memory(self) -> Module:
        """Accepted for PyTorch code (multiprocessing training); tinyflow's arrays need nothing."""
        return self

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
        d = self.__dict__
        if not (d.get("_forward_pre_hooks") or d.get("_forward_hooks") or d.get("_backward_hooks")
                or d.get("_backward_pre_hooks")):
            return self.forward(*args, **kwargs)  # no hooks: the common case, called per layer per step
        with_kwargs = self._hooks_with_kwargs
        for key, hook in list(self._forward_pre_hooks.items()):
            if with_kwargs.get(key):
                new = hook(self, args, kwargs)
                if new is not None:
                    args, kwargs = new
                continue
            new = hook(self, args)
            if new is not None:
                args = new if isinstance(new, tuple) else (new,)
        backward_hooks = self.__dict__.get("_backward_hooks") or self.__dict__.get("_backward_pre_hooks")
        if backward_hooks:
            args, report = BackwardHookState(self).wrap_inputs(args)
        out = self.forward(*args, **kwargs)
        if backward_hooks:
            out = report.wrap_outputs(out)
        for key, hook in list(self._forward_hooks.items()):
            new = hook(self, args, kwargs, out) if with_kwargs.get(key) else hook(self, args, out)
            if new is not None:
                out = new
        return out

    def _add_hook(self, store: OrderedDict, hook: Callable[..., Any], prepend: bool, with_kwargs: bool) -> RemovableHandle:
        handle = RemovableHandle(store, self._hooks_with_kwargs)
        store[handle.id] = hook
        if prepend:
            store.move_to_end(handle.id, last=False)
        if with_kwargs:
            self._hooks_with_kwargs[handle.id] = True
        return handle

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """``hook(module, inputs, output)`` (``hook(module, inputs, kwargs, output)`` with
        ``with_kwargs``) after every forward; may return a new output."""
        return self._add_hook(self._forward_hooks, hook, prepend, with_kwargs)

    def register_full_backward_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` once the gradients with respect to the
        module's tensor inputs are computed; may return a new grad_input tuple. ``grad_input``
        holds None for inputs that need no gradient."""
        return self._add_hook(self._backward_hooks, hook, prepend, False)

    def register_backward_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """PyTorch's deprecated form: served by :meth:`register_full_backward_hook`."""
        return self.register_full_backward_hook(hook)

    def register_full_backward_pre_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_output)`` when the gradients of the module's outputs arrive; may
        return a new grad_output tuple."""
        return self._add_hook(self._backward_pre_hooks, hook, prepend, False)

    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, inputs)`` (``hook(module, inputs, kwargs)`` returning (inputs, kwargs)
        with ``with_kwargs``) before every forward; may return new inputs."""
        return self._add_hook(self._forward_pre_hooks, hook, prepend, with_kwargs)

    # ------------------------------------------------------------------ printing
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        head = f"{type(self).__name__}({self.extra_repr()}"
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        return head + "\n  " + "\n  ".join(lines) + "\n)" if lines else head + ")"

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
