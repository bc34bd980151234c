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

A class's methods can wait the same way: ``attach_methods(cls, "pkg.module", names)`` puts a
``StandIn`` on ``cls`` for each name, and the first look-up of any of them imports the module
and puts its functions on ``cls`` (tensor.py's in-place methods from tinyflow/inplace.py;
tinyflow/surface.py builds its table's stand-ins from ``StandIn`` too).

Stdlib only: it imports no tinyflow module.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any

__all__ = ["attach", "by_module", "StandIn", "attach_methods"]


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


class StandIn:
    """What ``owner`` holds for the method (or property) ``name`` until ``load()`` has put the real
    one on it in its place.

    The first look-up of the name answers with the real one: ``x.add_``, ``Tensor.add_``,
    ``inspect.signature(Tensor.add_)``, and the special methods (``x += y``, ``x[i] = v``), which
    CPython looks up on the type, where it honours a descriptor; later look-ups find the real one
    and cost nothing more. ``load`` must be idempotent (it only imports a module and sets
    attributes to the same values): threads that look names up at once may each run it, and each
    finds the real attribute once its own run returns, so no lock is needed.
    """

    __slots__ = ("owner", "name", "load")

    def __init__(self, owner: type, name: str, load: Callable[[], None]) -> None:
        self.owner, self.name, self.load = owner, name, load

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        self.load()
        real = vars(self.owner)[self.name]
        if real is self:
            raise AttributeError(f"{self.owner.__name__}.{self.name}: its module did not define it")
        get = getattr(type(real), "__get__", None)  # a function binds to obj, a property reads it
        return real if get is None else get(real, obj, objtype)

    def __repr__(self) -> str:
        return f"<{self.owner.__name__}.{self.name}, loaded on first use>"


def attach_methods(cls: type, home: str, names: Iterable[str]) -> None:
    """Give ``cls`` the functions ``names`` of the module ``home`` (``"pkg.module"``, functions
    written with ``self`` first) as its methods, loaded on first use: the first look-up of any of
    them imports ``home`` and puts all of them on ``cls`` at once."""
    names = tuple(names)

    def load() -> None:
        module = importlib.import_module(home)
        for name in names:
            setattr(cls, name, getattr(module, name))

    for name in names:
        setattr(cls, name, StandIn(cls, name, load))
