"""Vector norms between tensors: pairwise_distance (the triplet losses use it), cosine_similarity,
pdist and normalize, on the ops of tinyflow/ops/distance.py."""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.nn.functional._utils import FunctionalError, _broadcast_pair
from tinyflow.ops.distance import CosineSimilarityFunction, VectorNormFunction
from tinyflow.tensor import Tensor, tensor

__all__ = ["normalize", "cosine_similarity", "pdist", "pairwise_distance"]


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None) -> Tensor:  # noqa: A002
    """input / max(||input||_p along dim, eps)."""
    norm = VectorNormFunction.apply(input, float(p), dim, True)
    return input / norm.clip(eps, None)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps)) along ``dim`` (inputs broadcast)."""
    a, b = _broadcast_pair("cosine_similarity", x1, x2)
    if not -a.ndim <= dim < max(a.ndim, 1):
        raise IndexError(f"cosine_similarity: dim {dim} is out of range for inputs of {a.ndim} dims")
    return CosineSimilarityFunction.apply(a, b, dim, float(eps))


def pdist(input: Tensor, p: float = 2.0) -> Tensor:  # noqa: A002
    """The p-norm distances between every pair of rows i < j of (N, M), in row-major pair order."""
    if input.ndim != 2:
        raise FunctionalError(f"pdist: only supports 2D tensors, got: {input.ndim}D (shape {tuple(input.shape)})")
    i, j = np.triu_indices(input.shape[0], 1)
    diff = input[tensor(i)] - input[tensor(j)]  # (N*(N-1)/2, M)
    return VectorNormFunction.apply(diff, float(p), -1, False)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """||x1 - x2 + eps||_p over the last dim."""
    diff = x1 - x2 + eps
    return VectorNormFunction.apply(diff, float(p), -1 if diff.ndim else None, keepdim)
