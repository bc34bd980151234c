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

# The files the layers lived in before they moved to nn/modules/ (PyTorch's place): a model pickled
# then names its classes by those modules (tinyflow.nn.conv.Conv2d), so the old paths still lead there.
_MOVED = {
    "activation": "tinyflow.nn.modules.activation",
    "batchnorm": "tinyflow.nn.modules.batchnorm",
    "container": "tinyflow.nn.modules.container",
    "conv": "tinyflow.nn.modules.conv",
    "distance": "tinyflow.nn.modules.distance",
    "dropout": "tinyflow.nn.modules.dropout",
    "flatten": "tinyflow.nn.modules.flatten",
    "fold": "tinyflow.nn.modules.fold",
    "instancenorm": "tinyflow.nn.modules.instancenorm",
    "linear": "tinyflow.nn.modules.linear",
    "loss": "tinyflow.nn.modules.loss",
    "module": "tinyflow.nn.modules.module",
    "normalization": "tinyflow.nn.modules.normalization",
    "padding": "tinyflow.nn.modules.padding",
    "pixelshuffle": "tinyflow.nn.modules.pixelshuffle",
    "pooling": "tinyflow.nn.modules.pooling",
    "rnn": "tinyflow.nn.modules.rnn",
    "sparse": "tinyflow.nn.modules.sparse",
    "transformer": "tinyflow.nn.modules.transformer",
    "upsampling": "tinyflow.nn.modules.upsampling",
}

# each name loads its file on first use: the layers from nn.modules' index, the rest from _LAZY
attach(__name__, {**by_module(modules._FILES, submodules=False), **by_module(_LAZY), **_MOVED}, export=False)
