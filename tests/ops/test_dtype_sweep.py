"""Every dtype through the training path's ops, against PyTorch.

For each (op, dtype) with dtype in bool, uint8, int8, int32, int64, float16, bfloat16, float32,
float64, the same program runs in tinyflow and in torch on the same small integer-valued inputs
(0..5, exact in every dtype; uint8 images for interpolate span 0..250). Either both return, with the same shape, dtype and values (exact
for integer and bool results, a few units in the last place for float16 / bfloat16), or both
raise, and tinyflow's error is one that ``except <torch's error type>`` catches (torch's
"not implemented for 'Long'" is a NotImplementedError: a program that catches it must catch
ours). The text of the errors is not compared. For floating inputs the gradients of a fixed
weighted sum of the results are compared the same way (dtype, then values).

The ops: the F functions and Tensor methods an AlexNet-style CNN or an LSTM trains with, and
every op that computes fractional weights or means (interpolate in every mode, the pools, the
normalisations, the losses with reduction='mean'), where an integer input is most likely to be
silently truncated. A case is a function of ``L``, a small namespace that builds the swept
dtype's tensors in either library, so one line describes both programs.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn.functional as TFF

torch = pytest.importorskip("torch")
pytest.importorskip("ml_dtypes")
TF = torch.nn.functional

DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]

# (rtol, atol) per result dtype: the half types round once more or less than torch here and there.
TOLERANCE = {"float16": (4e-3, 4e-3), "bfloat16": (2e-2, 2e-2), "float32": (1e-5, 1e-5), "float64": (1e-10, 1e-10)}


@functools.cache
def _values(shape: tuple[int, ...], low: int, high: int) -> np.ndarray:
    """Deterministic small integers in [low, high] (float64), one fixed pattern per shape."""
    seed = 7 + 31 * len(shape) + sum((i + 3) * n for i, n in enumerate(shape))
    return np.random.default_rng(seed).integers(low, high + 1, size=shape).astype(np.float64)


class Lib:
    """One library's tensors for one swept dtype: ``L.x(2, 3)`` is a (2, 3) tensor of that dtype."""

    def __init__(self, name: str, dtype: str, grad: bool = False) -> None:
        self.name, self.dtype_name = name, dtype
        self.mod = torch if name == "torch" else tf
        self.F = TF if name == "torch" else TFF
        self.dtype = self.as_dtype(dtype)
        self.grad = grad and dtype.startswith(("float", "bfloat"))
        self.leaves: list[Any] = []  # with ``grad``: the swept-dtype tensors made, requiring grad

    def as_dtype(self, name: str) -> Any:
        return getattr(torch, name) if self.name == "torch" else tf.dtypes.as_dtype(name)

    def make(self, values: np.ndarray, dtype: str | None = None) -> Any:
        swept = dtype is None or dtype == self.dtype_name
        dtype = self.dtype_name if dtype is None else dtype
        if self.name == "torch":
            t = torch.tensor(values).to(getattr(torch, dtype))
        else:
            t = tf.tensor(values.astype(tf.dtypes.as_dtype(dtype)), dtype=tf.dtypes.as_dtype(dtype))
        if self.grad and swept:
            self.leaves.append(t.requires_grad_(True))
        return t

    def x(self, *shape: int, low: int = 0, high: int = 5) -> Any:
        """The swept dtype, values in [low, high]."""
        return self.make(_values(shape, low, high))

    def c(self, *shape: int, low: int = 0, high: int = 5) -> Any:
        """The swept dtype, never requiring grad: what torch does not differentiate (running
        statistics, class weights)."""
        grad, self.grad = self.grad, False
        try:
            return self.x(*shape, low=low, high=high)
        finally:
            self.grad = grad

    def s(self, *shape: int) -> Any:
        """The swept dtype, values in [-3, 3] where it holds negatives ([0, 6] for uint8, bool)."""
        return self.x(*shape, low=0, high=6) if self.dtype_name in ("bool", "uint8") else self.x(*shape, low=-3, high=3)

    def p(self, *shape: int) -> Any:
        """The swept dtype, values 0 or 1 (probabilities, bool masks)."""
        return self.x(*shape, low=0, high=1)

    def long(self, values: Any) -> Any:
        return self.make(np.asarray(values, dtype=np.float64), "int64")

    def f32(self, *shape: int) -> Any:
        """A float32 partner (never requiring grad), values in [0, 5]."""
        grad, self.grad = self.grad, False
        try:
            return self.make(_values(shape, 0, 5), "float32")
        finally:
            self.grad = grad


Case = Callable[[Lib], Any]
CASES: dict[str, Case] = {}
DTYPE_ONLY: set[str] = set()  # random results (dropout in training): compare shape and dtype only


def case(name: str, fn: Case, dtype_only: bool = False) -> None:
    assert name not in CASES, name
    CASES[name] = fn
    if dtype_only:
        DTYPE_ONLY.add(name)


# ----------------------------------------------------------------------------- layers of a CNN
case("linear", lambda L: L.F.linear(L.x(3, 4), L.x(5, 4), L.x(5)))
case("linear_nobias", lambda L: L.F.linear(L.x(2, 3, 4), L.x(5, 4)))
case("conv2d", lambda L: L.F.conv2d(L.x(1, 2, 5, 5), L.x(3, 2, 3, 3), L.x(3), 1, 1))
case("conv2d_stride_groups", lambda L: L.F.conv2d(L.x(2, 4, 6, 6), L.x(4, 2, 3, 3), None, 2, 0, 1, 2))
case("max_pool2d", lambda L: L.F.max_pool2d(L.x(1, 2, 5, 5), 2))
case("max_pool2d_overlap_pad_ceil", lambda L: L.F.max_pool2d(L.x(2, 2, 6, 7), 3, 2, 1, 1, True))
case("max_pool2d_with_indices", lambda L: L.F.max_pool2d_with_indices(L.x(1, 2, 4, 5), 2))
case("avg_pool2d", lambda L: L.F.avg_pool2d(L.x(1, 2, 6, 6), 2))
case("avg_pool2d_pad_counted", lambda L: L.F.avg_pool2d(L.x(1, 2, 5, 6), 3, 2, 1))
case("avg_pool2d_pad_not_counted", lambda L: L.F.avg_pool2d(L.x(1, 2, 5, 6), 3, 2, 1, False, False))
case("avg_pool2d_ceil", lambda L: L.F.avg_pool2d(L.x(1, 2, 5, 6), 2, 2, 0, True))
case("avg_pool2d_divisor_override", lambda L: L.F.avg_pool2d(L.x(1, 2, 4, 6), 2, 2, 0, False, True, 3))
case("avg_pool2d_3d_input", lambda L: L.F.avg_pool2d(L.x(2, 5, 5), 3, 1, 1))
case("avg_pool1d", lambda L: L.F.avg_pool1d(L.x(2, 3, 7), 3, 2, 1))
case("max_pool1d", lambda L: L.F.max_pool1d(L.x(2, 3, 7), 3, 2, 1))
case("adaptive_avg_pool2d", lambda L: L.F.adaptive_avg_pool2d(L.x(1, 2, 5, 7), (3, 2)))
case("adaptive_avg_pool2d_tiled", lambda L: L.F.adaptive_avg_pool2d(L.x(1, 2, 4, 6), (2, 3)))
case("adaptive_avg_pool2d_identity", lambda L: L.F.adaptive_avg_pool2d(L.x(1, 2, 3, 3), 3))
case("adaptive_avg_pool1d", lambda L: L.F.adaptive_avg_pool1d(L.x(2, 3, 7), 3))
case("adaptive_max_pool2d", lambda L: L.F.adaptive_max_pool2d(L.x(1, 2, 5, 7), (3, 2)))
case("local_response_norm", lambda L: L.F.local_response_norm(L.x(1, 4, 3, 3), 3))
case("local_response_norm_3d", lambda L: L.F.local_response_norm(L.x(2, 5, 3), 2))
case("conv_transpose2d", lambda L: L.F.conv_transpose2d(L.x(1, 2, 3, 3), L.x(2, 3, 2, 2), L.x(3), 2))
case("dropout_eval", lambda L: L.F.dropout(L.x(3, 4), 0.5, False))
case("dropout_train", lambda L: L.F.dropout(L.x(3, 4), 0.5, True), dtype_only=True)
case("dropout_train_p1", lambda L: L.F.dropout(L.x(3, 4), 1.0, True))
case("flatten", lambda L: L.mod.flatten(L.x(2, 3, 4), 1))

# ----------------------------------------------------------------------------- activations
for _name in ["relu", "relu6", "sigmoid", "tanh", "gelu", "silu", "elu", "selu", "leaky_relu", "hardtanh",
              "softplus", "logsigmoid", "hardswish", "hardsigmoid", "softsign", "mish"]:
    case(_name, lambda L, n=_name: getattr(L.F, n)(L.x(3, 4)))
case("gelu_tanh", lambda L: L.F.gelu(L.x(3, 4), approximate="tanh"))
case("softmax", lambda L: L.F.softmax(L.x(3, 4), 1))
case("log_softmax", lambda L: L.F.log_softmax(L.x(3, 4), 1))
case("softmax_method", lambda L: L.x(3, 4).softmax(1))
case("log_softmax_method", lambda L: L.x(3, 4).log_softmax(0))
case("softmax_dtype_float64", lambda L: L.F.softmax(L.x(3, 4), 1, dtype=L.as_dtype("float64")))
case("log_softmax_dtype_float32", lambda L: L.F.log_softmax(L.x(3, 4), 0, dtype=L.as_dtype("float32")))

# ----------------------------------------------------------------------------- normalisations
case("batch_norm_train", lambda L: L.F.batch_norm(L.x(4, 3, 2), None, None, None, None, True))
case("batch_norm_eval", lambda L: L.F.batch_norm(L.x(4, 3, 2), L.c(3), L.c(3, low=1), L.x(3), L.x(3), False))
case("batch_norm_affine_train", lambda L: L.F.batch_norm(L.x(4, 3, 2, 2), None, None, L.x(3), L.x(3), True))
case("layer_norm", lambda L: L.F.layer_norm(L.x(2, 3, 4), (4,)))
case("layer_norm_affine", lambda L: L.F.layer_norm(L.x(2, 3, 4), (3, 4), L.x(3, 4), L.x(3, 4)))
case("group_norm", lambda L: L.F.group_norm(L.x(2, 4, 3), 2))
case("instance_norm", lambda L: L.F.instance_norm(L.x(2, 3, 4)))
case("rms_norm", lambda L: L.F.rms_norm(L.x(2, 3, 4), (4,)))
case("normalize", lambda L: L.F.normalize(L.x(3, 4)))

# ----------------------------------------------------------------------------- an LSTM's ops
case("embedding_weight", lambda L: L.F.embedding(L.long([[0, 2], [3, 1]]), L.x(4, 3)))
case("embedding_index", lambda L: L.F.embedding(L.x(2, 3, high=3), L.f32(4, 3)))
case("cat", lambda L: L.mod.cat([L.x(2, 3), L.x(1, 3)]))
case("stack", lambda L: L.mod.stack([L.x(2, 3), L.x(2, 3, low=1)], 1))
case("chunk", lambda L: L.x(2, 8).chunk(4, 1))
case("split", lambda L: L.x(2, 7).split(3, 1))

# ----------------------------------------------------------------------------- losses
case("cross_entropy", lambda L: L.F.cross_entropy(L.x(3, 5), L.long([0, 4, 2])))
case("cross_entropy_sum", lambda L: L.F.cross_entropy(L.x(3, 5), L.long([0, 4, 2]), reduction="sum"))
case("cross_entropy_smoothing", lambda L: L.F.cross_entropy(L.x(3, 5), L.long([0, 4, 2]), label_smoothing=0.1))
case("cross_entropy_weight", lambda L: L.F.cross_entropy(L.x(3, 5), L.long([0, 4, 2]), L.c(5, low=1)))
case("cross_entropy_ignore_index", lambda L: L.F.cross_entropy(L.x(3, 5), L.long([0, -100, 2])))
case("cross_entropy_target", lambda L: L.F.cross_entropy(L.f32(3, 5), L.x(3, high=4)))
case("cross_entropy_probabilities", lambda L: L.F.cross_entropy(L.x(3, 5), L.p(3, 5)))
case("nll_loss", lambda L: L.F.nll_loss(L.x(3, 5), L.long([1, 0, 4])))
case("nll_loss_target", lambda L: L.F.nll_loss(L.f32(3, 5), L.x(3, high=4)))
case("mse_loss", lambda L: L.F.mse_loss(L.x(3, 4), L.x(3, 4, low=1)))
case("mse_loss_sum", lambda L: L.F.mse_loss(L.x(3, 4), L.x(3, 4, low=1), reduction="sum"))
case("l1_loss", lambda L: L.F.l1_loss(L.x(3, 4), L.x(3, 4, low=1)))
case("smooth_l1_loss", lambda L: L.F.smooth_l1_loss(L.x(3, 4), L.x(3, 4, low=1)))
case("huber_loss", lambda L: L.F.huber_loss(L.x(3, 4), L.x(3, 4, low=1)))
case("binary_cross_entropy", lambda L: L.F.binary_cross_entropy(L.p(3, 4), L.p(2, 3, 2).reshape(3, 4)))
case("binary_cross_entropy_with_logits", lambda L: L.F.binary_cross_entropy_with_logits(L.x(3, 4), L.p(3, 4)))
case("kl_div", lambda L: L.F.kl_div(L.x(3, 4), L.p(3, 4), reduction="batchmean"))

# ----------------------------------------------------------------------------- Tensor methods
case("reshape", lambda L: L.x(2, 3, 4).reshape(6, -1))
case("view", lambda L: L.x(2, 3, 4).view(-1))
case("transpose", lambda L: L.x(2, 3).transpose(0, 1))
case("permute", lambda L: L.x(2, 3, 4).permute(2, 0, 1))
case("unsqueeze_squeeze", lambda L: L.x(2, 3).unsqueeze(1).squeeze())
case("sum", lambda L: L.x(3, 4).sum())
case("sum_dim", lambda L: L.x(3, 4).sum(1))
case("sum_dtype", lambda L: L.x(3, 4).sum(0, dtype=L.as_dtype("float64")))
case("mean", lambda L: L.x(3, 4).mean())
case("mean_dim", lambda L: L.x(3, 4).mean(0, keepdim=True))
case("mean_dtype", lambda L: L.x(3, 4).mean(1, dtype=L.as_dtype("float32")))
case("var", lambda L: L.x(3, 4).var(1))
case("std", lambda L: L.x(3, 4).std())
case("prod", lambda L: L.x(3, 4, high=2).prod(1))
case("max", lambda L: L.x(3, 4).max())
case("max_dim", lambda L: L.x(3, 4).max(1))
case("argmax", lambda L: L.x(3, 4).argmax(1))
case("logsumexp", lambda L: L.mod.logsumexp(L.x(3, 4), 1))
case("matmul", lambda L: L.x(3, 4) @ L.x(4, 2))
case("matmul_batched", lambda L: L.x(2, 3, 4) @ L.x(2, 4, 2))
case("matmul_vector", lambda L: L.x(3, 4) @ L.x(4))
case("add", lambda L: L.x(3, 4) + L.x(4, low=1))
case("sub", lambda L: L.x(3, 4) - L.x(3, 4, low=1))
case("mul", lambda L: L.x(3, 4) * L.x(3, 1, low=1))
case("div", lambda L: L.x(3, 4) / L.x(3, 4, low=1))
case("add_int", lambda L: L.x(3, 4) + 2)
case("mul_float", lambda L: L.x(3, 4) * 0.5)
case("div_int", lambda L: L.x(3, 4) / 2)
case("rsub_int", lambda L: 1 - L.x(3, 4))
case("sub_int", lambda L: L.x(3, 4) - 1)
case("pow_int", lambda L: L.x(3, 4) ** 2)
case("neg", lambda L: -L.x(3, 4))
case("abs", lambda L: L.x(3, 4).abs())
case("exp", lambda L: L.x(3, 4).exp())
case("log", lambda L: L.x(3, 4, low=1).log())
case("sqrt", lambda L: L.x(3, 4).sqrt())
case("clamp", lambda L: L.x(3, 4).clamp(1, 3))
case("gt", lambda L: L.x(3, 4) > L.x(3, 4, low=1))
case("eq_int", lambda L: L.x(3, 4) == 2)
case("maximum", lambda L: L.mod.maximum(L.x(3, 4), L.x(3, 4, low=1)))
case("where", lambda L: L.mod.where(L.p(3, 4).bool(), L.x(3, 4), L.x(3, 4, low=1)))
case("to_float", lambda L: L.x(3, 4).float())

# ----------------------------------------------------------------------------- negative values
# where the sign matters: padding that must never win a max, C's division toward zero, the
# negative side of the activations, logits and differences.
case("max_pool2d_signed_padded", lambda L: L.F.max_pool2d(L.s(1, 2, 5, 5), 3, 2, 1))
case("max_pool2d_with_indices_signed", lambda L: L.F.max_pool2d_with_indices(L.s(1, 2, 4, 5), 3, 1, 1))
case("avg_pool2d_signed", lambda L: L.F.avg_pool2d(L.s(1, 2, 5, 6), 3, 2, 1, False, False))
case("adaptive_max_pool2d_signed", lambda L: L.F.adaptive_max_pool2d(L.s(1, 2, 5, 7), (2, 3)))
for _name in ["relu", "relu6", "leaky_relu", "hardtanh", "elu", "gelu", "silu", "softplus"]:
    case(f"{_name}_signed", lambda L, n=_name: getattr(L.F, n)(L.s(3, 4)))
case("local_response_norm_signed", lambda L: L.F.local_response_norm(L.s(2, 4, 3), 3))
case("cross_entropy_signed", lambda L: L.F.cross_entropy(L.s(3, 5), L.long([0, 4, 2])))
case("mse_loss_signed", lambda L: L.F.mse_loss(L.s(3, 4), L.x(3, 4)))
case("sum_signed", lambda L: L.s(3, 4).sum(0))
case("mean_signed", lambda L: L.s(3, 4).mean(1))
case("div_signed", lambda L: L.s(3, 4) / L.x(3, 4, low=1))
case("abs_signed", lambda L: L.s(3, 4).abs())
case("clamp_signed", lambda L: L.s(3, 4).clamp(-1, 2))
case("max_dim_signed", lambda L: L.s(3, 4).max(1))
case("pad_reflect_signed", lambda L: L.F.pad(L.s(1, 2, 4), (2, -1), "reflect"))
case("interpolate_bilinear_signed", lambda L: L.F.interpolate(L.s(1, 2, 3, 4), (5, 3), None, "bilinear", False))
case("interpolate_bicubic_signed", lambda L: L.F.interpolate(L.s(1, 2, 3, 4), None, 2, "bicubic", True))

# ----------------------------------------------------------------------------- mixed dtypes
# the swept dtype beside a float32 partner: torch multiplies one dtype only (NumPy would promote,
# int32 @ float32 to float64) and promotes a loss's input and target. (Where torch refuses a mix
# that tinyflow computes in torch's promoted dtype - normalisation parameters of another dtype, a
# binary_cross_entropy target - tinyflow stays lenient, and no case is here.)
case("linear_float32_weight", lambda L: L.F.linear(L.x(3, 4), L.f32(5, 4)))
case("matmul_float32_operand", lambda L: L.x(3, 4) @ L.f32(4, 2))
case("mse_loss_float32_target", lambda L: L.F.mse_loss(L.f32(3, 4), L.x(3, 4)))
case("mse_loss_float32_input", lambda L: L.F.mse_loss(L.x(3, 4), L.f32(3, 4)))
case("l1_loss_float32_input", lambda L: L.F.l1_loss(L.f32(3, 4), L.x(3, 4)))
case("bce_with_logits_target", lambda L: L.F.binary_cross_entropy_with_logits(L.f32(3, 4), L.p(3, 4)))
case("add_float32", lambda L: L.x(3, 4) + L.f32(3, 4))
case("cat_float32", lambda L: L.mod.cat([L.x(3), L.f32(3)]))

# ----------------------------------------------------------------------------- resampling
# (mode, align_corners, spatial dims): every mode of F.interpolate, each way it computes weights
INTERPOLATE = [("nearest", None, 1), ("nearest", None, 2), ("nearest", None, 3), ("nearest-exact", None, 1),
               ("nearest-exact", None, 2), ("linear", False, 1), ("linear", True, 1), ("bilinear", False, 2),
               ("bilinear", True, 2), ("bicubic", False, 2), ("bicubic", True, 2), ("trilinear", False, 3),
               ("trilinear", True, 3), ("area", None, 1), ("area", None, 2), ("area", None, 3)]
_SHAPES = {1: (2, 3, 5), 2: (1, 3, 4, 5), 3: (1, 2, 3, 4, 3)}
for _mode, _align, _dims in INTERPOLATE:
    _tag = f"interpolate_{_mode}{'' if _align is None else '_ac' if _align else ''}_{_dims}d"
    case(f"{_tag}_up2", lambda L, m=_mode, a=_align, d=_dims: L.F.interpolate(
        L.x(*_SHAPES[d], high=250 if L.dtype_name == "uint8" else 5), None, 2, m, a))
    case(f"{_tag}_size", lambda L, m=_mode, a=_align, d=_dims: L.F.interpolate(
        L.x(*_SHAPES[d], high=250 if L.dtype_name == "uint8" else 5), (7, 3, 2)[-d:] if d > 1 else 3, None, m, a))
    case(f"{_tag}_scale1.7", lambda L, m=_mode, a=_align, d=_dims: L.F.interpolate(
        L.x(*_SHAPES[d], high=250 if L.dtype_name == "uint8" else 5), None, 1.7, m, a))

case("grid_sample", lambda L: L.F.grid_sample(L.x(1, 2, 3, 3), L.p(1, 2, 2, 2), "bilinear", "zeros", False))
case("grid_sample_nearest", lambda L: L.F.grid_sample(L.x(1, 2, 3, 3), L.p(1, 2, 2, 2), "nearest", "border", True))
case("upsample_bilinear", lambda L: L.F.upsample_bilinear(L.x(1, 2, 3, 3, high=250 if L.dtype_name == "uint8" else 5), 5))
case("adaptive_avg_pool3d", lambda L: L.F.adaptive_avg_pool3d(L.x(1, 2, 3, 4, 5), (2, 3, 2)))
case("avg_pool3d", lambda L: L.F.avg_pool3d(L.x(1, 2, 3, 4, 5), 2))
case("embedding_bag_mean", lambda L: L.F.embedding_bag(L.long([[0, 2], [3, 1]]), L.x(4, 3)))
case("cosine_similarity", lambda L: L.F.cosine_similarity(L.x(3, 4), L.x(3, 4, low=1)))
case("pairwise_distance", lambda L: L.F.pairwise_distance(L.x(3, 4), L.x(3, 4, low=1)))

# ----------------------------------------------------------------------------- padding
for _mode in ["constant", "reflect", "replicate", "circular"]:
    case(f"pad_{_mode}", lambda L, m=_mode: L.F.pad(L.x(1, 2, 4, 5), (1, 2, 2, 0), m))
    case(f"pad_{_mode}_crop", lambda L, m=_mode: L.F.pad(L.x(1, 2, 4, 5), (-1, 2, 1, -1), m))
case("pad_constant_value", lambda L: L.F.pad(L.x(2, 3), (1, 1), "constant", 2))


# torch's CPU build has no kernel where its CUDA build has one (tinyflow's ops are one code for both
# devices, so they compute): (case, dtype) -> why. The reference is torch's float32 result, rounded.
TORCH_CPU_GAPS: dict[tuple[str, str], str] = {
    **{(op, d): "torch's avg_pool3d, which its F composes LRN of 4-D input from, has no CPU half kernel "
       "(LRN's 3-D form, through avg_pool2d, computes)" for op in ("local_response_norm", "avg_pool3d")
       for d in ("float16", "bfloat16")},
}

# Where torch rounds more coarsely than its dtype's tolerance allows: (case, dtype) -> (why, the dtype
# whose tolerance applies), for the results and the gradients.
COARSER: dict[tuple[str, str], tuple[str, str]] = {
    ("bce_with_logits_target", "float64"): ("torch computes the float32 logits' terms in float32, tinyflow "
                                            "in the float64 of the target", "float32"),
    ("hardsigmoid", "float64"): ("torch's backward multiplies by 1/6 as a C float in every dtype", "float32"),
    ("log_softmax_dtype_float32", "float64"): ("both compute in float32 (dtype=float32), rounding apart", "float32"),
}
# Gradients compared with torch's float32 gradient rounded to the half dtype: (case, dtype) -> why.
HALF_GRADIENT_REFERENCE: dict[tuple[str, str], str] = {
    ("group_norm", d): "torch's CPU backward keeps half-precision statistics; tinyflow's float32 ones, rounded "
    "once, are the closer to the exact gradient" for d in ("float16", "bfloat16")
}

_INTEGERS = ("bool", "uint8", "int8", "int32", "int64")
# Mismatches that cannot be fixed in this change, each a strict xfail (it fails the day it is fixed
# and must leave this list): (case, dtype) -> why. All are in files another change owns.
KNOWN: dict[tuple[str, str], str] = {}


def _run(fn: Case, lib: Lib) -> tuple[Any, BaseException | None]:
    try:
        return fn(lib), None
    except Exception as e:  # noqa: BLE001 - any refusal is compared, by type
        return None, e


def _flat(result: Any) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _as_f64(t: Any) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        return t.detach().to(torch.float64).numpy()
    return np.asarray(t.numpy()).astype(np.float64)


def _dtype_name(t: Any) -> str:
    return str(t.dtype).replace("torch.", "") if isinstance(t, torch.Tensor) else np.dtype(t.dtype).name


def compare(name: str, dtype: str) -> str | None:
    """None if tinyflow and torch agree on ``name`` with ``dtype`` inputs, else what differs."""
    fn = CASES[name]
    ours, our_error = _run(fn, Lib("tinyflow", dtype))
    if (name, dtype) in TORCH_CPU_GAPS:
        theirs, their_error = _run(fn, Lib("torch", "float32"))
        theirs = None if theirs is None else [t.to(getattr(torch, dtype)) for t in _flat(theirs)]
    else:
        theirs, their_error = _run(fn, Lib("torch", dtype))
    if their_error is not None:
        if our_error is None:
            return f"torch raises {type(their_error).__name__}, tinyflow returns {_describe(ours)}"
        if not isinstance(our_error, type(their_error)):
            return (f"torch raises {type(their_error).__name__}, tinyflow raises {type(our_error).__name__}: "
                    f"{our_error}")
        return None
    if our_error is not None:
        return f"torch returns {_describe(theirs)}, tinyflow raises {type(our_error).__name__}: {our_error}"
    ours, theirs = _flat(ours), _flat(theirs)
    if len(ours) != len(theirs):
        return f"{len(ours)} results, torch {len(theirs)}"
    for a, b in zip(ours, theirs):
        if tuple(a.shape) != tuple(b.shape) or _dtype_name(a) != _dtype_name(b):
            return f"tinyflow {_describe(a)}, torch {_describe(b)}"
        if name in DTYPE_ONLY:
            continue
        va, vb = _as_f64(a), _as_f64(b)
        rtol, atol = TOLERANCE.get(COARSER.get((name, dtype), ("", _dtype_name(b)))[1], (0.0, 0.0))
        if not np.allclose(va, vb, rtol=rtol, atol=atol, equal_nan=True):
            worst = np.nanmax(np.abs(va - vb)) if va.size else 0.0
            return f"values differ ({_dtype_name(b)}), max |diff| {worst:.3g}: tinyflow {va.ravel()[:6]}, torch {vb.ravel()[:6]}"
    return None


def _gradients(fn: Case, lib: Lib) -> list[Any] | None:
    """The gradients of the swept-dtype inputs of ``fn`` for a fixed weighted sum of its floating
    outputs, or None where it raises or has nothing to differentiate."""
    try:
        outs = [o for o in _flat(fn(lib)) if o.requires_grad]
        if not outs or not lib.leaves:
            return None
        total = sum((o * lib.make(_values(tuple(o.shape), 1, 3), _dtype_name(o))).float().sum() for o in outs)
        total.backward()
    except Exception:  # noqa: BLE001 - refusals are the forward comparison's business
        return None
    return [leaf.grad for leaf in lib.leaves]


def compare_gradients(name: str, dtype: str) -> str | None:
    """None if the gradients tinyflow and torch give ``name``'s floating inputs agree in dtype
    and value (as the results do), else what differs."""
    tolerance = COARSER.get((name, dtype), ("", dtype))[1]
    ours = _gradients(CASES[name], Lib("tinyflow", dtype, grad=True))
    if (name, dtype) in HALF_GRADIENT_REFERENCE:
        theirs = _gradients(CASES[name], Lib("torch", "float32", grad=True))
        theirs = theirs and [None if g is None else g.to(getattr(torch, dtype)) for g in theirs]
    else:
        theirs = _gradients(CASES[name], Lib("torch", dtype, grad=True))
    if ours is None or theirs is None:
        return None if ours is None and theirs is None else f"gradients: tinyflow {ours}, torch {theirs}"
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if (a is None) != (b is None):
            return f"input {i}: tinyflow's gradient is {a}, torch's {b}"
        if a is None:
            continue
        if _dtype_name(a) != _dtype_name(b):
            return f"input {i}: gradient dtype tinyflow {_dtype_name(a)}, torch {_dtype_name(b)}"
        va, vb = _as_f64(a), _as_f64(b)
        rtol, atol = TOLERANCE[tolerance]
        finite = np.abs(vb[np.isfinite(vb)])
        scale = max(1.0, float(finite.max(initial=0.0)))  # normalisations' gradients cancel to ~0
        if not np.allclose(va, vb, rtol=rtol, atol=atol * scale, equal_nan=True):
            return f"input {i}: gradient values differ, max |diff| {np.nanmax(np.abs(va - vb)):.3g}"
    return None


def _describe(result: Any) -> str:
    return ", ".join(f"{_dtype_name(t)}{list(t.shape)}" for t in _flat(result))


def _params(gradients: bool = False) -> list[Any]:
    params = []
    for name in CASES:
        for dtype in DTYPES:
            if gradients and (dtype not in TOLERANCE or name in DTYPE_ONLY or (name, dtype) in TORCH_CPU_GAPS):
                continue
            marks = []
            if (name, dtype) in KNOWN:
                marks.append(pytest.mark.xfail(strict=True, reason=KNOWN[(name, dtype)]))
            params.append(pytest.param(name, dtype, id=f"{name}-{dtype}", marks=marks))
    return params


@pytest.mark.filterwarnings("ignore:`nn.functional.upsample_bilinear` is deprecated")
@pytest.mark.parametrize("name, dtype", _params())
def test_dtype_matches_torch(name: str, dtype: str) -> None:
    with torch.no_grad():
        problem = compare(name, dtype)
    assert problem is None, f"{name} with {dtype} inputs: {problem}"


@pytest.mark.filterwarnings("ignore:`nn.functional.upsample_bilinear` is deprecated")
@pytest.mark.parametrize("name, dtype", _params(gradients=True))
def test_gradients_match_torch(name: str, dtype: str) -> None:
    """Floating inputs: the gradients of a fixed weighted sum of the results, in the inputs' dtype
    (a bfloat16 input gets a bfloat16 gradient) and torch's values."""
    problem = compare_gradients(name, dtype)
    assert problem is None, f"{name} with {dtype} inputs: {problem}"


def test_the_comparison_catches_each_kind_of_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep can fail: a wrong dtype, wrong values, a result where torch refuses, a refusal
    where torch computes, and a refusal of a type torch's ``except`` would not catch."""
    probes: dict[str, Case] = {
        "dtype": lambda L: L.x(3).float() if L.name == "tinyflow" else L.x(3),
        "values": lambda L: L.x(3) + (1 if L.name == "tinyflow" else 0),
        "returns": lambda L: L.x(3) if L.name == "tinyflow" else L.x(3).softmax(0),
        "raises": lambda L: L.x(3).softmax(0) if L.name == "tinyflow" else L.x(3),
        "wrong_type": lambda L: L.x(3).softmax(0) if L.name == "torch" else (_ for _ in ()).throw(TypeError("x")),
    }
    for name, fn in probes.items():
        monkeypatch.setitem(CASES, "_probe_" + name, fn)
    assert "tinyflow float32[3], torch int64[3]" in compare("_probe_dtype", "int64")
    assert "values differ" in compare("_probe_values", "int32")
    assert "tinyflow returns int64[3]" in compare("_probe_returns", "int64")
    assert "tinyflow raises NotImplementedError" in compare("_probe_raises", "int64")
    assert "tinyflow raises TypeError" in compare("_probe_wrong_type", "int64")
    assert compare("_probe_values", "float32") is not None and compare("softmax", "float32") is None
    monkeypatch.setitem(CASES, "_probe_grad", lambda L: L.x(3) * (3 if L.name == "tinyflow" else 2))
    assert "gradient values differ" in compare_gradients("_probe_grad", "bfloat16")
    monkeypatch.setitem(CASES, "_probe_no_grad", lambda L: L.x(3) * L.x(3, low=1).detach() if L.name == "tinyflow"
                        else L.x(3) * L.x(3, low=1))
    assert "gradient is None" in compare_gradients("_probe_no_grad", "float64")
    assert len(DTYPES) == 9 and len(CASES) > 150
