"""Differentiable ops: one Function subclass per op, one file per family.

A class that shares its concept with an nn layer carries the ``Function`` suffix
(``Conv2dFunction`` is the op, ``nn.Conv2d`` the layer). Users call them through Tensor methods
and ``tinyflow.nn.functional``, which also checks their arguments.

The core families (what a CNN or LSTM training step needs): elementwise, reduce, shape, copy,
linalg (matmul, linear), activation, loss, conv, pool, norm, rnn, embedding, and pad and distance
(conv's padding modes, the distance losses). The others (math, indexing, sort, scan, layout,
decomposition, interpolate, special, einsum, and activation_extra / loss_extra / pool_extra beside
activation, loss and pool) belong to the PyTorch surface. Code imports an op from its family's file; ``tinyflow.ops.<Name>`` also works
and imports only that family, on first use (this file gathers names and defines none).
"""
from tinyflow._lazy_names import attach, by_module

# family module -> the names it exports (its __all__)
_FAMILIES = {
    "tinyflow.ops.activation": (
        "ReLUFunction LeakyReLUFunction GELUFunction SigmoidFunction TanhFunction "
        "SoftmaxFunction LogSoftmaxFunction LogSumExp erf_array "
        "ELUFunction SiLUFunction MishFunction SoftplusFunction SoftsignFunction HardtanhFunction "
        "HardsigmoidFunction HardswishFunction LogSigmoidFunction PReLUFunction"),
    "tinyflow.ops.conv": ("Conv2dFunction ConvTranspose2dFunction"),
    "tinyflow.ops.copy": ("Clone Cast ToDevice Fill"),
    "tinyflow.ops.distance": ("VectorNormFunction CosineSimilarityFunction"),
    "tinyflow.ops.elementwise": (
        "Add Sub Mul Div Pow PowScalar Neg Exp Log Sqrt Abs Clip Where Maximum Minimum "
        "NoGradient broadcast_error bool_error"),
    "tinyflow.ops.dropout": ("DropoutFunction dropout_seed"),
    "tinyflow.ops.embedding": ("EmbeddingFunction"),
    "tinyflow.ops.vision": ("ResampleFunction GridSample2dFunction taps"),
    "tinyflow.ops.linear": ("MatMul LinearFunction matmul matmul_array safe_sum"),
    "tinyflow.ops.loss": (
        "CrossEntropy NLLLossFunction MSELossFunction L1LossFunction BinaryCrossEntropyFunction "
        "BinaryCrossEntropyWithLogitsFunction SmoothL1LossFunction HuberLossFunction KLDivFunction"),
    "tinyflow.ops.lrn": ("LocalResponseNormFunction"),
    "tinyflow.ops.batchnorm": ("BatchNorm"),
    "tinyflow.ops.normalization": ("LayerNormFunction"),
    "tinyflow.ops.pad": ("PadNdFunction"),
    "tinyflow.ops.pool": (
        "MaxPool2dFunction AvgPool2dFunction AdaptiveAvgPool2dFunction AdaptiveMaxPool2dFunction "
        "MaxUnpool2dFunction"),
    "tinyflow.ops.reduce": ("Sum Mean Var Std Max Min MaxDim VectorNorm normalize_dim"),
    "tinyflow.ops.rnn": (
        "LSTMCellFunction GRUCellFunction LSTMLayer GRULayer lstm_cell gru_cell lstm_layer "
        "gru_layer"),
    "tinyflow.ops.shape": ("Reshape Permute Expand GetItem SetItem Cat Stack Split Pad"),
}

__all__ = sorted(name for names in _FAMILIES.values() for name in names.split())

attach(__name__, by_module(_FAMILIES), export=False)  # each name loads its family's file on first use
