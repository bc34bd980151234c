"""F.pad in all of PyTorch's modes: constant, reflect, replicate, circular; negative widths crop.

``widths`` holds a (before, after) pair for every dim of the input (F.pad turns PyTorch's
last-dim-first list into it and checks the sizes). A pair may crop one side and pad the other, and
where the border comes from follows PyTorch:

* constant: crop, then pad with the value (the order does not matter);
* reflect, replicate: the border copies the *whole* input, then the result is cropped, so a crop
  can reach into the added border (``reflect`` of ``[1 2 3 4 5]`` by (-1, 2) is ``[2 3 4 5 4 3]``);
* circular: crop first, then wrap around what is left (by (-1, 2): ``[2 3 4 5 2 3]``).

The copying modes extend each axis with ``xp.pad`` and fold the gradient of the added border back
onto the input entries it copied, with slices: reflect adds the mirrored border to entries 1..lo
(and n-1-hi..n-2), replicate adds the summed border to the edge entry, circular adds it to the far
end. A crop's gradient is zeros. No scatter, so it is the same code on a GPU.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tinyflow.autograd import Context, Function
from tinyflow.ops.elementwise import not_implemented_for

__all__ = ["PadNdFunction"]

_NUMPY_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}

Widths = Sequence[tuple[int, int]]


def _grow(widths: Widths) -> list[tuple[int, int]]:
    """The positive parts of ``widths``: what is added."""
    return [(max(lo, 0), max(hi, 0)) for lo, hi in widths]


def _cut(widths: Widths) -> list[tuple[int, int]]:
    """The negative parts of ``widths`` as positive counts: what is cropped."""
    return [(max(-lo, 0), max(-hi, 0)) for lo, hi in widths]


def _inside(cut: Widths, shape: Sequence[int]) -> tuple[slice, ...]:
    """The slices that drop ``cut`` entries from either end of each axis of ``shape``."""
    return tuple(slice(lo, n - hi) for (lo, hi), n in zip(cut, shape))


class PadNdFunction(Function):
    """Pad (positive widths) and crop (negative widths) every dim by its (before, after) pair."""

    @staticmethod
    def forward(ctx: Context, a: Any, widths: Widths, mode: str = "constant", value: float = 0.0) -> Any:
        xp = ctx.xp
        if mode in ("reflect", "replicate") and a.dtype.kind == "b":
            raise not_implemented_for(f"{mode} pad", a.dtype)
        ctx.widths, ctx.mode, ctx.in_shape = tuple(widths), mode, a.shape
        grow, cut = _grow(widths), _cut(widths)
        if mode == "constant":
            return xp.pad(a[_inside(cut, a.shape)], grow, mode="constant", constant_values=value)
        if mode == "circular":  # wrap around what the crop leaves
            return xp.pad(a[_inside(cut, a.shape)], grow, mode="wrap")
        padded = xp.pad(a, grow, mode=_NUMPY_MODE[mode])  # the border copies the whole input
        return padded[_inside(cut, padded.shape)]

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        grow, cut = _grow(ctx.widths), _cut(ctx.widths)
        if ctx.mode == "constant":  # the adjoint: drop the border, zeros where the input was cropped
            return xp.pad(g[_inside(grow, g.shape)], cut, mode="constant"), None, None, None
        if ctx.mode == "circular":
            core = tuple(n - lo - hi for (lo, hi), n in zip(cut, ctx.in_shape))
            return xp.pad(_fold_all(xp, g, grow, core, "circular"), cut, mode="constant"), None, None, None
        padded = xp.pad(g, cut, mode="constant")  # the whole padded input: zeros where it was cropped
        return _fold_all(xp, padded, grow, ctx.in_shape, ctx.mode), None, None, None


def _fold_all(xp: Any, g: Any, grow: Widths, shape: Sequence[int], mode: str) -> Any:
    """The gradient of an input of ``shape`` padded by ``grow``: each border folded back."""
    for axis in reversed(range(g.ndim)):
        lo, hi = grow[axis]
        if lo or hi:
            g = _fold(xp, g, axis, lo, hi, shape[axis], mode)
    return g


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
