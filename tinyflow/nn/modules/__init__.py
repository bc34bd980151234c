"""``torch.nn.modules``: the layer classes, each in the file PyTorch keeps it in
(``torch.nn.modules.conv.Conv2d``, ``torch.nn.modules.loss.CrossEntropyLoss``,
``torch.nn.modules.module.Module``, ...); ``tinyflow.nn`` re-exports them.

A re-export module, and the table below is its index: which file defines which layer. A layer
file loads the first time one of its names (or the file, ``nn.modules.conv``) is used
(``tinyflow._lazy_names.attach``, below), so a program reads only the layers it builds: an AlexNet step reads
module, container, conv, activation, pooling, dropout and linear. The framework's layer files
import only the core and the framework; the files marked surface are the PyTorch surface.
"""
from __future__ import annotations

from tinyflow._lazy_names import attach, by_module
from tinyflow.nn.modules.module import Module

# layer file -> the classes it defines, imported on first use.
_FILES = {
    "tinyflow.nn.modules.activation": (
        "ReLU", "LeakyReLU", "Tanh", "Sigmoid", "GELU", "Softmax", "LogSoftmax",
    ),
    "tinyflow.nn.modules.batchnorm": ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d"),
    "tinyflow.nn.modules.container": ("Sequential", "ModuleList", "ModuleDict"),
    "tinyflow.nn.modules.conv": ("Conv2d", "ConvTranspose2d"),
    "tinyflow.nn.modules.dropout": ("Dropout",),
    "tinyflow.nn.modules.flatten": ("Flatten", "Unflatten"),
    "tinyflow.nn.modules.linear": ("Linear", "Identity"),
    "tinyflow.nn.modules.loss": (
        "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCELoss", "BCEWithLogitsLoss",
    ),
    "tinyflow.nn.modules.module": ("Module",),
    "tinyflow.nn.modules.normalization": ("LocalResponseNorm", "LayerNorm", "GroupNorm", "RMSNorm"),
    "tinyflow.nn.modules.pooling": ("MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d"),
    "tinyflow.nn.modules.rnn": ("RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"),
    "tinyflow.nn.modules.sparse": ("Embedding", "EmbeddingBag"),
    # the PyTorch surface
    "tinyflow.nn.modules.loss_extra": (
        "SmoothL1Loss", "HuberLoss", "KLDivLoss", "SoftMarginLoss", "MarginRankingLoss",
        "HingeEmbeddingLoss", "CosineEmbeddingLoss", "TripletMarginLoss", "PoissonNLLLoss",
        "GaussianNLLLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss", "MultiLabelMarginLoss",
        "NLLLoss2d", "TripletMarginWithDistanceLoss",
    ),
    "tinyflow.nn.modules.activation_extra": (
        "Softmin", "ELU", "SELU", "CELU", "SiLU", "Mish", "Softplus", "Softsign", "Hardtanh", "ReLU6",
        "Hardswish", "Hardsigmoid", "LogSigmoid", "PReLU", "RReLU", "Threshold", "Hardshrink", "Softshrink",
        "Tanhshrink", "GLU", "Softmax2d", "MultiheadAttention",
    ),
    "tinyflow.nn.modules.container_extra": ("ParameterList", "ParameterDict"),
    "tinyflow.nn.modules.dropout_extra": ("Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
                                          "FeatureAlphaDropout"),
    "tinyflow.nn.modules.linear_extra": ("Bilinear",),
    "tinyflow.nn.modules.conv_extra": ("Conv1d", "Conv3d", "ConvTranspose1d", "ConvTranspose3d"),
    "tinyflow.nn.modules.pooling_extra": (
        "MaxPool1d", "MaxPool3d", "AvgPool1d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool3d",
        "AdaptiveMaxPool1d", "AdaptiveMaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "LPPool1d", "LPPool2d", "LPPool3d",
    ),
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

__all__ = [name for names in _FILES.values() for name in names]  # every layer, from the index

attach(__name__, by_module(_FILES), export=False)  # each name loads its file on first use
