"""Copies: clone, dtype casts and moves between devices (all differentiable; Tensor.clone and
Tensor.to call them)."""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.autograd import Context, Function
from tinyflow.device import Device, device_of, move

__all__ = ["Clone", "Cast", "ToDevice"]


class Clone(Function):
    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        return a.copy()

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        return g


class Cast(Function):
    """Change dtype; the gradient is cast back to the input's float dtype."""

    @staticmethod
    def forward(ctx: Context, a: Any, dtype: np.dtype) -> Any:
        ctx.dtype = a.dtype
        return a.astype(dtype)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return g.astype(ctx.dtype), None


class ToDevice(Function):
    """Copy to another device; the gradient travels back to where the input lives."""

    moves_device = True

    @staticmethod
    def forward(ctx: Context, a: Any, device: Device) -> Any:
        ctx.src = device_of(a)
        return move(a, device)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return move(g, ctx.src), None
