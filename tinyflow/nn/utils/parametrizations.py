"""``torch.nn.utils.parametrizations``: weight_norm, spectral_norm and orthogonal built on
:func:`tinyflow.nn.utils.parametrize.register_parametrization`, with PyTorch's module names
(``_WeightNorm``, ``_SpectralNorm``, ``_Orthogonal``), buffers and state-dict keys
(``parametrizations.weight.original0`` / ``original1`` for weight_norm's g and v,
``parametrizations.weight.0._u`` / ``_v`` for spectral_norm's power-iteration vectors,
``parametrizations.weight.0.base`` for orthogonal's trivialization base).

tinyflow limits: real tensors only for ``orthogonal``; weight_norm does not convert old
``weight_g`` / ``weight_v`` state dicts on load (tinyflow modules have no load_state_dict pre-hooks).
"""
from __future__ import annotations

from enum import Enum, auto
from typing import Any

import numpy as np

from tinyflow.autograd.grad_mode import no_grad
from tinyflow.creation import cat, randn, tensor, zeros
from tinyflow.device import array_module
from tinyflow.dtypes import finfo
from tinyflow.nn import functional as F
from tinyflow.nn.modules.module import Module
from tinyflow.nn.utils import parametrize
from tinyflow.nn.utils.weight_norm import _norm_except_dim
from tinyflow.surface import linalg
from tinyflow.tensor import Tensor

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# ------------------------------------------------------------------------------ weight_norm
class _WeightNorm(Module):
    """``weight = g * v / ||v||`` with the norm over every dim but ``dim`` (over all when -1)."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Weight normalization ``w = g * v / ||v||`` (norm per slice along ``dim``, over the whole tensor
    when ``dim`` is None) as a parametrization: ``original0`` is g, ``original1`` is v. Returns
    ``module``."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


# ------------------------------------------------------------------------------ spectral_norm
def _normalize_into(target: Tensor, value: Any, eps: float) -> None:
    """``target[...] = value / max(||value||, eps)`` in place, outside autograd."""
    xp = target.device.xp
    target.array[...] = value / max(float(xp.sqrt(xp.sum(value * xp.conj(value)).real)), eps)
    target._versions[0] += 1


class _SpectralNorm(Module):
    """``weight / sigma`` with sigma the largest singular value of the weight as a matrix, estimated
    by power iteration on the buffers ``_u`` and ``_v`` (updated on every access in training mode);
    a vector is simply normalised."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with no_grad():
                mat = self._reshape_weight_to_matrix(weight.detach())
            h, w = mat.shape
            u = randn(h, dtype=weight.dtype, device=weight.device)
            v = randn(w, dtype=weight.dtype, device=weight.device)
            _normalize_into(u, u.array.copy(), eps)
            _normalize_into(v, v.array.copy(), eps)
            self.register_buffer("_u", u)
            self.register_buffer("_v", v)
            self._power_method(mat, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        m = weight_mat.array
        xp = weight_mat.device.xp
        for _ in range(n_power_iterations):  # PyTorch's order: u first, then v
            _normalize_into(self._u, m @ self._v.array, self.eps)
            _normalize_into(self._v, xp.conj(m.T) @ self._u.array, self.eps)

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = u @ weight_mat.mv(v)  # torch.vdot(u, W v), of real vectors
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Spectral normalization ``W / sigma(W)`` as a parametrization: sigma, the largest singular value
    of ``W`` reshaped to a matrix along ``dim`` (0, or 1 for ConvTranspose modules), is estimated
    with ``n_power_iterations`` of the power method on every access in training mode. Returns
    ``module``."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


# ------------------------------------------------------------------------------ orthogonal
class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


def _eye(n: int, k: int, like: Tensor) -> Tensor:
    """The n x k identity matrix with ``like``'s dtype and device."""
    return tensor(like.device.xp.eye(n, k), dtype=like.dtype, device=like.device)


def _householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """``linalg.householder_product``: the first k columns of ``H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^T``
    with ``v_i`` column i of A below the diagonal and 1 on it (a differentiable composition)."""
    n, k = A.shape[-2], A.shape[-1]
    eye = _eye(n, k, A)
    V = A.tril(-1) + eye
    Q = eye.expand(*A.shape[:-2], n, k) if A.ndim > 2 else eye
    for i in reversed(range(k)):
        v = V[..., :, i:i + 1]
        Q = Q - tau[..., i:i + 1].unsqueeze(-1) * (v @ (v.mT @ Q))
    return Q


def _geqrf(a: Any) -> tuple[Any, Any]:
    """LAPACK's geqrf on a real (..., n, k) array: R above the diagonal, the Householder vectors below
    it, and their scalings tau (arrays, no autograd)."""
    xp = array_module(a)
    a = a.copy()
    n, k = a.shape[-2], a.shape[-1]
    tau = xp.zeros(a.shape[:-2] + (min(n, k),), dtype=a.dtype)
    flat_a, flat_tau = a.reshape(-1, n, k), tau.reshape(-1, min(n, k))
    for m, t in zip(flat_a, flat_tau):
        for j in range(min(n, k)):
            alpha, x = float(m[j, j]), m[j + 1:, j]
            xnorm = float(xp.sqrt((x * x).sum())) if x.size else 0.0
            if xnorm == 0.0:
                continue
            beta = -float(np.copysign(np.hypot(alpha, xnorm), alpha))
            t[j] = (beta - alpha) / beta
            m[j + 1:, j] = x / (alpha - beta)
            m[j, j] = beta
            v = xp.concatenate([xp.ones(1, dtype=a.dtype), m[j + 1:, j]])
            m[j:, j + 1:] -= t[j] * xp.outer(v, v @ m[j:, j + 1:])
    return flat_a.reshape(a.shape), flat_tau.reshape(tau.shape)


def _is_orthogonal(Q: Tensor) -> bool:
    n, k = Q.shape[-2], Q.shape[-1]
    xp = Q.device.xp
    eps = 10.0 * n * float(finfo(Q.dtype).eps)
    return bool(xp.allclose(Q.mH.array @ Q.array, xp.eye(k, dtype=Q.array.dtype), atol=eps))


def _make_orthogonal(A: Tensor) -> Tensor:
    """The Q of A = QR (A tall) with diag(R) made non-negative."""
    Q, R = linalg.qr(A)
    return Q * R.diagonal(0, -2, -1).sgn().unsqueeze(-2)


class _Orthogonal(Module):
    """An orthogonal matrix (orthonormal columns if tall, rows if wide) from an unconstrained one, by
    the matrix exponential or Cayley map of a skew-symmetric matrix or by Householder reflectors,
    times the buffer ``base`` with the dynamic trivialization."""

    def __init__(self, weight: Tensor, orthogonal_map: _OrthMaps, *, use_trivialization: bool = True) -> None:
        super().__init__()
        if weight.is_complex():
            raise NotImplementedError("orthogonal: complex weights are not supported by tinyflow; use a real weight")
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                X = cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], n, n - k)], dim=-1)
            A = X - X.mH
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = linalg.matrix_exp(A)
            else:
                eye = _eye(n, n, A)
                Q = linalg.solve(eye - 0.5 * A, eye + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = _householder_product(A, tau)
            Q = Q * X.diagonal(0, -2, -1).detach().trunc().unsqueeze(-2)  # PyTorch's .int(): no gradient
        if "base" in self._buffers:
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        if tuple(Q.shape) != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {tuple(Q.shape)}.")
        with no_grad():
            return self._right_inverse(Q.detach())

    def _right_inverse(self, Q: Tensor) -> Tensor:
        q_init = Q
        n, k = Q.shape[-2], Q.shape[-1]
        transpose = n < k
        if transpose:
            Q = Q.mT
            n, k = k, n
        if "base" not in self._buffers:
            if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                          "parametrizations when use_trivialization=False.")
            a, tau = _geqrf(Q.array)
            xp = array_module(a)
            for i in range(tau.shape[-1]):  # the diagonal becomes sign(R_ii), negated where tau_i = 0
                a[..., i, i] = xp.sign(a[..., i, i]) * xp.where(tau[..., i] == 0.0, -1.0, 1.0)
            A = tensor(a, dtype=Q.dtype, device=Q.device)
            return A.mT if transpose else A
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        else:
            N = randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype, device=Q.device)
            Q = _make_orthogonal(cat([Q, N], dim=-1))
        self.base = Q
        neg_id = zeros(*q_init.shape, dtype=q_init.dtype, device=q_init.device)
        neg_id.array[...] = -neg_id.device.xp.eye(q_init.shape[-2], q_init.shape[-1], dtype=q_init.array.dtype)
        return neg_id


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Make ``module.<name>`` (a matrix or batch of matrices) orthogonal: ``Q^T Q = I`` when tall,
    ``Q Q^T = I`` when wide, through ``orthogonal_map`` ("matrix_exp", "cayley" or "householder";
    default "matrix_exp" for square matrices, "householder" otherwise), with the dynamic
    trivialization (a ``base`` buffer) when ``use_trivialization``. The initial value is the
    weight itself if orthogonal, else its QR orthogonalization. Real tensors only in tinyflow.
    Returns ``module``."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
