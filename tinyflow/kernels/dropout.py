"""Random masks (dropout), drawn from an explicit seed so runs are reproducible."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["dropout_mask"]


def check_seed(seed: Any) -> Any:
    """None for an int seed; a seed given as an array (a captured step's device slot) checked to
    be one uint64 and returned. Shared by the reference and the CUDA twin."""
    if isinstance(seed, (int, np.integer)):
        return None
    shape, dtype = getattr(seed, "shape", None), getattr(seed, "dtype", None)
    if shape != (1,) or dtype != np.uint64:
        raise TypeError(f"dropout_mask: seed must be an int or a (1,) uint64 array, got "
                        f"{type(seed).__name__} shape {shape} dtype {dtype}")
    return seed


def dropout_mask(x: Any, p: float, seed: int | Any) -> Any:
    """A mask shaped like ``x``: 0 with probability p, else 1/(1-p) (inverted dropout), drawn from
    PCG64(seed) (the CUDA twin's counter-based generator gives other masks, as deterministic).
    ``seed`` is an int or a (1,) uint64 array holding it (a captured step's slot)."""
    if check_seed(seed) is not None:
        seed = int(np.asarray(seed)[0])
    keep = np.random.Generator(np.random.PCG64(seed)).random(x.shape, dtype=np.float32) >= p
    return (keep * np.asarray(1.0 / (1.0 - p), dtype=x.dtype)).astype(x.dtype, copy=False)
