"""``torch.nn.utils.stateless``: call a module with other tensors in place of its parameters and
buffers (``functional_call``), the engine behind ``tinyflow.func.functional_call``.

The given tensors are swapped into the module's ``_parameters`` / ``_buffers`` dicts (plain
attributes for other names) for the duration of one call and the originals put back afterwards,
also when the call raises. Gradients flow to the given tensors, as the module's layers read them
through ``self.weight`` like any parameter.
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from tinyflow.nn.modules.module import Module
from tinyflow.tensor import Tensor

__all__ = ["functional_call"]

_MISSING = object()  # an attribute the module did not have before the call


def _all_named_tensors(module: Module) -> dict[str, Tensor]:
    """Every parameter and buffer by dotted name, tied ones under each of their names."""
    named: dict[str, Tensor] = {}
    named.update(module.named_parameters(remove_duplicate=False))
    named.update(module.named_buffers(remove_duplicate=False))
    return named


def _untie_named_tensors_map(module: Module, given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` extended to every name tied (the same tensor) to a given name, as PyTorch's
    ``tie_weights=True``: a ValueError when two tied names get different values."""
    names_of: dict[int, set[str]] = {}
    for name, t in _all_named_tensors(module).items():
        names_of.setdefault(id(t), set()).add(name)
    tied: dict[str, set[str]] = {}
    for names in names_of.values():
        if len(names) > 1:
            for name in names:
                tied[name] = names
    given_tied = {name for name in given if name in tied}
    for name in given_tied:
        group = tied[name]
        if len(group & given_tied) > 1 and len({id(given[n]) for n in group & given_tied}) != 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(group)}, "
                             "which are tied. Consider using tie_weights=False")
    untied = dict(given)
    for name in given_tied:
        for other in tied[name]:
            untied[other] = given[name]
    return untied


def _check_keys(module: Module, keys: Mapping[str, Any]) -> None:
    """strict=True: the keys must be exactly the module's parameter and buffer names."""
    valid = set(_all_named_tensors(module))
    missing, unexpected = sorted(valid - set(keys)), sorted(set(keys) - valid)
    msgs = []
    if unexpected:
        msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
    if missing:
        msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
    if msgs:
        raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(type(module).__name__, "\n\t".join(msgs)))


def _owner(module: Module, name: str) -> tuple[Module, str]:
    """The submodule that holds the dotted ``name`` and the last part of the name."""
    prefix, _, attr = name.rpartition(".")
    mod = module
    for part in prefix.split(".") if prefix else []:
        try:
            mod = getattr(mod, part)
        except AttributeError as ex:
            raise AttributeError(f"{type(module).__name__} has no attribute `{part}` (looking up {name!r})") from ex
        if not isinstance(mod, Module):
            raise TypeError(f"submodule `{prefix}`: {type(mod).__name__} is not an instance of nn.Module")
    if not attr:
        raise KeyError('tensor name can\'t be empty string ""')
    return mod, attr


def _swap(module: Module, name: str, value: Any) -> Any:
    """Put ``value`` at the dotted ``name`` (``_MISSING``: remove it); return what was there."""
    if value is not _MISSING and value is not None and not isinstance(value, Tensor):
        raise TypeError(f"functional_call: the value for {name!r} must be a Tensor, got {type(value).__name__}")
    mod, attr = _owner(module, name)
    for store in (mod._parameters, mod._buffers):
        if attr in store:
            old = store[attr]
            if value is _MISSING:
                del store[attr]
            else:
                store[attr] = value
            return old
    old = getattr(mod, attr, _MISSING)
    if old is not _MISSING and old is not None and not isinstance(old, Tensor):
        raise TypeError(f"functional_call: attribute `{name}` of {type(mod).__name__} is a "
                        f"{type(old).__name__}, not a Tensor")
    if value is not _MISSING:
        object.__setattr__(mod, attr, value)
    elif attr in mod.__dict__:
        del mod.__dict__[attr]
    return old


@contextlib.contextmanager
def _reparametrize_module(module: Module, parameters_and_buffers: dict[str, Any], tie_weights: bool = False,
                          strict: bool = False) -> Iterator[None]:
    """Within the block, ``module`` holds ``parameters_and_buffers``; the originals come back at
    the end (also on an error), and tensors the module put in their place meanwhile (in-place
    state updates such as BatchNorm's running stats) are written back into the dict, as PyTorch."""
    untied = _untie_named_tensors_map(module, parameters_and_buffers) if tie_weights else parameters_and_buffers
    if strict:
        _check_keys(module, untied)
    originals: dict[str, Any] = {}
    try:
        for name, value in untied.items():
            originals[name] = _swap(module, name, value)
        yield
    finally:
        current = {name: _swap(module, name, old) for name, old in reversed(originals.items())}
        parameters_and_buffers.update({k: current[k] for k in parameters_and_buffers
                                       if k in current and current[k] is not _MISSING})


def _functional_call(module: Module, parameters_and_buffers: dict[str, Any], args: Any = None,
                     kwargs: dict[str, Any] | None = None, *, tie_weights: bool = True, strict: bool = False) -> Any:
    if not isinstance(module, Module):
        raise TypeError(f"functional_call: expected an nn.Module, got {type(module).__name__}")
    if not isinstance(parameters_and_buffers, dict):
        raise TypeError("functional_call: parameters_and_buffers must be a dict of name -> Tensor, got "
                        f"{type(parameters_and_buffers).__name__}")
    kwargs = {} if kwargs is None else kwargs
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    with _reparametrize_module(module, parameters_and_buffers, tie_weights=tie_weights, strict=strict):
        return module(*args, **kwargs)


def functional_call(module: Module, parameters_and_buffers: dict[str, Any], args: Any = None,
                    kwargs: dict[str, Any] | None = None, *, tie_weights: bool = True, strict: bool = False) -> Any:
    """``module(*args, **kwargs)`` with the tensors of ``parameters_and_buffers`` (dotted names) in
    place of the module's parameters and buffers; deprecated in PyTorch 2.0 (a FutureWarning) in
    favour of ``tinyflow.func.functional_call``, which it matches. ``args`` that is not a tuple is
    one argument. ``tie_weights``: names tied in the module share the given value; ``strict``: the
    keys must be exactly the module's names."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed "
                  "in a future version of PyTorch. Please use `torch.func.functional_call` instead which is a "
                  "drop-in replacement.", FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)
