"""``tinyflow.cpu.amp``: ``torch.cpu.amp.autocast`` over ``tinyflow.amp`` (bfloat16 by default)."""
from __future__ import annotations

from typing import Any

from tinyflow import amp as _amp

__all__ = ["autocast"]


def autocast(enabled: bool = True, dtype: Any = "bfloat16", cache_enabled: bool = True) -> _amp.autocast:
    """Half-precision GEMMs inside the block (``tinyflow.autocast("cpu", dtype, enabled)``)."""
    return _amp.autocast("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
