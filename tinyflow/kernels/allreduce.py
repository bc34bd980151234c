"""The reductions inside the all-reduce algorithms (the CUDA twins run on the device, on the
communication stream, so a GPU ring never copies its buffer to the host)."""
from __future__ import annotations

from typing import Any

__all__ = ["reduce_add", "reduce_scale"]


def reduce_add(dst: Any, src: Any) -> Any:
    """dst += src, in place; returns dst."""
    dst += src
    return dst


def reduce_scale(x: Any, factor: float) -> Any:
    """x *= factor, in place (the division of op='mean'); returns x."""
    x *= factor
    return x
