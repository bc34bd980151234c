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
        "SoftmaxFunction LogSoftmaxFunction LogSumExp erf_array"),
    "tinyflow.ops.activation_extra": (
        "ELUFunction SiLUFunction MishFunction SoftplusFunction SoftsignFunction HardtanhFunction "
        "HardsigmoidFunction HardswishFunction LogSigmoidFunction PReLUFunction"),
    "tinyflow.ops.conv": ("Conv2dFunction ConvTranspose2dFunction"),
    "tinyflow.ops.copy": ("Clone Cast ToDevice Fill"),
    "tinyflow.ops.decomposition": (
        "LinAlgError Inverse Solve SolveTriangular Det SlogDet Cholesky CholeskySolve "
        "CholeskyInverse QR SVD Eigh PInverse MatrixExp Cross VectorNorm inverse_with_info "
        "cholesky_with_info"),
    "tinyflow.ops.distance": ("VectorNormFunction CosineSimilarityFunction"),
    "tinyflow.ops.einsum": ("Einsum parse_einsum"),
    "tinyflow.ops.elementwise": (
        "Add Sub Mul Div Pow PowScalar Neg Exp Log Sqrt Abs Clip Where Maximum Minimum "
        "DropoutFunction NoGradient dropout_seed broadcast_error bool_error"),
    "tinyflow.ops.embedding": ("EmbeddingFunction"),
    "tinyflow.ops.indexing": (
        "Gather Scatter ScatterAdd ScatterReduce IndexSelect IndexAdd MaskedSelect Nonzero "
        "normalize_dim"),
    "tinyflow.ops.interpolate": ("ResampleFunction GridSample2dFunction taps"),
    "tinyflow.ops.layout": (
        "IndexCopy IndexPut MaskedScatter DiagonalScatter DiagEmbed Flip Roll Repeat RepeatInterleave UnfoldDim "
        "Tril Triu Diag Diagonal"),
    "tinyflow.ops.linalg": ("MatMul LinearFunction matmul matmul_array safe_sum"),
    "tinyflow.ops.loss": (
        "CrossEntropy NLLLossFunction MSELossFunction L1LossFunction BinaryCrossEntropyFunction "
        "BinaryCrossEntropyWithLogitsFunction"),
    "tinyflow.ops.loss_extra": ("SmoothL1LossFunction HuberLossFunction KLDivFunction"),
    "tinyflow.ops.math": (
        "UnaryFunction Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh Rsqrt Log2 "
        "Log10 Log1p Expm1 Exp2 Erf Erfinv Reciprocal Square Frac Floor Ceil Trunc Round Sign "
        "Atan2 Fmod Remainder DivRounded FloorDivide Lerp LogAddExp CopySign erfinv_array"),
    "tinyflow.ops.norm": ("LocalResponseNormFunction BatchNorm LayerNormFunction"),
    "tinyflow.ops.pad": ("PadNdFunction"),
    "tinyflow.ops.pool": (
        "MaxPool2dFunction AvgPool2dFunction AdaptiveAvgPool2dFunction AdaptiveMaxPool2dFunction"),
    "tinyflow.ops.pool_extra": ("MaxUnpool2dFunction"),
    "tinyflow.ops.reduce": ("Sum Mean Var Std Max Min MaxDim VectorNorm normalize_dim"),
    "tinyflow.ops.rnn": (
        "LSTMCellFunction GRUCellFunction LSTMLayer GRULayer lstm_cell gru_cell lstm_layer "
        "gru_layer"),
    "tinyflow.ops.scan": ("CumSum CumProd CumExtreme LogCumSumExp Prod accumulate"),
    "tinyflow.ops.shape": ("Reshape Permute Expand GetItem SetItem Cat Stack Split Pad"),
    "tinyflow.ops.sort": ("Argsort Unique"),
    "tinyflow.ops.special": (
        "lgamma_array digamma_array zeta_array polygamma_array erf_small_array erfc_array "
        "erfcx_array ndtr_array ndtri_array log_ndtr_array i0_array i0e_array i1_array "
        "i1e_array bessel_j0_array bessel_j1_array spherical_bessel_j0_array Lgamma Digamma "
        "Polygamma Erfc Erfcx Ndtr Ndtri LogNdtr I0 I0e I1 I1e Sinc Entr Logit Xlogy Xlog1py "
        "Hypot LogAddExp2 Fmax Fmin Heaviside NextAfter Zeta Frexp gammainc_array "
        "gammaincc_array Gammainc"),
}

__all__ = sorted(name for names in _FAMILIES.values() for name in names.split())

attach(__name__, by_module(_FAMILIES), export=False)  # each name loads its family's file on first use
