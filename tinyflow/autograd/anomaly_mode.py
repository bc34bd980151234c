"""Anomaly detection (``torch.autograd.anomaly_mode``): find the first op that makes a NaN or Inf.

While it is on (per thread), ``Function.apply`` checks every op's outputs and the backward engine
every op's input gradients (engine.py calls ``check_finite`` when ``_state.enabled``), and the
first non-finite value raises a RuntimeError naming the op and the phase. Slow: for debugging.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import Any

from tinyflow.device import array_module
from tinyflow.dtypes import is_floating_or_complex

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled"]


class _AnomalyMode(threading.local):
    def __init__(self) -> None:
        self.enabled = False


_state = _AnomalyMode()


class detect_anomaly(contextlib.ContextDecorator):
    """Check every op's outputs (forward) and input gradients (backward) for NaN/Inf.

    The first op that produces one raises a RuntimeError naming it. Slow: for debugging only.
    """

    def __enter__(self) -> None:
        self.prev = _state.enabled
        _state.enabled = True

    def __exit__(self, *exc: Any) -> None:
        _state.enabled = self.prev


class set_detect_anomaly:
    """``torch.autograd.set_detect_anomaly(mode)``: switches anomaly detection on or off from the
    call on (as a plain call), or for a ``with`` block (the previous setting comes back at its end)."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev = _state.enabled
        _state.enabled = bool(mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        _state.enabled = self.prev


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on (``detect_anomaly`` / ``set_detect_anomaly``)."""
    return bool(_state.enabled)


def check_finite(op: str, phase: str, arrays: Sequence[Any]) -> None:
    """Raise if one of ``arrays`` (an op's outputs, or its input gradients) holds a NaN or Inf."""
    for i, a in enumerate(arrays):
        if a is None or not hasattr(a, "dtype") or not is_floating_or_complex(a.dtype):
            continue
        xp = array_module(a)
        if not bool(xp.isfinite(a).all()):
            what = "output" if phase == "forward" else "gradient of input"
            raise RuntimeError(
                f"detect_anomaly: {op}.{phase} produced NaN or Inf in its {what} {i} "
                f"(shape {tuple(a.shape)})"
            )
