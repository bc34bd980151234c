"""Layers and models: Module, Parameter and the PyTorch-named layers, each in the file PyTorch
keeps it in (``tinyflow/nn/modules/<file>.py``, importable as ``tinyflow.nn.modules.<file>``);
the stateless forms are ``nn.functional``, the initialisers ``nn.init``.

A re-export module: ``nn.Conv2d`` is ``nn.modules.Conv2d``, whose table says which file defines
it. Module, Parameter, init and functional load with nn; a layer file, ``nn.parallel``
(DataParallel, DistributedDataParallel) and ``nn.utils`` load the first time one of their names
is used (``tinyflow._lazy_names.attach``, below), so a program reads only the layers it builds.
"""
from __future__ import annotations

from tinyflow._lazy_names import attach, by_module
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

# each name loads its file on first use: the layers from nn.modules' index, the rest from _LAZY
attach(__name__, {**by_module(modules._FILES, submodules=False), **by_module(_LAZY)}, export=False)
