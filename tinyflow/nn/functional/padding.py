"""F.pad: constant (negative widths crop), reflect, replicate and circular padding, as
``torch.nn.functional.pad``. The convolutions pad with it too (padding='same' with an even
kernel, padding_mode, the 3-d forms), and so do the packed-sequence utilities."""
from __future__ import annotations

from typing import Any

from tinyflow.nn.functional._utils import FunctionalError
from tinyflow.ops.pad import PadNdFunction
from tinyflow.tensor import Tensor

__all__ = ["pad"]


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input: Tensor, pad: Any, mode: str = "constant", value: float | None = None) -> Tensor:  # noqa: A002
    """Pad the last len(pad) // 2 dims: ``pad`` is (left, right, top, bottom, front, back), last
    dim first, as ``torch.nn.functional.pad``. Negative widths crop, one side or both, in every mode
    (where the border then comes from: tinyflow/ops/pad.py); the sizes PyTorch refuses are refused."""
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
