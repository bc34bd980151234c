"""Layers and models: Module, Parameter and the PyTorch-named layers, each in the file PyTorch
keeps it in (torch/nn/modules/<file>.py, also importable as ``tinyflow.nn.modules.<file>``);
the stateless forms are ``nn.functional``."""
from tinyflow.nn import functional, init, modules, parallel, utils  # noqa: F401
from tinyflow.nn.activation import (  # noqa: F401
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    MultiheadAttention,
    PReLU,
    ReLU,
    ReLU6,
    RReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softmax2d,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from tinyflow.nn.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d  # noqa: F401
from tinyflow.nn.container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential  # noqa: F401
from tinyflow.nn.conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: F401
from tinyflow.nn.distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from tinyflow.nn.dropout import AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout  # noqa: F401
from tinyflow.nn.flatten import Flatten, Unflatten  # noqa: F401
from tinyflow.nn.fold import Fold, Unfold  # noqa: F401
from tinyflow.nn.instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d  # noqa: F401
from tinyflow.nn.linear import Bilinear, Identity, Linear  # noqa: F401
from tinyflow.nn.loss import (  # noqa: F401
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    NLLLoss,
    NLLLoss2d,
    PoissonNLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)
from tinyflow.nn.module import Module  # noqa: F401
from tinyflow.nn.normalization import GroupNorm, LayerNorm, LocalResponseNorm, RMSNorm  # noqa: F401
from tinyflow.nn.padding import (  # noqa: F401
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from tinyflow.nn.parallel import DataParallel  # noqa: F401
from tinyflow.nn.parameter import Parameter  # noqa: F401
from tinyflow.nn.pixelshuffle import ChannelShuffle, PixelShuffle, PixelUnshuffle  # noqa: F401
from tinyflow.nn.pooling import (  # noqa: F401
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
)
from tinyflow.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell  # noqa: F401
from tinyflow.nn.sparse import Embedding, EmbeddingBag  # noqa: F401
from tinyflow.nn.transformer import (  # noqa: F401
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from tinyflow.nn.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
