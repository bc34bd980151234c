"""F.pad in all of PyTorch's modes: constant (negative widths crop), reflect, replicate, circular.

``widths`` holds a (before, after) pair for every dim of the input (F.pad turns PyTorch's
last-dim-first list into it). The non-constant modes extend each axis with ``xp.pad`` and fold
the gradient of the added border back onto the input entries it copied, with slices: reflect
adds the mirrored border to entries 1..lo (and n-1-hi..n-2), replicate adds the summed border to
the edge entry, circular adds it to the far end. No scatter, so it is the same code on a GPU.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tinyflow.autograd import Context, Function

__all__ = ["PadNdFunction"]

_NUMPY_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


class PadNdFunction(Function):
    """Pad (or, with negative constant widths, crop) every dim by its (before, after) pair."""

    @staticmethod
    def forward(ctx: Context, a: Any, widths: Sequence[tuple[int, int]], mode: str = "constant",
                value: float = 0.0) -> Any:
        xp = ctx.xp
        ctx.widths, ctx.mode, ctx.in_shape = tuple(widths), mode, a.shape
        if mode == "constant":
            crop = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(widths, a.shape))
            grow = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
            return xp.pad(a[crop], grow, mode="constant", constant_values=value)
        return xp.pad(a, list(widths), mode=_NUMPY_MODE[mode])

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        if ctx.mode == "constant":  # the adjoint: drop the border, zeros where the input was cropped
            keep = tuple(slice(max(lo, 0), n - max(hi, 0)) for (lo, hi), n in zip(ctx.widths, g.shape))
            cropped = [(max(-lo, 0), max(-hi, 0)) for lo, hi in ctx.widths]
            return xp.pad(g[keep], cropped, mode="constant"), None, None, None
        for axis in reversed(range(g.ndim)):
            lo, hi = ctx.widths[axis]
            if lo or hi:
                g = _fold(xp, g, axis, lo, hi, ctx.in_shape[axis], ctx.mode)
        return g, None, None, None


def _fold(xp: Any, g: Any, axis: int, lo: int, hi: int, n: int, mode: str) -> Any:
    """The gradient of one padded axis summed back onto the ``n`` input entries it came from."""
    g = xp.moveaxis(g, axis, 0)
    out = g[lo:lo + n].copy()
    left, right = g[:lo], g[lo + n:]
    if mode == "reflect":  # border entry lo - p mirrors input entry p (and likewise on the right)
        out[1:lo + 1] += left[::-1]
        out[n - 1 - hi:n - 1] += right[::-1]
    elif mode == "replicate":
        out[0] += left.sum(axis=0)
        out[n - 1] += right.sum(axis=0)
    else:  # circular: the left border copies the last lo entries, the right one the first hi
        out[n - lo:] += left
        out[:hi] += right
    return xp.moveaxis(out, 0, axis)
