"""The rest of F's dropout: channel (feature) dropout in 1, 2 and 3 dims and SELU's alpha dropout:
the PyTorch surface. The framework's element dropout (F.dropout) is in dropout.py."""
from __future__ import annotations

import numpy as np

from tinyflow.nn.functional._utils import FunctionalError, _as_constant
from tinyflow.nn.functional.dropout import _check_p, dropout
from tinyflow.random import Generator, rng
from tinyflow.tensor import Tensor, ones

__all__ = ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]

_ALPHA_PRIME = 1.7580993408473766  # selu's scale * alpha: the value a dropped unit takes (negated)


def _feature_dropout(op: str, x: Tensor, p: float, training: bool, batched_ndim: int,
                     generator: Generator | None) -> Tensor:
    """Zero whole channels: one keep/drop draw per (N, C) (or per C for an unbatched input)."""
    _check_p(op, p)
    if not training or p == 0:
        return x
    lead = 2 if x.ndim == batched_ndim else 1
    shape = tuple(x.shape[:lead]) + (1,) * (x.ndim - lead)
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
