"""Random masks (dropout), drawn from an explicit seed so runs are reproducible."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["dropout_mask"]


def dropout_mask(x: Any, p: float, seed: int) -> Any:
    """A mask shaped like ``x``: 0 with probability p, else 1/(1-p) (inverted dropout).

    The reference draws from PCG64(seed); the CUDA twin uses its own counter-based generator,
    so the masks differ between devices but both are deterministic in ``seed``.
    """
    keep = np.random.Generator(np.random.PCG64(seed)).random(x.shape, dtype=np.float32) >= p
    return (keep * np.asarray(1.0 / (1.0 - p), dtype=x.dtype)).astype(x.dtype, copy=False)
