"""Embedding lookup: rows of a weight matrix gathered by integer ids, scatter-added back in backward."""
from __future__ import annotations

from typing import Any

from tinyflow.autograd import Context, Function
from tinyflow.device import device_check

__all__ = ["EmbeddingFunction"]


class IndexDtypeError(TypeError, RuntimeError):
    """Ids of a dtype embedding cannot look up: PyTorch's RuntimeError, tinyflow's TypeError before."""


class EmbeddingFunction(Function):
    """out[...] = weight[indices[...]]: (*, ) int ids and (V, D) weight -> (*, D).

    The weight gradient adds up the gradient rows of repeated ids (a scatter-add); the row of
    ``padding_idx`` gets no gradient, as in PyTorch.
    """

    @staticmethod
    def forward(ctx: Context, indices: Any, weight: Any, padding_idx: int | None = None) -> Any:
        xp = ctx.xp
        if weight.ndim != 2:
            raise ValueError(f"embedding: weight must be (num_embeddings, embedding_dim), got {tuple(weight.shape)}")
        if indices.dtype.kind != "i" or indices.dtype.itemsize < 4:  # int32 or int64, as PyTorch
            raise IndexDtypeError(
                f"embedding: indices must be an integer tensor (int64 or int32), got dtype {indices.dtype} with "
                f"shape {tuple(indices.shape)}; convert with .long()"
            )
        num = weight.shape[0]
        if indices.size:
            _check_range(xp, indices, num, tuple(weight.shape))
        ctx.save_for_backward(indices)
        ctx.num = num
        ctx.padding_idx = padding_idx
        return xp.take(weight, indices, axis=0)  # (*, D)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple:
        (indices,) = ctx.saved_tensors
        if not ctx.needs_input_grad[1]:
            return None, None
        flat = grad.reshape(-1, grad.shape[-1])  # (N, D)
        return None, ctx.kernels.embedding_backward(flat, indices.reshape(-1), ctx.num, ctx.padding_idx)


def _check_range(xp: Any, indices: Any, num: int, shape: tuple[int, ...]) -> None:
    """Ids outside [0, num) are an IndexError naming the smallest (if negative) or largest id: at
    once on the CPU, on a device at the next host read, so the lookup costs no sync
    (tinyflow.device.device_check)."""
    lo, hi = indices.min(), indices.max()

    def error(bad: int) -> IndexError:
        return IndexError(f"embedding: index {bad} is out of range for a weight of {num} rows (shape {shape}); "
                          "ids must lie in [0, num_embeddings)")

    device_check((lo < 0) | (hi >= num), xp.where(lo < 0, lo, hi), error, key=("embedding", shape))
