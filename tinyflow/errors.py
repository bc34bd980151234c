"""Error classes shared by the ops.

Where PyTorch raises ``RuntimeError`` (shapes that do not fit an op, a broadcast that fails),
tinyflow raises a class that subclasses it, so ``except RuntimeError`` in a PyTorch program
works; the ones that were ``ValueError`` before keep that base too, for tinyflow's own callers.
"""
from __future__ import annotations

__all__ = ["ShapeError"]


class ShapeError(ValueError, RuntimeError):
    """Shapes an op cannot work with (broadcasting, matmul, reshape, cat, an in-place result
    that does not fit its tensor): a RuntimeError in PyTorch, and a ValueError here too."""
