"""Grad mode (``torch.autograd.grad_mode``): whether ops record the graph, per thread.

``Function.apply`` (function.py) reads ``_state.enabled`` on every op call: when it is off, no
op records a node or saves anything, and results need no gradient. ``no_grad``, ``enable_grad``
and ``set_grad_enabled`` switch it for a ``with`` block or a decorated function and put the
previous value back at the end. The switch is per thread, as in PyTorch (data-parallel ranks
run as threads in the tests).
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any

__all__ = ["is_grad_enabled", "set_grad_enabled", "no_grad", "enable_grad"]


class _GradMode(threading.local):
    def __init__(self) -> None:
        self.enabled = True  # every thread starts recording


_state = _GradMode()


def is_grad_enabled() -> bool:
    """Whether ops record the graph in this thread now."""
    return _state.enabled


class set_grad_enabled(contextlib.ContextDecorator):
    """Context manager (and decorator) that turns graph recording on or off."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)

    def __enter__(self) -> None:
        self.prev = _state.enabled
        _state.enabled = self.mode

    def __exit__(self, *exc: Any) -> None:
        _state.enabled = self.prev


class no_grad(set_grad_enabled):
    """Run without recording a graph: results need no gradient, nothing is saved."""

    def __init__(self) -> None:
        super().__init__(False)


class enable_grad(set_grad_enabled):
    """Re-enable graph recording inside a ``no_grad`` block."""

    def __init__(self) -> None:
        super().__init__(True)
