"""Dropout: the op, DropoutFunction (a mask drawn by the ``dropout_mask`` kernel, whose seed
``dropout_seed`` takes), and F's dropouts: element dropout (``dropout``), channel (feature) dropout
in 1, 2 and 3 dims, and SELU's alpha dropout, built on it."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyflow.arg_parser import FunctionalError
from tinyflow.autograd.function import Context, Function
from tinyflow.capture import state as capture_state
from tinyflow.creation import as_constant, ones, zeros_like
from tinyflow.dtypes import is_floating_or_complex
from tinyflow.random import Generator, default_generator, rng
from tinyflow.tensor import Tensor

__all__ = ["DropoutFunction", "dropout_seed", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
           "feature_alpha_dropout"]


def dropout_seed(draw: Callable[[], int]) -> Any:
    """The seed of one dropout mask: ``draw()`` now (an int), or inside a CUDA graph capture a
    (1,) uint64 slot of the capture that ``draw()`` refills before every replay, in the order the
    eager step draws: N replays give the masks of N eager steps (tinyflow/capture.py)."""
    capture = capture_state.capture
    if capture is None:
        return draw()
    return capture.slot(draw, np.uint64, 1)


class DropoutFunction(Function):
    """Inverted dropout: multiply by a mask of 0 and 1/(1-p) drawn by the ``dropout_mask`` kernel.

    ``seed`` is an int, or a (1,) uint64 device array the kernel reads (``dropout_seed``)."""

    @staticmethod
    def forward(ctx: Context, a: Any, p: float, seed: Any) -> Any:
        if not is_floating_or_complex(a.dtype):  # PyTorch's words: a * (mask / (1 - p)) is a float
            raise RuntimeError(f"dropout: result type Float can't be cast to the desired output type {a.dtype}")
        mask = ctx.kernels.dropout_mask(a, p, seed)
        ctx.save_for_backward(mask)
        return a * mask

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        (mask,) = ctx.saved_tensors
        return g * mask, None, None


# ======================================================================= F (tinyflow.nn.functional)


def _check_p(op: str, p: float) -> None:
    if not 0 <= p <= 1:
        raise FunctionalError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,  # noqa: A002
            generator: Generator | None = None) -> Tensor:
    """Inverted dropout; the identity when not training or p == 0."""
    _check_p("dropout", p)
    if not training or p == 0:
        return input
    if p == 1:  # zeros in the input's dtype (through the graph, for a zero gradient)
        return input * 0 if input.is_floating_point() else zeros_like(input)
    seed = dropout_seed(lambda: int((generator or default_generator).rng.integers(0, 2**63 - 1)))
    return DropoutFunction.apply(input, p, seed)


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
    return x * as_constant(keep * a, x) + as_constant(b, x)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:  # noqa: A002
    return _alpha_dropout("alpha_dropout", input, p, training, False)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,  # noqa: A002
                          inplace: bool = False) -> Tensor:
    return _alpha_dropout("feature_alpha_dropout", input, p, training, True)
