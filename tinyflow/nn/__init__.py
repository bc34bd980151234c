"""Layers and models: Module, Parameter and the PyTorch-named layers, each in the file PyTorch
keeps it in (``tinyflow/nn/modules/<file>.py``, importable as ``tinyflow.nn.modules.<file>``);
the stateless forms are ``nn.functional``, the initialisers ``nn.init``, the helpers ``nn.utils``
and the data-parallel wrappers ``nn.parallel``.

A re-export module, as torch/nn/__init__.py: ``nn.Conv2d`` is ``nn.modules.Conv2d``, which is
``nn.modules.conv.Conv2d``.
"""
from __future__ import annotations

from tinyflow.nn import functional, init, modules, parallel, utils
from tinyflow.nn.modules import *
from tinyflow.nn.parallel import DataParallel
from tinyflow.nn.parameter import Parameter

__all__ = modules.__all__ + ["Parameter", "DataParallel", "functional", "init", "modules", "parallel", "utils"]
