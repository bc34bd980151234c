"""``tinyflow.linalg``: PyTorch's ``torch.linalg`` for real floating tensors.

Every function takes batches of matrices ``(..., m, n)`` (or vectors) as PyTorch, returns its named
tuples (``linalg_svd(U, S, Vh)``, ...) and is differentiable where PyTorch's is; the ops with their
own backward live in tinyflow/surface/ops/decomposition.py, the others compose differentiable Tensor ops.
Singular or non-positive-definite input raises :class:`LinAlgError` (a RuntimeError) with
PyTorch's message.

tinyflow limits: real float32 / float64 tensors only (complex input is a NotImplementedError);
no ``out=`` arguments; no eig / eigvals / lu / householder_product / tensorsolve; ``driver=``
selects no LAPACK routine (lstsq's driver only decides which of its results are filled in, as
PyTorch's).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tinyflow import return_types
from tinyflow.device import array_module
from tinyflow.dtypes import as_dtype, is_complex, is_floating, is_half
from tinyflow.surface.ops import decomposition as _dec
from tinyflow.surface.ops.decomposition import LinAlgError

if TYPE_CHECKING:
    from tinyflow.tensor import Tensor

__all__ = [
    "LinAlgError", "inv", "inv_ex", "solve", "det", "slogdet", "cholesky", "cholesky_ex", "qr", "svd", "svdvals",
    "eigh", "eigvalsh", "pinv", "matrix_power", "matrix_exp", "matrix_norm", "vector_norm", "norm", "cross",
    "multi_dot", "lstsq", "solve_triangular", "vecdot", "diagonal", "matrix_rank", "cond", "matmul",
]


_TORCH_DTYPE_NAMES = {
    "float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double", "int64": "Long",
    "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
    "complex64": "ComplexFloat", "complex128": "ComplexDouble",
}


# ------------------------------------------------------------------------------------ checks


def _tensor_class() -> Any:
    from tinyflow.tensor import Tensor

    return Tensor


def _dtype_name(dtype: Any) -> str:
    name = as_dtype(dtype).name
    return _TORCH_DTYPE_NAMES.get(name, name)


def _check_dtype(op: str, x: Any, what: str = "input") -> None:
    """PyTorch's errors for integer, bool and half-precision input; complex is tinyflow's limit."""
    if not isinstance(x, _tensor_class()):
        raise TypeError(f"{op}: expected a Tensor as {what}, got {type(x).__name__}")
    dtype = x.dtype
    if is_complex(dtype):
        raise NotImplementedError(
            f"{op}: complex tensors are not supported by tinyflow.linalg (got {dtype}); use float32 or float64"
        )
    if not is_floating(dtype):
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as {what}. Got {_dtype_name(dtype)}")
    if is_half(dtype):
        raise RuntimeError(f"{op}: Low precision dtypes not supported. Got {_dtype_name(dtype)}")


def _check_matrix(op: str, a: Any, square: bool = True, name: str = "A") -> None:
    """``a`` a real floating tensor of (batches of) matrices, square if asked."""
    _check_dtype(op, a)
    if a.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    if square and a.shape[-1] != a.shape[-2]:
        raise RuntimeError(
            f"{op}: {name} must be batches of square matrices, but they are {a.shape[-2]} by {a.shape[-1]} matrices"
        )


def _check_same_dtype(op: str, a: Tensor, b: Tensor) -> None:
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"{op}: Expected A and B to have the same dtype, but found A of type {_dtype_name(a.dtype)} and B of "
            f"type {_dtype_name(b.dtype)} instead"
        )


def _tolerances(a: Tensor, atol: Any, rtol: Any) -> tuple[Any, Any]:
    """PyTorch's defaults: rtol = eps * max(m, n) when neither is given, 0 when only atol (> 0) is."""
    def raw(v: Any) -> Any:
        if v is None:
            return 0.0
        return v.detach().array if isinstance(v, _tensor_class()) else v

    if rtol is None:
        positive_atol = atol is not None and (isinstance(atol, _tensor_class()) or atol > 0)
        rtol = 0.0 if positive_atol else float(np.finfo(a.dtype).eps) * max(a.shape[-2], a.shape[-1])
    return raw(atol), raw(rtol)


def _eye(n: int, like: Tensor) -> Tensor:
    from tinyflow.surface.functions import eye

    return eye(n, dtype=like.dtype, device=like.device)


# ------------------------------------------------------------------------------------ inverses and solves


def inv(A: Tensor) -> Tensor:  # noqa: N803 (PyTorch's name)
    """The inverse of each square matrix of A (..., n, n). Raises LinAlgError if one is singular."""
    _check_matrix("linalg.inv", A)
    return _dec.Inverse.apply(A, "linalg.inv", True)[0]


def inv_ex(A: Tensor, *, check_errors: bool = False) -> Any:  # noqa: N803
    """``(inverse, info)``: the inverses and, per matrix, 0 or LAPACK's index of a zero pivot
    (that inverse is then NaN). With ``check_errors`` a singular matrix raises LinAlgError."""
    _check_matrix("linalg.inv_ex", A)
    inverse, info = _dec.Inverse.apply(A, "linalg.inv_ex", check_errors)
    return return_types.linalg_inv_ex(inverse, info)


def _is_vector_rhs(A: Tensor, B: Tensor) -> bool:  # noqa: N803
    """PyTorch's rule: B is a (batch of) vector(s) if 1-D, or if its shape is A's without the last dim."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:  # noqa: N803
    """The solution X of ``A X = B`` (``X A = B`` with ``left=False``); A (..., n, n), B (..., n, k)
    (or (..., k, n) with ``left=False``) or a batch of vectors (..., n) (``left=True`` only, as
    PyTorch); batch dims broadcast."""
    _check_matrix("linalg.solve", A)
    _check_dtype("linalg.solve", B)
    _check_same_dtype("linalg.solve", A, B)
    vector = _is_vector_rhs(A, B)
    rhs = B.unsqueeze(-1) if vector else B  # a vector is a column, also with left=False (as PyTorch)
    n = A.shape[-1]
    if rhs.ndim < 2 or (rhs.shape[-2] if left else rhs.shape[-1]) != n:
        b_shape = "x".join(str(s) for s in rhs.shape[-2:])
        raise RuntimeError(
            f"linalg.solve: Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'} "
            f"({A.shape[-2]}x{n} and {b_shape})"
        )
    x = _dec.Solve.apply(A, rhs) if left else _dec.Solve.apply(A.mT, rhs.mT).mT  # X A = B <=> A^T X^T = B^T
    return x.squeeze(-1) if vector else x


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,  # noqa: N803
                     unitriangular: bool = False) -> Tensor:
    """The solution X of ``A X = B`` (``X A = B`` with ``left=False``) for A upper or lower
    triangular (only that triangle is read; its diagonal taken as ones if ``unitriangular``).
    A (..., n, n), B (..., n, k) (left) or (..., k, n) (right); batch dims broadcast. A zero
    on the diagonal gives inf / NaN, no error (as PyTorch)."""
    _check_matrix("linalg.solve_triangular", A)
    _check_dtype("linalg.solve_triangular", B)
    _check_same_dtype("linalg.solve_triangular", A, B)
    if B.ndim < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor B must have at least 2 dimensions.")
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(
            f"linalg.solve_triangular: Incompatible shapes of A and B for the equation "
            f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {B.shape[-2]}x{B.shape[-1]})"
        )
    if left:
        return _dec.SolveTriangular.apply(A, B, upper, unitriangular)
    return _dec.SolveTriangular.apply(A.mT, B.mT, not upper, unitriangular).mT


def pinv(A: Tensor, *, atol: Any = None, rtol: Any = None, hermitian: bool = False,  # noqa: N803
         rcond: Any = None) -> Tensor:
    """The Moore-Penrose pseudo-inverse of each matrix of A (..., m, n) -> (..., n, m); singular
    values at or below ``max(atol, rtol * largest)`` count as zero (``rcond``: the old name of
    rtol). ``hermitian``: A is symmetric (its eigendecomposition is used). The gradient assumes
    the rank does not change (as PyTorch's)."""
    _check_matrix("linalg.pinv", A, square=hermitian)
    if rcond is not None:
        rtol = rcond
    atol, rtol = _tolerances(A, atol, rtol)
    return _dec.PInverse.apply(A, atol, rtol, hermitian)


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None) -> Any:  # noqa: N803
    """The least-squares solution of ``A X = B`` (minimum norm when A is rank-deficient) as
    ``(solution, residuals, rank, singular_values)``. As PyTorch on the CPU: ``driver`` (default
    'gelsy') decides which of the others are filled in: residuals (squared residual norms, when
    m > n, the driver is not 'gelsy' and every A is full-rank), rank (not with 'gels'), singular
    values ('gelsd', 'gelss'); the others are empty. The solution's gradient is right for full-rank A."""
    op = "torch.linalg.lstsq"
    _check_matrix(op, A, square=False)
    _check_dtype(op, B)
    _check_same_dtype("linalg.lstsq", A, B)
    driver = "gelsy" if driver is None else driver
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(
            f"{op}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss), but got {driver!r}"
        )
    m, n = A.shape[-2], A.shape[-1]
    vector = B.ndim == A.ndim - 1
    rhs = B.unsqueeze(-1) if vector else B
    if rhs.shape[-2] != m:
        raise RuntimeError(f"{op}: input.size(-2) should match other.size(-2), got {m} and {rhs.shape[-2]}")
    rtol = float(np.finfo(A.dtype).eps) * max(m, n) if rcond is None or rcond < 0 else rcond
    solution = pinv(A, rtol=rtol) @ rhs  # (..., n, k)
    empty_float = A.new_zeros((0,))
    rank = A.new_zeros((0,), dtype=np.int64)
    if driver != "gels":
        rank = matrix_rank(A.detach(), rtol=rtol)
    singular_values = svdvals(A) if driver in ("gelsd", "gelss") else empty_float
    residuals = empty_float
    if m > n and driver != "gelsy":
        full = rank if driver != "gels" else matrix_rank(A.detach(), rtol=rtol)
        if bool((full == n).all()):
            residuals = ((A @ solution - rhs) ** 2).sum(-2)  # (..., k)
    return return_types.linalg_lstsq(solution.squeeze(-1) if vector else solution, residuals, rank, singular_values)


# ------------------------------------------------------------------------------------ determinants


def det(A: Tensor) -> Tensor:  # noqa: N803
    """The determinant of each square matrix of A; its gradient (the cofactor matrix) is finite
    for singular A too."""
    _check_matrix("linalg.det", A)
    return _dec.Det.apply(A)


def slogdet(A: Tensor) -> Any:  # noqa: N803
    """``(sign, logabsdet)``: the sign of det(A) (0 when singular) and log|det A| (-inf when
    singular), computed without overflow."""
    _check_matrix("linalg.slogdet", A)
    sign, logabsdet = _dec.SlogDet.apply(A)
    return return_types.linalg_slogdet(sign.detach(), logabsdet)


# ------------------------------------------------------------------------------------ decompositions


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:  # noqa: N803
    """The lower Cholesky factor L of each symmetric positive-definite A = L L^T (only A's lower
    triangle is read); ``upper=True`` returns L^T. Raises LinAlgError if A is not positive-definite."""
    _check_matrix("linalg.cholesky", A)
    return _dec.Cholesky.apply(A, upper, "linalg.cholesky", True)[0]


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> Any:  # noqa: N803
    """``(L, info)``: the Cholesky factors and, per matrix, 0 or the order of the first leading
    minor that is not positive-definite (that L is then only partly computed)."""
    _check_matrix("linalg.cholesky_ex", A)
    low, info = _dec.Cholesky.apply(A, upper, "linalg.cholesky_ex", check_errors)
    return return_types.linalg_cholesky_ex(low, info)


def qr(A: Tensor, mode: str = "reduced") -> Any:  # noqa: N803
    """``(Q, R)`` with A = QR, Q orthonormal columns, R upper triangular. ``mode``: 'reduced'
    (Q (m, k), R (k, n), k = min(m, n)), 'complete' (Q (m, m), R (m, n)) or 'r' (Q empty).
    Differentiable in 'reduced' mode and in 'complete' mode when m <= n."""
    _check_matrix("linalg.qr", A, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")
    q, r = _dec.QR.apply(A, mode)
    return return_types.linalg_qr(q, r)


def svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None) -> Any:  # noqa: N803
    """``(U, S, Vh)`` with A = U diag(S) Vh, S descending. ``full_matrices`` (default True, as
    PyTorch): U (m, m) and Vh (n, n), else the reduced (m, k), (k, n). Gradients of U and Vh are
    defined only for losses invariant to the signs of the singular vectors (as PyTorch)."""
    _check_matrix("linalg.svd", A, square=False)
    if driver is not None:
        raise RuntimeError(
            "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend."
        )
    u, s, vh = _dec.SVD.apply(A, full_matrices)
    return return_types.linalg_svd(u, s, vh)


def svdvals(A: Tensor, *, driver: str | None = None) -> Tensor:  # noqa: N803
    """The singular values of each matrix of A, in descending order."""
    _check_matrix("linalg.svdvals", A, square=False)
    return svd(A, full_matrices=False, driver=driver).S


def eigh(A: Tensor, UPLO: str = "L") -> Any:  # noqa: N803
    """``(eigenvalues, eigenvectors)`` of each symmetric matrix of A (only the ``UPLO`` triangle,
    'L' or 'U', is read): eigenvalues ascending, eigenvectors as columns."""
    _check_matrix("linalg.eigh", A)
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    w, v = _dec.Eigh.apply(A, UPLO)
    return return_types.linalg_eigh(w, v)


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:  # noqa: N803
    """The eigenvalues (ascending) of each symmetric matrix of A."""
    _check_matrix("linalg.eigvalsh", A)
    return eigh(A, UPLO).eigenvalues


# ------------------------------------------------------------------------------------ matrix functions


def matrix_power(A: Tensor, n: int) -> Tensor:  # noqa: N803
    """A^n for an integer n by repeated squaring: the identity for n = 0, powers of inv(A) for n < 0."""
    _check_matrix("linalg.matrix_power", A)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"linalg.matrix_power: n must be an integer, got {type(n).__name__}")
    n = int(n)
    if n == 0:
        return A * 0 + _eye(A.shape[-1], A)  # the identity, batched as A (its gradient is zero)
    base = inv(A) if n < 0 else A
    n = abs(n)
    result = None
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def matrix_exp(A: Tensor) -> Tensor:  # noqa: N803
    """The matrix exponential ``sum_k A^k / k!`` of each square matrix of A (scaling and
    squaring with a [13/13] Padé approximant)."""
    _check_matrix("linalg.matrix_exp", A)
    return _dec.MatrixExp.apply(A)


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:  # noqa: A002
    """The cross product of the 3-vectors along ``dim`` (both inputs have the same number of
    dims and broadcast)."""
    _check_dtype("linalg.cross", input)
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if not -input.ndim <= dim < input.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-input.ndim}, {input.ndim - 1}], "
                         f"but got {dim})")
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got {input.shape[dim]} and {other.shape[dim]}"
        )
    a, b = input._pair(other)
    return _dec.Cross.apply(a, b, dim % input.ndim)


def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """The product of a chain of matrices, multiplied in the order with the fewest flops. The first
    may be a vector (a row), the last a vector (a column); the others are 2-D."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    first, last = tensors[0], tensors[-1]
    if first.ndim not in (1, 2):
        raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got {first.ndim}D")
    if last.ndim not in (1, 2):
        raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got {last.ndim}D")
    for i, t in enumerate(tensors[1:-1], start=1):
        if t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    mats = [first.unsqueeze(0) if first.ndim == 1 else first, *tensors[1:-1],
            last.unsqueeze(-1) if last.ndim == 1 else last]
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(
                f"multi_dot(): tensors {i} and {i + 1} with shapes {tuple(tensors[i].shape)} and "
                f"{tuple(tensors[i + 1].shape)} cannot be multiplied"
            )
    out = _chain_product(mats, _chain_order([m.shape[0] for m in mats] + [mats[-1].shape[1]]), 0, len(mats) - 1)
    if first.ndim == 1:
        out = out.squeeze(0)
    if last.ndim == 1:
        out = out.squeeze(-1)
    return out


def _chain_order(dims: list[int]) -> list[list[int]]:
    """The classic dynamic programme: split[i][j] is where the cheapest product of matrices
    i..j splits (matrix i is dims[i] x dims[i + 1])."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain_product(mats: list[Tensor], split: list[list[int]], i: int, j: int) -> Tensor:
    if i == j:
        return mats[i]
    k = split[i][j]
    return _chain_product(mats, split, i, k) @ _chain_product(mats, split, k + 1, j)


def matmul(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """``input @ other`` (torch.linalg.matmul is torch.matmul)."""
    return input @ other


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of the vectors of x and y along ``dim`` (inputs broadcast)."""
    return (x * y).sum(dim)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:  # noqa: N803
    """The diagonals of the matrices of A (a view): torch.diagonal with the last two dims by default."""
    return A.diagonal(offset, dim1, dim2)


# ------------------------------------------------------------------------------------ norms, rank, condition


def _norm_dims(op: str, dim: Any, ndim: int) -> tuple[int, ...]:
    dims = tuple(range(ndim)) if dim is None else (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    out = []
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {d})"
            )
        out.append(int(d) % max(ndim, 1))
    if len(set(out)) != len(out):
        raise RuntimeError(f"{op}: dim {dims} appears multiple times in the list of dims")
    return tuple(out) if ndim else ()


def vector_norm(x: Tensor, ord: float = 2, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                dtype: Any = None) -> Tensor:
    """The vector ``ord``-norm ``(sum |x|^ord)^(1/ord)`` over ``dim`` (all entries when None):
    inf is max |x|, -inf min |x|, 0 the number of non-zeros. ``dtype``: compute in it."""
    _check_dtype("linalg.vector_norm", x)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    if dtype is not None:
        x = x.to(dtype)
    dims = _norm_dims("linalg.vector_norm", dim, x.ndim)
    if ord < 0 and x.numel() == 0 or (ord == math.inf and any(x.shape[d] == 0 for d in dims)):
        raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty tensor because the "
                           "operation does not have an identity")
    return _dec.VectorNorm.apply(x, float(ord), dims, keepdim)


_MATRIX_ORDS = ("fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2)


def matrix_norm(A: Tensor, ord: Any = "fro", dim: tuple[int, int] = (-2, -1), keepdim: bool = False, *,  # noqa: A002, N803
                dtype: Any = None) -> Tensor:
    """The matrix norm over the two dims ``dim``: 'fro' (Frobenius), 'nuc' (sum of singular values),
    2 / -2 (largest / smallest singular value), 1 / -1 (max / min column abs-sum), inf / -inf
    (max / min row abs-sum)."""
    op = "linalg.matrix_norm"
    _check_matrix(op, A, square=False)
    if ord not in _MATRIX_ORDS:
        raise RuntimeError(f"{op}: Order {ord} not supported.")
    if dtype is not None:
        A = A.to(dtype)
    if isinstance(dim, (int, np.integer)) or len(tuple(dim)) != 2:
        raise RuntimeError(f"{op}: dim must be a 2-tuple. Got {dim}")
    d0, d1 = _norm_dims(op, dim, A.ndim)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        s = svdvals(A.movedim((d0, d1), (-2, -1)))
        out = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
        if keepdim:
            for d in sorted((d0, d1)):
                out = out.unsqueeze(d)
        return out
    inner, outer = (d0, d1) if ord in (1, -1) else (d1, d0)  # 1: column sums, inf: row sums
    sums = A.abs().sum(inner, keepdim=True)
    out = sums.amax(outer, keepdim=True) if ord > 0 else sums.amin(outer, keepdim=True)
    if not keepdim:
        out = out.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    return out


def norm(A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:  # noqa: A002, N803
    """A vector or matrix norm: a vector norm over one ``dim``, a matrix norm over two; with no
    ``dim``, the 2-norm of all entries when ``ord`` is None, else A must be 1-D (vector) or 2-D (matrix)."""
    _check_dtype("linalg.norm", A)
    if dim is not None:
        dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.ndim}D.")


def matrix_rank(A: Tensor, *, atol: Any = None, rtol: Any = None, hermitian: bool = False) -> Tensor:  # noqa: N803
    """The number of singular values of each matrix of A above ``max(atol, rtol * largest)``
    (int64, A's batch shape; rtol defaults to eps * max(m, n)). Not differentiable."""
    _check_matrix("linalg.matrix_rank", A, square=hermitian)
    atol, rtol = _tolerances(A, atol, rtol)
    s = (eigvalsh(A).abs() if hermitian else svdvals(A)).detach().array  # (..., k)
    xp = array_module(s)
    smax = s.max(axis=-1, keepdims=True) if s.shape[-1] else xp.zeros(s.shape[:-1] + (1,), dtype=s.dtype)
    cutoff = xp.maximum(xp.asarray(atol, dtype=s.dtype)[..., None], xp.asarray(rtol, dtype=s.dtype)[..., None] * smax)
    return _tensor_class()._from_array((s > cutoff).sum(axis=-1).astype(np.int64), device=A.device)


def cond(A: Tensor, p: Any = None) -> Tensor:  # noqa: N803
    """The condition number of each matrix of A in the norm ``p``: for None / 2 / -2 the ratio of
    the extreme singular values, otherwise ``norm(A, p) * norm(inv(A), p)`` (square A)."""
    _check_matrix("linalg.cond", A, square=p not in (None, 2, -2))
    if p is not None and p not in _MATRIX_ORDS:
        raise RuntimeError(f"linalg.cond: Order {p} not supported.")
    if p in (None, 2, -2):
        s = svdvals(A)
        big, small = s[..., 0], s[..., -1]
        return big / small if p in (None, 2) else small / big
    return matrix_norm(A, p) * matrix_norm(inv(A), p)
