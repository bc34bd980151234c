"""How tensors print: ``repr(x)`` and ``torch.set_printoptions`` (PyTorch keeps these in torch/_tensor_str.py)."""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from tinyflow.dtypes import get_default_dtype, is_floating

__all__ = ["set_printoptions", "get_printoptions", "tensor_repr"]

_PRINT_DEFAULTS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}
_PRINT_PROFILES = {"default": _PRINT_DEFAULTS, "short": {**_PRINT_DEFAULTS, "precision": 2, "edgeitems": 2},
                   "full": {**_PRINT_DEFAULTS, "threshold": float("inf")}}
_print_options = dict(_PRINT_DEFAULTS)


def set_printoptions(precision: int | None = None, threshold: float | None = None, edgeitems: int | None = None,
                     linewidth: int | None = None, profile: str | None = None, sci_mode: bool | None = None) -> None:
    """``torch.set_printoptions``: how tensors print. ``profile`` ("default", "short", "full")
    resets every option first; ``sci_mode`` True/False forces/suppresses scientific notation
    (None: chosen from the values)."""
    if profile is not None:
        if profile not in _PRINT_PROFILES:
            raise ValueError(f"set_printoptions: unknown profile {profile!r}; choose from {sorted(_PRINT_PROFILES)}")
        _print_options.update(_PRINT_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                        ("linewidth", linewidth)):
        if value is not None:
            _print_options[name] = value
    if sci_mode is not None or profile is not None:
        _print_options["sci_mode"] = sci_mode


def get_printoptions() -> dict[str, Any]:
    """The current print options (``torch._tensor_str.PRINT_OPTS`` as a dict)."""
    return dict(_print_options)


def _format_array(a: Any) -> str:
    opts = _print_options
    threshold = opts["threshold"]
    kwargs: dict[str, Any] = {
        "separator": ", ", "prefix": "tensor(", "precision": opts["precision"], "edgeitems": opts["edgeitems"],
        "threshold": sys.maxsize if threshold == float("inf") else int(threshold), "max_line_width": opts["linewidth"],
    }
    if opts["sci_mode"] is True and a.dtype.kind == "f":
        kwargs["formatter"] = {"float_kind": lambda x: np.format_float_scientific(x, precision=opts["precision"])}
    elif opts["sci_mode"] is False:
        kwargs["suppress_small"] = True
    if a.dtype.kind == "f" and "formatter" not in kwargs:
        finite = a[np.isfinite(a)]
        if finite.size and not np.all(finite == np.round(finite)):
            kwargs["floatmode"] = "fixed"  # PyTorch: every element with `precision` digits (2.5000, not 2.5)
    return np.array2string(a, **kwargs)




def tensor_repr(self: Any) -> str:
    """``repr(x)``: ``tensor([...], dtype=..., device=..., grad_fn=<...>)`` as PyTorch prints it."""
    body = _format_array(self._read("repr"))
    extra = []
    if self.dtype != get_default_dtype() and is_floating(self.dtype) or self.dtype.kind not in "fib":
        extra.append(f"dtype={self.dtype}")
    if self._device.type != "cpu":
        extra.append(f"device='{self._device}'")
    if self._ctx is not None:
        extra.append(f"grad_fn=<{self._ctx.fn.__name__}Backward>")
    elif self._requires_grad:
        extra.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extra) + ")"
