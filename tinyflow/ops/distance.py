"""Vector norms and the distances built on them: the ops (VectorNormFunction,
CosineSimilarityFunction) and F.normalize, F.cosine_similarity, F.pdist and F.pairwise_distance
(the triplet losses use it). Gradients follow PyTorch's at the awkward points: a zero vector's
norm has gradient 0 (not NaN), and the inf-norm shares its gradient among tied maxima."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinyflow.arg_parser import FunctionalError, broadcast_pair
from tinyflow.autograd.function import Context, Function
from tinyflow.creation import tensor
from tinyflow.ops.elementwise import floating_only
from tinyflow.tensor import Tensor

__all__ = ["VectorNormFunction", "CosineSimilarityFunction", "normalize", "cosine_similarity", "pdist",
           "pairwise_distance"]


def _norm(xp: Any, x: Any, p: float, axis: Any, keepdims: bool) -> Any:
    ax = xp.abs(x)
    if p == 2:
        return xp.sqrt((x * x).sum(axis=axis, keepdims=keepdims))
    if p == 1:
        return ax.sum(axis=axis, keepdims=keepdims)
    if p == math.inf:
        return ax.max(axis=axis, keepdims=keepdims) if x.size else xp.zeros(
            np.sum(ax, axis=axis, keepdims=keepdims).shape, x.dtype)
    if p == -math.inf:
        return ax.min(axis=axis, keepdims=keepdims)
    if p == 0:
        return (x != 0).sum(axis=axis, keepdims=keepdims).astype(x.dtype)
    return (ax**p).sum(axis=axis, keepdims=keepdims) ** (1.0 / p)


class VectorNormFunction(Function):
    """The p-norm of ``x`` over ``dim`` (an int, a tuple, or None for all elements)."""

    @staticmethod
    def forward(ctx: Context, x: Any, p: float = 2.0, dim: Any = None, keepdim: bool = False) -> Any:
        xp = ctx.xp
        floating_only("vector_norm", x)
        out = _norm(xp, x, p, dim, True)
        ctx.save_for_backward(x, out)
        ctx.p, ctx.dim, ctx.keepdim = p, dim, keepdim
        res = out if keepdim else (out.reshape(()) if dim is None else xp.squeeze(out, axis=dim))
        return xp.asarray(res, dtype=x.dtype)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        x, n = ctx.saved_tensors
        p = ctx.p
        if not ctx.keepdim:
            g = g.reshape(n.shape)
        if p == 0:
            return xp.zeros_like(x), None, None, None
        if p == 1:
            return xp.sign(x) * g, None, None, None
        if p in (math.inf, -math.inf):
            ax = xp.abs(x)
            mask = (ax == n) | xp.isnan(ax)
            return xp.sign(x) * mask * (g / mask.sum(axis=ctx.dim, keepdims=True)), None, None, None
        safe = xp.where(n == 0, 1, n)
        if p == 2:
            scale = xp.where(n == 0, 0, g / safe)
            return x * scale, None, None, None
        scale = xp.where(n == 0, 0, g / safe ** (p - 1))
        return xp.sign(x) * xp.abs(x) ** (p - 1) * scale, None, None, None


class CosineSimilarityFunction(Function):
    """sum(x1 * x2, dim) / (max(|x1|, eps) * max(|x2|, eps)) for x1, x2 of one shape.

    As in PyTorch the clamp of each norm to eps is outside autograd: the gradient of a norm
    is x / |x| (0 for a zero vector) even where the clamp is active.
    """

    @staticmethod
    def forward(ctx: Context, x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Any:
        xp = ctx.xp
        floating_only("cosine_similarity", x1, x2)
        n1 = xp.sqrt((x1 * x1).sum(axis=dim, keepdims=True))
        n2 = xp.sqrt((x2 * x2).sum(axis=dim, keepdims=True))
        c1, c2 = xp.maximum(n1, eps), xp.maximum(n2, eps)
        y = ((x1 / c1) * (x2 / c2)).sum(axis=dim, keepdims=True)
        ctx.save_for_backward(x1, x2, n1, n2, c1, c2, y)
        ctx.dim = dim
        return xp.squeeze(y, axis=dim).astype(x1.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        x1, x2, n1, n2, c1, c2, y = ctx.saved_tensors
        g = xp.expand_dims(g, ctx.dim)
        inv1 = xp.where(n1 == 0, 0, 1 / xp.where(n1 == 0, 1, n1))
        inv2 = xp.where(n2 == 0, 0, 1 / xp.where(n2 == 0, 1, n2))
        g1 = g * (x2 / (c1 * c2) - y * x1 * inv1 / c1) if ctx.needs_input_grad[0] else None
        g2 = g * (x1 / (c1 * c2) - y * x2 * inv2 / c2) if ctx.needs_input_grad[1] else None
        return g1, g2, None, None


# ======================================================================= F (tinyflow.nn.functional)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None) -> Tensor:  # noqa: A002
    """input / max(||input||_p along dim, eps)."""
    norm = VectorNormFunction.apply(input, float(p), dim, True)
    return input / norm.clip(eps, None)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps)) along ``dim`` (inputs broadcast)."""
    a, b = broadcast_pair("cosine_similarity", x1, x2)
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
