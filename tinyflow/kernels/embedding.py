"""The embedding kernel: the scatter-add that is the backward of a table lookup.

The forward of ``F.embedding`` is plain fancy indexing (``weight[idx]``) and needs no kernel.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.device import array_module

__all__ = ["embedding_backward"]

Array = Any


def embedding_backward(
    grad: Array, indices: Array, num_embeddings: int, padding_idx: int | None = None
) -> Array:
    """Scatter-add rows of ``grad`` (N, D) into a (num_embeddings, D) weight gradient at ``indices`` (N,).

    Repeated indices add up; the row of ``padding_idx`` stays zero. On NumPy the rows are sorted
    by index and summed per run with one ``add.reduceat`` (several times faster than ``add.at``).
    """
    xp = array_module(grad)
    out = xp.zeros((num_embeddings, grad.shape[-1]), dtype=grad.dtype)  # (V, D)
    if indices.size == 0:
        return out
    if xp is np:
        order = np.argsort(indices, kind="stable")
        ids = indices[order]
        starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
        out[ids[starts]] = np.add.reduceat(grad[order], starts, axis=0)
    else:
        xp.add.at(out, indices, grad)
    if padding_idx is not None:
        out[padding_idx] = 0
    return out
