"""Layers and models: Module, Parameter and the PyTorch-named layers."""
from tinyflow.nn import functional, init  # noqa: F401
from tinyflow.nn.activation import GELU, Dropout, LeakyReLU, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh  # noqa: F401
from tinyflow.nn.container import ModuleDict, ModuleList, Sequential  # noqa: F401

# Families written elsewhere add their import line below.
from tinyflow.nn.conv import Conv2d  # noqa: F401,E402
from tinyflow.nn.linear import Flatten, Identity, Linear  # noqa: F401
from tinyflow.nn.loss import CrossEntropyLoss, MSELoss, NLLLoss  # noqa: F401
from tinyflow.nn.module import Module  # noqa: F401
from tinyflow.nn.normalization import BatchNorm2d, LocalResponseNorm  # noqa: F401,E402
from tinyflow.nn.parameter import Parameter  # noqa: F401
from tinyflow.nn.pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: F401,E402
from tinyflow.nn.rnn import GRU, LSTM, GRUCell, LSTMCell  # noqa: F401,E402
from tinyflow.nn.sparse import Embedding  # noqa: F401,E402
