"""Differentiable ops: one Function subclass per op, one file per family."""
# Each family adds its line below.
from tinyflow.ops.conv import Conv2d  # noqa: F401,E402
from tinyflow.ops.elementwise import *  # noqa: F401,F403
from tinyflow.ops.embedding import Embedding  # noqa: F401,E402
from tinyflow.ops.linalg import Linear, MatMul  # noqa: F401
from tinyflow.ops.loss import CrossEntropy, LogSoftmax, LogSumExp, MSELoss, NLLLoss, Softmax  # noqa: F401
from tinyflow.ops.memory import Cast, Clone, ToDevice  # noqa: F401
from tinyflow.ops.norm import BatchNorm, LocalResponseNorm  # noqa: F401,E402
from tinyflow.ops.pool import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: F401,E402
from tinyflow.ops.reduce import Max, MaxDim, Mean, Min, Sum, Var  # noqa: F401
from tinyflow.ops.rnn import GRUCell, GRULayer, LSTMCell, LSTMLayer  # noqa: F401,E402
from tinyflow.ops.shape import Cat, Expand, GetItem, Pad, Permute, Reshape, Split, Stack  # noqa: F401
