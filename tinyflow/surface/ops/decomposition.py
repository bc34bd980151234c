"""Matrix decompositions and the ops of ``tinyflow.linalg`` that need their own backward: inverse,
solve, determinants, Cholesky, QR, SVD, eigh, pseudo-inverse, matrix exponential, cross product
and vector norms.

Every op works on batches of matrices (``(..., m, n)``, as PyTorch) and computes its forward with
``xp.linalg`` (NumPy's LAPACK, CuPy's cuSOLVER). The backward formulas are PyTorch's
(FunctionsManual.cpp) for real inputs. Argument checks and the user-facing API live in
tinyflow/surface/linalg.py; the ops here only raise :class:`LinAlgError` for singular or
non-positive-definite input, with PyTorch's messages.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinyflow.autograd.function import Context, Function
from tinyflow.device import to_host

__all__ = [
    "LinAlgError", "Inverse", "Solve", "SolveTriangular", "Det", "SlogDet", "Cholesky", "CholeskySolve",
    "CholeskyInverse", "QR", "SVD", "Eigh",
    "PInverse", "MatrixExp", "Cross", "VectorNorm", "inverse_with_info", "cholesky_with_info",
]


class LinAlgError(RuntimeError):
    """``torch.linalg.LinAlgError``: the input of a linear-algebra op is singular or not
    positive-definite."""


# ------------------------------------------------------------------------------------ helpers


def _mT(x: Any) -> Any:
    """The transpose of the last two dims (a view)."""
    return x.swapaxes(-1, -2)


def _batch_prefix(shape: tuple[int, ...], flat_index: int) -> str:
    """PyTorch's "(Batch element k): " prefix of an error in one matrix of a batch."""
    return f"(Batch element {flat_index}): " if len(shape) > 2 else ""


def _is_numpy(xp: Any) -> bool:
    return xp is np


def _host(xp: Any, a: Any, why: str) -> np.ndarray:
    """``a`` on the host: itself on the CPU (no host read counted), a copy from a GPU."""
    return a if _is_numpy(xp) else to_host(a, why)


def _any_failed(xp: Any, info: Any) -> bool:
    return bool(_host(xp, info.any(), "linalg error check"))


def _all_finite(xp: Any, a: Any) -> bool:
    """Whether every entry of ``a`` is finite (one host read on a GPU)."""
    return bool(to_host(xp.isfinite(a).all(), "linalg error check"))


def _lu_zero_pivots(a: np.ndarray) -> np.ndarray:
    """Per matrix of the batch ``a`` (..., n, n) on the host: the 1-based index of the first
    exactly-zero pivot of LU with partial pivoting (LAPACK getrf's ``info``), 0 when none."""
    batch = a.shape[:-2]
    n = a.shape[-1]
    mats = np.array(a, dtype=np.float64).reshape(-1, n, n)
    info = np.zeros(len(mats), dtype=np.int32)
    for b, m in enumerate(mats):
        for k in range(n):
            p = k + int(np.argmax(np.abs(m[k:, k])))
            if m[p, k] == 0 or not np.isfinite(m[p, k]):
                info[b] = k + 1
                break
            m[[k, p]] = m[[p, k]]
            m[k + 1:, k:] -= np.outer(m[k + 1:, k] / m[k, k], m[k, k:])
    return info.reshape(batch)


def _cholesky_failures(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per matrix of ``a`` (..., n, n) on the host, from its lower triangle: the order of the first
    leading minor that is not positive-definite (LAPACK potrf's ``info``, 0 when none) and the
    factor as far as it got (the columns before the failing one; zeros after)."""
    batch = a.shape[:-2]
    n = a.shape[-1]
    mats = np.array(a, dtype=np.float64).reshape(-1, n, n)
    info = np.zeros(len(mats), dtype=np.int32)
    factors = np.zeros_like(mats)
    for b, m in enumerate(mats):
        low = factors[b]
        for j in range(n):
            d = m[j, j] - low[j, :j] @ low[j, :j]
            if not d > 0:  # also NaN
                info[b] = j + 1
                break
            low[j, j] = math.sqrt(d)
            low[j + 1:, j] = (m[j + 1:, j] - low[j + 1:, :j] @ low[j, :j]) / low[j, j]
    return info.reshape(batch), factors.reshape(a.shape)


def _first_failure(info: np.ndarray) -> tuple[int, int]:
    """(flat batch index, info value) of the first matrix whose ``info`` is non-zero."""
    flat = info.reshape(-1)
    k = int(np.flatnonzero(flat)[0])
    return k, int(flat[k])


def singular_inverse_error(op: str, shape: tuple[int, ...], info: np.ndarray) -> LinAlgError:
    k, pivot = _first_failure(info)
    return LinAlgError(
        f"{op}: {_batch_prefix(shape, k)}The diagonal element {pivot} is zero, the inversion could not be "
        "completed because the input matrix is singular."
    )


def not_positive_definite_error(op: str, shape: tuple[int, ...], info: np.ndarray) -> LinAlgError:
    k, order = _first_failure(info)
    return LinAlgError(
        f"{op}: {_batch_prefix(shape, k)}The factorization could not be completed because the input is not "
        f"positive-definite (the leading minor of order {order} is not positive-definite)."
    )


def _fill_where_ok(fn: Any, a: Any, out: Any, info: np.ndarray, fallback: int) -> None:
    """``out[k] = fn(a[k])`` for each matrix k of the batch whose ``info`` is 0 (the error path
    only: one call per matrix). A matrix that ``fn`` still rejects (LAPACK in float32 can meet
    a zero pivot that the float64 diagnosis did not) gets ``info`` = ``fallback``."""
    n = a.shape[-1]
    flat_a, flat_out, flat_info = a.reshape(-1, n, n), out.reshape(-1, n, n), info.reshape(-1)
    for k in np.flatnonzero(flat_info == 0):
        try:
            flat_out[k] = fn(flat_a[k])
        except np.linalg.LinAlgError:
            flat_info[k] = fallback


def inverse_with_info(xp: Any, a: Any) -> tuple[Any, Any]:
    """``(inv(a), info)`` for a batch (..., n, n): ``info`` (int32, batch-shaped) is 0 where the
    matrix is invertible and LAPACK's index of the zero pivot where it is singular; those
    inverses are NaN. One host read on a GPU (the finiteness check)."""
    batch = a.shape[:-2]
    try:
        inv = xp.linalg.inv(a)
        if _is_numpy(xp) or _all_finite(xp, inv):
            return inv, xp.zeros(batch, dtype=np.int32)
    except np.linalg.LinAlgError:
        pass
    info = _lu_zero_pivots(to_host(a, "linalg singular matrix diagnosis"))
    inv = xp.full(a.shape, np.nan, dtype=a.dtype)
    _fill_where_ok(xp.linalg.inv, a, inv, info, a.shape[-1])
    return inv, xp.asarray(info)


def cholesky_with_info(xp: Any, a: Any) -> tuple[Any, Any]:
    """``(L, info)`` with ``L`` the lower Cholesky factor of each matrix of ``a`` (its lower
    triangle is read) and ``info`` LAPACK's order of the first leading minor that is not
    positive-definite (0 where the factorization succeeded; that ``L`` is partial)."""
    batch = a.shape[:-2]
    try:
        low = xp.linalg.cholesky(a)
        if _is_numpy(xp) or _all_finite(xp, low):
            return low, xp.zeros(batch, dtype=np.int32)
    except np.linalg.LinAlgError:
        pass
    info, partial = _cholesky_failures(to_host(a, "linalg cholesky diagnosis"))
    low = xp.asarray(partial.astype(a.dtype))
    _fill_where_ok(xp.linalg.cholesky, a, low, info, a.shape[-1])
    return low, xp.asarray(info)


def _tri(xp: Any, a: Any, upper: bool, unit: bool) -> Any:
    """The upper or lower triangle of ``a`` (strict, with a unit diagonal, if ``unit``)."""
    t = xp.triu(a, 1 if unit else 0) if upper else xp.tril(a, -1 if unit else 0)
    if unit:
        t = t + xp.eye(a.shape[-1], dtype=a.dtype)
    return t


def _substitute(xp: Any, t: Any, b: Any, upper: bool) -> Any:
    """``t^{-1} b`` for triangular ``t`` by substitution, row by row over the batch: the
    fallback for an exactly singular ``t`` (LAPACK's trsm gives inf / NaN there, no error)."""
    n = t.shape[-1]
    x = xp.zeros(b.shape, dtype=np.result_type(t.dtype, b.dtype))
    rows = range(n - 1, -1, -1) if upper else range(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in rows:
            known = slice(i + 1, n) if upper else slice(0, i)
            rest = b[..., i, :] - (t[..., i:i + 1, known] @ x[..., known, :])[..., 0, :]
            x[..., i, :] = rest / t[..., i, i][..., None]
    return x


def solve_triangular_array(xp: Any, t: Any, b: Any, upper: bool) -> Any:
    """``t^{-1} b`` for triangular ``t`` (..., n, n) and ``b`` (..., n, k) of one batch shape."""
    try:
        x = xp.linalg.solve(t, b)
        if _is_numpy(xp):
            return x
        if _all_finite(xp, x):
            return x
    except np.linalg.LinAlgError:
        pass
    return _substitute(xp, t, b, upper)


def _broadcast_batch(xp: Any, a: Any, b: Any) -> tuple[Any, Any]:
    """``a`` (..., n, n) and ``b`` (..., n, k) broadcast to one batch shape."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return xp.broadcast_to(a, batch + a.shape[-2:]), xp.broadcast_to(b, batch + b.shape[-2:])


def _quotient(xp: Any, num: Any, den: Any) -> Any:
    """``num / den`` with 0 / 0 taken as 0. The engine hands an unused output of a multi-output op
    exact zeros (PyTorch: no gradient), so SVD / eigh backward with unused U, V or eigenvectors
    stay finite at repeated or zero singular values and eigenvalues, as PyTorch's."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.where(num == 0, 0, num / den).astype(np.result_type(num.dtype, den.dtype))


def _exclusive_products(s: Any, xp: Any) -> Any:
    """``p[..., i] = prod_{j != i} s[..., j]`` without division (finite when some s are 0)."""
    n = s.shape[-1]
    ones = xp.ones(s.shape[:-1] + (1,), dtype=s.dtype)
    left = xp.concatenate([ones, xp.cumprod(s[..., :-1], axis=-1)], axis=-1) if n > 1 else ones
    right_rev = xp.cumprod(s[..., ::-1][..., :-1], axis=-1) if n > 1 else None
    right = xp.concatenate([ones, right_rev], axis=-1)[..., ::-1] if n > 1 else ones
    return left * right


def cofactor_matrix(xp: Any, a: Any) -> Any:
    """``adj(A)^T`` (the gradient of det A) of each matrix of ``a``, from the SVD, so it is right
    for singular matrices too: A = U S Vh gives adj(A)^T = det(U) det(Vh) U diag(prod_{j != i} s_j) Vh."""
    if a.shape[-1] == 0:
        return xp.zeros_like(a)
    u, s, vh = xp.linalg.svd(a)
    sign = xp.linalg.det(u) * xp.linalg.det(vh)
    return sign[..., None, None] * ((u * _exclusive_products(s, xp)[..., None, :]) @ vh)


# ------------------------------------------------------------------------------------ ops


class Inverse(Function):
    """``(inv(A), info)``; raises LinAlgError for a singular A when ``check_errors``."""

    @staticmethod
    def forward(ctx: Context, a: Any, op: str, check_errors: bool) -> tuple[Any, Any]:
        xp = ctx.xp
        inv, info = inverse_with_info(xp, a)
        if check_errors and _any_failed(xp, info):
            raise singular_inverse_error(op, tuple(a.shape), _host(xp, info, "linalg error"))
        ctx.save_for_backward(inv)
        return inv, info

    @staticmethod
    def backward(ctx: Context, g: Any, g_info: Any) -> tuple:
        (inv,) = ctx.saved_tensors
        inv_t = _mT(inv)
        return -(inv_t @ g @ inv_t), None, None  # d(A^-1) = -A^-1 dA A^-1


class Solve(Function):
    """``X = A^{-1} B`` for A (..., n, n) and B (..., n, k), batch dims broadcast."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        xp = ctx.xp
        a_b, b_b = _broadcast_batch(xp, a, b)
        err = LinAlgError("torch.linalg.solve: The solver failed because the input matrix is singular.")
        try:
            x = xp.linalg.solve(a_b, b_b)
        except np.linalg.LinAlgError:
            raise err from None
        if not _is_numpy(xp) and not _all_finite(xp, x):
            raise err
        ctx.save_for_backward(a_b, x)
        return x

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, x = ctx.saved_tensors
        gb = ctx.xp.linalg.solve(_mT(a), g)  # A^{-T} G
        ga = -gb @ _mT(x) if ctx.needs_input_grad[0] else None
        return ga, gb


class SolveTriangular(Function):
    """``X = T^{-1} B`` with T the upper or lower triangle of A (unit diagonal if ``unitriangular``)."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any, upper: bool, unitriangular: bool) -> Any:
        xp = ctx.xp
        a_b, b_b = _broadcast_batch(xp, a, b)
        t = _tri(xp, a_b, upper, unitriangular)
        x = solve_triangular_array(xp, t, b_b, upper)
        ctx.save_for_backward(t, x)
        ctx.upper, ctx.unit = upper, unitriangular
        return x

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        t, x = ctx.saved_tensors
        gb = solve_triangular_array(xp, _mT(t), g, not ctx.upper)
        ga = None
        if ctx.needs_input_grad[0]:
            full = -gb @ _mT(x)
            ga = xp.triu(full, 1 if ctx.unit else 0) if ctx.upper else xp.tril(full, -1 if ctx.unit else 0)
        return ga, gb, None, None


class Det(Function):
    """``det(A)``. Its gradient is the cofactor matrix ``adj(A)^T``, computed from the SVD so it
    stays finite (and right) for singular A, as PyTorch's."""

    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        d = ctx.xp.linalg.det(a)
        ctx.save_for_backward(a)
        return d

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        xp = ctx.xp
        (a,) = ctx.saved_tensors
        return g[..., None, None] * cofactor_matrix(xp, a)


class SlogDet(Function):
    """``(sign, log|det A|)``; the gradient of log|det A| is ``A^{-T}``."""

    @staticmethod
    def forward(ctx: Context, a: Any) -> tuple[Any, Any]:
        sign, logabsdet = ctx.xp.linalg.slogdet(a)
        ctx.save_for_backward(a)
        return sign, logabsdet

    @staticmethod
    def backward(ctx: Context, g_sign: Any, g: Any) -> Any:
        xp = ctx.xp
        (a,) = ctx.saved_tensors
        inv, info = inverse_with_info(xp, a)
        grad = _mT(inv)
        if _any_failed(xp, info):  # singular: cofactor / 0, infinite as PyTorch's
            bad = info != 0
            grad[bad] = cofactor_matrix(xp, a[bad]) / xp.linalg.det(a[bad])[..., None, None]
        return g[..., None, None] * grad


class Cholesky(Function):
    """``(L, info)`` with ``A = L L^T`` (L lower; ``upper`` returns ``L^T``), from A's lower triangle."""

    @staticmethod
    def forward(ctx: Context, a: Any, upper: bool, op: str, check_errors: bool) -> tuple[Any, Any]:
        xp = ctx.xp
        low, info = cholesky_with_info(xp, a)
        if check_errors and _any_failed(xp, info):
            raise not_positive_definite_error(op, tuple(a.shape), _host(xp, info, "linalg error"))
        ctx.save_for_backward(low)
        ctx.upper = upper
        return (_mT(low).copy() if upper else low), info

    @staticmethod
    def backward(ctx: Context, g: Any, g_info: Any) -> tuple:
        xp = ctx.xp
        (low,) = ctx.saved_tensors
        g_low = _mT(g) if ctx.upper else g
        # PyTorch's cholesky_backward: gA = L^{-T} Phi(L^T gL) L^{-1}, symmetrised
        phi = xp.tril(_mT(low) @ g_low)
        phi = 0.5 * (phi + _mT(xp.tril(phi, -1)))
        ga = solve_triangular_array(xp, _mT(low), phi, True)  # L^{-T} phi
        ga = _mT(solve_triangular_array(xp, _mT(low), _mT(ga), True))  # (.) L^{-1}
        return ga, None, None, None


class CholeskySolve(Function):
    """``X = A^{-1} B`` for ``A = L L^T`` (``U^T U`` when ``upper``) from its factor (only its
    triangle is read). As PyTorch's, the factor's gradient ``-(gB X^T + X gB^T) L`` is that of
    ``A = L L^T`` with the whole factor (not projected onto its triangle)."""

    @staticmethod
    def forward(ctx: Context, b: Any, factor: Any, upper: bool) -> Any:
        xp = ctx.xp
        f_b, b_b = _broadcast_batch(xp, factor, b)
        low = _mT(xp.triu(f_b)) if upper else xp.tril(f_b)
        y = solve_triangular_array(xp, low, b_b, False)  # L y = B
        x = solve_triangular_array(xp, _mT(low), y, True)  # L^T x = y
        ctx.save_for_backward(f_b, low, x)
        ctx.upper = upper
        return x

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        factor, low, x = ctx.saved_tensors
        gb = solve_triangular_array(xp, _mT(low), solve_triangular_array(xp, low, g, False), True)  # A^{-1} G
        g_factor = None
        if ctx.needs_input_grad[1]:
            common = gb @ _mT(x)
            common = common + _mT(common)
            g_factor = -(factor @ common) if ctx.upper else -(common @ factor)
        return gb, g_factor, None


class CholeskyInverse(Function):
    """``A^{-1}`` for ``A = L L^T`` (``U^T U`` when ``upper``) from its factor (only its triangle
    is read); the factor's gradient is PyTorch's ``-(A^{-1} (G + G^T) A^{-1}) L``."""

    @staticmethod
    def forward(ctx: Context, factor: Any, upper: bool) -> Any:
        xp = ctx.xp
        low = _mT(xp.triu(factor)) if upper else xp.tril(factor)
        eye = xp.broadcast_to(xp.eye(factor.shape[-1], dtype=factor.dtype), factor.shape)
        l_inv = solve_triangular_array(xp, low, eye, False)
        inverse = _mT(l_inv) @ l_inv  # A^{-1} = L^{-T} L^{-1}
        ctx.save_for_backward(factor, inverse)
        ctx.upper = upper
        return inverse

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        factor, inverse = ctx.saved_tensors
        common = inverse @ (g + _mT(g)) @ inverse
        return (-(factor @ common) if ctx.upper else -(common @ factor)), None


class QR(Function):
    """``(Q, R)`` of ``A = QR`` in mode 'reduced', 'complete' or 'r' (Q empty then)."""

    @staticmethod
    def forward(ctx: Context, a: Any, mode: str) -> tuple[Any, Any]:
        xp = ctx.xp
        if mode == "r":
            r = xp.linalg.qr(a, mode="r")
            q = xp.zeros((0,), dtype=a.dtype)
        else:
            q, r = xp.linalg.qr(a, mode=mode)
        ctx.save_for_backward(q, r)
        ctx.mode = mode
        ctx.m, ctx.n = a.shape[-2], a.shape[-1]
        return q, r

    @staticmethod
    def backward(ctx: Context, gq: Any, gr: Any) -> Any:
        xp = ctx.xp
        q, r = ctx.saved_tensors
        m, n = ctx.m, ctx.n
        if ctx.mode == "r":
            raise RuntimeError(
                "linalg.qr: the derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                "Use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr."
            )
        if ctx.mode == "complete" and m > n:
            raise RuntimeError(
                "linalg.qr: the QR decomposition is not differentiable when mode='complete' and nrows > ncols; "
                "use mode='reduced'."
            )
        if m >= n:
            return _qr_backward_tall(xp, q, r, gq, gr)
        # A = Q [U | V] with U square: the first m columns go through the square case, the rest
        # (Y = Q V) add Q gV to their gradient and Y gV^T to Q's.
        u, v = r[..., :, :m], r[..., :, m:]
        gu, gv = gr[..., :, :m], gr[..., :, m:]
        y = q @ v
        gx = _qr_backward_tall(xp, q, u, gq + y @ _mT(gv), gu)
        return xp.concatenate([gx, q @ gv], axis=-1)


def _qr_backward_tall(xp: Any, q: Any, r: Any, gq: Any, gr: Any) -> Any:
    """gA = (gQ + Q copyltu(M)) R^{-T} with M = R gR^T - gQ^T Q, for A = QR with m >= n."""
    mat = r @ _mT(gr) - _mT(gq) @ q
    low = xp.tril(mat, -1)
    copyltu = low + _mT(low) + xp.tril(xp.triu(mat))  # symmetric, from the lower triangle
    b = gq + q @ copyltu
    # b R^{-T} = (R^{-1} b^T)^T, R upper triangular
    return _mT(solve_triangular_array(xp, r, _mT(b), True))


class SVD(Function):
    """``(U, S, Vh)`` of ``A = U diag(S) Vh``; the gradient is PyTorch's svd_backward (with
    ``full_matrices`` only the first k = min(m, n) columns of U and rows of Vh take part)."""

    @staticmethod
    def forward(ctx: Context, a: Any, full_matrices: bool) -> tuple[Any, Any, Any]:
        u, s, vh = ctx.xp.linalg.svd(a, full_matrices=full_matrices)
        ctx.save_for_backward(u, s, vh)
        return u, s, vh

    @staticmethod
    def backward(ctx: Context, gu: Any, gs: Any, gvh: Any) -> Any:
        xp = ctx.xp
        u, s, vh = ctx.saved_tensors
        k = s.shape[-1]
        u, gu, vh, gvh = u[..., :, :k], gu[..., :, :k], vh[..., :k, :], gvh[..., :k, :]
        return svd_backward(xp, u, s, vh, gu, gs, gvh)


def svd_backward(xp: Any, u: Any, s: Any, vh: Any, gu: Any, gs: Any, gvh: Any) -> Any:
    """PyTorch's svd_backward for real reduced factors U (m, k), S (k,), Vh (k, n)."""
    m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
    uhgu = _mT(u) @ gu
    vhgv = vh @ _mT(gvh)
    s2 = s * s
    e = s2[..., None, :] - s2[..., :, None]  # E[j, l] = s_l^2 - s_j^2
    idx = np.arange(k)
    e[..., idx, idx] = 1
    inner = _quotient(xp, (uhgu - _mT(uhgu)) * s[..., None, :] + s[..., :, None] * (vhgv - _mT(vhgv)), e)
    inner[..., idx, idx] = gs
    if m > k:
        # gA = [U inner + (I - U U^T) gU S^{-1}] Vh
        ga = u @ inner
        gu_sinv = _quotient(xp, gu, s[..., None, :])
        ga = ga + gu_sinv - u @ (_mT(u) @ gu_sinv)
        return ga @ vh
    if n > k:
        # gA = U [inner Vh + S^{-1} gVh (I - V Vh)]
        ga = inner @ vh
        sinv_gvh = _quotient(xp, gvh, s[..., :, None])
        ga = ga + sinv_gvh - (sinv_gvh @ _mT(vh)) @ vh
        return u @ ga
    return u @ inner @ vh


class Eigh(Function):
    """``(L, V)`` with ``A = V diag(L) V^T`` for symmetric A (the ``UPLO`` triangle is read)."""

    @staticmethod
    def forward(ctx: Context, a: Any, uplo: str) -> tuple[Any, Any]:
        w, v = ctx.xp.linalg.eigh(a, UPLO=uplo)
        ctx.save_for_backward(w, v)
        return w, v

    @staticmethod
    def backward(ctx: Context, gw: Any, gv: Any) -> Any:
        w, v = ctx.saved_tensors
        vhgv = _mT(v) @ gv
        vhgv = 0.5 * (vhgv - _mT(vhgv))
        e = w[..., None, :] - w[..., :, None]  # E[i, j] = w_j - w_i
        idx = np.arange(w.shape[-1])
        e[..., idx, idx] = 1
        inner = _quotient(ctx.xp, vhgv, e)
        inner[..., idx, idx] = gw
        return v @ inner @ _mT(v)


def pinv_array(xp: Any, a: Any, atol: Any, rtol: Any, hermitian: bool) -> Any:
    """The Moore-Penrose pseudo-inverse of each matrix of ``a``: singular values at or below
    ``max(atol, rtol * s_max)`` are treated as zero. ``atol`` / ``rtol``: numbers or arrays
    broadcast against the batch."""
    if hermitian:
        w, v = xp.linalg.eigh(a)
        s = xp.abs(w)
        left, right = v, _mT(v)  # A = V diag(w) V^T
    else:
        left, s, right = xp.linalg.svd(a, full_matrices=False)
        w = s
    smax = s.max(axis=-1, keepdims=True) if s.shape[-1] else xp.zeros(s.shape[:-1] + (1,), dtype=s.dtype)
    cutoff = xp.maximum(xp.asarray(atol, dtype=s.dtype)[..., None], xp.asarray(rtol, dtype=s.dtype)[..., None] * smax)
    keep = s > cutoff
    inv_w = xp.where(keep, 1 / xp.where(keep, w, 1), 0)
    return (_mT(right) * inv_w[..., None, :]) @ _mT(left)


class PInverse(Function):
    """The pseudo-inverse ``P = A^+``; its gradient (constant rank) is
    ``-P^T gP P^T + (I - A P) gP^T P P^T + P^T P gP^T (I - P A)``."""

    @staticmethod
    def forward(ctx: Context, a: Any, atol: Any, rtol: Any, hermitian: bool) -> Any:
        p = pinv_array(ctx.xp, a, atol, rtol, hermitian)
        ctx.save_for_backward(a, p)
        return p

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        a, p = ctx.saved_tensors
        pt, gt = _mT(p), _mT(g)
        ga = -pt @ g @ pt
        ga = ga + (gt @ p @ pt - a @ (p @ (gt @ p @ pt)))  # (I - A P) gP^T P P^T
        ga = ga + (pt @ p @ gt - ((pt @ p @ gt) @ p) @ a)  # P^T P gP^T (I - P A)
        return ga, None, None, None


_PADE13 = (
    64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
    10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0,
)
_THETA13 = 5.371920351148152


def expm_array(xp: Any, a: Any) -> Any:
    """``exp(A)`` of each matrix of ``a`` by scaling and squaring with the [13/13] Padé
    approximant (Higham 2005): each matrix is scaled by its own 2^-s so that its 1-norm is at
    most theta_13, and squared back s times."""
    n = a.shape[-1]
    if n == 0 or a.size == 0:
        return a.copy()
    norm1 = xp.abs(a).sum(axis=-2).max(axis=-1)  # (...)
    with np.errstate(divide="ignore"):
        s = xp.maximum(xp.ceil(xp.log2(norm1 / _THETA13)), 0)
    s = xp.where(xp.isfinite(s), s, 0).astype(np.int64)
    x = a / (2.0 ** s).astype(a.dtype)[..., None, None]
    b = _PADE13
    eye = xp.eye(n, dtype=a.dtype)
    x2 = x @ x
    x4 = x2 @ x2
    x6 = x4 @ x2
    u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2) + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye)
    v = x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2) + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye
    r = xp.linalg.solve(v - u, v + u)
    steps = int(_host(xp, s.max(), "matrix_exp squarings")) if s.size else 0
    for i in range(steps):
        r = xp.where((s > i)[..., None, None], r @ r, r)
    return r


class MatrixExp(Function):
    """``exp(A) = sum_k A^k / k!``; the gradient is the upper-right block of
    ``exp([[A^T, G], [0, A^T]])`` (the derivative of exp in the direction G, adjoint)."""

    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        ctx.save_for_backward(a)
        return expm_array(ctx.xp, a)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        xp = ctx.xp
        (a,) = ctx.saved_tensors
        n = a.shape[-1]
        at = _mT(a)
        block = xp.zeros(a.shape[:-2] + (2 * n, 2 * n), dtype=np.result_type(a.dtype, g.dtype))
        block[..., :n, :n] = at
        block[..., n:, n:] = at
        block[..., :n, n:] = g
        return expm_array(xp, block)[..., :n, n:]


class Cross(Function):
    """The cross product of 3-vectors along ``dim`` (inputs broadcast)."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any, dim: int) -> Any:
        ctx.save_for_backward(a, b)
        ctx.dim = dim
        return ctx.xp.cross(a, b, axis=dim)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        a, b = ctx.saved_tensors
        ga = xp.cross(b, g, axis=ctx.dim) if ctx.needs_input_grad[0] else None
        gb = xp.cross(g, a, axis=ctx.dim) if ctx.needs_input_grad[1] else None
        return ga, gb, None


class VectorNorm(Function):
    """``(sum |x|^ord)^(1/ord)`` over ``dims`` (inf: max |x|, -inf: min |x|, 0: count of non-zeros).
    The gradient at a zero norm is 0 (as PyTorch's); max / min share it among ties."""

    @staticmethod
    def forward(ctx: Context, x: Any, ord: float, dims: tuple[int, ...], keepdim: bool) -> Any:  # noqa: A002
        xp = ctx.xp
        ax = xp.abs(x)
        if ord == math.inf:
            out = ax.max(axis=dims, keepdims=True)
        elif ord == -math.inf:
            out = ax.min(axis=dims, keepdims=True)
        elif ord == 0:
            out = (x != 0).sum(axis=dims, keepdims=True).astype(x.dtype)
        elif ord == 1:
            out = ax.sum(axis=dims, keepdims=True)
        elif ord == 2:
            out = xp.sqrt((x * x).sum(axis=dims, keepdims=True))
        else:
            out = (ax**ord).sum(axis=dims, keepdims=True) ** (1.0 / ord)
        ctx.save_for_backward(x, out)
        ctx.ord, ctx.dims, ctx.keepdim = ord, dims, keepdim
        return out if keepdim else out.squeeze(axis=dims)

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        xp = ctx.xp
        x, out = ctx.saved_tensors
        ord, dims = ctx.ord, ctx.dims  # noqa: A001
        if not ctx.keepdim:
            g = xp.expand_dims(g, dims)
        if ord == 0:
            return xp.zeros_like(x)
        sign = xp.sign(x)
        if ord in (math.inf, -math.inf):
            hit = (xp.abs(x) == out).astype(x.dtype)
            return g * sign * hit / hit.sum(axis=dims, keepdims=True)
        if ord == 1:
            return g * sign
        safe = xp.where(out == 0, 1, out)
        if ord == 2:
            return xp.where(out == 0, 0, g * x / safe)
        grad = sign * xp.abs(x) ** (ord - 1) * safe ** (1 - ord)
        return xp.where(out == 0, 0, g * xp.where(xp.isfinite(grad), grad, 0))
