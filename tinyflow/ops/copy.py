"""Copies: clone, dtype casts, moves between devices and the value in-place fills write (all
differentiable; Tensor.clone, Tensor.to and fill_/copy_/zero_ call them)."""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.autograd.function import Context, Function
from tinyflow.device import Device, device_of, move

__all__ = ["Clone", "Cast", "ToDevice", "Fill"]


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


class Fill(Function):
    """The new value of ``a.fill_(v)``, ``a.copy_(src)``, ``a.zero_()``: ``value`` (a number or an
    array) broadcast to a's shape and cast to a's dtype. The gradient goes to the value only; the
    old value of ``a`` gets none, as in PyTorch."""

    @staticmethod
    def forward(ctx: Context, a: Any, value: Any) -> Any:
        out = ctx.xp.empty(a.shape, dtype=a.dtype)
        out[...] = value
        return out

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        return None, g if ctx.needs_input_grad[1] else None
