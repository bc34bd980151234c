"""Padding: F.pad in all of PyTorch's modes (constant, reflect, replicate, circular; negative widths
crop) and its op, PadNdFunction. The convolutions pad with it too (padding='same' with an even
kernel, padding_mode, the 3-d forms), and so do the packed-sequence utilities.

The op takes a (before, after) pair for every dim of the input (``pad``, at the end, turns
PyTorch's last-dim-first list into it and checks the sizes). A pair may crop one side and pad the other, and
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

from tinyflow.arg_parser import FunctionalError
from tinyflow.autograd.function import Context, Function
from tinyflow.ops.elementwise import not_implemented_for
from tinyflow.tensor import Tensor

__all__ = ["PadNdFunction", "pad"]

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


# ======================================================================= F (tinyflow.nn.functional)

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input: Tensor, pad: Any, mode: str = "constant", value: float | None = None) -> Tensor:  # noqa: A002
    """Pad the last len(pad) // 2 dims: ``pad`` is (left, right, top, bottom, front, back), last
    dim first, as ``torch.nn.functional.pad``. Negative widths crop, one side or both, in every mode
    (where the border then comes from: the module docstring); the sizes PyTorch refuses are refused."""
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"pad: unknown padding mode {mode!r}; use one of {_PAD_MODES}")
    widths_in = tuple(int(p) for p in pad)
    if len(widths_in) % 2:
        raise FunctionalError(f"pad: padding length must be divisible by 2, got {widths_in}")
    if len(widths_in) // 2 > input.ndim:
        raise FunctionalError(f"pad: padding {widths_in} pads {len(widths_in) // 2} dims but the input "
                              f"{tuple(input.shape)} has only {input.ndim}")
    if mode != "constant" and value is not None and value != 0:
        raise FunctionalError(f"pad: padding mode {mode!r} doesn't take in value argument")
    widths = [(0, 0)] * input.ndim
    for i in range(len(widths_in) // 2):
        widths[input.ndim - 1 - i] = (widths_in[2 * i], widths_in[2 * i + 1])
    for dim, ((lo, hi), n) in enumerate(zip(widths, input.shape)):
        if lo or hi:
            _check_sizes(mode, dim, lo, hi, n, tuple(input.shape))
    padded = range(input.ndim - len(widths_in) // 2, input.ndim)
    if mode in ("reflect", "replicate") and padded and all(sum(widths[d]) + input.shape[d] == 0 for d in padded):
        raise FunctionalError(f"pad: {mode} padding {widths_in} of input shape {tuple(input.shape)} leaves no "
                              "entry: at least one padded dim must keep a size of 1 or more")
    return PadNdFunction.apply(input, widths, mode, 0.0 if value is None else value)


def _check_sizes(mode: str, dim: int, lo: int, hi: int, n: int, shape: tuple[int, ...]) -> None:
    """PyTorch's limits on the widths (lo, hi) of dim ``dim`` (size ``n``) in ``mode``, one line each."""
    out, kept = n + lo + hi, n + min(lo, 0) + min(hi, 0)  # the output size; what the crops leave
    where = f"dim {dim} of size {n} (input shape {shape})"
    if mode == "constant" and (kept < 0 or out < 0):
        raise FunctionalError(f"pad: the input size {n} of dim {dim}, plus negative padding {lo} and {hi}, "
                              f"resulted in a negative output size (input shape {shape})")
    if mode in ("reflect", "replicate") and n == 0:
        raise FunctionalError(f"pad: {mode} padding {(lo, hi)} needs a non-empty {where}")
    if mode == "reflect" and (lo >= n or hi >= n):
        raise FunctionalError(f"pad: reflect padding {(lo, hi)} must be smaller than the input size {n} of {where}")
    if mode in ("reflect", "replicate") and out < 0:
        raise FunctionalError(f"pad: {mode} padding {(lo, hi)} of {where} leaves a negative output size {out}")
    if mode == "circular" and (kept < 0 or out < 0):
        raise FunctionalError(f"pad: circular padding {(lo, hi)} of {where} crops more than the input holds")
    if mode == "circular" and max(lo, hi) > kept:
        raise FunctionalError(f"pad: circular padding {(lo, hi)} of {where} wraps around more than once: each "
                              f"width must be at most the size the crops leave ({kept})")
