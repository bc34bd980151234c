"""nn.functional (imported as F): the stateless form of every layer, PyTorch's names and defaults.

A re-export module: every F function is defined in one family file of this package, where it
checks its arguments (with messages that name the function), applies autocast, and calls the
differentiable op of tinyflow/ops/ that computes it (``F.conv2d`` -> ``Conv2dFunction`` of
tinyflow/ops/conv.py), or composes differentiable Tensor ops where no dedicated op is needed.

The families the framework's layers, recipes and models call are loaded with F: activation,
attention, conv, distance, dropout, linear, loss, normalization, padding, pooling, sparse
(embedding). The PyTorch surface that only surface layers and users call (vision: interpolate,
grid_sample, pixel_shuffle, fold/unfold, ...; instancenorm) loads on first use of one of its
names (PEP 562 ``__getattr__`` below), so a training step does not read it.
"""
from __future__ import annotations

import importlib
from typing import Any

from tinyflow.nn.functional._utils import FunctionalError
from tinyflow.nn.functional.activation import *  # relu, gelu, softmax, log_softmax, the in-place forms, ...
from tinyflow.nn.functional.attention import *  # scaled_dot_product_attention, multi_head_attention_forward
from tinyflow.nn.functional.conv import *  # conv1d/2d/3d, conv_transpose1d/2d/3d
from tinyflow.nn.functional.distance import *  # pairwise_distance, cosine_similarity, pdist, normalize
from tinyflow.nn.functional.dropout import *  # dropout, dropout1d/2d/3d, alpha_dropout, ...
from tinyflow.nn.functional.linear import *  # linear, bilinear
from tinyflow.nn.functional.loss import REDUCTIONS
from tinyflow.nn.functional.loss import *  # cross_entropy, nll_loss, mse_loss, ...
from tinyflow.nn.functional.normalization import *  # batch_norm, layer_norm, group_norm, rms_norm, local_response_norm
from tinyflow.nn.functional.padding import *  # pad
from tinyflow.nn.functional.pooling import *  # max_pool1d/2d/3d, avg_pool*, adaptive_*, lp_pool*, max_unpool*
from tinyflow.nn.functional.sparse import *  # embedding, embedding_bag, one_hot

# The surface families: module -> the F names it defines, imported on first use.
_SURFACE = {
    "tinyflow.nn.functional.vision": (
        "unfold", "fold", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "affine_grid",
        "grid_sample", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
    ),
    "tinyflow.nn.functional.instancenorm": ("instance_norm",),
}

__all__ = [
    "linear", "bilinear", "conv2d", "conv1d", "conv_transpose2d", "conv_transpose1d", "unfold", "fold", "relu",
    "relu_", "leaky_relu", "gelu", "sigmoid", "tanh", "elu", "selu", "celu", "silu", "mish", "softplus", "softsign",
    "hardtanh", "relu6", "hardsigmoid", "hardswish", "logsigmoid", "prelu", "rrelu", "threshold", "hardshrink",
    "softshrink", "tanhshrink", "glu", "softmax", "softmin", "log_softmax", "logsumexp", "dropout", "dropout1d",
    "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "max_pool2d", "max_pool2d_with_indices",
    "avg_pool2d", "max_pool1d", "avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "adaptive_avg_pool1d",
    "adaptive_max_pool1d", "max_unpool2d", "pad", "interpolate", "upsample", "upsample_nearest",
    "upsample_bilinear", "pixel_shuffle", "pixel_unshuffle", "local_response_norm", "batch_norm", "layer_norm",
    "group_norm", "instance_norm", "normalize", "cosine_similarity", "pairwise_distance", "embedding", "one_hot",
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div", "soft_margin_loss", "margin_ranking_loss", "hinge_embedding_loss",
    "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss",
    "multilabel_soft_margin_loss", "max_unpool1d", "multi_margin_loss", "multilabel_margin_loss",
    "scaled_dot_product_attention", "multi_head_attention_forward", "elu_", "celu_", "selu_", "leaky_relu_",
    "hardtanh_", "threshold_", "rrelu_", "gumbel_softmax", "rms_norm", "channel_shuffle", "embedding_bag", "conv3d",
    "conv_transpose3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d", "affine_grid",
    "grid_sample", "pdist", "triplet_margin_with_distance_loss", "lp_pool1d", "lp_pool2d", "lp_pool3d",
]


def __getattr__(name: str) -> Any:
    """A surface F function: import its family file on first use (PEP 562)."""
    for module, names in _SURFACE.items():
        if name in names:
            value = getattr(importlib.import_module(module), name)
            globals()[name] = value  # found directly from now on
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {n for names in _SURFACE.values() for n in names})
