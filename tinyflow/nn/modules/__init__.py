"""``torch.nn.modules``: the layer classes, each in the file PyTorch keeps it in
(``torch.nn.modules.conv.Conv2d``, ``torch.nn.modules.loss.CrossEntropyLoss``,
``torch.nn.modules.module.Module``, ...); ``tinyflow.nn`` re-exports them.

A re-export module: it imports every layer file and gathers each file's ``__all__``.
"""
from __future__ import annotations

from tinyflow.nn.modules import (
    activation,
    batchnorm,
    channelshuffle,
    container,
    conv,
    distance,
    dropout,
    flatten,
    fold,
    instancenorm,
    linear,
    loss,
    normalization,
    padding,
    pixelshuffle,
    pooling,
    rnn,
    sparse,
    transformer,
    upsampling,
)
from tinyflow.nn.modules.activation import *
from tinyflow.nn.modules.batchnorm import *
from tinyflow.nn.modules.channelshuffle import *
from tinyflow.nn.modules.container import *
from tinyflow.nn.modules.conv import *
from tinyflow.nn.modules.distance import *
from tinyflow.nn.modules.dropout import *
from tinyflow.nn.modules.flatten import *
from tinyflow.nn.modules.fold import *
from tinyflow.nn.modules.instancenorm import *
from tinyflow.nn.modules.linear import *
from tinyflow.nn.modules.loss import *
from tinyflow.nn.modules.module import Module
from tinyflow.nn.modules.normalization import *
from tinyflow.nn.modules.padding import *
from tinyflow.nn.modules.pixelshuffle import *
from tinyflow.nn.modules.pooling import *
from tinyflow.nn.modules.rnn import *
from tinyflow.nn.modules.sparse import *
from tinyflow.nn.modules.transformer import *
from tinyflow.nn.modules.upsampling import *

__all__ = ["Module"] + [  # every layer: each file's __all__, in this order
    name
    for file in (activation, batchnorm, channelshuffle, container, conv, distance, dropout, flatten, fold,
                 instancenorm, linear, loss, normalization, padding, pixelshuffle, pooling, rnn, sparse, transformer,
                 upsampling)
    for name in file.__all__
]
