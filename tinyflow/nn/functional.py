"""nn.functional (imported as F): the stateless form of every layer, PyTorch's names and defaults.

Every F function is defined here: it checks its arguments (with messages that name the
function), applies autocast, and calls the differentiable op of tinyflow/ops/ that computes it
(``F.conv2d`` -> ``ops.Conv2dFunction``), or composes differentiable Tensor ops where no
dedicated op is needed (the rarer losses, glu, pixel_shuffle).
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tinyflow import amp, ops, promotion
from tinyflow.errors import ShapeError
from tinyflow.kernels.shapes import IntPair, _pair, conv_output_size, pool_output_shape
from tinyflow.ops.interpolate import output_size as resampled_size
from tinyflow.random import Generator, rng
from tinyflow.tensor import Tensor, as_tensor, tensor, where

__all__ = [
    "linear", "bilinear", "conv2d", "conv1d", "conv_transpose2d", "conv_transpose1d", "unfold", "fold",
    "relu", "relu_", "leaky_relu", "gelu", "sigmoid", "tanh", "elu", "selu", "celu", "silu", "mish",
    "softplus", "softsign", "hardtanh", "relu6", "hardsigmoid", "hardswish", "logsigmoid", "prelu",
    "rrelu", "threshold", "hardshrink", "softshrink", "tanhshrink", "glu", "softmax", "softmin",
    "log_softmax", "logsumexp", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
    "feature_alpha_dropout", "max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "max_pool1d",
    "avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "adaptive_avg_pool1d",
    "adaptive_max_pool1d", "max_unpool2d", "pad", "interpolate", "upsample", "upsample_nearest",
    "upsample_bilinear", "pixel_shuffle", "pixel_unshuffle", "local_response_norm", "batch_norm",
    "layer_norm", "group_norm", "instance_norm", "normalize", "cosine_similarity", "pairwise_distance",
    "embedding", "one_hot", "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss",
    "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "soft_margin_loss",
    "margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss", "triplet_margin_loss",
    "poisson_nll_loss", "gaussian_nll_loss", "multilabel_soft_margin_loss", "max_unpool1d",
    "multi_margin_loss", "multilabel_margin_loss", "scaled_dot_product_attention", "multi_head_attention_forward",
    "elu_", "celu_", "selu_", "leaky_relu_", "hardtanh_", "threshold_", "rrelu_", "gumbel_softmax", "rms_norm",
    "channel_shuffle", "embedding_bag", "conv3d", "conv_transpose3d", "max_pool3d", "avg_pool3d",
    "adaptive_avg_pool3d", "adaptive_max_pool3d", "affine_grid", "grid_sample", "pdist",
    "triplet_margin_with_distance_loss", "lp_pool1d", "lp_pool2d", "lp_pool3d",
]

REDUCTIONS = ("mean", "sum", "none")


class FunctionalError(ShapeError):
    """An argument F cannot work with (shapes, sizes, modes). PyTorch raises RuntimeError for
    these, so ``except RuntimeError`` catches it, and ``except ValueError`` too."""


# ------------------------------------------------------------------------ linear and convolution
def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias (in the autocast dtype inside ``tf.amp.autocast``)."""
    return ops.LinearFunction.apply(*amp.autocast_inputs(x, weight, bias))


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y[..., o] = input1 @ weight[o] @ input2 + bias[o]; weight (out, in1, in2)."""
    out, in1, in2 = weight.shape
    if input1.shape[-1] != in1 or input2.shape[-1] != in2 or tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise FunctionalError(f"bilinear: inputs {tuple(input1.shape)} and {tuple(input2.shape)} do not fit weight "
                              f"{tuple(weight.shape)}; they need the same leading dims and {in1} and {in2} features")
    lead = tuple(input1.shape[:-1])
    x1, x2 = input1.reshape(-1, in1), input2.reshape(-1, in2)
    t = (x1 @ weight.permute(1, 0, 2).reshape(in1, out * in2)).reshape(-1, out, in2)  # (B, out, in2)
    y = (t * x2.reshape(-1, 1, in2)).sum(dim=2)
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, out)


def _same_padding(kernel: tuple[int, int], dilation: tuple[int, int],
                  stride: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """padding='same': (top, left) and (bottom, right); the extra row/column of an even total
    goes after, as PyTorch pads it."""
    if stride != (1, 1):
        raise FunctionalError("conv2d: padding='same' is not supported for strided convolutions (as in PyTorch)")
    total = [d * (k - 1) for k, d in zip(kernel, dilation)]
    before = (total[0] // 2, total[1] // 2)
    return before, (total[0] - before[0], total[1] - before[1])


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntPair = 1,
           padding: IntPair | str = 0, dilation: IntPair = 1, groups: int = 1) -> Tensor:
    """2-D cross-correlation over x (N, C, H, W) or (C, H, W), as ``torch.nn.functional.conv2d``.

    Inside ``tf.amp.autocast`` it computes in the autocast dtype (float32 weights get float32
    gradients through the casts).
    """
    x, weight, bias = amp.autocast_inputs(x, weight, bias)
    if weight.ndim != 4:
        raise FunctionalError(f"conv2d: weight must be 4-D (O, C/groups, kh, kw), got shape {tuple(weight.shape)}")
    unbatched = x.ndim == 3
    if unbatched:
        x = x.reshape(1, *x.shape)
    if x.ndim != 4:
        raise FunctionalError(f"conv2d: input must be (N, C, H, W) or (C, H, W), got shape {tuple(x.shape)}")
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    o, cg, kh, kw = weight.shape
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise FunctionalError(f"conv2d: padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
        if padding == "valid":
            padding = (0, 0)
        else:
            before, after = _same_padding((kh, kw), dilation, stride)
            padding = before
            if after != before:  # uneven: the extra row / column explicitly, then the even part
                x = pad(x, (0, after[1] - before[1], 0, after[0] - before[0]))
    padding = _pair(padding, "padding")
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise FunctionalError(f"conv2d: need stride >= 1, dilation >= 1, padding >= 0; got stride={stride}, "
                              f"padding={padding}, dilation={dilation}")
    if not isinstance(groups, int) or groups < 1 or o % groups:
        raise FunctionalError(f"conv2d: groups={groups} must be a positive int dividing the {o} output "
                              f"channels of weight {tuple(weight.shape)}")
    n, c, h, w = x.shape
    if c != cg * groups:
        raise FunctionalError(
            f"conv2d: input {tuple(x.shape)} has {c} channels but weight {tuple(weight.shape)} with "
            f"groups={groups} expects {cg * groups}; check in_channels of the layer"
        )
    if bias is not None and tuple(bias.shape) != (o,):
        raise FunctionalError(f"conv2d: bias shape {tuple(bias.shape)} must be ({o},) for weight "
                              f"{tuple(weight.shape)}")
    oh = conv_output_size(h, kh, stride[0], padding[0], dilation[0])
    ow = conv_output_size(w, kw, stride[1], padding[1], dilation[1])
    if oh < 1 or ow < 1:
        raise FunctionalError(
            f"conv2d: input {tuple(x.shape)} is too small for kernel {(kh, kw)} with padding "
            f"{padding} and dilation {dilation} (output would be {oh}x{ow}); use a larger input"
        )
    if x.dtype != weight.dtype:
        raise FunctionalError(f"conv2d: input dtype {x.dtype} and weight dtype {weight.dtype} differ; "
                              "convert one with .to(dtype)")
    y = ops.Conv2dFunction.apply(x, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return y.reshape(*y.shape[1:]) if unbatched else y


def _single(v: Any, name: str, op: str) -> int:
    """An int or a 1-sequence of ints (PyTorch's _single)."""
    if isinstance(v, int):
        return v
    try:
        (a,) = v
        return int(a)
    except (TypeError, ValueError):
        raise FunctionalError(f"{op}: {name} must be an int or a 1-tuple of ints, got {v!r}") from None


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-D cross-correlation over (N, C, L) or (C, L): conv2d on a height-1 image."""
    if weight.ndim != 3:
        raise FunctionalError(f"conv1d: weight must be 3-D (O, C/groups, k), got shape {tuple(weight.shape)}")
    if input.ndim not in (2, 3):
        raise FunctionalError(f"conv1d: input must be (N, C, L) or (C, L), got shape {tuple(input.shape)}")
    x = input.reshape(*input.shape[:-1], 1, input.shape[-1])  # (N, C, 1, L)
    w = weight.reshape(weight.shape[0], weight.shape[1], 1, weight.shape[2])
    pad = padding if isinstance(padding, str) else (0, _single(padding, "padding", "conv1d"))
    y = conv2d(x, w, bias, (1, _single(stride, "stride", "conv1d")), pad,
               (1, _single(dilation, "dilation", "conv1d")), groups)
    return y.reshape(*y.shape[:-2], y.shape[-1])


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntPair = 1,  # noqa: A002
                     padding: IntPair = 0, output_padding: IntPair = 0, groups: int = 1,
                     dilation: IntPair = 1) -> Tensor:
    """The transposed 2-D convolution (``torch.nn.functional.conv_transpose2d``): weight is
    (C_in, C_out/groups, kh, kw); the output is (N, C_out, H_out, W_out) with
    H_out = (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1."""
    x, weight, bias = amp.autocast_inputs(input, weight, bias)
    op = "conv_transpose2d"
    if weight.ndim != 4:
        raise FunctionalError(f"{op}: weight must be 4-D (C_in, C_out/groups, kh, kw), got shape {tuple(weight.shape)}")
    unbatched = x.ndim == 3
    if unbatched:
        x = x.reshape(1, *x.shape)
    if x.ndim != 4:
        raise FunctionalError(f"{op}: input must be (N, C, H, W) or (C, H, W), got shape {tuple(input.shape)}")
    stride, padding = _pair(stride, "stride", op), _pair(padding, "padding", op)
    output_padding, dilation = _pair(output_padding, "output_padding", op), _pair(dilation, "dilation", op)
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0 or min(output_padding) < 0:
        raise FunctionalError(f"{op}: need stride >= 1, dilation >= 1, padding >= 0 and output_padding >= 0; got "
                              f"stride={stride}, padding={padding}, output_padding={output_padding}, dilation={dilation}")
    if any(o >= s and o >= d for o, s, d in zip(output_padding, stride, dilation)):
        raise FunctionalError(f"{op}: output_padding {output_padding} must be smaller than either stride "
                              f"{stride} or dilation {dilation}")
    cin, cog, kh, kw = weight.shape
    if not isinstance(groups, int) or groups < 1 or cin % groups:
        raise FunctionalError(f"{op}: groups={groups} must be a positive int dividing the {cin} input "
                              f"channels of weight {tuple(weight.shape)}")
    if x.shape[1] != cin:
        raise FunctionalError(f"{op}: input {tuple(x.shape)} has {x.shape[1]} channels but weight "
                              f"{tuple(weight.shape)} expects {cin}; check in_channels of the layer")
    if bias is not None and tuple(bias.shape) != (cog * groups,):
        raise FunctionalError(f"{op}: bias shape {tuple(bias.shape)} must be ({cog * groups},) for weight "
                              f"{tuple(weight.shape)} with groups={groups}")
    h, w = x.shape[-2:]
    hout = (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1
    wout = (w - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1
    if hout < 1 or wout < 1:
        raise FunctionalError(f"{op}: input {tuple(x.shape)} with padding {padding} gives an empty output "
                              f"({hout}x{wout}); use less padding")
    if x.dtype != weight.dtype:
        raise FunctionalError(f"{op}: input dtype {x.dtype} and weight dtype {weight.dtype} differ; "
                              "convert one with .to(dtype)")
    y = ops.ConvTranspose2dFunction.apply(x, weight, bias, stride, padding, output_padding, dilation, groups)
    return y.reshape(*y.shape[1:]) if unbatched else y


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """The transposed 1-D convolution: conv_transpose2d on a height-1 image."""
    op = "conv_transpose1d"
    if weight.ndim != 3:
        raise FunctionalError(f"{op}: weight must be 3-D (C_in, C_out/groups, k), got shape {tuple(weight.shape)}")
    if input.ndim not in (2, 3):
        raise FunctionalError(f"{op}: input must be (N, C, L) or (C, L), got shape {tuple(input.shape)}")
    x = input.reshape(*input.shape[:-1], 1, input.shape[-1])
    w = weight.reshape(weight.shape[0], weight.shape[1], 1, weight.shape[2])
    y = conv_transpose2d(x, w, bias, (1, _single(stride, "stride", op)), (0, _single(padding, "padding", op)),
                         (0, _single(output_padding, "output_padding", op)), groups,
                         (1, _single(dilation, "dilation", op)))
    return y.reshape(*y.shape[:-2], y.shape[-1])


def _triple(v: Any, name: str, op: str) -> tuple[int, int, int]:
    """An int or a 3-sequence of ints (PyTorch's _triple)."""
    if isinstance(v, int):
        return (v, v, v)
    try:
        a, b, c = v
        return (int(a), int(b), int(c))
    except (TypeError, ValueError):
        raise FunctionalError(f"{op}: {name} must be an int or a 3-tuple of ints, got {v!r}") from None


def _depth_first(t: Tensor) -> Tensor:
    """(N, C, D, H, W) -> (N*D, C, H, W): every depth slice an image of the batch."""
    n, c, d, h, w = t.shape
    return t.permute(0, 2, 1, 3, 4).reshape(n * d, c, h, w)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,  # noqa: A002
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """3-D cross-correlation over (N, C, D, H, W) or (C, D, H, W): one conv2d of every output
    depth's input slices per kernel depth offset, summed (weight (O, C/groups, kd, kh, kw))."""
    op = "conv3d"
    if weight.ndim != 5:
        raise FunctionalError(f"{op}: weight must be 5-D (O, C/groups, kd, kh, kw), got shape {tuple(weight.shape)}")
    unbatched = input.ndim == 4
    x = input.unsqueeze(0) if unbatched else input
    if x.ndim != 5:
        raise FunctionalError(f"{op}: input must be (N, C, D, H, W) or (C, D, H, W), got shape {tuple(input.shape)}")
    s, d = _triple(stride, "stride", op), _triple(dilation, "dilation", op)
    k = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise FunctionalError(f"{op}: padding must be an int, a triple, 'valid' or 'same', got {padding!r}")
        if padding == "same" and s != (1, 1, 1):
            raise FunctionalError(f"{op}: padding='same' is not supported for strided convolutions")
        total = [0, 0, 0] if padding == "valid" else [di * (ki - 1) for ki, di in zip(k, d)]
        widths = [(t // 2, t - t // 2) for t in total]
    else:
        widths = [(p, p) for p in _triple(padding, "padding", op)]
    if x.shape[1] != weight.shape[1] * groups:
        raise FunctionalError(f"{op}: input {tuple(x.shape)} has {x.shape[1]} channels but weight "
                              f"{tuple(weight.shape)} with groups={groups} expects {weight.shape[1] * groups}")
    if any(lo or hi for lo, hi in widths):
        x = pad(x, tuple(w for pair in reversed(widths) for w in pair))
    depth = x.shape[2]
    od = (depth - d[0] * (k[0] - 1) - 1) // s[0] + 1
    if od < 1:
        raise FunctionalError(f"{op}: input {tuple(input.shape)} is too small for kernel {k} (output depth {od})")
    out = None
    for kd in range(k[0]):
        start = kd * d[0]
        part = x[:, :, start:start + (od - 1) * s[0] + 1:s[0]]  # (N, C, OD, H, W)
        y = conv2d(_depth_first(part), weight[:, :, kd], None, s[1:], 0, d[1:], groups)  # (N*OD, O, OH, OW)
        out = y if out is None else out + y
    n = x.shape[0]
    out = out.reshape(n, od, *out.shape[1:]).permute(0, 2, 1, 3, 4)  # (N, O, OD, OH, OW)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """The transposed 3-D convolution: per kernel depth offset, conv_transpose2d of every input
    depth slice, spread out by the depth stride and summed at its offset; then the depth padding
    is cropped (weight (C_in, C_out/groups, kd, kh, kw))."""
    op = "conv_transpose3d"
    if weight.ndim != 5:
        raise FunctionalError(f"{op}: weight must be 5-D (C_in, C_out/groups, kd, kh, kw), got {tuple(weight.shape)}")
    unbatched = input.ndim == 4
    x = input.unsqueeze(0) if unbatched else input
    if x.ndim != 5:
        raise FunctionalError(f"{op}: input must be (N, C, D, H, W) or (C, D, H, W), got shape {tuple(input.shape)}")
    s, p = _triple(stride, "stride", op), _triple(padding, "padding", op)
    op_, d = _triple(output_padding, "output_padding", op), _triple(dilation, "dilation", op)
    if any(o >= si and o >= di for o, si, di in zip(op_, s, d)):
        raise FunctionalError(f"{op}: output_padding {op_} must be smaller than either stride {s} or dilation {d}")
    n, _, depth = x.shape[:3]
    kd = weight.shape[2]
    full = (depth - 1) * s[0] + d[0] * (kd - 1) + 1
    spread_len = (depth - 1) * s[0] + 1
    total = None
    for i in range(kd):
        y = conv_transpose2d(_depth_first(x), weight[:, :, i], None, s[1:], p[1:], op_[1:], groups, d[1:])
        y = y.reshape(n, depth, *y.shape[1:]).permute(0, 2, 1, 3, 4)  # (N, Cout, D, OH, OW)
        if s[0] > 1:  # input depth i lands at depth i * stride: zeros in between
            from tinyflow.tensor import stack

            y = stack([y] + [y * 0.0] * (s[0] - 1), dim=3).reshape(*y.shape[:2], depth * s[0], *y.shape[3:])
            y = y[:, :, :spread_len]
        front = i * d[0]
        y = pad(y, (0, 0, 0, 0, front, full - spread_len - front))
        total = y if total is None else total + y
    out = pad(total, (0, 0, 0, 0, -p[0], op_[0] - p[0]))  # crop the padding, extend by output_padding
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


def unfold(input: Tensor, kernel_size: IntPair, dilation: IntPair = 1, padding: IntPair = 0,  # noqa: A002
           stride: IntPair = 1) -> Tensor:
    """im2col as PyTorch lays it out: (N, C, H, W) -> (N, C*kh*kw, L), L = OH*OW sliding blocks."""
    op = "unfold"
    if input.ndim != 4:
        raise FunctionalError(f"{op}: input must be 4-D (N, C, H, W), got shape {tuple(input.shape)}")
    k, d = _pair(kernel_size, "kernel_size", op), _pair(dilation, "dilation", op)
    p, s = _pair(padding, "padding", op), _pair(stride, "stride", op)
    n, c, h, w = input.shape
    eye = tensor(_identity_kernels(k), dtype=input.dtype, device=input.device)  # (kh*kw, 1, kh, kw)
    y = conv2d(input.reshape(n * c, 1, h, w), eye, None, s, p, d)  # (N*C, kh*kw, OH, OW)
    return y.reshape(n, c * k[0] * k[1], -1)


def fold(input: Tensor, output_size: IntPair, kernel_size: IntPair, dilation: IntPair = 1,  # noqa: A002
         padding: IntPair = 0, stride: IntPair = 1) -> Tensor:
    """col2im, the adjoint of unfold: (N, C*kh*kw, L) -> (N, C, H, W), overlapping blocks summed."""
    op = "fold"
    if input.ndim != 3:
        raise FunctionalError(f"{op}: input must be 3-D (N, C*kh*kw, L), got shape {tuple(input.shape)}")
    k, d = _pair(kernel_size, "kernel_size", op), _pair(dilation, "dilation", op)
    p, s = _pair(padding, "padding", op), _pair(stride, "stride", op)
    oh, ow = _pair(output_size, "output_size", op)
    n, ckk, length = input.shape
    kk = k[0] * k[1]
    bh = conv_output_size(oh, k[0], s[0], p[0], d[0])
    bw = conv_output_size(ow, k[1], s[1], p[1], d[1])
    if ckk % kk or bh * bw != length:
        raise FunctionalError(f"{op}: input {tuple(input.shape)} does not hold C*{kk} rows of {bh}x{bw} = "
                              f"{bh * bw} blocks for output_size {(oh, ow)}, kernel_size {k}")
    c = ckk // kk
    eye = tensor(_identity_kernels(k), dtype=input.dtype, device=input.device)  # (kh*kw, 1, kh, kw)
    x = input.reshape(n * c, kk, bh, bw)
    hout = (bh - 1) * s[0] - 2 * p[0] + d[0] * (k[0] - 1) + 1
    wout = (bw - 1) * s[1] - 2 * p[1] + d[1] * (k[1] - 1) + 1
    # output_padding (< stride) restores the rows and columns the last block only partly covers
    y = conv_transpose2d(x, eye, None, s, p, (oh - hout, ow - wout), 1, d)  # (N*C, 1, OH, OW)
    return y.reshape(n, c, oh, ow)


def _identity_kernels(k: tuple[int, int]) -> Any:
    """(kh*kw, 1, kh, kw) one-hot kernels: a convolution with them copies each window offset."""
    kk = k[0] * k[1]
    return np.eye(kk).reshape(kk, 1, k[0], k[1])


# ----------------------------------------------------------------------------------- activations
# ``inplace=True`` is accepted everywhere PyTorch has it; tinyflow returns a new tensor and leaves
# the input alone (see docs/pytorch.md), which is what ``x = F.relu(x, inplace=True)`` needs.
def relu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """max(x, 0); keeps the input's dtype (bool input is an error, as in PyTorch)."""
    _tensor_input("relu", input)
    return ops.ReLUFunction.apply(input)


def _in_place(input: Tensor, result: Tensor) -> Tensor:  # noqa: A002
    """``input`` overwritten with ``result`` (recorded by autograd, as PyTorch's in-place ops)."""
    return input.copy_(result)


def relu_(input: Tensor) -> Tensor:  # noqa: A002
    """relu in place: ``input`` is overwritten and returned."""
    return _in_place(input, relu(input))


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    return _in_place(input, elu(input, alpha))


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    return _in_place(input, celu(input, alpha))


def selu_(input: Tensor) -> Tensor:  # noqa: A002
    return _in_place(input, selu(input))


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:  # noqa: A002
    return _in_place(input, leaky_relu(input, negative_slope))


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:  # noqa: A002
    return _in_place(input, hardtanh(input, min_val, max_val))


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:  # noqa: A002
    return _in_place(input, globals()["threshold"](input, threshold, value))


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:  # noqa: A002
    return _in_place(input, rrelu(input, lower, upper, training))


def _tensor_input(op: str, input: Any) -> None:  # noqa: A002
    """PyTorch's TypeError for an activation given something other than a Tensor."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")


def _floating(op: str, input: Tensor) -> None:  # noqa: A002
    """PyTorch computes these activations for floating inputs only (NotImplementedError otherwise)."""
    _tensor_input(op, input)
    if not input.is_floating_point():
        raise NotImplementedError(f'"{op}" not implemented for {input.dtype} inputs; convert with .float()')


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:  # noqa: A002
    _floating("leaky_relu", input)
    return ops.LeakyReLUFunction.apply(input, float(negative_slope))


def gelu(input: Tensor, approximate: str = "none") -> Tensor:  # noqa: A002
    if approximate not in ("none", "tanh"):
        raise FunctionalError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    _floating("gelu", input)
    return ops.GELUFunction.apply(input, approximate)


def sigmoid(input: Tensor) -> Tensor:  # noqa: A002
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:  # noqa: A002
    return input.tanh()


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    _floating("elu", input)
    return ops.ELUFunction.apply(input, float(alpha), 1.0, 1.0)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """scale * elu(x, alpha) with the self-normalising constants."""
    _floating("selu", input)
    return ops.ELUFunction.apply(input, _SELU_ALPHA, _SELU_SCALE, 1.0)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise RuntimeError("celu: alpha cannot be 0 (it divides the input)")
    _floating("celu", input)
    return ops.ELUFunction.apply(input, float(alpha), 1.0, 1.0 / alpha)


def silu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    _floating("silu", input)
    return ops.SiLUFunction.apply(input)


def mish(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    _floating("mish", input)
    return ops.MishFunction.apply(input)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: A002
    """log(1 + exp(beta * x)) / beta; linear where beta * x > threshold."""
    _floating("softplus", input)
    return ops.SoftplusFunction.apply(input, float(beta), float(threshold))


def softsign(input: Tensor) -> Tensor:  # noqa: A002
    """x / (1 + |x|); integer input gives the default float dtype, as PyTorch's composite."""
    if input.dtype == np.bool_:
        raise NotImplementedError('"softsign" not implemented for bool inputs (abs of bool); convert with .float()')
    return ops.SoftsignFunction.apply(promotion.float_operand(input))


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    if min_val > max_val:
        raise FunctionalError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    _tensor_input("hardtanh", input)
    return ops.HardtanhFunction.apply(input, float(min_val), float(max_val))


def relu6(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """min(max(x, 0), 6): hardtanh(x, 0, 6)."""
    _tensor_input("relu6", input)
    return ops.HardtanhFunction.apply(input, 0.0, 6.0)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    _floating("hardsigmoid", input)
    return ops.HardsigmoidFunction.apply(input)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    _floating("hardswish", input)
    return ops.HardswishFunction.apply(input)


def logsigmoid(input: Tensor) -> Tensor:  # noqa: A002
    _floating("logsigmoid", input)
    return ops.LogSigmoidFunction.apply(input)


def prelu(input: Tensor, weight: Tensor) -> Tensor:  # noqa: A002
    """x for x > 0, weight * x otherwise; weight has 1 element or one per channel (dim 1)."""
    n = weight.numel()
    channels = input.shape[1] if input.ndim >= 2 else 1
    if n != 1 and n != channels:
        raise FunctionalError(f"prelu: weight has {n} elements but input {tuple(input.shape)} has {channels} "
                         "channels (dim 1); use 1 or num_channels parameters")
    return ops.PReLUFunction.apply(input, weight)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,  # noqa: A002
          inplace: bool = False) -> Tensor:
    """leaky_relu with slope (lower + upper) / 2; in training a slope drawn per element from U(lower, upper)."""
    if not training:
        return leaky_relu(input, (lower + upper) / 2)
    slopes = _as_constant(rng(None).uniform(lower, upper, size=input.shape), input)
    return where(input >= 0, input, input * slopes)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:  # noqa: A002
    """x where x > threshold, else value, in the input's dtype (NaN stays NaN, as PyTorch)."""
    _tensor_input("threshold", input)
    if input.dtype == np.bool_:
        raise NotImplementedError('"threshold" not implemented for bool inputs; convert with .float() or .long()')
    return where(input <= threshold, tensor(value, dtype=input.dtype, device=input.device), input)


def _nan_or_zero(input: Tensor) -> Tensor:  # noqa: A002
    """0 where ``input`` is a number, NaN (without a gradient) where it is NaN: the shrink
    functions' middle branch, which lets NaN through as PyTorch does."""
    return where(input.isnan(), input.detach(), tensor(0.0, dtype=input.dtype, device=input.device))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:  # noqa: A002
    """x where |x| > lambd, else 0."""
    _floating("hardshrink", input)
    return where((input > lambd) | (input < -lambd), input, _nan_or_zero(input))


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:  # noqa: A002
    """x - lambd where x > lambd, x + lambd where x < -lambd, else 0."""
    if lambd < 0:
        raise FunctionalError(f"softshrink: lambda must be >= 0, got {lambd}")
    _floating("softshrink", input)
    return where(input > lambd, input - lambd, where(input < -lambd, input + lambd, _nan_or_zero(input)))


def tanhshrink(input: Tensor) -> Tensor:  # noqa: A002
    """x - tanh(x)."""
    if input.dtype == np.bool_:
        raise RuntimeError("tanhshrink: subtraction of bool tensors is not supported; convert with .float()")
    return input - input.tanh()


def glu(input: Tensor, dim: int = -1) -> Tensor:  # noqa: A002
    """a * sigmoid(b) for the two halves a, b of ``input`` along ``dim``."""
    if input.ndim == 0 or input.shape[dim] % 2:
        raise FunctionalError(f"glu: halving dimension {dim} of input {tuple(input.shape)} needs an even size")
    _floating("glu", input)
    a, b = input.chunk(2, dim)
    return a * b.sigmoid()


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """softmax((logits + Gumbel noise) / tau); with ``hard`` the one-hot of its argmax in the
    forward pass and the soft sample's gradient (straight-through), as PyTorch."""
    u = rng(None).random(tuple(logits.shape))
    gumbels = _as_constant(-np.log(-np.log(np.maximum(u, 1e-300))), logits)  # Gumbel(0, 1) samples
    y_soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    xp = logits.device.xp
    index = xp.expand_dims(xp.argmax(y_soft.array, axis=dim), dim)
    hot = xp.zeros(y_soft.shape, dtype=y_soft.dtype)
    xp.put_along_axis(hot, index, 1.0, axis=dim)
    return Tensor._from_array(hot, device=logits.device) - y_soft.detach() + y_soft


def _softmax_dim(op: str, ndim: int) -> int:
    """PyTorch's legacy choice of dim when none is given (with its warning)."""
    warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call to include dim=X "
                  "as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def _softmax_input(input: Tensor, dtype: Any) -> Tensor:  # noqa: A002
    """The input in ``dtype`` if given; integer input in the default float dtype (PyTorch
    refuses it without ``dtype=``; tinyflow computes in float32 rather than raising)."""
    if dtype is None and not input.is_floating_point():
        from tinyflow.tensor import get_default_dtype

        dtype = get_default_dtype()
    return input if dtype is None else input.to(dtype)


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:  # noqa: A002
    """Softmax along ``dim`` (computed in ``dtype`` when given); in float32 inside
    ``tf.amp.autocast`` (as log_softmax and the losses)."""
    dim = _softmax_dim("softmax", input.ndim) if dim is None else dim
    return ops.SoftmaxFunction.apply(*amp.float32_inputs(_softmax_input(input, dtype)), dim)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:  # noqa: A002
    dim = _softmax_dim("softmin", input.ndim) if dim is None else dim
    return ops.SoftmaxFunction.apply(*amp.float32_inputs(_softmax_input(-input, dtype)), dim)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:  # noqa: A002
    dim = _softmax_dim("log_softmax", input.ndim) if dim is None else dim
    return ops.LogSoftmaxFunction.apply(*amp.float32_inputs(_softmax_input(input, dtype)), dim)


def logsumexp(x: Tensor, dim: int = -1, keepdim: bool = False) -> Tensor:
    return ops.LogSumExp.apply(x, dim, keepdim)


def _as_constant(value: Any, like: Tensor) -> Tensor:
    """A NumPy array as a constant tensor of ``like``'s dtype and device (no gradient)."""
    return tensor(value, dtype=like.dtype, device=like.device)


# --------------------------------------------------------------------------------------- dropout
def _check_p(op: str, p: float) -> None:
    if not 0 <= p <= 1:
        raise FunctionalError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")


def dropout(x: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,
            generator: Generator | None = None) -> Tensor:
    """Inverted dropout; the identity when not training or p == 0."""
    _check_p("dropout", p)
    if not training or p == 0:
        return x
    if p == 1:
        return x * 0.0
    # an int now, or inside a CUDA graph capture a device slot drawn before each replay
    seed = ops.dropout_seed(lambda: int(rng(generator).integers(0, 2**63 - 1)))
    return ops.DropoutFunction.apply(x, p, seed)


def _feature_dropout(op: str, x: Tensor, p: float, training: bool, batched_ndim: int,
                     generator: Generator | None) -> Tensor:
    """Zero whole channels: one keep/drop draw per (N, C) (or per C for an unbatched input)."""
    _check_p(op, p)
    if not training or p == 0:
        return x
    lead = 2 if x.ndim == batched_ndim else 1
    shape = tuple(x.shape[:lead]) + (1,) * (x.ndim - lead)
    from tinyflow.tensor import ones

    mask = dropout(ones(*shape, dtype=x.dtype, device=x.device), p, True, generator=generator)
    return x * mask


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:  # noqa: A002
    """Zero whole channels of (N, C, L) (or (C, L)) with probability p, scale the rest by 1/(1-p)."""
    if input.ndim not in (2, 3):
        raise FunctionalError(f"dropout1d: expected 2-D or 3-D input, got shape {tuple(input.shape)}")
    return _feature_dropout("dropout1d", input, p, training, 3, None)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:  # noqa: A002
    """Zero whole channels of (N, C, H, W) (or (C, H, W)) with probability p."""
    return _feature_dropout("dropout2d", input, p, training, 4, None)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:  # noqa: A002
    return _feature_dropout("dropout3d", input, p, training, 5, None)


_ALPHA_PRIME = 1.7580993408473766  # selu's scale * alpha: the value a dropped unit takes (negated)


def _alpha_dropout(op: str, x: Tensor, p: float, training: bool, feature: bool) -> Tensor:
    """SELU-preserving dropout: dropped units take selu's saturation value, then an affine map
    restores zero mean and unit variance (PyTorch's formula)."""
    _check_p(op, p)
    if not training or p == 0 or x.numel() == 0:
        return x
    if p == 1:
        return x * 0.0
    shape = tuple(x.shape[:2]) + (1,) * (x.ndim - 2) if feature else tuple(x.shape)
    keep = (rng(None).random(shape) >= p).astype(np.float64)
    a = 1.0 / np.sqrt((_ALPHA_PRIME**2 * p + 1) * (1 - p))
    b = (keep - 1) * (_ALPHA_PRIME * a) + _ALPHA_PRIME * a * p
    return x * _as_constant(keep * a, x) + _as_constant(b, x)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:  # noqa: A002
    return _alpha_dropout("alpha_dropout", input, p, training, False)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,  # noqa: A002
                          inplace: bool = False) -> Tensor:
    return _alpha_dropout("feature_alpha_dropout", input, p, training, True)


# --------------------------------------------------------------------------------------- pooling
def _check_input(op: str, x: Tensor) -> None:
    if x.ndim not in (3, 4):
        raise FunctionalError(f"{op}: input must be (N, C, H, W) or (C, H, W), got shape {tuple(x.shape)}")


def _batched(x: Tensor) -> tuple[Tensor, bool]:
    return (x.reshape(1, *x.shape), True) if x.ndim == 3 else (x, False)


def _pool_geometry(op: str, x: Tensor, kernel_size, stride, padding, dilation, ceil_mode):
    _check_input(op, x)
    k = _pair(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _pair(stride, "stride", op)
    p, d = _pair(padding, "padding", op), _pair(dilation, "dilation", op)
    if min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
        raise FunctionalError(f"{op}: need kernel_size, stride, dilation >= 1 and padding >= 0; got "
                         f"kernel_size={k}, stride={s}, padding={p}, dilation={d}")
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise FunctionalError(f"{op}: padding {p} must be at most half of kernel_size {k} (as in PyTorch)")
    oh, ow = pool_output_shape(x.shape[-2], x.shape[-1], k, s, p, d, ceil_mode)
    if oh < 1 or ow < 1:
        raise FunctionalError(f"{op}: input {tuple(x.shape)} is too small for kernel_size {k} with "
                         f"padding {p} and dilation {d} (output would be {oh}x{ow})")
    return k, s, p, d


def max_pool2d(x: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
               padding: IntPair = 0, dilation: IntPair = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Any:
    """Max pooling over (N, C, H, W); stride defaults to kernel_size, as in PyTorch.

    With ``return_indices`` also the position of each maximum as a flat index into its
    (H, W) plane (int64), as ``max_unpool2d`` takes it.
    """
    k, s, p, d = _pool_geometry("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode)
    x, unbatched = _batched(x)
    out = ops.MaxPool2dFunction.apply(x, k, s, p, d, bool(ceil_mode), bool(return_indices))
    if unbatched:
        out = tuple(o.reshape(*o.shape[1:]) for o in out) if return_indices else out.reshape(*out.shape[1:])
    return out


def max_pool2d_with_indices(x: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
                            padding: IntPair = 0, dilation: IntPair = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple[Tensor, Tensor]:
    return max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool2d(x: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
               padding: IntPair = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Average pooling over (N, C, H, W); padding counts in the divisor by default (PyTorch).

    ``divisor_override`` divides each window's sum by that number instead."""
    k, s, p, _ = _pool_geometry("avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None:
        if divisor_override == 0:
            raise FunctionalError("avg_pool2d: divisor_override must be non-zero")
        if ceil_mode:
            raise NotImplementedError("avg_pool2d: divisor_override with ceil_mode=True is not supported")
        return avg_pool2d(x, k, s, p, False, True) * (k[0] * k[1] / divisor_override)
    x, unbatched = _batched(x)
    y = ops.AvgPool2dFunction.apply(x, k, s, p, bool(ceil_mode), bool(count_include_pad))
    return y.reshape(*y.shape[1:]) if unbatched else y


def _as_2d(op: str, x: Tensor) -> Tensor:
    """(N, C, L) or (C, L) as a height-1 image for the 1-D pools."""
    if x.ndim not in (2, 3):
        raise FunctionalError(f"{op}: input must be (N, C, L) or (C, L), got shape {tuple(x.shape)}")
    return x.reshape(*x.shape[:-1], 1, x.shape[-1])


def _from_2d(y: Tensor) -> Tensor:
    return y.reshape(*y.shape[:-2], y.shape[-1])


def max_pool1d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over (N, C, L): max_pool2d on a height-1 image."""
    op = "max_pool1d"
    k = _single(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _single(stride, "stride", op)
    out = max_pool2d(_as_2d(op, x), (1, k), (1, s), (0, _single(padding, "padding", op)),
                     (1, _single(dilation, "dilation", op)), ceil_mode, return_indices)
    return tuple(_from_2d(o) for o in out) if return_indices else _from_2d(out)


def avg_pool1d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """Average pooling over (N, C, L): avg_pool2d on a height-1 image."""
    op = "avg_pool1d"
    k = _single(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _single(stride, "stride", op)
    return _from_2d(avg_pool2d(_as_2d(op, x), (1, k), (1, s), (0, _single(padding, "padding", op)), ceil_mode,
                               count_include_pad))


def _adaptive_size(op: str, x: Tensor, output_size: Any) -> tuple[int, int]:
    _check_input(op, x)
    h, w = x.shape[-2:]
    if output_size is None or isinstance(output_size, int):
        output_size = (output_size, output_size)
    oh, ow = (h if output_size[0] is None else int(output_size[0]),
              w if output_size[1] is None else int(output_size[1]))
    if oh < 1 or ow < 1 or h < 1 or w < 1:
        raise FunctionalError(f"{op}: input {tuple(x.shape)} and output_size {(oh, ow)} must both be non-empty")
    return oh, ow


def adaptive_avg_pool2d(x: Tensor, output_size: int | None | tuple[int | None, int | None]) -> Tensor:
    """Average pooling to a fixed (OH, OW), windows as PyTorch's; None keeps that input size."""
    oh, ow = _adaptive_size("adaptive_avg_pool2d", x, output_size)
    if (oh, ow) == tuple(x.shape[-2:]):
        return x  # every window is one pixel: the identity (AlexNet's 6x6 -> 6x6 at 224)
    return ops.AdaptiveAvgPool2dFunction.apply(x, (oh, ow))


def adaptive_max_pool2d(x: Tensor, output_size: int | None | tuple[int | None, int | None],
                        return_indices: bool = False) -> Any:
    """Max over PyTorch's adaptive windows to a fixed (OH, OW); indices as max_pool2d's."""
    oh, ow = _adaptive_size("adaptive_max_pool2d", x, output_size)
    out, indices = ops.AdaptiveMaxPool2dFunction.apply(x, (oh, ow))
    return (out, indices) if return_indices else out


def adaptive_avg_pool1d(x: Tensor, output_size: Any) -> Tensor:
    op = "adaptive_avg_pool1d"
    return _from_2d(adaptive_avg_pool2d(_as_2d(op, x), (1, _single(output_size, "output_size", op))))


def adaptive_max_pool1d(x: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    op = "adaptive_max_pool1d"
    out = adaptive_max_pool2d(_as_2d(op, x), (1, _single(output_size, "output_size", op)), return_indices)
    return tuple(_from_2d(o) for o in out) if return_indices else _from_2d(out)


def _as_5d(op: str, x: Tensor) -> tuple[Tensor, bool]:
    if x.ndim not in (4, 5):
        raise FunctionalError(f"{op}: input must be (N, C, D, H, W) or (C, D, H, W), got shape {tuple(x.shape)}")
    return (x.unsqueeze(0), True) if x.ndim == 4 else (x, False)


def _depth_pass(fn: Any, x: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``fn`` (a 2-d pool) along the depth of (N, C, D, H, W), one (1, D) image per position."""
    n, c, d, h, w = x.shape
    rows = x.permute(0, 1, 3, 4, 2).reshape(n, c * h * w, 1, d)
    out = fn(rows, *args, **kwargs)
    values = out[0] if isinstance(out, tuple) else out
    od = values.shape[-1]

    def back(t: Tensor) -> Tensor:
        return t.reshape(n, c, h, w, od).permute(0, 1, 4, 2, 3)  # (N, C, OD, H, W)

    return tuple(back(t) for t in out) if isinstance(out, tuple) else back(out)


def _plane_pass(fn: Any, x: Tensor, *args: Any, **kwargs: Any) -> Any:
    """``fn`` (a 2-d pool) over every depth slice of (N, C, D, H, W)."""
    n, c, d = x.shape[:3]
    out = fn(x.reshape(n, c * d, *x.shape[3:]), *args, **kwargs)

    def back(t: Tensor) -> Tensor:
        return t.reshape(n, c, d, *t.shape[2:])

    return tuple(back(t) for t in out) if isinstance(out, tuple) else back(out)


def _combine_indices(plane_idx: Tensor, depth_idx: Tensor, h: int, w: int) -> Tensor:
    """Flat (D*H*W) indices from the depth pass's argmax and the plane pass's argmaxes."""
    xp = plane_idx.device.xp
    d_idx = depth_idx.array  # (N, C, OD, OH, OW), an index into D
    hw = xp.take_along_axis(plane_idx.array, d_idx, axis=2)
    return Tensor._from_array(d_idx * (h * w) + hw, device=plane_idx.device)


def max_pool3d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over (N, C, D, H, W): the maximum of maxima, over (H, W) then over D."""
    op = "max_pool3d"
    x, unbatched = _as_5d(op, x)
    k = _triple(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _triple(stride, "stride", op)
    p, d = _triple(padding, "padding", op), _triple(dilation, "dilation", op)
    plane = _plane_pass(max_pool2d, x, k[1:], s[1:], p[1:], d[1:], ceil_mode, return_indices)
    values = plane[0] if return_indices else plane
    deep = _depth_pass(max_pool2d, values, (1, k[0]), (1, s[0]), (0, p[0]), (1, d[0]), ceil_mode, return_indices)
    if return_indices:
        out = (deep[0], _combine_indices(plane[1], deep[1], x.shape[3], x.shape[4]))
        return tuple(t.squeeze(0) for t in out) if unbatched else out
    return deep.squeeze(0) if unbatched else deep


def avg_pool3d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Average pooling over (N, C, D, H, W): over (H, W) then over D (the divisor is a product of
    per-axis counts, so the passes are exact)."""
    op = "avg_pool3d"
    x, unbatched = _as_5d(op, x)
    k = _triple(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _triple(stride, "stride", op)
    p = _triple(padding, "padding", op)
    if divisor_override is not None:
        if divisor_override == 0:
            raise FunctionalError(f"{op}: divisor must be not zero")
        if ceil_mode:
            raise NotImplementedError(f"{op}: divisor_override with ceil_mode=True is not supported")
        out = avg_pool3d(x, k, s, p, False, True) * (k[0] * k[1] * k[2] / divisor_override)
        return out.squeeze(0) if unbatched else out
    plane = _plane_pass(avg_pool2d, x, k[1:], s[1:], p[1:], ceil_mode, count_include_pad)
    out = _depth_pass(avg_pool2d, plane, (1, k[0]), (1, s[0]), (0, p[0]), ceil_mode, count_include_pad)
    return out.squeeze(0) if unbatched else out


def _adaptive_3d(op: str, x: Tensor, output_size: Any) -> tuple[Tensor, bool, tuple[int, int, int]]:
    x, unbatched = _as_5d(op, x)
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * 3
    if len(sizes) != 3:
        raise FunctionalError(f"{op}: output_size must be an int or 3 values, got {output_size}")
    out = tuple(x.shape[2 + i] if v is None else int(v) for i, v in enumerate(sizes))
    return x, unbatched, out  # type: ignore[return-value]


def adaptive_avg_pool3d(x: Tensor, output_size: Any) -> Tensor:
    """Average pooling to a fixed (OD, OH, OW) with PyTorch's adaptive windows, axis by axis."""
    x, unbatched, (od, oh, ow) = _adaptive_3d("adaptive_avg_pool3d", x, output_size)
    plane = _plane_pass(adaptive_avg_pool2d, x, (oh, ow))
    out = _depth_pass(adaptive_avg_pool2d, plane, (1, od))
    return out.squeeze(0) if unbatched else out


def adaptive_max_pool3d(x: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling to a fixed (OD, OH, OW) with PyTorch's adaptive windows, axis by axis."""
    x, unbatched, (od, oh, ow) = _adaptive_3d("adaptive_max_pool3d", x, output_size)
    plane = _plane_pass(adaptive_max_pool2d, x, (oh, ow), True)
    deep = _depth_pass(adaptive_max_pool2d, plane[0], (1, od), True)
    out = (deep[0], _combine_indices(plane[1], deep[1], x.shape[3], x.shape[4])) if return_indices else deep[0]
    if unbatched:
        return tuple(t.squeeze(0) for t in out) if return_indices else out.squeeze(0)
    return out


def _lp(out: Tensor, window: int, norm_type: float) -> Tensor:
    """PyTorch's lp_pool finish: (sign(mean) * relu(|mean|) * window) ** (1 / p)."""
    return (out.sign() * out.abs().relu() * float(window)) ** (1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Tensor:
    """(sum over each window of x**p) ** (1/p), as PyTorch computes it (through avg_pool)."""
    k = _single(kernel_size, "kernel_size", "lp_pool1d")
    return _lp(avg_pool1d(input**norm_type, k, stride, 0, ceil_mode), k, norm_type)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: IntPair, stride: IntPair | None = None,  # noqa: A002
              ceil_mode: bool = False) -> Tensor:
    kh, kw = _pair(kernel_size, "kernel_size", "lp_pool2d")
    return _lp(avg_pool2d(input**norm_type, (kh, kw), stride, 0, ceil_mode), kh * kw, norm_type)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Tensor:
    kd, kh, kw = _triple(kernel_size, "kernel_size", "lp_pool3d")
    return _lp(avg_pool3d(input**norm_type, (kd, kh, kw), stride, 0, ceil_mode), kd * kh * kw, norm_type)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
                 output_size: Any = None) -> Tensor:
    """max_unpool2d on a height-1 image: the partial inverse of max_pool1d."""
    op = "max_unpool1d"
    k = _single(kernel_size, "kernel_size", op)
    s = k if stride is None else _single(stride, "stride", op)
    size = None if output_size is None else (1, int(tuple(output_size)[-1]))
    out = max_unpool2d(_as_2d(op, input), _as_2d(op, indices), (1, k), (1, s),
                       (0, _single(padding, "padding", op)), size)
    return _from_2d(out)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size: IntPair, stride: IntPair | None = None,  # noqa: A002
                 padding: IntPair = 0, output_size: Any = None) -> Tensor:
    """The partial inverse of max_pool2d: each value put back at its index, zeros elsewhere."""
    op = "max_unpool2d"
    k = _pair(kernel_size, "kernel_size", op)
    s = k if stride is None else _pair(stride, "stride", op)
    p = _pair(padding, "padding", op)
    x, unbatched = _batched(input)
    idx = indices.reshape(*x.shape) if unbatched else indices
    if tuple(idx.shape) != tuple(x.shape):
        raise FunctionalError(f"{op}: indices {tuple(indices.shape)} must have the input's shape {tuple(input.shape)}")
    if output_size is None:
        size = tuple((n - 1) * s[i] - 2 * p[i] + k[i] for i, n in enumerate(x.shape[-2:]))
    else:
        size = tuple(int(v) for v in tuple(output_size)[-2:])
    y = ops.MaxUnpool2dFunction.apply(x, idx.array, size)
    return y.reshape(*y.shape[1:]) if unbatched else y


# ------------------------------------------------------------------------ padding and resampling
_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input: Tensor, pad: Any, mode: str = "constant", value: float | None = None) -> Tensor:  # noqa: A002
    """Pad the last len(pad) // 2 dims: ``pad`` is (left, right, top, bottom, front, back), last
    dim first, as ``torch.nn.functional.pad``. Negative widths crop (in every mode, before the
    border is added); reflect, replicate and circular copy the input's own border."""
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"pad: unknown padding mode {mode!r}; use one of {_PAD_MODES}")
    widths_in = tuple(int(p) for p in pad)
    if len(widths_in) % 2:
        raise FunctionalError(f"pad: padding length must be divisible by 2, got {widths_in}")
    if len(widths_in) // 2 > input.ndim:
        raise FunctionalError(f"pad: padding {widths_in} pads {len(widths_in) // 2} dims but the input "
                              f"{tuple(input.shape)} has only {input.ndim}")
    widths = [(0, 0)] * input.ndim
    for i in range(len(widths_in) // 2):
        widths[input.ndim - 1 - i] = (widths_in[2 * i], widths_in[2 * i + 1])
    for dim, ((lo, hi), n) in enumerate(zip(widths, input.shape)):
        if n + min(lo, 0) + min(hi, 0) < 0 or n + lo + hi < 0:
            raise FunctionalError(f"pad: the input size {n} of dim {dim}, plus negative padding {lo} and "
                                  f"{hi}, resulted in a negative output size")
    if mode == "constant":
        return ops.PadNdFunction.apply(input, widths, "constant", 0.0 if value is None else value)
    if value is not None and value != 0:
        raise FunctionalError(f"pad: padding mode {mode!r} doesn't take in value argument")
    if any(lo < 0 or hi < 0 for lo, hi in widths):  # negative widths crop first, as in PyTorch
        crop = [(min(lo, 0), min(hi, 0)) for lo, hi in widths]
        input = ops.PadNdFunction.apply(input, crop, "constant", 0.0)  # noqa: A001
        widths = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
        if not any(lo or hi for lo, hi in widths):
            return input
    for dim, ((lo, hi), n) in enumerate(zip(widths, input.shape)):
        limit_ok = (lo < n and hi < n) if mode == "reflect" else (lo <= n and hi <= n) if mode == "circular" else n > 0
        if (lo or hi) and not limit_ok:
            rule = {"reflect": "smaller than", "circular": "at most", "replicate": "used with a non-empty"}[mode]
            raise FunctionalError(f"pad: {mode} padding {(lo, hi)} of dim {dim} must be {rule} the input size "
                                  f"{n} (input shape {tuple(input.shape)})")
    return ops.PadNdFunction.apply(input, widths, mode, 0.0)


_RESAMPLE = {"nearest": ("nearest", None), "nearest-exact": ("nearest-exact", None), "area": ("area", None),
             "linear": ("linear", 1), "bilinear": ("linear", 2), "trilinear": ("linear", 3), "bicubic": ("cubic", 2)}


def _spatial(op: str, value: Any, dims: int, name: str, x: Tensor) -> list[Any]:
    values = list(value) if isinstance(value, (tuple, list)) else [value] * dims
    if len(values) != dims:
        raise FunctionalError(f"{op}: input with spatial dimensions {list(x.shape[2:])} needs {dims} values of "
                              f"{name}, got {value}; give the input as (N, C, d1, ...) and one {name} per spatial dim")
    return values


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",  # noqa: A002
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize (N, C, L), (N, C, H, W) or (N, C, D, H, W) to ``size`` or by ``scale_factor``, with
    PyTorch's source-pixel rules: nearest, nearest-exact, (bi/tri)linear with or without
    align_corners, bicubic and area (adaptive average pooling)."""
    op = "interpolate"
    if mode not in _RESAMPLE:
        raise NotImplementedError(f"{op}: mode {mode!r} is not supported; use one of {sorted(_RESAMPLE)}")
    kind, needs = _RESAMPLE[mode]
    dims = input.ndim - 2
    if dims not in (1, 2, 3):
        raise NotImplementedError(f"{op}: input must be 3-D, 4-D or 5-D (N, C, d1, ...), got shape "
                                  f"{tuple(input.shape)} for mode {mode!r}")
    if needs is not None and needs != dims:
        raise NotImplementedError(f"{op}: got {input.ndim}D input, but {mode} mode needs {needs + 2}D input")
    if align_corners is not None and kind not in ("linear", "cubic"):
        raise FunctionalError(f"{op}: align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if antialias:
        raise NotImplementedError(f"{op}: antialias=True is not supported")
    if size is not None and scale_factor is not None:
        raise FunctionalError(f"{op}: only one of size or scale_factor should be defined")
    in_sizes = list(input.shape[2:])
    if size is not None:
        out_sizes = [int(v) for v in _spatial(op, size, dims, "size", input)]
        scales: list[float | None] = [None] * dims
    elif scale_factor is not None:
        factors = [float(v) for v in _spatial(op, scale_factor, dims, "scale_factor", input)]
        out_sizes = [resampled_size(n, f) for n, f in zip(in_sizes, factors)]
        scales = [None] * dims if recompute_scale_factor else factors
    else:
        raise FunctionalError(f"{op}: either size or scale_factor should be defined")
    if min(out_sizes + in_sizes) < 1:
        raise FunctionalError(f"{op}: input and output sizes should be greater than 0, but got input "
                              f"{in_sizes} and output {out_sizes}")
    if kind == "area":
        if dims == 1:
            return adaptive_avg_pool1d(input, out_sizes[0])
        if dims == 2:
            return adaptive_avg_pool2d(input, tuple(out_sizes))
        raise NotImplementedError(f"{op}: mode 'area' supports 3-D and 4-D input, got shape {tuple(input.shape)}")
    out = input
    for i in range(dims):
        index, weight = ops.taps(kind, in_sizes[i], out_sizes[i], bool(align_corners), scales[i])
        out = ops.ResampleFunction.apply(out, 2 + i, index, weight)
    return out


def upsample(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",  # noqa: A002
             align_corners: bool | None = None) -> Tensor:
    """Deprecated alias of interpolate (as in PyTorch)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:  # noqa: A002
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:  # noqa: A002
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def _align_corners_default(op: str, align_corners: bool | None) -> bool:
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since "
                      "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
                      "documentation of grid_sample for details.", UserWarning, stacklevel=3)
        return False
    return bool(align_corners)


def affine_grid(theta: Tensor, size: Any, align_corners: bool | None = None) -> Tensor:
    """The (N, H, W, 2) sampling grid of the affine maps ``theta`` (N, 2, 3) for an output of
    ``size`` (N, C, H, W), in grid_sample's [-1, 1] coordinates."""
    op = "affine_grid"
    align = _align_corners_default(op, align_corners)
    if len(size) != 4:
        raise NotImplementedError(f"{op}: only 4-D sizes (N, C, H, W) are supported, got {list(size)}")
    n, _, h, w = (int(v) for v in size)
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3) or theta.shape[0] != n:
        raise FunctionalError(f"{op}: expected a batch of 2-D affine matrices of shape Nx2x3 for size {list(size)}, "
                              f"got {tuple(theta.shape)}")

    def axis(k: int) -> np.ndarray:
        if k <= 1:
            return np.zeros(k)
        points = np.linspace(-1, 1, k)
        return points if align else points * (k - 1) / k

    xs, ys = np.meshgrid(axis(w), axis(h))
    base = np.stack([xs, ys, np.ones_like(xs)], axis=-1).reshape(h * w, 3)  # (H*W, 3)
    return (_as_constant(base, theta) @ theta.transpose(1, 2)).reshape(n, h, w, 2)


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",  # noqa: A002
                align_corners: bool | None = None) -> Tensor:
    """Sample (N, C, H, W) at the (x, y) points of ``grid`` (N, Ho, Wo, 2) in [-1, 1]: bilinear or
    nearest, with zeros, border or reflection padding; differentiable in input and grid."""
    op = "grid_sample"
    if mode not in ("bilinear", "nearest"):
        raise NotImplementedError(f"{op}: mode {mode!r} is not supported; use 'bilinear' or 'nearest'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise FunctionalError(f"{op}: expected padding_mode to be 'zeros', 'border', or 'reflection', "
                              f"but got: {padding_mode!r}")
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise FunctionalError(f"{op}: expected input (N, C, H, W) and grid (N, Ho, Wo, 2) with the same N, got "
                              f"{tuple(input.shape)} and {tuple(grid.shape)}")
    align = _align_corners_default(op, align_corners)
    return ops.GridSample2dFunction.apply(input, grid.to(input.dtype), mode, padding_mode, align)


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:  # noqa: A002
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    r = int(upscale_factor)
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise FunctionalError(f"pixel_shuffle: {c} channels of input {tuple(input.shape)} are not divisible "
                              f"by upscale_factor**2 = {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)  # (*, C, H, r, W, r)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:  # noqa: A002
    """(N, C, *) with the C channels read as (groups, C/groups) and transposed (ShuffleNet)."""
    n, c = input.shape[:2]
    if c % groups:
        raise FunctionalError(f"channel_shuffle: {c} channels of input {tuple(input.shape)} are not divisible "
                              f"by groups={groups}")
    rest = tuple(input.shape[2:])
    return input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(n, c, *rest)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:  # noqa: A002
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W)."""
    r = int(downscale_factor)
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise FunctionalError(f"pixel_unshuffle: height and width of input {tuple(input.shape)} must be "
                              f"divisible by downscale_factor {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)  # (*, C, r, r, H, W)
    return x.reshape(*lead, c * r * r, h // r, w // r)


# --------------------------------------------------------------------------------- normalisation
def local_response_norm(x: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """Normalise each activation by the energy of its ``size`` neighbouring channels (N, C, *)."""
    if x.ndim < 3:
        raise FunctionalError(f"local_response_norm: input must be at least 3-D (N, C, *), got shape "
                         f"{tuple(x.shape)}")
    if not isinstance(size, int) or size < 1:
        raise FunctionalError(f"local_response_norm: size must be a positive int, got {size!r}")
    (x,) = amp.float32_inputs(x)
    return ops.LocalResponseNormFunction.apply(x, size, float(alpha), float(beta), float(k))


def batch_norm(x: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalisation over the channel axis of (N, C, *), as ``torch.nn.functional.batch_norm``."""
    if x.ndim < 2:
        raise FunctionalError(f"batch_norm: input must be (N, C, *), got shape {tuple(x.shape)}")
    c = x.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise FunctionalError(f"batch_norm: {name} has shape {tuple(t.shape)} but input "
                             f"{tuple(x.shape)} has {c} channels")
    if not training and (running_mean is None or running_var is None):
        raise FunctionalError("batch_norm: evaluation mode needs running_mean and running_var")
    if training and x.numel() // max(c, 1) <= 1:
        raise FunctionalError(f"batch_norm: expected more than 1 value per channel when training, got "
                         f"input shape {tuple(x.shape)}")
    # Under autocast x keeps its half dtype and the affine parameters are float32, as PyTorch's
    # batch_norm (on no autocast list) runs cuDNN's half-input kernel: statistics in float32 inside
    # the kernel, no cast of the activation either way.
    weight, bias = amp.float32_inputs(weight, bias)
    return ops.BatchNorm.apply(x, running_mean, running_var, weight, bias, bool(training),
                               float(momentum), float(eps))


def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,  # noqa: A002
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the last len(normalized_shape) dims (biased variance), then scale and shift."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)
    if tuple(input.shape[input.ndim - len(shape):]) != shape or len(shape) > input.ndim:
        raise FunctionalError(f"layer_norm: normalized_shape {list(shape)} must be the last dims of the input "
                              f"shape {list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise FunctionalError(f"layer_norm: {name} has shape {tuple(t.shape)}, expected normalized_shape {shape}")
    x, weight, bias = amp.float32_inputs(input, weight, bias)
    return ops.LayerNormFunction.apply(x, len(shape), weight, bias, float(eps))


def rms_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,  # noqa: A002
             eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2 over the last dims) + eps) * weight; eps defaults to the dtype's epsilon."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)
    if len(shape) > input.ndim or tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise FunctionalError(f"rms_norm: normalized_shape {list(shape)} must be the last dims of the input "
                              f"shape {list(input.shape)}")
    if eps is None:
        eps = float(np.finfo(input.dtype).eps) if input.is_floating_point() else 1e-6
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    y = input * ((input * input).mean(dim=dims, keepdim=True) + eps) ** -0.5
    return y * weight if weight is not None else y


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,  # noqa: A002
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each of ``num_groups`` channel groups of (N, C, *) over its channels and
    positions, then scale and shift per channel."""
    if input.ndim < 2 or input.shape[1] % num_groups:
        raise FunctionalError(f"group_norm: expected input (N, C, *) with C divisible by num_groups={num_groups}, "
                              f"got shape {tuple(input.shape)}")
    n, c = input.shape[:2]
    (x,) = amp.float32_inputs(input)
    y = ops.LayerNormFunction.apply(x.reshape(n, num_groups, -1), 1, None, None, float(eps)).reshape(*x.shape)
    view = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(*view)
    if bias is not None:
        y = y + bias.reshape(*view)
    return y


def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,  # noqa: A002
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel of each sample over its positions (N, C, *)."""
    if input.ndim < 3:
        raise FunctionalError(f"instance_norm: expected input (N, C, *) with positions, got shape {tuple(input.shape)}")
    n, c = input.shape[:2]
    if use_input_stats:
        (x,) = amp.float32_inputs(input)
        y = ops.LayerNormFunction.apply(x.reshape(n, c, -1), 1, None, None, float(eps)).reshape(*x.shape)
        if running_mean is not None or running_var is not None:
            from tinyflow.autograd import no_grad

            with no_grad():
                flat = x.detach().reshape(n, c, -1)
                count = flat.shape[-1]
                if running_mean is not None:
                    running_mean.mul_(1 - momentum).add_(flat.mean(2).mean(0) * momentum)
                if running_var is not None:
                    var = flat.var(2, unbiased=False) * (count / max(count - 1, 1))
                    running_var.mul_(1 - momentum).add_(var.mean(0) * momentum)
    else:
        y = batch_norm(input, running_mean, running_var, None, None, False, momentum, eps)
    view = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(*view)
    if bias is not None:
        y = y + bias.reshape(*view)
    return y


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None) -> Tensor:  # noqa: A002
    """input / max(||input||_p along dim, eps)."""
    norm = ops.VectorNormFunction.apply(input, float(p), dim, True)
    return input / norm.clip(eps, None)


def _broadcast_pair(op: str, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    try:
        shape = tuple(np.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
    except ValueError:
        raise FunctionalError(f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be broadcast "
                              "together") from None
    return (a if tuple(a.shape) == shape else a.expand(*shape)), (b if tuple(b.shape) == shape else b.expand(*shape))


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps)) along ``dim`` (inputs broadcast)."""
    a, b = _broadcast_pair("cosine_similarity", x1, x2)
    if not -a.ndim <= dim < max(a.ndim, 1):
        raise IndexError(f"cosine_similarity: dim {dim} is out of range for inputs of {a.ndim} dims")
    return ops.CosineSimilarityFunction.apply(a, b, dim, float(eps))


def pdist(input: Tensor, p: float = 2.0) -> Tensor:  # noqa: A002
    """The p-norm distances between every pair of rows i < j of (N, M), in row-major pair order."""
    if input.ndim != 2:
        raise FunctionalError(f"pdist: only supports 2D tensors, got: {input.ndim}D (shape {tuple(input.shape)})")
    i, j = np.triu_indices(input.shape[0], 1)
    diff = input[tensor(i)] - input[tensor(j)]  # (N*(N-1)/2, M)
    return ops.VectorNormFunction.apply(diff, float(p), -1, False)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """||x1 - x2 + eps||_p over the last dim."""
    diff = x1 - x2 + eps
    return ops.VectorNormFunction.apply(diff, float(p), -1 if diff.ndim else None, keepdim)


# ------------------------------------------------------------------------------------- embedding
def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,  # noqa: A002
              max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """The rows of ``weight`` at the ids in ``input``, as ``torch.nn.functional.embedding``.

    A negative ``padding_idx`` counts from the end; its row gets no gradient. With ``max_norm``
    the looked-up rows whose ``norm_type``-norm exceeds it are rescaled in place first, as in
    PyTorch. ``sparse`` is accepted (the gradient is dense in tinyflow).
    """
    if padding_idx is not None:
        if not -weight.shape[0] <= padding_idx < weight.shape[0]:
            raise FunctionalError(f"embedding: padding_idx {padding_idx} must be within num_embeddings "
                                  f"({weight.shape[0]})")
        if padding_idx < 0:
            padding_idx += weight.shape[0]
    if scale_grad_by_freq:
        raise NotImplementedError("embedding: scale_grad_by_freq=True is not supported")
    if max_norm is not None:
        _embedding_renorm_(weight, input, float(max_norm), float(norm_type))
    return ops.EmbeddingFunction.apply(input, weight, padding_idx=padding_idx)


def _embedding_renorm_(weight: Tensor, input: Tensor, max_norm: float, norm_type: float) -> None:
    """Scale the rows of ``weight`` that ``input`` uses down to norm ``max_norm`` (in place, no graph)."""
    xp = weight.device.xp
    rows = xp.unique(input.array.reshape(-1))
    w = weight.array
    norms = ops.distance._norm(xp, w[rows].astype(np.float64), norm_type, 1, True)
    scale = xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
    w[rows] = (w[rows] * scale).astype(w.dtype)
    weight._versions[0] += 1  # an in-place edit, as PyTorch's embedding_renorm_


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,  # noqa: A002
                  max_norm: float | None = None, norm_type: float = 2, scale_grad_by_freq: bool = False,
                  mode: str = "mean", sparse: bool = False, per_sample_weights: Tensor | None = None,
                  include_last_offset: bool = False, padding_idx: int | None = None) -> Tensor:
    """Sums, means or maxima of bags of embeddings: the rows of a 2-D ``input``, or the slices of a
    1-D ``input`` that ``offsets`` start. Ids equal to ``padding_idx`` are left out (and not
    counted in a mean); an empty bag gives zeros. (B, embedding_dim)."""
    op = "embedding_bag"
    if mode not in ("sum", "mean", "max"):
        raise FunctionalError(f"{op}: mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"{op}: per_sample_weights was not None; it is only supported for mode='sum' "
                                  f"(got mode={mode!r})")
    ids = np.asarray(_target(input, weight))
    if ids.ndim == 2:
        if offsets is not None:
            raise FunctionalError(f"{op}: if input is 2-D, then offsets has to be None, as input is treated as a "
                                  "mini-batch of fixed length sequences")
        starts = np.arange(0, ids.size, ids.shape[1]) if ids.size else np.zeros(ids.shape[0], np.int64)
        ends = starts + ids.shape[1]
    elif ids.ndim == 1:
        if offsets is None:
            raise FunctionalError(f"{op}: offsets has to be a 1-D tensor but got None")
        starts = np.asarray(_target(offsets, weight)).astype(np.int64)
        if include_last_offset:
            starts, ends = starts[:-1], starts[1:]
        else:
            ends = np.append(starts[1:], ids.size)
    else:
        raise FunctionalError(f"{op}: input has to be 1-D or 2-D, got shape {tuple(input.shape)}")
    flat = ids.reshape(-1)
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    emb = embedding(Tensor._from_array(weight.device.xp.asarray(flat), device=weight.device), weight,
                    padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type)  # (T, D)
    keep = flat != padding_idx if padding_idx is not None else np.ones(flat.shape, bool)
    bags = len(starts)
    if mode == "max":
        from tinyflow.tensor import stack, zeros

        rows = []
        for b in range(bags):
            sel = np.nonzero(keep[starts[b]:ends[b]])[0] + starts[b]
            rows.append(emb[tensor(sel)].amax(0) if sel.size else
                        zeros(weight.shape[1], dtype=weight.dtype, device=weight.device))
        return stack(rows) if rows else emb[:0]
    matrix = np.zeros((bags, flat.size))  # (B, T): each bag's weights over the positions
    for b in range(bags):
        span = np.arange(starts[b], ends[b])
        span = span[keep[span]]
        if span.size:
            matrix[b, span] = 1.0 / span.size if mode == "mean" else 1.0
    if per_sample_weights is not None:
        psw_t = per_sample_weights.reshape(1, -1)
        return (_as_constant(matrix, emb) * psw_t) @ emb
    return _as_constant(matrix, emb) @ emb


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """(*) int64 class ids -> (*, num_classes) int64 of zeros with a one at each id."""
    op = "one_hot"
    if tensor.dtype.kind not in "iu":
        raise FunctionalError(f"{op}: one_hot is only applicable to index tensors (int64), got {tensor.dtype}")
    xp = tensor.device.xp
    ids = tensor.array
    if ids.size:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0:
            raise FunctionalError(f"{op}: class values must be non-negative, got {lo}")
        if num_classes >= 0 and hi >= num_classes:
            raise FunctionalError(f"{op}: class values must be smaller than num_classes ({num_classes}), got {hi}")
        n = hi + 1 if num_classes < 0 else num_classes
    elif num_classes < 0:
        raise FunctionalError(f"{op}: can not infer total number of classes from an empty tensor; pass num_classes")
    else:
        n = num_classes
    out = (ids[..., None] == xp.arange(n)).astype(np.int64)
    return Tensor._from_array(out, device=tensor.device)


# ------------------------------------------------------------------------------------- attention
def _neg_inf_mask(mask: Any, like: Tensor, keep_where_true: bool) -> Tensor:
    """An additive float mask from a boolean one (-inf where attention is not allowed) or the
    float mask itself. ``keep_where_true``: SDPA's meaning of True; MultiheadAttention's is the
    opposite (True = masked out)."""
    if not isinstance(mask, Tensor):
        mask = tensor(mask, device=like.device)
    if mask.dtype == np.bool_:
        allowed = mask.array if keep_where_true else ~mask.array
        xp = like.device.xp
        return Tensor._from_array(xp.where(allowed, 0.0, -np.inf).astype(like.dtype), device=like.device)
    return mask.to(like.dtype) if mask.dtype != like.dtype else mask


def _causal_mask(l_: int, s_: int, like: Tensor) -> Tensor:
    xp = like.device.xp
    allowed = xp.tril(xp.ones((l_, s_), dtype=bool))
    return Tensor._from_array(xp.where(allowed, 0.0, -np.inf).astype(like.dtype), device=like.device)


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(q k^T * scale + mask) v over (..., L, E) queries and (..., S, E) keys, as PyTorch's
    math: a boolean mask keeps the positions where it is True, a float mask is added;
    ``is_causal`` masks the future; ``enable_gqa`` shares each key/value head among query heads."""
    op = "scaled_dot_product_attention"
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise FunctionalError(f"{op}: query, key and value need at least 2 dims, got {tuple(query.shape)}, "
                              f"{tuple(key.shape)}, {tuple(value.shape)}")
    if is_causal and attn_mask is not None:
        raise FunctionalError(f"{op}: explicit attn_mask should not be set when is_causal=True")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        heads, kv_heads = query.shape[-3], key.shape[-3]
        if heads % kv_heads:
            raise FunctionalError(f"{op}: {heads} query heads are not a multiple of {kv_heads} key/value heads")

        def repeat(t: Tensor) -> Tensor:
            lead, (h, s_, e) = tuple(t.shape[:-3]), tuple(t.shape[-3:])
            return t.reshape(*lead, h, 1, s_, e).expand(*lead, h, heads // h, s_, e).reshape(*lead, heads, s_, e)

        key, value = repeat(key), repeat(value)
    l_, s_ = query.shape[-2], key.shape[-2]
    factor = 1.0 / np.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * float(factor)  # (..., L, S)
    if is_causal:
        scores = scores + _causal_mask(l_, s_, scores)
    if attn_mask is not None:
        scores = scores + _neg_inf_mask(attn_mask, scores, keep_where_true=True)
    weights = softmax(scores, dim=-1)
    if dropout_p > 0:
        weights = dropout(weights, dropout_p, training=True)
    return weights @ value


def multi_head_attention_forward(query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
                                 in_proj_weight: Tensor | None, in_proj_bias: Tensor | None,
                                 bias_k: Tensor | None, bias_v: Tensor | None, add_zero_attn: bool,
                                 dropout_p: float, out_proj_weight: Tensor, out_proj_bias: Tensor | None,
                                 training: bool = True, key_padding_mask: Any = None, need_weights: bool = True,
                                 attn_mask: Any = None, use_separate_proj_weight: bool = False,
                                 q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
                                 v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
                                 static_v: Tensor | None = None, average_attn_weights: bool = True,
                                 is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    """PyTorch's multi-head attention on (L, N, E) query and (S, N, E) key/value (or unbatched
    (L, E)): projections, heads, masks (True in a boolean mask = not allowed), softmax, dropout,
    output projection. Returns (output, weights averaged over heads or per head, or None)."""
    op = "multi_head_attention_forward"
    unbatched = query.ndim == 2
    if unbatched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    if embed_dim != embed_dim_to_check:
        raise FunctionalError(f"{op}: query has embedding dim {embed_dim}, expected {embed_dim_to_check}")
    if embed_dim % num_heads:
        raise FunctionalError(f"{op}: embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    head_dim = embed_dim // num_heads
    if use_separate_proj_weight:
        b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
        q = linear(query, q_proj_weight, b_q)
        k = linear(key, k_proj_weight, b_k)
        v = linear(value, v_proj_weight, b_v)
    else:
        w_q, w_k, w_v = in_proj_weight.chunk(3)
        b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)
    if is_causal and attn_mask is None:
        attn_mask = _causal_mask(tgt_len, key.shape[0], q) < 0  # True = masked out, MHA's meaning
    if attn_mask is not None:
        attn_mask = _neg_inf_mask(attn_mask, q, keep_where_true=False)
        if attn_mask.ndim == 2:
            attn_mask = attn_mask.unsqueeze(0)  # (1, L, S)
    if bias_k is not None and bias_v is not None:
        from tinyflow.tensor import cat

        k = cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = cat([v, bias_v.expand(1, bsz, embed_dim)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)  # (N*H, L, hd)
    k = (static_k if static_k is not None else k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1))
    v = (static_v if static_v is not None else v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1))
    if add_zero_attn:
        from tinyflow.tensor import cat, zeros

        k = cat([k, zeros(bsz * num_heads, 1, head_dim, dtype=k.dtype, device=k.device)], dim=1)
        v = cat([v, zeros(bsz * num_heads, 1, head_dim, dtype=v.dtype, device=v.device)], dim=1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    if key_padding_mask is not None:
        kpm = _neg_inf_mask(key_padding_mask, q, keep_where_true=False)  # (N, S)
        kpm = kpm.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len).reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    scores = (q * float(np.sqrt(1.0 / head_dim))) @ k.transpose(-2, -1)  # (N*H, L, S)
    if attn_mask is not None:
        scores = scores + attn_mask
    weights = softmax(scores, dim=-1)
    if dropout_p > 0.0 and training:
        weights = dropout(weights, dropout_p, training=True)
    out = (weights @ v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, embed_dim)
    if unbatched:
        out = out.squeeze(1)
    if not need_weights:
        return out, None
    weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
    if average_attn_weights:
        weights = weights.mean(dim=1)
    return out, (weights.squeeze(0) if unbatched else weights)


# ---------------------------------------------------------------------------------------- losses
# Every loss takes PyTorch's deprecated ``size_average`` / ``reduce`` too, at PyTorch's positions,
# and maps them to ``reduction`` as PyTorch does.
def _reduction(op: str, size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else "mean" if size_average else "sum"
    if reduction not in REDUCTIONS:
        raise FunctionalError(f"{op}: {reduction} is not a valid value for reduction; use one of {REDUCTIONS}")
    return reduction


def _check_reduction(op: str, reduction: str) -> None:
    _reduction(op, None, None, reduction)


def _target(t: Any, like: Tensor) -> Any:
    """A target given as Tensor, ndarray or list, as a raw array on ``like``'s device."""
    if isinstance(t, Tensor):
        return t.array
    arr = as_tensor(t).to(like.device) if not hasattr(t, "shape") else as_tensor(t)
    return arr.array


def _as_target(t: Any, like: Tensor) -> Tensor:
    return t if isinstance(t, Tensor) else tensor(t, dtype=like.dtype, device=like.device)


def cross_entropy(logits: Tensor, target: Any, weight: Tensor | None = None, size_average: bool | None = None,
                  ignore_index: int = -100, reduce: bool | None = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Softmax cross-entropy on logits (N, C), (N, C, d1, ...) or (C,) and class indices, as PyTorch.

    Targets that are class probabilities (a float tensor shaped like the logits) are supported too.
    """
    reduction = _reduction("cross_entropy", size_average, reduce, reduction)
    logits, target = amp.float32_inputs(logits, target)
    if not 0 <= label_smoothing <= 1:
        raise FunctionalError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    w = weight.array if isinstance(weight, Tensor) else weight
    if isinstance(target, Tensor) and target.is_floating_point():
        return _soft_cross_entropy(logits, target, weight, reduction, label_smoothing)
    if logits.ndim == 1:  # one unbatched sample (C,) with a 0-d target
        t = _target(target, logits)
        out = ops.CrossEntropy.apply(logits.reshape(1, -1), t.reshape(1), w, ignore_index, reduction,
                                     label_smoothing)
        return out.reshape() if reduction == "none" else out
    return ops.CrossEntropy.apply(logits, _target(target, logits), w, ignore_index, reduction, label_smoothing)


def _soft_cross_entropy(logits: Tensor, target: Tensor, weight: Tensor | None, reduction: str,
                        label_smoothing: float) -> Tensor:
    if target.shape != logits.shape:
        raise FunctionalError(f"cross_entropy: probability targets must have the logits' shape "
                              f"{logits.shape}, got {target.shape}")
    dim = 1 if logits.ndim > 1 else 0
    c = logits.shape[dim]
    if label_smoothing:
        target = target * (1 - label_smoothing) + label_smoothing / c
    lp = log_softmax(logits, dim=dim)
    if weight is not None:
        lp = lp * (weight.reshape((1, c) + (1,) * (logits.ndim - 2)) if dim else weight)
    losses = -(lp * target).sum(dim=dim)
    if reduction == "mean":
        return losses.mean() * 1.0
    return losses.sum() if reduction == "sum" else losses


def nll_loss(log_probs: Tensor, target: Any, weight: Tensor | None = None, size_average: bool | None = None,
             ignore_index: int = -100, reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """The negative log-likelihood of class indices under log-probabilities (N, C, *) or (C,)."""
    reduction = _reduction("nll_loss", size_average, reduce, reduction)
    (log_probs,) = amp.float32_inputs(log_probs)
    w = weight.array if isinstance(weight, Tensor) else weight
    if log_probs.ndim == 1:
        t = _target(target, log_probs)
        out = ops.NLLLossFunction.apply(log_probs.reshape(1, -1), t.reshape(1), w, ignore_index, reduction)
        return out.reshape() if reduction == "none" else out
    return ops.NLLLossFunction.apply(log_probs, _target(target, log_probs), w, ignore_index, reduction)


def _pointwise_pair(op: str, input: Tensor, target: Any) -> tuple[Tensor, Tensor]:  # noqa: A002
    """Input and target broadcast to one shape (with PyTorch's warning when they differ), in
    float32 inside autocast."""
    target = _as_target(target, input)
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({tuple(target.shape)}) that is different to the input size "
                      f"({tuple(input.shape)}). This will likely lead to incorrect results due to "
                      "broadcasting. Please ensure they have the same size.", UserWarning, stacklevel=3)
        input, target = _broadcast_pair(op, input, target)
    return tuple(amp.float32_inputs(input, target))  # type: ignore[return-value]


def mse_loss(input: Tensor, target: Any, size_average: bool | None = None, reduce: bool | None = None,  # noqa: A002
             reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """The mean (or sum) of squared differences."""
    reduction = _reduction("mse_loss", size_average, reduce, reduction)
    a, t = _pointwise_pair("mse_loss", input, target)
    if weight is not None:
        losses = ops.MSELossFunction.apply(a, t, "none") * weight
        return losses if reduction == "none" else losses.mean() if reduction == "mean" else losses.sum()
    return ops.MSELossFunction.apply(a, t, reduction)


def l1_loss(input: Tensor, target: Any, size_average: bool | None = None, reduce: bool | None = None,  # noqa: A002
            reduction: str = "mean") -> Tensor:
    """The mean (or sum) of absolute differences."""
    reduction = _reduction("l1_loss", size_average, reduce, reduction)
    return ops.L1LossFunction.apply(*_pointwise_pair("l1_loss", input, target), reduction)


def smooth_l1_loss(input: Tensor, target: Any, size_average: bool | None = None,  # noqa: A002
                   reduce: bool | None = None, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """Squared below ``beta`` (scaled by 1/beta), absolute above: 0.5 d^2/beta or |d| - 0.5 beta."""
    reduction = _reduction("smooth_l1_loss", size_average, reduce, reduction)
    if beta < 0:
        raise FunctionalError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    return ops.SmoothL1LossFunction.apply(*_pointwise_pair("smooth_l1_loss", input, target), reduction, float(beta))


def huber_loss(input: Tensor, target: Any, reduction: str = "mean", delta: float = 1.0,  # noqa: A002
               weight: Tensor | None = None) -> Tensor:
    """0.5 d^2 below ``delta``, delta * (|d| - 0.5 delta) above."""
    reduction = _reduction("huber_loss", None, None, reduction)
    if delta <= 0:
        raise FunctionalError(f"huber_loss: delta must be positive, got {delta}")
    a, t = _pointwise_pair("huber_loss", input, target)
    if weight is not None:
        losses = ops.HuberLossFunction.apply(a, t, "none", float(delta)) * weight
        return losses if reduction == "none" else losses.mean() if reduction == "mean" else losses.sum()
    return ops.HuberLossFunction.apply(a, t, reduction, float(delta))


def _weight_array(op: str, weight: Any, like: Tensor) -> Any:
    """An optional rescaling weight as a raw array broadcastable to ``like`` (no gradient)."""
    if weight is None:
        return None
    w = weight.array if isinstance(weight, Tensor) else np.asarray(weight)
    try:
        np.broadcast_shapes(tuple(w.shape), tuple(like.shape))
    except ValueError:
        raise FunctionalError(f"{op}: weight of shape {tuple(w.shape)} cannot be broadcast to the input shape "
                              f"{tuple(like.shape)}") from None
    return w.astype(like.dtype, copy=False)


def binary_cross_entropy(input: Tensor, target: Any, weight: Tensor | None = None,  # noqa: A002
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """Binary cross-entropy between probabilities ``input`` in [0, 1] and ``target`` (same shape);
    each log is clamped at -100, as in PyTorch."""
    op = "binary_cross_entropy"
    reduction = _reduction(op, size_average, reduce, reduction)
    target = _as_target(target, input)
    if tuple(target.shape) != tuple(input.shape):
        raise FunctionalError(f"{op}: using a target size ({tuple(target.shape)}) that is different to the input size "
                         f"({tuple(input.shape)}) is deprecated. Please ensure they have the same size.")
    p, t = amp.float32_inputs(input, target)
    return ops.BinaryCrossEntropyFunction.apply(p, t, _weight_array(op, weight, p), reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Any, weight: Tensor | None = None,  # noqa: A002
                                     size_average: bool | None = None, reduce: bool | None = None,
                                     reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross-entropy on logits, stable for any logit; ``pos_weight`` (broadcast over the
    last dim, one per class) weighs the positive term."""
    op = "binary_cross_entropy_with_logits"
    reduction = _reduction(op, size_average, reduce, reduction)
    target = _as_target(target, input)
    if tuple(target.shape) != tuple(input.shape):
        raise FunctionalError(f"{op}: target size ({tuple(target.shape)}) must be the same as input size "
                         f"({tuple(input.shape)})")
    x, t = amp.float32_inputs(input, target)
    return ops.BinaryCrossEntropyWithLogitsFunction.apply(
        x, t, _weight_array(op, weight, x), _weight_array(op, pos_weight, x), reduction)


def kl_div(input: Tensor, target: Any, size_average: bool | None = None, reduce: bool | None = None,  # noqa: A002
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """KL(target || prediction) with ``input`` the prediction's log-probabilities: pointwise
    target * (log(target) - input). ``reduction="batchmean"`` (the true KL divergence) divides
    the sum by the batch size; "mean" divides by the number of elements (with PyTorch's warning)."""
    op = "kl_div"
    if reduction != "batchmean":
        reduction = _reduction(op, size_average, reduce, reduction)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    a, t = _pointwise_pair(op, input, target) if tuple(_as_target(target, input).shape) != tuple(input.shape) \
        else amp.float32_inputs(input, _as_target(target, input))
    return ops.KLDivFunction.apply(a, t, reduction, bool(log_target))


def soft_margin_loss(input: Tensor, target: Any, size_average: bool | None = None,  # noqa: A002
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target * input)) for targets of +-1."""
    reduction = _reduction("soft_margin_loss", size_average, reduce, reduction)
    a, t = _pointwise_pair("soft_margin_loss", input, target)
    return _reduce(softplus(-t * a), reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """max(0, -target * (input1 - input2) + margin)."""
    reduction = _reduction("margin_ranking_loss", size_average, reduce, reduction)
    t = _as_target(target, input1)
    return _reduce((-t * (input1 - input2) + margin).clip(0, None), reduction)


def hinge_embedding_loss(input: Tensor, target: Any, margin: float = 1.0, size_average: bool | None = None,  # noqa: A002
                         reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """input where target == 1, max(0, margin - input) where target == -1."""
    reduction = _reduction("hinge_embedding_loss", size_average, reduce, reduction)
    t = _as_target(target, input)
    losses = where(t != 1, (margin - input).clip(0, None), 0.0) + where(t != -1, input, 0.0)
    return _reduce(losses, reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0,
                          size_average: bool | None = None, reduce: bool | None = None,
                          reduction: str = "mean") -> Tensor:
    """1 - cos(x1, x2) for target 1, max(0, cos(x1, x2) - margin) for target -1 (cos along dim 1
    of (N, D), or of the one vector pair)."""
    reduction = _reduction("cosine_embedding_loss", size_average, reduce, reduction)
    prod = (input1 * input2).sum(dim=-1)
    cos = prod / (((input1 * input1).sum(dim=-1) + 1e-12) * ((input2 * input2).sum(dim=-1) + 1e-12)).sqrt()
    t = _as_target(target, cos)
    losses = where(t == 1, 1 - cos, where(t == -1, (cos - margin).clip(0, None), 0.0))
    return _reduce(losses, reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2.0,
                        eps: float = 1e-6, swap: bool = False, size_average: bool | None = None,
                        reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """max(d(a, p) - d(a, n) + margin, 0) with d the pairwise p-norm distance."""
    reduction = _reduction("triplet_margin_loss", size_average, reduce, reduction)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce((d_pos - d_neg + margin).clip(0, None), reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Any = None, margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Tensor:
    """max(d(a, p) - d(a, n) + margin, 0) for any distance function (pairwise_distance by default)."""
    reduction = _reduction("triplet_margin_with_distance_loss", None, None, reduction)
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(dist(positive, negative))
    return _reduce((d_pos - d_neg + margin).clip(0, None), reduction)


def poisson_nll_loss(input: Tensor, target: Any, log_input: bool = True, full: bool = False,  # noqa: A002
                     size_average: bool | None = None, eps: float = 1e-8, reduce: bool | None = None,
                     reduction: str = "mean") -> Tensor:
    """Poisson negative log-likelihood: exp(input) - target * input (log_input), else
    input - target * log(input + eps); ``full`` adds Stirling's term where target > 1."""
    reduction = _reduction("poisson_nll_loss", size_average, reduce, reduction)
    t = _as_target(target, input)
    losses = input.exp() - t * input if log_input else input - t * (input + eps).log()
    if full:  # Stirling's approximation of log(target!), where target > 1
        with np.errstate(divide="ignore", invalid="ignore"):
            stirling = t * t.log() - t + 0.5 * (2 * np.pi * t).log()
        losses = losses + where(t > 1, stirling, 0.0)
    return _reduce(losses, reduction)


def gaussian_nll_loss(input: Tensor, target: Any, var: Any, full: bool = False, eps: float = 1e-6,  # noqa: A002
                      reduction: str = "mean") -> Tensor:
    """0.5 * (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) if full)."""
    reduction = _reduction("gaussian_nll_loss", None, None, reduction)
    t = _as_target(target, input)
    v = var if isinstance(var, Tensor) else _as_target(var, input)
    if v.ndim == input.ndim - 1 and tuple(v.shape) == tuple(input.shape[:-1]):
        v = v.unsqueeze(-1)
    v = v.clip(eps, None)
    losses = 0.5 * (v.log() + (input - t) ** 2 / v)
    if full:
        losses = losses + 0.5 * float(np.log(2 * np.pi))
    return _reduce(losses, reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Any, weight: Tensor | None = None,  # noqa: A002
                                size_average: bool | None = None, reduce: bool | None = None,
                                reduction: str = "mean") -> Tensor:
    """Mean over classes of the binary logistic loss of each class, per sample."""
    reduction = _reduction("multilabel_soft_margin_loss", size_average, reduce, reduction)
    t = _as_target(target, input)
    losses = -(t * logsigmoid(input) + (1 - t) * logsigmoid(-input))
    if weight is not None:
        losses = losses * weight
    return _reduce(losses.mean(dim=input.ndim - 1), reduction)


def multi_margin_loss(input: Tensor, target: Any, p: int = 1, margin: float = 1.0,  # noqa: A002
                      weight: Tensor | None = None, size_average: bool | None = None, reduce: bool | None = None,
                      reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss: sum over i != y of max(0, margin - x[y] + x[i])**p / C (times weight[y])."""
    reduction = _reduction("multi_margin_loss", size_average, reduce, reduction)
    if p not in (1, 2):
        raise FunctionalError(f"multi_margin_loss: only p == 1 and p == 2 supported, got {p}")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    y = np.asarray(_target(target, input)).reshape(-1)
    c = x.shape[1]
    hot = np.zeros((x.shape[0], c))
    hot[np.arange(x.shape[0]), y] = 1.0
    mask = _as_constant(hot, x)
    xy = (x * mask).sum(dim=1, keepdim=True)
    terms = (margin - xy + x).clip(0, None) * (1 - mask)
    if p == 2:
        terms = terms * terms
    if weight is not None:
        terms = terms * _as_constant(np.asarray(weight.array)[y].reshape(-1, 1), x)
    losses = terms.sum(dim=1) / c
    return _reduce(losses if input.ndim == 2 else losses.reshape(()), reduction)


def multilabel_margin_loss(input: Tensor, target: Any, size_average: bool | None = None,  # noqa: A002
                           reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Hinge loss between each target class j (the ids before the first -1 of a target row) and
    each other class i: sum of max(0, 1 - (x[j] - x[i])) / C."""
    reduction = _reduction("multilabel_margin_loss", size_average, reduce, reduction)
    x = input if input.ndim == 2 else input.reshape(1, -1)
    ids = np.asarray(_target(target, input)).reshape(x.shape)
    is_target = np.zeros(x.shape)
    for row, labels in enumerate(ids):
        for j in labels:
            if j < 0:
                break
            is_target[row, j] = 1.0
    pairs = _as_constant(is_target[:, :, None] * (1 - is_target)[:, None, :], x)  # (N, j, i)
    hinge = (1 - x.reshape(*x.shape, 1) + x.reshape(x.shape[0], 1, x.shape[1])).clip(0, None)
    losses = (hinge * pairs).sum(dim=(1, 2)) / x.shape[1]
    return _reduce(losses if input.ndim == 2 else losses.reshape(()), reduction)


def _reduce(losses: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return losses.mean()
    return losses.sum() if reduction == "sum" else losses
