"""The embedding kernel: the scatter-add that is the backward of a table lookup.

The forward of ``F.embedding`` is plain fancy indexing (``weight[idx]``) and needs no kernel.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.dtypes import is_half
from tinyflow.kernels._cpu import array_module

__all__ = ["embedding_backward"]

Array = Any


def embedding_backward(
    grad: Array, indices: Array, num_embeddings: int, padding_idx: int | None = None
) -> Array:
    """Scatter-add rows of ``grad`` (N, D) into a (num_embeddings, D) weight gradient at ``indices`` (N,).

    Repeated indices add up; the row of ``padding_idx`` stays zero. On NumPy the rows are sorted
    by index and summed per run with one ``add.reduceat`` (several times faster than ``add.at``).
    Half-precision gradients add up in float32 and are rounded once, as the CUDA kernel and
    PyTorch do (a bfloat16 running sum of ones stops at 256).
    """
    xp = array_module(grad)
    half = is_half(grad.dtype)
    acc_dtype = np.float32 if half else grad.dtype
    out = xp.zeros((num_embeddings, grad.shape[-1]), dtype=acc_dtype)  # (V, D)
    if indices.size == 0:
        return out.astype(grad.dtype, copy=False)
    if xp is np:
        order = np.argsort(indices, kind="stable")
        ids = indices[order]
        starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
        out[ids[starts]] = np.add.reduceat(grad[order], starts, axis=0, dtype=acc_dtype)
    else:
        xp.add.at(out, indices, grad.astype(acc_dtype, copy=False))
    if padding_idx is not None:
        out[padding_idx] = 0
    return out.astype(grad.dtype, copy=False)
