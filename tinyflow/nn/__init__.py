"""Layers and models: Module, Parameter and the PyTorch-named layers, each in the file PyTorch
keeps it in (torch/nn/modules/<file>.py); the stateless forms are ``nn.functional``."""
from tinyflow.nn import functional, init  # noqa: F401
from tinyflow.nn.activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh  # noqa: F401
from tinyflow.nn.batchnorm import BatchNorm2d  # noqa: F401
from tinyflow.nn.container import ModuleDict, ModuleList, Sequential  # noqa: F401
from tinyflow.nn.conv import Conv2d  # noqa: F401
from tinyflow.nn.dropout import Dropout  # noqa: F401
from tinyflow.nn.flatten import Flatten  # noqa: F401
from tinyflow.nn.linear import Identity, Linear  # noqa: F401
from tinyflow.nn.loss import CrossEntropyLoss, MSELoss, NLLLoss  # noqa: F401
from tinyflow.nn.module import Module  # noqa: F401
from tinyflow.nn.normalization import LocalResponseNorm  # noqa: F401
from tinyflow.nn.parameter import Parameter  # noqa: F401
from tinyflow.nn.pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: F401
from tinyflow.nn.rnn import GRU, LSTM, GRUCell, LSTMCell  # noqa: F401
from tinyflow.nn.sparse import Embedding  # noqa: F401
