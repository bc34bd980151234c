"""``tinyflow.cuda.amp``: ``torch.cuda.amp``'s autocast and GradScaler over ``tinyflow.amp``.

Like PyTorch's, both turn themselves off with a warning where CUDA is not available: autocast
runs its block in full precision and the scaler passes every call through, so a CUDA training
script runs unchanged on a CPU-only machine.
"""
from __future__ import annotations

from typing import Any

from tinyflow import amp as _amp

__all__ = ["autocast", "GradScaler"]


def autocast(enabled: bool = True, dtype: Any = "float16", cache_enabled: bool = True) -> _amp.autocast:
    """Half-precision GEMMs inside the block on a GPU; full precision (and a warning) without CUDA."""
    return _amp.autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


def GradScaler(*args: Any, enabled: bool = True, **kwargs: Any) -> _amp.GradScaler:  # noqa: N802
    """A ``tinyflow.amp.GradScaler``, disabled (every call a pass-through) without CUDA."""
    return _amp.GradScaler("cuda", *args, enabled=enabled, **kwargs)
