"""CUDA twin of ``tinyflow/kernels/embedding.py``: the embedding gradient over csrc/embedding.cu,
for float32, float64, float16 and bfloat16 gradients (other dtypes run the reference)."""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.kernels import embedding as reference
from tinyflow_cuda.kernels._launch import KernelCall
from tinyflow_cuda.runtime import THREADS, grid_for

__all__ = ["embedding_backward"]

Array = Any

HALF_SUFFIXES = ("f16", "bf16")  # accumulated in a float32 buffer, rounded once at the end


def block_shape(d: int) -> tuple[int, int]:
    """(lanes along D, gradient rows) of a 256-thread block: lanes a power of two from 32 to 256,
    as few as cover D, so a narrow embedding still fills the block with rows."""
    lanes = 32
    while lanes < min(d, THREADS):
        lanes *= 2
    return lanes, THREADS // lanes


def embedding_backward(grad: Array, indices: Array, num_embeddings: int,
                       padding_idx: int | None = None) -> Array:
    """Scatter-add the rows of ``grad`` (N, D) into a (num_embeddings, D) gradient at ``indices``.

    Gradient rows are spread over the blocks, their columns over a block's lanes; each element is
    atomically added into its row, so repeated indices add up. Half-precision gradients add up in
    a float32 buffer that a second kernel rounds once (csrc/embedding.cu says why).
    """
    call = KernelCall("embedding_backward", grad, op="embedding backward")
    if not call.supported or grad.ndim != 2:
        return reference.embedding_backward(grad, indices, num_embeddings, padding_idx)
    with call:
        grad = call.contiguous(grad)
        indices = call.contiguous(indices.reshape(-1).astype(np.int64, copy=False))
        n, d = grad.shape
        if indices.shape[0] != n:
            raise ValueError(f"embedding_backward: {indices.shape[0]} indices for {n} gradient rows "
                             f"(grad {tuple(grad.shape)}); pass one index per gradient row")
        half = call.suffix in HALF_SUFFIXES
        if n == 0 or d == 0:
            return call.zeros((num_embeddings, d))  # (V, D), nothing to add
        acc = call.zeros((num_embeddings, d), np.float32 if half else None)  # (V, D)
        pad = -1 if padding_idx is None else int(padding_idx) % num_embeddings
        lanes, rows = block_shape(d)
        call.launch_grid(grid_for(n, rows), (lanes, rows), [grad, indices, acc, n, d,
                                                             num_embeddings, pad])
        if not half:
            return acc
        out = call.empty((num_embeddings, d))  # (V, D) in grad's dtype
        rounding = KernelCall("embedding_grad_round", grad, op="embedding backward")
        rounding.launch(out.size, [acc, out, out.size])
        return out
