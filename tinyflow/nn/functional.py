"""nn.functional (imported as F): the stateless form of every layer, PyTorch's names and defaults."""
from __future__ import annotations

from typing import Any

from tinyflow import amp, ops
from tinyflow.random import Generator, rng
from tinyflow.tensor import Tensor, as_tensor, pad  # noqa: F401  (pad is part of F's API)


def _target(t: Any, like: Tensor) -> Any:
    """A target given as Tensor, ndarray or list, as a raw array on ``like``'s device."""
    if isinstance(t, Tensor):
        return t.data
    arr = as_tensor(t).to(like.device) if not hasattr(t, "shape") else as_tensor(t)
    return arr.data


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias (in the autocast dtype inside ``tf.amp.autocast``)."""
    return ops.Linear.apply(*amp.autocast_inputs(x, weight, bias))


def relu(x: Tensor) -> Tensor:
    return ops.ReLU.apply(x)


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    return ops.LeakyReLU.apply(x, negative_slope)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    return ops.GELU.apply(x, approximate)


def sigmoid(x: Tensor) -> Tensor:
    return x.sigmoid()


def tanh(x: Tensor) -> Tensor:
    return x.tanh()


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Softmax along ``dim``; in float32 inside ``tf.amp.autocast`` (as log_softmax and the losses)."""
    return ops.Softmax.apply(*amp.float32_inputs(x), dim)


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    return ops.LogSoftmax.apply(*amp.float32_inputs(x), dim)


def logsumexp(x: Tensor, dim: int = -1, keepdim: bool = False) -> Tensor:
    return ops.LogSumExp.apply(x, dim, keepdim)


def dropout(x: Tensor, p: float = 0.5, training: bool = True, generator: Generator | None = None) -> Tensor:
    """Inverted dropout; the identity when not training or p == 0."""
    if not 0 <= p <= 1:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0:
        return x
    if p == 1:
        return x * 0.0
    seed = int(rng(generator).integers(0, 2**63 - 1))
    return ops.Dropout.apply(x, p, seed)


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
    ops.loss._check_reduction("cross_entropy", reduction)
    logits, target = amp.float32_inputs(logits, target)
    if not 0 <= label_smoothing <= 1:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    w = weight.data if isinstance(weight, Tensor) else weight
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
    ops.loss._check_reduction("nll_loss", reduction)
    (log_probs,) = amp.float32_inputs(log_probs)
    w = weight.data if isinstance(weight, Tensor) else weight
    return ops.NLLLoss.apply(log_probs, _target(target, log_probs), w, ignore_index, reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:  # noqa: A002
    ops.loss._check_reduction("mse_loss", reduction)
    target = target if isinstance(target, Tensor) else as_tensor(target)
    return ops.MSELoss.apply(*amp.float32_inputs(input, target), reduction)


def one_hot(target: Tensor, num_classes: int = -1) -> Tensor:
    xp = target.device.xp
    n = int(target.data.max()) + 1 if num_classes < 0 else num_classes
    out = (target.data[..., None] == xp.arange(n)).astype("int64")
    return Tensor._from_array(out, device=target.device)


# Families written elsewhere add their import line below.
from tinyflow.ops.conv import conv2d  # noqa: F401,E402
from tinyflow.ops.embedding import embedding  # noqa: F401,E402
from tinyflow.ops.norm import batch_norm, local_response_norm  # noqa: F401,E402
from tinyflow.ops.pool import adaptive_avg_pool2d, avg_pool2d, max_pool2d  # noqa: F401,E402
