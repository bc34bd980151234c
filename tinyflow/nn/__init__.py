"""Layers and models: Module, Parameter and the PyTorch-named layers, each in the file PyTorch
keeps it in (``tinyflow/nn/modules/<file>.py``, importable as ``tinyflow.nn.modules.<file>``);
the stateless forms are ``nn.functional``, the initialisers ``nn.init``.

A re-export module. The framework's layers load with it; the PyTorch-surface layers (padding,
upsampling, pixel and channel shuffle, fold/unfold, instance norm, distances, the Transformer),
``nn.parallel`` (DataParallel and DistributedDataParallel) and ``nn.utils`` load on first use of
one of their names (PEP 562 ``__getattr__`` below).
"""
from __future__ import annotations

import importlib
from typing import Any

from tinyflow.nn import functional, init, modules
from tinyflow.nn.modules.activation import *  # ReLU, GELU, Softmax, ..., MultiheadAttention
from tinyflow.nn.modules.batchnorm import *  # BatchNorm1d/2d/3d
from tinyflow.nn.modules.container import *  # Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict
from tinyflow.nn.modules.conv import *  # Conv1d/2d/3d, ConvTranspose1d/2d/3d
from tinyflow.nn.modules.dropout import *  # Dropout, Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout
from tinyflow.nn.modules.flatten import *  # Flatten, Unflatten
from tinyflow.nn.modules.linear import *  # Linear, Identity, Bilinear
from tinyflow.nn.modules.loss import *  # CrossEntropyLoss, MSELoss, ...
from tinyflow.nn.modules.module import Module
from tinyflow.nn.modules.normalization import *  # LayerNorm, GroupNorm, RMSNorm, LocalResponseNorm
from tinyflow.nn.modules.pooling import *  # MaxPool*, AvgPool*, Adaptive*Pool*, LPPool*, MaxUnpool*
from tinyflow.nn.modules.rnn import *  # RNN, LSTM, GRU and their cells
from tinyflow.nn.modules.sparse import *  # Embedding, EmbeddingBag
from tinyflow.nn.parameter import Parameter

# Loaded on first use: module -> the names it defines (a module's own name, e.g. "utils" for
# tinyflow.nn.utils, gives the module).
_SURFACE = {
    "tinyflow.nn.modules.channelshuffle": ("ChannelShuffle",),
    "tinyflow.nn.modules.distance": ("CosineSimilarity", "PairwiseDistance"),
    "tinyflow.nn.modules.fold": ("Fold", "Unfold"),
    "tinyflow.nn.modules.instancenorm": ("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"),
    "tinyflow.nn.modules.padding": (
        "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ReflectionPad1d",
        "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
        "CircularPad1d", "CircularPad2d", "CircularPad3d",
    ),
    "tinyflow.nn.modules.pixelshuffle": ("PixelShuffle", "PixelUnshuffle"),
    "tinyflow.nn.modules.transformer": (
        "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer",
    ),
    "tinyflow.nn.modules.upsampling": ("Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"),
    "tinyflow.nn.parallel": ("DataParallel",),
    "tinyflow.nn.utils": (),
}

__all__ = modules.__all__ + ["Parameter", "DataParallel", "functional", "init", "modules", "parallel", "utils"]


def __getattr__(name: str) -> Any:
    """A surface layer class, ``DataParallel``, ``nn.parallel`` or ``nn.utils``: imported on
    first use (PEP 562)."""
    for module, names in _SURFACE.items():
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
    return sorted(set(globals()) | {n for names in _SURFACE.values() for n in names} | {"parallel", "utils"})
