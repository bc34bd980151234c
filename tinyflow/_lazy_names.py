"""Names a module shows under PyTorch's spelling while their code lives in other files, loaded on first use.

PyTorch programs write ``torch.autograd.grad``, ``torch.autograd.Variable`` and
``import torch.autograd.functional``. In tinyflow, autograd.py is the backward engine; those names
live in files of their own: autograd_grad.py and autograd_function.py in the core (they import
autograd.py, so autograd.py cannot import them back without an import circle), and
autograd_functional.py and autograd_variable.py in the PyTorch surface (which the core must not
import). ``attach(module, table)`` makes them reachable from the module without loading any of
them now; autograd.py attaches the core ones, tinyflow/surface.py the surface ones. A table is
plain data (name -> "pkg.module" or "pkg.module:attribute"), which tests/test_boundaries.py reads
as a lazy reference, not an import:

- an attribute ``module.name`` imports its file on first use (a PEP 562 ``__getattr__`` added to
  the module), then stays a plain attribute;
- where the target is a whole module, ``import module.name`` works too: the module gets an empty
  ``__path__`` (so that Python's import system looks for submodules of it) and a finder on
  ``sys.meta_path`` hands out the target's module object, so one file stays one module under
  both names.

Stdlib only: it imports no tinyflow module.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

__all__ = ["attach", "by_module"]


class _SubmoduleAliases(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import a.b`` where ``a.b`` is an alias of the module ``c``: the module object of ``c``."""

    def __init__(self) -> None:
        self.targets: dict[str, str] = {}  # alias -> the module's own name
        self._specs: dict[str, Any] = {}  # alias -> the target's own spec, while the alias is loading

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.targets:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> ModuleType:
        module = importlib.import_module(self.targets[spec.name])
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system stamped the alias's spec on the module; give it back its own (it is
        # already executed: nothing runs twice).
        module.__spec__ = self._specs.pop(module.__spec__.name)


_ALIASES = _SubmoduleAliases()
_TABLES: dict[str, dict[str, str]] = {}  # module name -> {attribute: "module" or "module:attribute"}


def attach(module_name: str, names: Mapping[str, str], export: bool = True) -> None:
    """Give the (imported) module ``module_name`` the attributes ``names`` maps to their homes,
    loaded on first use: ``"pkg.mod"`` (the attribute is that module, and ``import
    module_name.attribute`` works too) or ``"pkg.mod:attr"`` (that module's attribute). With
    ``export``, the names join the module's ``__all__`` list (a re-export module that writes its
    own ``__all__`` passes False)."""
    module = sys.modules[module_name]
    table = _TABLES.get(module_name)
    if table is None:
        table = _TABLES[module_name] = {}
        module.__getattr__ = _getattr_of(module, table)
        module.__dir__ = lambda: sorted(set(vars(module)) | set(table))
    table.update(names)
    for name, target in names.items():
        if ":" not in target and target != f"{module_name}.{name}":  # (a real submodule needs no alias)
            _ALIASES.targets[f"{module_name}.{name}"] = target
            if not hasattr(module, "__path__"):
                module.__path__ = []
    if _ALIASES.targets and _ALIASES not in sys.meta_path:
        sys.meta_path.append(_ALIASES)
    exported = getattr(module, "__all__", None)
    if export and isinstance(exported, list):
        exported += [n for n in names if n not in exported]


def by_module(families: Mapping[str, str | tuple[str, ...]], submodules: bool = True) -> dict[str, str]:
    """``attach``'s table from a re-export module's index, file -> the names it defines
    (``{"tinyflow.optim.adam": ("Adam", "AdamW")}``, or the names as one spaced string): each name
    maps to ``"file:name"``, and each file is also reachable under its own last name
    (``optim.adam``; not with ``submodules=False``) unless a name of the table is spelled the same
    (``F.dropout`` is the function)."""
    table: dict[str, str] = {}
    for home, names in families.items():
        for name in names.split() if isinstance(names, str) else names:
            table[name] = f"{home}:{name}"
    for home in families if submodules else ():
        table.setdefault(home.rsplit(".", 1)[1], home)
    return table


def _getattr_of(module: ModuleType, table: dict[str, str]) -> Any:
    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
        home, _, attribute = target.partition(":")
        if attribute:
            value = getattr(importlib.import_module(home), attribute)
        else:  # through the alias, so that sys.modules knows the module under both names
            value = importlib.import_module(f"{module.__name__}.{name}")
        setattr(module, name, value)  # later lookups are plain attribute reads
        return value

    return __getattr__
