"""Containers with PyTorch's methods: of modules (Sequential, ModuleList, ModuleDict) and of bare
parameters (ParameterList, ParameterDict)."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

from tinyflow.nn.modules.module import Module
from tinyflow.nn.parameter import Parameter
from tinyflow.tensor import Tensor

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


class _ModuleSequence(Module):
    """What Sequential and ModuleList share: modules registered under "0", "1", ... in order,
    renumbered when one is deleted (as PyTorch does)."""

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules.keys())[idx]
        self._modules[key] = module

    def __delitem__(self, idx: int | slice) -> None:
        keys = list(self._modules.keys())
        for key in keys[idx] if isinstance(idx, slice) else [keys[idx]]:
            del self._modules[key]
        self._modules = OrderedDict((str(i), m) for i, m in enumerate(self._modules.values()))

    def _insert(self, index: int, module: Module) -> None:
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules = OrderedDict((str(i), m) for i, m in enumerate(mods))

    def extend(self, modules: Iterable[Module]) -> Any:
        for m in modules:
            self.append(m)
        return self

    def pop(self, idx: int) -> Module:
        m = self[idx]
        del self[idx]
        return m


class Sequential(_ModuleSequence):
    """Modules called in order; built from arguments or an OrderedDict of names."""

    def __init__(self, *modules: Any) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, idx: int | slice) -> Module:
        items = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(OrderedDict(items[idx]))
        return items[idx][1]

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        self._insert(index, module)
        return self

    def __add__(self, other: Sequential) -> Sequential:
        return Sequential(*self, *other)


class ModuleList(_ModuleSequence):
    """A list of modules, registered so their parameters are found."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        for m in modules or []:
            self.append(m)

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self._modules)), module)
        return self

    def __getitem__(self, idx: int | slice) -> Any:
        items = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(items[idx])
        return items[idx]

    def insert(self, index: int, module: Module) -> None:
        self._insert(index, module)

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self, *other])


class _NamedStore(Module):
    """What ModuleDict and ParameterDict share: a dict's methods over one of Module's stores
    (``_store``: ``"_modules"`` or ``"_parameters"``)."""

    _store = "_modules"

    def _entries(self) -> OrderedDict:
        return self.__dict__[self._store]

    def __getitem__(self, key: str) -> Any:
        return self._entries()[key]

    def __delitem__(self, key: str) -> None:
        del self._entries()[key]

    def __contains__(self, key: str) -> bool:
        return key in self._entries()

    def __len__(self) -> int:
        return len(self._entries())

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries())

    def keys(self) -> Any:
        return self._entries().keys()

    def values(self) -> Any:
        return self._entries().values()

    def items(self) -> Any:
        return self._entries().items()

    def pop(self, key: str) -> Any:
        return self._entries().pop(key)


class ModuleDict(_NamedStore):
    def __init__(self, modules: dict[str, Module] | None = None) -> None:
        super().__init__()
        for k, m in (modules or {}).items():
            self.add_module(k, m)

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def update(self, modules: Any) -> None:
        for k, m in (modules.items() if hasattr(modules, "items") else modules):
            self.add_module(k, m)

    def clear(self) -> None:
        self._modules.clear()


def _as_parameter(value: Any) -> Any:
    return value if isinstance(value, Parameter) or not isinstance(value, Tensor) else Parameter(value)


class ParameterList(Module):
    """A list of parameters registered under "0", "1", ... (Tensors become Parameters)."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        for v in values or []:
            self.append(v)

    def append(self, value: Any) -> ParameterList:
        self.register_parameter(str(len(self)), _as_parameter(value))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        for v in values:
            self.append(v)
        return self

    def __getitem__(self, idx: int | slice) -> Any:
        items = list(self._parameters.values())
        return ParameterList(items[idx]) if isinstance(idx, slice) else items[idx]

    def __setitem__(self, idx: int, value: Any) -> None:
        key = list(self._parameters.keys())[idx]
        self._parameters[key] = _as_parameter(value)

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._parameters.values())

    def __iadd__(self, values: Iterable[Any]) -> ParameterList:
        return self.extend(values)


class ParameterDict(_NamedStore):
    """A dict of named parameters (Tensors become Parameters)."""

    _store = "_parameters"

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key: str, value: Any) -> None:
        self.register_parameter(key, _as_parameter(value))

    def update(self, parameters: Any) -> None:
        """Add (name, parameter) pairs; a plain dict is added in sorted key order, as PyTorch does."""
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            items = list(parameters.items())
        elif hasattr(parameters, "items"):
            items = sorted(parameters.items())
        else:
            items = list(parameters)
        for k, v in items:
            self[k] = v
