"""Layers and models: Module, Parameter and the PyTorch-named layers, each in the file PyTorch
keeps it in (``tinyflow/nn/modules/<file>.py``, importable as ``tinyflow.nn.modules.<file>``);
the stateless forms are ``nn.functional``, the initialisers ``nn.init``.

A re-export module: ``nn.Conv2d`` is ``nn.modules.Conv2d``, whose table says which file defines
it. Module, Parameter, init and functional load with nn; a layer file, ``nn.parallel``
(DataParallel, DistributedDataParallel) and ``nn.utils`` load the first time one of their names
is used (PEP 562 ``__getattr__`` below), so a program reads only the layers it builds.
"""
from __future__ import annotations

import importlib
from typing import Any

from tinyflow.nn import functional, init, modules
from tinyflow.nn.modules.module import Module
from tinyflow.nn.parameter import Parameter

# Besides the layers (all of nn.modules' names): module -> the names it defines, imported on
# first use (a module's own name, e.g. "utils" for tinyflow.nn.utils, gives the module).
_LAZY = {
    "tinyflow.nn.parallel": ("DataParallel",),
    "tinyflow.nn.utils": (),
}

__all__ = modules.__all__ + ["Parameter", "DataParallel", "functional", "init", "modules", "parallel", "utils"]


def __getattr__(name: str) -> Any:
    """A layer class (from nn.modules), ``DataParallel``, ``nn.parallel`` or ``nn.utils``:
    imported on first use (PEP 562)."""
    if name in modules.__all__:
        value = getattr(modules, name)
    else:
        for module, names in _LAZY.items():
            if name in names:
                value = getattr(importlib.import_module(module), name)
                break
            if module == f"{__name__}.{name}":
                value = importlib.import_module(module)
                break
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
