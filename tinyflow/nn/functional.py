"""nn.functional (imported as F): the stateless form of every layer, PyTorch's names and defaults.

Every F function is defined here: it checks its arguments (with messages that name the
function), applies autocast, and calls the differentiable op of tinyflow/ops/ that computes it
(``F.conv2d`` -> ``ops.Conv2dFunction``). ``pad`` is the one re-export: it is ``tf.pad``.
"""
from __future__ import annotations

from typing import Any

from tinyflow import amp, ops
from tinyflow.kernels.shapes import IntPair, _pair, conv_output_size, pool_output_shape
from tinyflow.random import Generator, rng
from tinyflow.tensor import Tensor, as_tensor, pad  # noqa: F401  (pad is part of F's API)

__all__ = [
    "linear", "conv2d",
    "relu", "leaky_relu", "gelu", "sigmoid", "tanh", "softmax", "log_softmax", "logsumexp",
    "dropout",
    "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
    "local_response_norm", "batch_norm",
    "embedding", "one_hot", "pad",
    "cross_entropy", "nll_loss", "mse_loss",
]

REDUCTIONS = ("mean", "sum", "none")


# ------------------------------------------------------------------------ linear and convolution
def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias (in the autocast dtype inside ``tf.amp.autocast``)."""
    return ops.LinearFunction.apply(*amp.autocast_inputs(x, weight, bias))


def _same_padding(kernel: tuple[int, int], dilation: tuple[int, int],
                  stride: tuple[int, int]) -> tuple[int, int]:
    if stride != (1, 1):
        raise ValueError("conv2d: padding='same' is only supported with stride 1 (as in PyTorch)")
    total = [d * (k - 1) for k, d in zip(kernel, dilation)]
    if any(t % 2 for t in total):
        raise ValueError(
            f"conv2d: padding='same' with kernel {kernel} and dilation {dilation} needs uneven "
            "padding; pad the input explicitly (F.pad) and use padding=0"
        )
    return (total[0] // 2, total[1] // 2)


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntPair = 1,
           padding: IntPair | str = 0, dilation: IntPair = 1, groups: int = 1) -> Tensor:
    """2-D cross-correlation over x (N, C, H, W) or (C, H, W), as ``torch.nn.functional.conv2d``.

    Inside ``tf.amp.autocast`` it computes in the autocast dtype (float32 weights get float32
    gradients through the casts).
    """
    x, weight, bias = amp.autocast_inputs(x, weight, bias)
    if weight.ndim != 4:
        raise ValueError(f"conv2d: weight must be 4-D (O, C/groups, kh, kw), got shape {tuple(weight.shape)}")
    unbatched = x.ndim == 3
    if unbatched:
        x = x.reshape(1, *x.shape)
    if x.ndim != 4:
        raise ValueError(f"conv2d: input must be (N, C, H, W) or (C, H, W), got shape {tuple(x.shape)}")
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    o, cg, kh, kw = weight.shape
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise ValueError(f"conv2d: padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
        padding = (0, 0) if padding == "valid" else _same_padding((kh, kw), dilation, stride)
    padding = _pair(padding, "padding")
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise ValueError(f"conv2d: need stride >= 1, dilation >= 1, padding >= 0; got stride={stride}, "
                         f"padding={padding}, dilation={dilation}")
    if not isinstance(groups, int) or groups < 1 or o % groups:
        raise ValueError(f"conv2d: groups={groups} must be a positive int dividing the {o} output "
                         f"channels of weight {tuple(weight.shape)}")
    n, c, h, w = x.shape
    if c != cg * groups:
        raise ValueError(
            f"conv2d: input {tuple(x.shape)} has {c} channels but weight {tuple(weight.shape)} with "
            f"groups={groups} expects {cg * groups}; check in_channels of the layer"
        )
    if bias is not None and tuple(bias.shape) != (o,):
        raise ValueError(f"conv2d: bias shape {tuple(bias.shape)} must be ({o},) for weight {tuple(weight.shape)}")
    oh = conv_output_size(h, kh, stride[0], padding[0], dilation[0])
    ow = conv_output_size(w, kw, stride[1], padding[1], dilation[1])
    if oh < 1 or ow < 1:
        raise ValueError(
            f"conv2d: input {tuple(x.shape)} is too small for kernel {(kh, kw)} with padding "
            f"{padding} and dilation {dilation} (output would be {oh}x{ow}); use a larger input"
        )
    if x.dtype != weight.dtype:
        raise ValueError(f"conv2d: input dtype {x.dtype} and weight dtype {weight.dtype} differ; "
                         "convert one with .to(dtype)")
    y = ops.Conv2dFunction.apply(x, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return y.reshape(*y.shape[1:]) if unbatched else y


# ----------------------------------------------------------------------------------- activations
def relu(x: Tensor) -> Tensor:
    return ops.ReLUFunction.apply(x)


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    return ops.LeakyReLUFunction.apply(x, negative_slope)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    return ops.GELUFunction.apply(x, approximate)


def sigmoid(x: Tensor) -> Tensor:
    return x.sigmoid()


def tanh(x: Tensor) -> Tensor:
    return x.tanh()


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Softmax along ``dim``; in float32 inside ``tf.amp.autocast`` (as log_softmax and the losses)."""
    return ops.SoftmaxFunction.apply(*amp.float32_inputs(x), dim)


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    return ops.LogSoftmaxFunction.apply(*amp.float32_inputs(x), dim)


def logsumexp(x: Tensor, dim: int = -1, keepdim: bool = False) -> Tensor:
    return ops.LogSumExp.apply(x, dim, keepdim)


# --------------------------------------------------------------------------------------- dropout
def dropout(x: Tensor, p: float = 0.5, training: bool = True, generator: Generator | None = None) -> Tensor:
    """Inverted dropout; the identity when not training or p == 0."""
    if not 0 <= p <= 1:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0:
        return x
    if p == 1:
        return x * 0.0
    seed = int(rng(generator).integers(0, 2**63 - 1))
    return ops.DropoutFunction.apply(x, p, seed)


# --------------------------------------------------------------------------------------- pooling
def _check_input(op: str, x: Tensor) -> None:
    if x.ndim not in (3, 4):
        raise ValueError(f"{op}: input must be (N, C, H, W) or (C, H, W), got shape {tuple(x.shape)}")


def _batched(x: Tensor) -> tuple[Tensor, bool]:
    return (x.reshape(1, *x.shape), True) if x.ndim == 3 else (x, False)


def _pool_geometry(op: str, x: Tensor, kernel_size, stride, padding, dilation, ceil_mode):
    _check_input(op, x)
    k = _pair(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () else _pair(stride, "stride", op)
    p, d = _pair(padding, "padding", op), _pair(dilation, "dilation", op)
    if min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
        raise ValueError(f"{op}: need kernel_size, stride, dilation >= 1 and padding >= 0; got "
                         f"kernel_size={k}, stride={s}, padding={p}, dilation={d}")
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise ValueError(f"{op}: padding {p} must be at most half of kernel_size {k} (as in PyTorch)")
    oh, ow = pool_output_shape(x.shape[-2], x.shape[-1], k, s, p, d, ceil_mode)
    if oh < 1 or ow < 1:
        raise ValueError(f"{op}: input {tuple(x.shape)} is too small for kernel_size {k} with "
                         f"padding {p} and dilation {d} (output would be {oh}x{ow})")
    return k, s, p, d


def max_pool2d(x: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
               padding: IntPair = 0, dilation: IntPair = 1, ceil_mode: bool = False) -> Tensor:
    """Max pooling over (N, C, H, W); stride defaults to kernel_size, as in PyTorch."""
    k, s, p, d = _pool_geometry("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode)
    x, unbatched = _batched(x)
    y = ops.MaxPool2dFunction.apply(x, k, s, p, d, bool(ceil_mode))
    return y.reshape(*y.shape[1:]) if unbatched else y


def avg_pool2d(x: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
               padding: IntPair = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """Average pooling over (N, C, H, W); padding counts in the divisor by default (PyTorch)."""
    k, s, p, _ = _pool_geometry("avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode)
    x, unbatched = _batched(x)
    y = ops.AvgPool2dFunction.apply(x, k, s, p, bool(ceil_mode), bool(count_include_pad))
    return y.reshape(*y.shape[1:]) if unbatched else y


def adaptive_avg_pool2d(x: Tensor, output_size: int | None | tuple[int | None, int | None]) -> Tensor:
    """Average pooling to a fixed (OH, OW), windows as PyTorch's; None keeps that input size."""
    _check_input("adaptive_avg_pool2d", x)
    h, w = x.shape[-2:]
    if output_size is None or isinstance(output_size, int):
        output_size = (output_size, output_size)
    oh, ow = (h if output_size[0] is None else int(output_size[0]),
              w if output_size[1] is None else int(output_size[1]))
    if oh < 1 or ow < 1 or h < 1 or w < 1:
        raise ValueError(f"adaptive_avg_pool2d: input {tuple(x.shape)} and output_size {(oh, ow)} "
                         "must both be non-empty")
    if (oh, ow) == (h, w):
        return x  # every window is one pixel: the identity (AlexNet's 6x6 -> 6x6 at 224)
    return ops.AdaptiveAvgPool2dFunction.apply(x, (oh, ow))


# --------------------------------------------------------------------------------- normalisation
def local_response_norm(x: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """Normalise each activation by the energy of its ``size`` neighbouring channels (N, C, *)."""
    if x.ndim < 3:
        raise ValueError(f"local_response_norm: input must be at least 3-D (N, C, *), got shape "
                         f"{tuple(x.shape)}")
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"local_response_norm: size must be a positive int, got {size!r}")
    (x,) = amp.float32_inputs(x)
    return ops.LocalResponseNormFunction.apply(x, size, float(alpha), float(beta), float(k))


def batch_norm(x: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalisation over the channel axis of (N, C, *), as ``torch.nn.functional.batch_norm``."""
    if x.ndim < 2:
        raise ValueError(f"batch_norm: input must be (N, C, *), got shape {tuple(x.shape)}")
    c = x.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise ValueError(f"batch_norm: {name} has shape {tuple(t.shape)} but input "
                             f"{tuple(x.shape)} has {c} channels")
    if not training and (running_mean is None or running_var is None):
        raise ValueError("batch_norm: evaluation mode needs running_mean and running_var")
    if training and x.numel() // max(c, 1) <= 1:
        raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got "
                         f"input shape {tuple(x.shape)}")
    x, weight, bias = amp.float32_inputs(x, weight, bias)
    return ops.BatchNorm.apply(x, running_mean, running_var, weight, bias, bool(training),
                               float(momentum), float(eps))


# ------------------------------------------------------------------------------------- embedding
def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None) -> Tensor:  # noqa: A002
    """F.embedding(input, weight, padding_idx=None): the rows of ``weight`` at the ids in ``input``.

    A negative ``padding_idx`` counts from the end, as in PyTorch.
    """
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    return ops.EmbeddingFunction.apply(input, weight, padding_idx=padding_idx)


def one_hot(target: Tensor, num_classes: int = -1) -> Tensor:
    xp = target.device.xp
    n = int(target.array.max()) + 1 if num_classes < 0 else num_classes
    out = (target.array[..., None] == xp.arange(n)).astype("int64")
    return Tensor._from_array(out, device=target.device)


# ---------------------------------------------------------------------------------------- losses
def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")


def _target(t: Any, like: Tensor) -> Any:
    """A target given as Tensor, ndarray or list, as a raw array on ``like``'s device."""
    if isinstance(t, Tensor):
        return t.array
    arr = as_tensor(t).to(like.device) if not hasattr(t, "shape") else as_tensor(t)
    return arr.array


def cross_entropy(
    logits: Tensor,
    target: Any,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Softmax cross-entropy on logits (N, C) or (N, C, d1, ...) and class indices, as PyTorch.

    Targets that are class probabilities (a float tensor shaped like the logits) are supported too.
    """
    _check_reduction("cross_entropy", reduction)
    logits, target = amp.float32_inputs(logits, target)
    if not 0 <= label_smoothing <= 1:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    w = weight.array if isinstance(weight, Tensor) else weight
    if isinstance(target, Tensor) and target.is_floating_point():
        return _soft_cross_entropy(logits, target, weight, reduction, label_smoothing)
    return ops.CrossEntropy.apply(logits, _target(target, logits), w, ignore_index, reduction, label_smoothing)


def _soft_cross_entropy(logits: Tensor, target: Tensor, weight: Tensor | None, reduction: str,
                        label_smoothing: float) -> Tensor:
    if target.shape != logits.shape:
        raise ValueError(f"cross_entropy: probability targets must have the logits' shape {logits.shape}, got {target.shape}")
    c = logits.shape[1]
    if label_smoothing:
        target = target * (1 - label_smoothing) + label_smoothing / c
    lp = log_softmax(logits, dim=1)
    if weight is not None:
        lp = lp * weight.reshape((1, c) + (1,) * (logits.ndim - 2))
    losses = -(lp * target).sum(dim=1)
    if reduction == "mean":
        return losses.sum() / losses.shape[0] if losses.ndim == 1 else losses.mean() * 1.0
    return losses.sum() if reduction == "sum" else losses


def nll_loss(log_probs: Tensor, target: Any, weight: Tensor | None = None, ignore_index: int = -100,
             reduction: str = "mean") -> Tensor:
    _check_reduction("nll_loss", reduction)
    (log_probs,) = amp.float32_inputs(log_probs)
    w = weight.array if isinstance(weight, Tensor) else weight
    return ops.NLLLossFunction.apply(log_probs, _target(target, log_probs), w, ignore_index, reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:  # noqa: A002
    _check_reduction("mse_loss", reduction)
    target = target if isinstance(target, Tensor) else as_tensor(target)
    return ops.MSELossFunction.apply(*amp.float32_inputs(input, target), reduction)
