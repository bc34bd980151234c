"""``torch.nn.modules``: the layer classes, each in the file PyTorch keeps it in
(``torch.nn.modules.conv.Conv2d``, ``torch.nn.modules.loss.CrossEntropyLoss``,
``torch.nn.modules.module.Module``, ...); ``tinyflow.nn`` re-exports them.

A re-export module. The framework's layers load with it; the PyTorch-surface layers (padding,
upsampling, pixel and channel shuffle, fold/unfold, instance norm, distances, the Transformer)
load on first use of one of their names or files (PEP 562 ``__getattr__`` below).
"""
from __future__ import annotations

import importlib
from typing import Any

from tinyflow.nn.modules.activation import *  # ReLU, GELU, Softmax, ..., MultiheadAttention
from tinyflow.nn.modules.batchnorm import *  # BatchNorm1d/2d/3d
from tinyflow.nn.modules.container import *  # Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict
from tinyflow.nn.modules.conv import *  # Conv1d/2d/3d, ConvTranspose1d/2d/3d
from tinyflow.nn.modules.dropout import *  # Dropout, Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout
from tinyflow.nn.modules.flatten import *  # Flatten, Unflatten
from tinyflow.nn.modules.linear import *  # Linear, Identity, Bilinear
from tinyflow.nn.modules.loss import *  # CrossEntropyLoss, MSELoss, ...
from tinyflow.nn.modules.module import *  # Module
from tinyflow.nn.modules.normalization import *  # LayerNorm, GroupNorm, RMSNorm, LocalResponseNorm
from tinyflow.nn.modules.pooling import *  # MaxPool*, AvgPool*, Adaptive*Pool*, LPPool*, MaxUnpool*
from tinyflow.nn.modules.rnn import *  # RNN, LSTM, GRU and their cells
from tinyflow.nn.modules.sparse import *  # Embedding, EmbeddingBag

# The surface layer files: module -> the classes it defines, imported on first use.
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
}

__all__ = [
    # activation
    "ReLU", "LeakyReLU", "Tanh", "Sigmoid", "GELU", "Softmax", "LogSoftmax", "Softmin", "ELU", "SELU", "CELU", "SiLU",
    "Mish", "Softplus", "Softsign", "Hardtanh", "ReLU6", "Hardswish", "Hardsigmoid", "LogSigmoid", "PReLU", "RReLU",
    "Threshold", "Hardshrink", "Softshrink", "Tanhshrink", "GLU", "Softmax2d", "MultiheadAttention",
    # batchnorm, container, conv, dropout, flatten, linear
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "Sequential", "ModuleList", "ModuleDict", "ParameterList",
    "ParameterDict", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "Dropout",
    "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", "Flatten", "Unflatten", "Linear",
    "Identity", "Bilinear",
    # loss
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss",
    "KLDivLoss", "SoftMarginLoss", "MarginRankingLoss", "HingeEmbeddingLoss", "CosineEmbeddingLoss",
    "TripletMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss",
    "MultiLabelMarginLoss", "NLLLoss2d", "TripletMarginWithDistanceLoss",
    # module, normalization, pooling, rnn, sparse
    "Module", "LocalResponseNorm", "LayerNorm", "GroupNorm", "RMSNorm", "MaxPool1d", "MaxPool2d", "MaxPool3d",
    "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "LPPool1d",
    "LPPool2d", "LPPool3d", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "Embedding", "EmbeddingBag",
    # the surface files
    "ChannelShuffle", "CosineSimilarity", "PairwiseDistance", "Fold", "Unfold", "InstanceNorm1d", "InstanceNorm2d",
    "InstanceNorm3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
    "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d", "PixelShuffle", "PixelUnshuffle",
    "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer",
    "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
]


def __getattr__(name: str) -> Any:
    """A surface layer class (or its file, e.g. ``nn.modules.transformer``): imported on first
    use (PEP 562)."""
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
    return sorted(set(globals()) | {n for names in _SURFACE.values() for n in names})
