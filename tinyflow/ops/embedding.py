"""Lookups by id: the embedding op (rows of a weight matrix gathered by integer ids, scatter-added
back in backward) and F's embedding (with max_norm's in-place renormalisation), embedding_bag and
one_hot."""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.arg_parser import FunctionalError
from tinyflow.autograd.function import Context, Function
from tinyflow.creation import as_constant, stack, target_array, tensor, zeros
from tinyflow.device import device_check
from tinyflow.ops.distance import _norm
from tinyflow.tensor import Tensor

__all__ = ["EmbeddingFunction", "embedding", "embedding_bag", "one_hot"]


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


# ======================================================================= F (tinyflow.nn.functional)


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,  # noqa: A002
              max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """The rows of ``weight`` at the ids in ``input``, as ``torch.nn.functional.embedding``.

    A negative ``padding_idx`` counts from the end; its row gets no gradient. With ``max_norm``
    the looked-up rows whose ``norm_type``-norm exceeds it are rescaled in place first, as in
    PyTorch. ``sparse`` is accepted (the gradient is dense in tinyflow).
    """
    if padding_idx is not None:
        if not -weight.shape[0] <= padding_idx < weight.shape[0]:
            raise FunctionalError(f"embedding: padding_idx {padding_idx} must be within num_embeddings "
                                  f"({weight.shape[0]})")
        if padding_idx < 0:
            padding_idx += weight.shape[0]
    if scale_grad_by_freq:
        raise NotImplementedError("embedding: scale_grad_by_freq=True is not supported")
    if max_norm is not None:
        _embedding_renorm_(weight, input, float(max_norm), float(norm_type))
    return EmbeddingFunction.apply(input, weight, padding_idx=padding_idx)


def _embedding_renorm_(weight: Tensor, input: Tensor, max_norm: float, norm_type: float) -> None:
    """Scale the rows of ``weight`` that ``input`` uses down to norm ``max_norm`` (in place, no graph)."""
    xp = weight.device.xp
    rows = xp.unique(input.array.reshape(-1))
    w = weight.array
    norms = _norm(xp, w[rows].astype(np.float64), norm_type, 1, True)
    scale = xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
    w[rows] = (w[rows] * scale).astype(w.dtype)
    weight._versions[0] += 1  # an in-place edit, as PyTorch's embedding_renorm_


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,  # noqa: A002
                  max_norm: float | None = None, norm_type: float = 2, scale_grad_by_freq: bool = False,
                  mode: str = "mean", sparse: bool = False, per_sample_weights: Tensor | None = None,
                  include_last_offset: bool = False, padding_idx: int | None = None) -> Tensor:
    """Sums, means or maxima of bags of embeddings: the rows of a 2-D ``input``, or the slices of a
    1-D ``input`` that ``offsets`` start. Ids equal to ``padding_idx`` are left out (and not
    counted in a mean); an empty bag gives zeros. (B, embedding_dim)."""
    op = "embedding_bag"
    if mode not in ("sum", "mean", "max"):
        raise FunctionalError(f"{op}: mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"{op}: per_sample_weights was not None; it is only supported for mode='sum' "
                                  f"(got mode={mode!r})")
    if not weight.is_floating_point():
        raise RuntimeError(f"{op}: weight must be floating point (float16, bfloat16, float32 or float64), got "
                           f"{weight.dtype}")
    ids = np.asarray(target_array(input, weight))
    if ids.ndim == 2:
        if offsets is not None:
            raise FunctionalError(f"{op}: if input is 2-D, then offsets has to be None, as input is treated as a "
                                  "mini-batch of fixed length sequences")
        starts = np.arange(0, ids.size, ids.shape[1]) if ids.size else np.zeros(ids.shape[0], np.int64)
        ends = starts + ids.shape[1]
    elif ids.ndim == 1:
        if offsets is None:
            raise FunctionalError(f"{op}: offsets has to be a 1-D tensor but got None")
        starts = np.asarray(target_array(offsets, weight)).astype(np.int64)
        if include_last_offset:
            starts, ends = starts[:-1], starts[1:]
        else:
            ends = np.append(starts[1:], ids.size)
    else:
        raise FunctionalError(f"{op}: input has to be 1-D or 2-D, got shape {tuple(input.shape)}")
    flat = ids.reshape(-1)
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    emb = embedding(Tensor._from_array(weight.device.xp.asarray(flat), device=weight.device), weight,
                    padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type)  # (T, D)
    keep = flat != padding_idx if padding_idx is not None else np.ones(flat.shape, bool)
    bags = len(starts)
    if mode == "max":
        rows = []
        for b in range(bags):
            sel = np.nonzero(keep[starts[b]:ends[b]])[0] + starts[b]
            rows.append(emb[tensor(sel)].amax(0) if sel.size else
                        zeros(weight.shape[1], dtype=weight.dtype, device=weight.device))
        return stack(rows) if rows else emb[:0]
    matrix = np.zeros((bags, flat.size))  # (B, T): each bag's weights over the positions
    for b in range(bags):
        span = np.arange(starts[b], ends[b])
        span = span[keep[span]]
        if span.size:
            matrix[b, span] = 1.0 / span.size if mode == "mean" else 1.0
    if per_sample_weights is not None:
        psw_t = per_sample_weights.reshape(1, -1)
        return (as_constant(matrix, emb) * psw_t) @ emb
    return as_constant(matrix, emb) @ emb


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """(*) int64 class ids -> (*, num_classes) int64 of zeros with a one at each id."""
    op = "one_hot"
    if tensor.dtype.kind not in "iu":
        raise FunctionalError(f"{op}: one_hot is only applicable to index tensors (int64), got {tensor.dtype}")
    xp = tensor.device.xp
    ids = tensor.array
    if ids.size:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0:
            raise FunctionalError(f"{op}: class values must be non-negative, got {lo}")
        if num_classes >= 0 and hi >= num_classes:
            raise FunctionalError(f"{op}: class values must be smaller than num_classes ({num_classes}), got {hi}")
        n = hi + 1 if num_classes < 0 else num_classes
    elif num_classes < 0:
        raise FunctionalError(f"{op}: can not infer total number of classes from an empty tensor; pass num_classes")
    else:
        n = num_classes
    out = (ids[..., None] == xp.arange(n)).astype(np.int64)
    return Tensor._from_array(out, device=tensor.device)
