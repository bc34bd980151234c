"""nn.functional (imported as F): the stateless form of every layer, PyTorch's names and defaults.

A re-export module: every F function is defined in one family file of this package, where it
checks its arguments (with messages that name the function), applies autocast, and calls the
differentiable op of tinyflow/ops/ that computes it (``F.conv2d`` -> ``Conv2dFunction`` of
tinyflow/ops/conv.py), or composes differentiable Tensor ops where no dedicated op is needed.
The table below is the index: which file defines which name.

A family file loads the first time one of its names is used (``tinyflow._lazy_names.attach``, below), so
a program reads only the families it calls: an AlexNet step reads conv (and padding, which it
imports), activation, pooling, dropout, linear and loss, not attention, embedding or vision. The
framework's families (activation, attention, conv, distance, dropout, linear, loss,
normalization, padding, pooling, sparse) import only the core; vision and instancenorm are the
PyTorch surface (only surface layers and users call them).
"""
from __future__ import annotations

from tinyflow._lazy_names import attach, by_module
from tinyflow.nn.functional._utils import FunctionalError

# Loaded with F because their files are named like a function they define: importing the file
# later would set F.linear / F.dropout to the module (the import system binds a submodule on its
# package); imported here, the function names below bind after the module and stay.
from tinyflow.ops.dropout import dropout
from tinyflow.ops.linear import linear

# family file -> the F names it defines, imported on first use.
_FAMILIES = {
    "tinyflow.ops.activation": (
        "relu", "relu_", "leaky_relu", "leaky_relu_", "gelu", "sigmoid", "tanh", "softmax", "log_softmax", "logsumexp", "elu_", "celu_", "selu_", "hardtanh_", "threshold_", "rrelu_", "elu", "selu", "celu", "silu", "mish", "softplus", "softsign", "hardtanh", "relu6", "hardsigmoid", "hardswish", "logsigmoid", "prelu", "rrelu", "threshold", "hardshrink", "softshrink", "tanhshrink", "glu", "gumbel_softmax", "softmin",
    ),
    "tinyflow.ops.attention": ("scaled_dot_product_attention", "multi_head_attention_forward"),
    "tinyflow.ops.conv": ("conv2d", "conv_transpose2d", "conv1d", "conv_transpose1d", "conv3d", "conv_transpose3d"),
    "tinyflow.ops.distance": ("normalize", "cosine_similarity", "pdist", "pairwise_distance"),
    "tinyflow.ops.loss": (
        "REDUCTIONS", "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "smooth_l1_loss", "huber_loss", "kl_div", "soft_margin_loss", "margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss", "poisson_nll_loss", "gaussian_nll_loss", "multilabel_soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
    ),
    "tinyflow.ops.lrn": ("local_response_norm",),
    "tinyflow.ops.batchnorm": ("batch_norm", "instance_norm"),
    "tinyflow.ops.normalization": ("layer_norm", "rms_norm", "group_norm"),
    "tinyflow.ops.pad": ("pad",),
    "tinyflow.ops.pool": (
        "max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d",
    ),
    "tinyflow.ops.embedding": ("embedding", "embedding_bag", "one_hot"),
    # the PyTorch surface
    "tinyflow.ops.dropout": ("dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                                             "feature_alpha_dropout"),
    "tinyflow.ops.linear": ("bilinear",),
    "tinyflow.ops.vision": (
        "unfold", "fold", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "affine_grid",
        "grid_sample", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
    ),
}

# Every F function: the two loaded above and each family's names (REDUCTIONS, the loss reductions' names,
# is reachable as F.REDUCTIONS but not exported, as in PyTorch).
__all__ = ["linear", "dropout"] + [name for names in _FAMILIES.values() for name in names if name != "REDUCTIONS"]

attach(__name__, by_module(_FAMILIES), export=False)  # each name loads its file on first use
