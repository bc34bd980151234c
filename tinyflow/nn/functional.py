"""``torch.nn.functional`` (imported as F): the stateless form of every layer, PyTorch's names,
signatures and defaults.

An index that defines nothing: each function lives in the op family file of its op, beside the
Function classes it calls, and checks its arguments and applies autocast there (``F.conv2d`` is
tinyflow/ops/conv.py's, next to ``Conv2dFunction``; ``F.relu`` and ``F.silu`` tinyflow/ops/
activation.py's). ``F.REDUCTIONS``, the loss reductions' names, is reachable but not exported, as
in PyTorch.
"""
from tinyflow.ops.activation import (
    celu, celu_, elu, elu_, gelu, glu, gumbel_softmax, hardshrink, hardsigmoid, hardswish, hardtanh, hardtanh_,
    leaky_relu, leaky_relu_, log_softmax, logsigmoid, logsumexp, mish, prelu, relu, relu6, relu_, rrelu, rrelu_, selu,
    selu_, sigmoid, silu, softmax, softmin, softplus, softshrink, softsign, tanh, tanhshrink, threshold, threshold_,
)
from tinyflow.ops.attention import multi_head_attention_forward, scaled_dot_product_attention
from tinyflow.ops.batchnorm import batch_norm, instance_norm
from tinyflow.ops.conv import conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d
from tinyflow.ops.distance import cosine_similarity, normalize, pairwise_distance, pdist
from tinyflow.ops.dropout import alpha_dropout, dropout, dropout1d, dropout2d, dropout3d, feature_alpha_dropout
from tinyflow.ops.embedding import embedding, embedding_bag, one_hot
from tinyflow.ops.linear import bilinear, linear
from tinyflow.ops.loss import (
    binary_cross_entropy, binary_cross_entropy_with_logits, cosine_embedding_loss, cross_entropy, gaussian_nll_loss,
    hinge_embedding_loss, huber_loss, kl_div, l1_loss, margin_ranking_loss, mse_loss, multi_margin_loss,
    multilabel_margin_loss, multilabel_soft_margin_loss, nll_loss, poisson_nll_loss, smooth_l1_loss, soft_margin_loss,
    triplet_margin_loss, triplet_margin_with_distance_loss,
)
from tinyflow.ops.loss import REDUCTIONS  # noqa: F401 (F.REDUCTIONS: reachable, not exported)
from tinyflow.ops.lrn import local_response_norm
from tinyflow.ops.normalization import group_norm, layer_norm, rms_norm
from tinyflow.ops.pad import pad
from tinyflow.ops.pool import (
    adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, adaptive_max_pool1d, adaptive_max_pool2d,
    adaptive_max_pool3d, avg_pool1d, avg_pool2d, avg_pool3d, lp_pool1d, lp_pool2d, lp_pool3d, max_pool1d, max_pool2d,
    max_pool2d_with_indices, max_pool3d, max_unpool1d, max_unpool2d,
)
from tinyflow.ops.vision import (
    affine_grid, channel_shuffle, fold, grid_sample, interpolate, pixel_shuffle, pixel_unshuffle, unfold, upsample,
    upsample_bilinear, upsample_nearest,
)

__all__ = [
    "celu", "celu_", "elu", "elu_", "gelu", "glu", "gumbel_softmax", "hardshrink", "hardsigmoid", "hardswish",
    "hardtanh", "hardtanh_", "leaky_relu", "leaky_relu_", "log_softmax", "logsigmoid", "logsumexp", "mish", "prelu",
    "relu", "relu6", "relu_", "rrelu", "rrelu_", "selu", "selu_", "sigmoid", "silu", "softmax", "softmin", "softplus",
    "softshrink", "softsign", "tanh", "tanhshrink", "threshold", "threshold_", "multi_head_attention_forward",
    "scaled_dot_product_attention", "batch_norm", "instance_norm", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "cosine_similarity", "normalize", "pairwise_distance", "pdist",
    "alpha_dropout", "dropout", "dropout1d", "dropout2d", "dropout3d", "feature_alpha_dropout", "embedding",
    "embedding_bag", "one_hot", "bilinear", "linear", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "cosine_embedding_loss", "cross_entropy", "gaussian_nll_loss", "hinge_embedding_loss", "huber_loss", "kl_div",
    "l1_loss", "margin_ranking_loss", "mse_loss", "multi_margin_loss", "multilabel_margin_loss",
    "multilabel_soft_margin_loss", "nll_loss", "poisson_nll_loss", "smooth_l1_loss", "soft_margin_loss",
    "triplet_margin_loss", "triplet_margin_with_distance_loss", "local_response_norm", "group_norm", "layer_norm",
    "rms_norm", "pad", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "lp_pool1d", "lp_pool2d",
    "lp_pool3d", "max_pool1d", "max_pool2d", "max_pool2d_with_indices", "max_pool3d", "max_unpool1d", "max_unpool2d",
    "affine_grid", "channel_shuffle", "fold", "grid_sample", "interpolate", "pixel_shuffle", "pixel_unshuffle",
    "unfold", "upsample", "upsample_bilinear", "upsample_nearest",
]
