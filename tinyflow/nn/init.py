"""Weight initialisation, torch.nn.init: PyTorch's formulas and defaults, all in place and outside
the graph. The initialisers the layers use (uniform_, normal_, constant_, xavier_*, kaiming_*,
calculate_gain, and PyTorch's default for Linear and Conv), then truncated normal, orthogonal,
eye, Dirac and sparse, and PyTorch's deprecated names without the underscore (``init.uniform``)."""
from __future__ import annotations

import functools
import math
import warnings
from typing import Any

import numpy as np

from tinyflow.autograd.grad_mode import no_grad
from tinyflow.random import Generator, rng
from tinyflow.tensor import Tensor

__all__ = [
    "calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "xavier_uniform_", "xavier_normal_",
    "kaiming_uniform_", "kaiming_normal_", "trunc_normal_", "orthogonal_", "eye_", "dirac_", "sparse_", "uniform",
    "normal", "constant", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal", "orthogonal",
    "eye", "dirac", "sparse",
]


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
              "sigmoid", "identity")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is not None and (isinstance(param, bool) or not isinstance(param, (int, float))):
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _fans(t: Tensor) -> tuple[int, int]:
    if t.ndim < 2:
        raise ValueError(f"fan in and fan out need a tensor with at least 2 dims, got shape {t.shape}")
    receptive = 1
    for s in t.shape[2:]:
        receptive *= s
    return t.shape[1] * receptive, t.shape[0] * receptive


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator | None = None) -> Tensor:
    with no_grad():
        return t.uniform_(a, b, generator=generator)


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator | None = None) -> Tensor:
    with no_grad():
        return t.normal_(mean, std, generator=generator)


def constant_(t: Tensor, value: float) -> Tensor:
    with no_grad():
        return t.fill_(value)


def zeros_(t: Tensor) -> Tensor:
    return constant_(t, 0.0)


def ones_(t: Tensor) -> Tensor:
    return constant_(t, 1.0)


def xavier_uniform_(t: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    fan_in, fan_out = _fans(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound, generator)


def xavier_normal_(t: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    fan_in, fan_out = _fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def _kaiming_std(t: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"kaiming init: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(t)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator: Generator | None = None) -> Tensor:
    bound = math.sqrt(3.0) * _kaiming_std(t, a, mode, nonlinearity)
    return uniform_(t, -bound, bound, generator)


def kaiming_normal_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator: Generator | None = None) -> Tensor:
    return normal_(t, 0.0, _kaiming_std(t, a, mode, nonlinearity), generator)


def default_linear_init_(weight: Tensor, bias: Tensor | None, generator: Any = None) -> None:
    """PyTorch's default for Linear and Conv: kaiming_uniform(a=sqrt(5)), bias U(-1/sqrt(fan_in), ..)."""
    kaiming_uniform_(weight, a=math.sqrt(5), generator=generator)
    if bias is not None:
        fan_in, _ = _fans(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound, generator)


def trunc_normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator: Generator | None = None) -> Tensor:
    """Normal samples redrawn until they fall in [a, b]."""
    g = rng(generator)
    vals = g.normal(mean, std, size=t.shape)
    bad = (vals < a) | (vals > b)
    while bad.any():
        vals[bad] = g.normal(mean, std, size=int(bad.sum()))
        bad = (vals < a) | (vals > b)
    with no_grad():
        return t.copy_(np.asarray(vals, dtype=t.dtype))


def orthogonal_(t: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """A (semi-)orthogonal matrix (rows x the rest flattened), from the QR decomposition of a
    normal sample with the signs of R's diagonal folded in (Saxe et al.), times ``gain``."""
    if t.ndim < 2:
        raise ValueError(f"orthogonal_: only tensors with 2 or more dimensions are supported, got shape {t.shape}")
    if t.numel() == 0:
        return t
    rows = t.shape[0]
    cols = t.numel() // rows
    flat = rng(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    with no_grad():
        return t.copy_(np.asarray(q.reshape(t.shape) * gain, dtype=t.dtype))


def eye_(t: Tensor) -> Tensor:
    """The identity matrix in a 2-D tensor (ones on the diagonal of a rectangular one)."""
    if t.ndim != 2:
        raise ValueError(f"eye_: only 2-D tensors are supported, got shape {t.shape}")
    with no_grad():
        return t.copy_(np.eye(*t.shape, dtype=t.dtype))


def dirac_(t: Tensor, groups: int = 1) -> Tensor:
    """The Dirac delta in a 3-, 4- or 5-D convolution weight: a convolution that keeps as many
    input channels as it can (per group)."""
    if t.ndim not in (3, 4, 5):
        raise ValueError(f"dirac_: only 3, 4 or 5-D tensors are supported, got shape {t.shape}")
    if t.shape[0] % groups:
        raise ValueError(f"dirac_: dim 0 ({t.shape[0]}) must be divisible by groups ({groups})")
    out_per_group = t.shape[0] // groups
    min_dim = min(out_per_group, t.shape[1])
    w = np.zeros(t.shape, dtype=t.dtype)
    centre = tuple(s // 2 for s in t.shape[2:])
    for g in range(groups):
        for d in range(min_dim):
            w[(g * out_per_group + d, d) + centre] = 1
    with no_grad():
        return t.copy_(w)


def sparse_(t: Tensor, sparsity: float, std: float = 0.01, generator: Generator | None = None) -> Tensor:
    """A 2-D matrix with N(0, std) entries and ``sparsity`` of each column set to zero."""
    if t.ndim != 2:
        raise ValueError(f"sparse_: only 2-D tensors are supported, got shape {t.shape}")
    g = rng(generator)
    rows, cols = t.shape
    zeros = int(math.ceil(sparsity * rows))
    w = g.normal(0, std, size=(rows, cols))
    for c in range(cols):
        w[g.permutation(rows)[:zeros], c] = 0
    with no_grad():
        return t.copy_(np.asarray(w, dtype=t.dtype))


def _deprecated(fn: Any) -> Any:
    """PyTorch's old non-underscore names (init.uniform, ...): warn, then call the in-place one."""

    @functools.wraps(fn)
    def alias(*args: Any, **kwargs: Any) -> Any:
        warnings.warn(f"nn.init.{fn.__name__[:-1]} is now deprecated in favor of nn.init.{fn.__name__}.",
                      FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)

    alias.__name__ = fn.__name__[:-1]
    return alias

uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
sparse = _deprecated(sparse_)
