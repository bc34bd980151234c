"""CUDA twin of ``tinyflow/kernels/embedding.py``: the embedding gradient over csrc/embedding.cu."""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.kernels import embedding as reference
from tinyflow_cuda.kernels._launch import KernelCall

__all__ = ["embedding_backward"]

Array = Any


def embedding_backward(grad: Array, indices: Array, num_embeddings: int,
                       padding_idx: int | None = None) -> Array:
    """Scatter-add the rows of ``grad`` (N, D) into a (num_embeddings, D) gradient at ``indices``.

    One thread per gradient element, atomically added into its row: repeated indices add up.
    """
    call = KernelCall("embedding_backward", grad, op="embedding backward")
    if not call.supported or grad.ndim != 2:
        return reference.embedding_backward(grad, indices, num_embeddings, padding_idx)
    with call:
        grad = call.contiguous(grad)
        indices = call.contiguous(indices.reshape(-1).astype(np.int64, copy=False))
        n, d = grad.shape
        if indices.shape[0] != n:
            raise ValueError(f"embedding_backward: {indices.shape[0]} indices for {n} gradient rows")
        out = call.zeros((num_embeddings, d))  # (V, D)
        if n:
            pad = -1 if padding_idx is None else int(padding_idx) % num_embeddings
            call.launch(n * d, [grad, indices, out, n, d, num_embeddings, pad])
        return out
