"""Differentiable ops: one file per family, each holding the family's Function classes and its F
functions (``tinyflow.nn.functional`` re-exports those; see docs/design.md).

A class that shares its concept with an nn layer carries the ``Function`` suffix
(``Conv2dFunction`` is the op, ``nn.Conv2d`` the layer, ``F.conv2d`` its function, all three
reading the same file). The families: elementwise, reduce, shape, copy (what Tensor's methods
call), activation, linear, conv, pool, dropout, loss, batchnorm, lrn, normalization, embedding,
rnn, pad, distance, attention, vision. The ops only the PyTorch surface calls (math, indexing,
sort, scan, layout, ...) live in tinyflow/surface/ops/.

This file gathers the op classes by name (``tinyflow.ops.Conv2dFunction``) and defines none.
"""
from tinyflow.ops.activation import (
    ELUFunction, GELUFunction, HardsigmoidFunction, HardswishFunction, HardtanhFunction, LeakyReLUFunction,
    LogSigmoidFunction, LogSoftmaxFunction, LogSumExp, MishFunction, PReLUFunction, ReLUFunction, SigmoidFunction,
    SiLUFunction, SoftmaxFunction, SoftplusFunction, SoftsignFunction, TanhFunction, erf_array,
)
from tinyflow.ops.batchnorm import BatchNorm
from tinyflow.ops.conv import Conv2dFunction, ConvTranspose2dFunction
from tinyflow.ops.copy import Cast, Clone, Fill, ToDevice
from tinyflow.ops.distance import CosineSimilarityFunction, VectorNormFunction
from tinyflow.ops.dropout import DropoutFunction, dropout_seed
from tinyflow.ops.elementwise import (
    Abs, Add, Clip, Div, Exp, Log, Maximum, Minimum, Mul, Neg, NoGradient, Pow, PowScalar, Sqrt, Sub, Where,
    bool_error, broadcast_error,
)
from tinyflow.ops.embedding import EmbeddingFunction
from tinyflow.ops.linear import LinearFunction, MatMul, matmul, matmul_array, safe_sum
from tinyflow.ops.loss import (
    BinaryCrossEntropyFunction, BinaryCrossEntropyWithLogitsFunction, CrossEntropy, HuberLossFunction,
    KLDivFunction, L1LossFunction, MSELossFunction, NLLLossFunction, SmoothL1LossFunction,
)
from tinyflow.ops.lrn import LocalResponseNormFunction
from tinyflow.ops.normalization import LayerNormFunction
from tinyflow.ops.pad import PadNdFunction
from tinyflow.ops.pool import (
    AdaptiveAvgPool2dFunction, AdaptiveMaxPool2dFunction, AvgPool2dFunction, MaxPool2dFunction, MaxUnpool2dFunction,
)
from tinyflow.ops.reduce import Max, MaxDim, Mean, Min, Std, Sum, Var, VectorNorm, normalize_dim
from tinyflow.ops.rnn import (
    GRUCellFunction, GRULayer, LSTMCellFunction, LSTMLayer, gru_cell, gru_layer, lstm_cell, lstm_layer,
)
from tinyflow.ops.shape import Cat, Expand, GetItem, Pad, Permute, Reshape, SetItem, Split, Stack
from tinyflow.ops.vision import GridSample2dFunction, ResampleFunction, taps

__all__ = [
    "Abs", "AdaptiveAvgPool2dFunction", "AdaptiveMaxPool2dFunction", "Add", "AvgPool2dFunction", "BatchNorm",
    "BinaryCrossEntropyFunction", "BinaryCrossEntropyWithLogitsFunction", "Cast", "Cat", "Clip", "Clone",
    "Conv2dFunction", "ConvTranspose2dFunction", "CosineSimilarityFunction", "CrossEntropy", "Div",
    "DropoutFunction", "ELUFunction", "EmbeddingFunction", "Exp", "Expand", "Fill", "GELUFunction",
    "GRUCellFunction", "GRULayer", "GetItem", "GridSample2dFunction", "HardsigmoidFunction", "HardswishFunction",
    "HardtanhFunction", "HuberLossFunction", "KLDivFunction", "L1LossFunction", "LSTMCellFunction", "LSTMLayer",
    "LayerNormFunction", "LeakyReLUFunction", "LinearFunction", "LocalResponseNormFunction", "Log",
    "LogSigmoidFunction", "LogSoftmaxFunction", "LogSumExp", "MSELossFunction", "MatMul", "Max", "MaxDim",
    "MaxPool2dFunction", "MaxUnpool2dFunction", "Maximum", "Mean", "Min", "Minimum", "MishFunction", "Mul",
    "NLLLossFunction", "Neg", "NoGradient", "PReLUFunction", "Pad", "PadNdFunction", "Permute", "Pow", "PowScalar",
    "ReLUFunction", "ResampleFunction", "Reshape", "SetItem", "SiLUFunction", "SigmoidFunction",
    "SmoothL1LossFunction", "SoftmaxFunction", "SoftplusFunction", "SoftsignFunction", "Split", "Sqrt", "Stack",
    "Std", "Sub", "Sum", "TanhFunction", "ToDevice", "Var", "VectorNorm", "VectorNormFunction", "Where",
    "bool_error", "broadcast_error", "dropout_seed", "erf_array", "gru_cell", "gru_layer", "lstm_cell",
    "lstm_layer", "matmul", "matmul_array", "normalize_dim", "safe_sum", "taps",
]
