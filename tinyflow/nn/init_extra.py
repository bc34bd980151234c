"""The rest of nn.init: truncated normal, orthogonal, eye, Dirac and sparse initialisers and PyTorch's
deprecated names without the underscore (``init.uniform``, ...): the PyTorch surface. The
initialisers the framework's layers use (uniform_, normal_, constant_, zeros_, ones_, xavier_*,
kaiming_*, calculate_gain) are in init.py; ``tinyflow.nn.init.<name>`` reaches these too."""
from __future__ import annotations

import functools
import math
import warnings
from typing import Any

import numpy as np

from tinyflow.autograd import no_grad
from tinyflow.nn.init import (
    constant_,
    kaiming_normal_,
    kaiming_uniform_,
    normal_,
    uniform_,
    xavier_normal_,
    xavier_uniform_,
)
from tinyflow.random import Generator, rng
from tinyflow.tensor import Tensor

__all__ = [
    "trunc_normal_", "orthogonal_", "eye_", "dirac_", "sparse_", "uniform", "normal", "constant", "xavier_uniform",
    "xavier_normal", "kaiming_uniform", "kaiming_normal", "orthogonal", "eye", "dirac", "sparse",
]


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
