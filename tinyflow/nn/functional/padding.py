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
    dim first, as ``torch.nn.functional.pad``. Negative widths crop (in every mode, before the
    border is added); reflect, replicate and circular copy the input's own border."""
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"pad: unknown padding mode {mode!r}; use one of {_PAD_MODES}")
    widths_in = tuple(int(p) for p in pad)
    if len(widths_in) % 2:
        raise FunctionalError(f"pad: padding length must be divisible by 2, got {widths_in}")
    if len(widths_in) // 2 > input.ndim:
        raise FunctionalError(f"pad: padding {widths_in} pads {len(widths_in) // 2} dims but the input "
                              f"{tuple(input.shape)} has only {input.ndim}")
    widths = [(0, 0)] * input.ndim
    for i in range(len(widths_in) // 2):
        widths[input.ndim - 1 - i] = (widths_in[2 * i], widths_in[2 * i + 1])
    for dim, ((lo, hi), n) in enumerate(zip(widths, input.shape)):
        if n + min(lo, 0) + min(hi, 0) < 0 or n + lo + hi < 0:
            raise FunctionalError(f"pad: the input size {n} of dim {dim}, plus negative padding {lo} and "
                                  f"{hi}, resulted in a negative output size")
    if mode == "constant":
        return PadNdFunction.apply(input, widths, "constant", 0.0 if value is None else value)
    if value is not None and value != 0:
        raise FunctionalError(f"pad: padding mode {mode!r} doesn't take in value argument")
    if any(lo < 0 or hi < 0 for lo, hi in widths):  # negative widths crop first, as in PyTorch
        crop = [(min(lo, 0), min(hi, 0)) for lo, hi in widths]
        input = PadNdFunction.apply(input, crop, "constant", 0.0)  # noqa: A001
        widths = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
        if not any(lo or hi for lo, hi in widths):
            return input
    for dim, ((lo, hi), n) in enumerate(zip(widths, input.shape)):
        limit_ok = (lo < n and hi < n) if mode == "reflect" else (lo <= n and hi <= n) if mode == "circular" else n > 0
        if (lo or hi) and not limit_ok:
            rule = {"reflect": "smaller than", "circular": "at most", "replicate": "used with a non-empty"}[mode]
            raise FunctionalError(f"pad: {mode} padding {(lo, hi)} of dim {dim} must be {rule} the input size "
                                  f"{n} (input shape {tuple(input.shape)})")
    return PadNdFunction.apply(input, widths, mode, 0.0)
