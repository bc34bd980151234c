"""Tensor methods of torch.linalg's surface (det, inverse, logdet, slogdet, pinverse, svd, qr,
cholesky, matrix_power, ...): each calls tinyflow.linalg (tinyflow/surface/linalg.py).

``LinalgMethods`` is a namespace, not a base class: tinyflow/surface/__init__.py attaches the methods and the
``tinyflow.*`` functions of this file that its table lists.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from tinyflow import return_types

if TYPE_CHECKING:
    from tinyflow.tensor import Tensor

__all__ = ["LinalgMethods"]


def _linalg() -> Any:
    import tinyflow.surface.linalg as linalg

    return linalg


def _decomposition() -> Any:
    from tinyflow.surface.ops import decomposition

    return decomposition


def _check_factor(op: str, factor: Tensor) -> None:
    _linalg()._check_matrix(op, factor, name="input2" if op == "cholesky_solve" else "A")


def _real_only(op: str, t: Tensor) -> None:
    from tinyflow.dtypes import is_complex

    if is_complex(t.dtype):
        raise NotImplementedError(f"{op}: complex tensors need a conjugate, which tinyflow does not have; "
                                  "use a real tensor (then it is the transpose)")


class LinalgMethods:
    """Tensor methods (``self`` is a Tensor): a namespace that tinyflow/surface/__init__.py reads; see the module docstring."""

    # ------------------------------------------------------------ determinants and inverses
    def det(self) -> Tensor:
        """The determinant of each square matrix (``torch.det`` is ``torch.linalg.det``)."""
        return _linalg().det(self)

    def logdet(self) -> Tensor:
        """log det of each square matrix: NaN where the determinant is negative, -inf where it is 0."""
        sign, logabsdet = _linalg().slogdet(self)
        return logabsdet.masked_fill(sign < 0, float("nan"))

    def slogdet(self) -> Any:
        """``(sign, logabsdet)`` of the determinant of each square matrix."""
        sign, logabsdet = _linalg().slogdet(self)
        return return_types.slogdet(sign, logabsdet)

    def inverse(self) -> Tensor:
        """The inverse of each square matrix (``torch.linalg.inv``)."""
        return _linalg().inv(self)

    def pinverse(self, rcond: float = 1e-15) -> Tensor:
        """The pseudo-inverse; singular values at or below ``rcond`` times the largest count as zero."""
        return _linalg().pinv(self, rtol=rcond)

    # ------------------------------------------------------------ decompositions (torch's old API)
    def svd(self, some: bool = True, compute_uv: bool = True) -> Any:
        """``(U, S, V)`` with ``self = U diag(S) V^T`` (V, not Vh as torch.linalg.svd): reduced
        when ``some``; with ``compute_uv=False`` U and V are zero (m, m) and (n, n) matrices."""
        linalg = _linalg()
        if not compute_uv:
            s = linalg.svdvals(self)
            m, n = self.shape[-2], self.shape[-1]
            batch = tuple(self.shape[:-2])
            return return_types.svd(self.new_zeros(batch + (m, m)), s, self.new_zeros(batch + (n, n)))
        u, s, vh = linalg.svd(self, full_matrices=not some)
        return return_types.svd(u, s, vh.mT)

    def qr(self, some: bool = True) -> Any:
        """``(Q, R)`` with ``self = QR``: reduced when ``some``, complete otherwise."""
        q, r = _linalg().qr(self, "reduced" if some else "complete")
        return return_types.qr(q, r)

    def cholesky(self, upper: bool = False) -> Tensor:
        """The Cholesky factor of each symmetric positive-definite matrix (lower, or upper = L^T)."""
        return _linalg().cholesky(self, upper=upper)

    def cholesky_solve(self, input2: Tensor, upper: bool = False) -> Tensor:
        """The solution X of ``A X = self`` for A = L L^T given its factor ``input2`` = L (lower
        triangular; U with A = U^T U when ``upper``). Batch dims broadcast."""
        _check_factor("cholesky_solve", input2)
        _linalg()._check_matrix("cholesky_solve", self, square=False)
        return _decomposition().CholeskySolve.apply(self, input2, upper)

    def cholesky_inverse(self, upper: bool = False) -> Tensor:
        """The inverse of A = L L^T (U^T U when ``upper``) from its Cholesky factor ``self``."""
        _check_factor("cholesky_inverse", self)
        return _decomposition().CholeskyInverse.apply(self, upper)

    # ------------------------------------------------------------ matrix functions
    def matrix_power(self, n: int) -> Tensor:
        """The n-th power of each square matrix (negative n: of its inverse)."""
        return _linalg().matrix_power(self, n)

    def matrix_exp(self) -> Tensor:
        """The matrix exponential of each square matrix."""
        return _linalg().matrix_exp(self)

    def cross(self, other: Tensor, dim: int | None = None) -> Tensor:
        """The cross product along ``dim``; without ``dim`` (deprecated, as torch.cross) along the
        first dim of size 3."""
        if dim is None:
            warnings.warn(
                "Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree with "
                "that of linalg.cross in a future release.", UserWarning, stacklevel=2)
            sizes = list(self.shape)
            if 3 not in sizes:
                raise RuntimeError("no dimension of size 3 in input")
            dim = sizes.index(3)
        return _linalg().cross(self, other, dim=dim)

    # ------------------------------------------------------------ adjoints
    @property
    def mH(self) -> Tensor:  # noqa: N802 (PyTorch's name)
        """The conjugate transpose of the last two dims; for real tensors the transpose ``mT``."""
        if self.ndim < 2:
            raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor.")
        _real_only("Tensor.mH", self)
        return self.mT

    @property
    def H(self) -> Tensor:  # noqa: N802
        """The conjugate transpose of a matrix (2-D only; a 0-D tensor is itself)."""
        if self.ndim not in (0, 2):
            more = " For batches of matrices, consider using tensor.mH" if self.ndim > 2 else ""
            raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.{more}")
        _real_only("Tensor.H", self)
        return self.mT if self.ndim == 2 else self

    def adjoint(self) -> Tensor:
        """The conjugate transpose of the last two dims (a view): ``mH``."""
        if self.ndim < 2:
            raise RuntimeError(
                f"tensor.adjoint() is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor."
            )
        _real_only("Tensor.adjoint", self)
        return self.mT


def chain_matmul(*matrices: Tensor) -> Tensor:
    """The product of 2-D matrices in the cheapest order (deprecated in torch: ``linalg.multi_dot``)."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    for i, m in enumerate(matrices):
        if m.ndim != 2:
            raise RuntimeError(f"chain_matmul(): tensor {i} must be 2D but got {m.ndim}D")
    if len(matrices) == 1:
        return matrices[0].clone()
    return _linalg().multi_dot(matrices)
