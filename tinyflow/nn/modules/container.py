"""Module containers: Sequential, ModuleList, ModuleDict (PyTorch's methods). ParameterList and
ParameterDict are the PyTorch surface, in container_extra.py."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

from tinyflow._lazy_names import attach, by_module
from tinyflow.nn.modules.module import Module

__all__ = ["Sequential", "ModuleList", "ModuleDict"]


class Sequential(Module):
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

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules.keys())[idx]
        self._modules[key] = module

    def __delitem__(self, idx: int | slice) -> None:
        keys = list(self._modules.keys())
        for key in keys[idx] if isinstance(idx, slice) else [keys[idx]]:
            del self._modules[key]
        # PyTorch renumbers the remaining entries
        self._modules = OrderedDict((str(i), m) for i, m in enumerate(self._modules.values()))

    def insert(self, index: int, module: Module) -> Sequential:
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules = OrderedDict((str(i), m) for i, m in enumerate(mods))
        return self

    def extend(self, modules: Iterable[Module]) -> Sequential:
        for m in modules:
            self.append(m)
        return self

    def pop(self, idx: int) -> Module:
        m = self[idx]
        del self[idx]
        return m

    def __add__(self, other: Sequential) -> Sequential:
        return Sequential(*self, *other)


class ModuleList(Module):
    """A list of modules, registered so their parameters are found."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        for m in modules or []:
            self.append(m)

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, idx: int | slice) -> Any:
        items = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(items[idx])
        return items[idx]

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules.keys())[idx]
        self._modules[key] = module

    def __delitem__(self, idx: int | slice) -> None:
        keys = list(self._modules.keys())
        for key in keys[idx] if isinstance(idx, slice) else [keys[idx]]:
            del self._modules[key]
        self._modules = OrderedDict((str(i), m) for i, m in enumerate(self._modules.values()))

    def insert(self, index: int, module: Module) -> None:
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules = OrderedDict((str(i), m) for i, m in enumerate(mods))

    def pop(self, idx: int) -> Module:
        m = self[idx]
        del self[idx]
        return m

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self, *other])

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())


class ModuleDict(Module):
    def __init__(self, modules: dict[str, Module] | None = None) -> None:
        super().__init__()
        for k, m in (modules or {}).items():
            self.add_module(k, m)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def keys(self) -> Any:
        return self._modules.keys()

    def values(self) -> Any:
        return self._modules.values()

    def items(self) -> Any:
        return self._modules.items()

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def update(self, modules: Any) -> None:
        for k, m in (modules.items() if hasattr(modules, "items") else modules):
            self.add_module(k, m)

    def clear(self) -> None:
        self._modules.clear()


# PyTorch's module path names the parameter containers too (torch.nn.modules.container.ParameterList): they
# live in container_extra.py, the PyTorch surface, and load from there the first time one is asked for here.
attach(__name__, by_module({"tinyflow.nn.modules.container_extra": ("ParameterList", "ParameterDict")},
                           submodules=False))  # and in __all__, as PyTorch lists them
