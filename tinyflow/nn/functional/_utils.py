"""What the F family files share: the error type, the int-or-tuple argument readers (PyTorch's
_single / _triple; ``_pair`` is tinyflow.kernels.shapes'), constants and targets as tensors."""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.errors import ShapeError
from tinyflow.tensor import Tensor, as_tensor, tensor


class FunctionalError(ShapeError):
    """An argument F cannot work with (shapes, sizes, modes). PyTorch raises RuntimeError for
    these, so ``except RuntimeError`` catches it, and ``except ValueError`` too."""


def _single(v: Any, name: str, op: str) -> int:
    """An int or a 1-sequence of ints (PyTorch's _single)."""
    if isinstance(v, int):
        return v
    try:
        (a,) = v
        return int(a)
    except (TypeError, ValueError):
        raise FunctionalError(f"{op}: {name} must be an int or a 1-tuple of ints, got {v!r}") from None


def _triple(v: Any, name: str, op: str) -> tuple[int, int, int]:
    """An int or a 3-sequence of ints (PyTorch's _triple)."""
    if isinstance(v, int):
        return (v, v, v)
    try:
        a, b, c = v
        return (int(a), int(b), int(c))
    except (TypeError, ValueError):
        raise FunctionalError(f"{op}: {name} must be an int or a 3-tuple of ints, got {v!r}") from None


def _as_constant(value: Any, like: Tensor) -> Tensor:
    """A NumPy array as a constant tensor of ``like``'s dtype and device (no gradient)."""
    return tensor(value, dtype=like.dtype, device=like.device)


def _broadcast_pair(op: str, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    try:
        shape = tuple(np.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
    except ValueError:
        raise FunctionalError(f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be broadcast "
                              "together") from None
    return (a if tuple(a.shape) == shape else a.expand(*shape)), (b if tuple(b.shape) == shape else b.expand(*shape))


def _target(t: Any, like: Tensor) -> Any:
    """A target given as Tensor, ndarray or list, as a raw array on ``like``'s device."""
    if isinstance(t, Tensor):
        return t.array
    arr = as_tensor(t).to(like.device) if not hasattr(t, "shape") else as_tensor(t)
    return arr.array
