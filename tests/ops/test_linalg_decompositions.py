"""tinyflow.linalg (inverses, solves, determinants, Cholesky, QR, SVD, eigh, pinv, lstsq, matrix
functions, norms) and the matching torch.* functions and Tensor methods: float64 gradchecks over
random (batched) shapes, PyTorch parity of values, dtypes and gradients, and the errors of bad input.

Singular vectors are defined up to sign, so QR, SVD and eigh are compared through quantities that
do not depend on it (reconstructions, singular values, sign-normalised factors, U diag(f(S)) Vh)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")

L = tf.linalg
batches = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)
sizes = st.integers(1, 4)
seeds = st.integers(0, 2**31 - 1)
few = settings(max_examples=12, deadline=None)


def normal(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def positive_definite(batch, n, seed):
    """M M^T + n I: symmetric, well conditioned."""
    m = normal(batch + (n, n), seed)
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def diagonally_dominant(batch, n, seed):
    a = normal(batch + (n, n), seed)
    return a + np.eye(n) * (np.abs(a).sum(-1, keepdims=True) + 1)


def leaf(a, dtype=tf.float64):
    return tf.tensor(a, dtype=dtype, requires_grad=True)


def _outputs(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def parity(ours, theirs, *arrays, rtol=1e-7, atol=1e-9, grad=True):
    """ours(*tinyflow tensors) against theirs(*torch tensors) on float64 ``arrays``: shapes, dtypes,
    values, and the gradients of a random weighting of the float outputs."""
    tf_in = [leaf(a) for a in arrays]
    th_in = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    outs, refs = _outputs(ours(*tf_in)), _outputs(theirs(*th_in))
    assert len(outs) == len(refs)
    rng = np.random.default_rng(0)
    loss_tf, loss_th = None, None
    for o, r in zip(outs, refs):
        assert tuple(o.shape) == tuple(r.shape)
        assert str(o.dtype) == str(r.dtype).replace("torch.", "")
        if not r.dtype.is_floating_point:
            np.testing.assert_array_equal(o.numpy(), r.numpy())
            continue
        np.testing.assert_allclose(o.detach().numpy(), r.detach().numpy(), rtol=rtol, atol=atol)
        if r.requires_grad:
            w = rng.standard_normal(tuple(r.shape))
            term_tf, term_th = (o * tf.tensor(w)).sum(), (r * torch.tensor(w)).sum()
            loss_tf = term_tf if loss_tf is None else loss_tf + term_tf
            loss_th = term_th if loss_th is None else loss_th + term_th
    if not grad or loss_th is None:
        return
    loss_tf.backward()
    loss_th.backward()
    for t, r in zip(tf_in, th_in):
        ref = np.zeros(r.shape) if r.grad is None else r.grad.numpy()
        got = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-8)


def sym(x):
    """x + x^T in either framework: symmetric input for ops that read one triangle."""
    return x + x.mT


# ------------------------------------------------------------------------------ inverse, solve


@few
@given(batch=batches, n=sizes, k=sizes, seed=seeds)
def test_inv_and_solve_gradcheck(batch, n, k, seed):
    a = diagonally_dominant(batch, n, seed)
    b = normal(batch + (n, k), seed + 1)
    assert gradcheck(L.inv, [leaf(a)])
    assert gradcheck(L.solve, [leaf(a), leaf(b)])
    assert gradcheck(lambda x, y: L.solve(x, y, left=False), [leaf(a), leaf(np.swapaxes(b, -1, -2))])
    assert gradcheck(lambda x, y: L.solve(x, y), [leaf(a), leaf(b[..., 0])])  # a batch of vectors
    assert gradcheck(lambda x, y: L.solve(x, y), [leaf(a), leaf(b[(0,) * len(batch)])])  # B broadcast


@few
@given(batch=batches, n=sizes, k=sizes, seed=seeds)
def test_inv_and_solve_match_torch(batch, n, k, seed):
    a = diagonally_dominant(batch, n, seed)
    b = normal(batch + (n, k), seed + 1)
    parity(L.inv, torch.linalg.inv, a)
    parity(lambda x: L.inv_ex(x).inverse, lambda x: torch.linalg.inv_ex(x).inverse, a)
    parity(L.solve, torch.linalg.solve, a, b)
    parity(lambda x, y: L.solve(x, y, left=False), lambda x, y: torch.linalg.solve(x, y, left=False),
           a, np.swapaxes(b, -1, -2))
    parity(L.solve, torch.linalg.solve, a, b[..., 0])
    parity(L.solve, torch.linalg.solve, a[(0,) * len(batch)], b)  # A broadcast over B's batch
    parity(lambda x: x.inverse(), lambda x: x.inverse(), a)


@few
@given(batch=batches, n=sizes, k=sizes, upper=st.booleans(), left=st.booleans(), unit=st.booleans(), seed=seeds)
def test_solve_triangular(batch, n, k, upper, left, unit, seed):
    a = diagonally_dominant(batch, n, seed)
    b = normal(batch + ((n, k) if left else (k, n)), seed + 1)

    def ours(x, y):
        return L.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit)

    def theirs(x, y):
        return torch.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit)

    assert gradcheck(ours, [leaf(a), leaf(b)])
    parity(ours, theirs, a, b)


def test_solve_triangular_with_a_zero_on_the_diagonal_gives_inf_not_an_error():
    a = np.triu(np.ones((3, 3)))
    a[2, 2] = 0
    got = L.solve_triangular(tf.tensor(a), tf.tensor(np.ones((3, 1))), upper=True).numpy()
    ref = torch.linalg.solve_triangular(torch.tensor(a), torch.ones(3, 1, dtype=torch.float64), upper=True).numpy()
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(ref))


def test_inverse_errors_match_torch():
    singular = np.array([[1.0, 2, 3], [2, 4, 6], [0, 0, 1]])
    with pytest.raises(L.LinAlgError, match=r"^linalg.inv: The diagonal element 2 is zero, the inversion could not "
                                            r"be completed because the input matrix is singular.$"):
        L.inv(tf.tensor(singular))
    batch = np.stack([np.eye(3), np.eye(3), np.zeros((3, 3))])
    with pytest.raises(L.LinAlgError, match=r"^linalg.inv: \(Batch element 2\): The diagonal element 1 is zero"):
        L.inv(tf.tensor(batch))
    with pytest.raises(L.LinAlgError, match=r"^torch.linalg.solve: The solver failed because the input matrix is "
                                            r"singular.$"):
        L.solve(tf.tensor(singular), tf.tensor(np.ones(3)))
    assert issubclass(L.LinAlgError, RuntimeError)
    with pytest.raises(RuntimeError, match=r"^linalg.inv: Expected a floating point or complex tensor as input. "
                                           r"Got Long$"):
        L.inv(tf.tensor(np.ones((3, 3), dtype=np.int64)))
    with pytest.raises(RuntimeError, match=r"linalg.inv: Low precision dtypes not supported. Got Half"):
        L.inv(tf.tensor(np.eye(3), dtype=tf.float16))
    with pytest.raises(RuntimeError, match=r"linalg.inv: A must be batches of square matrices, but they are 3 by 4"):
        L.inv(tf.zeros(3, 4))
    with pytest.raises(RuntimeError, match=r"linalg.inv: The input tensor A must have at least 2 dimensions."):
        L.inv(tf.zeros(3))
    with pytest.raises(RuntimeError, match=r"linalg.solve: Expected A and B to have the same dtype, but found A of "
                                           r"type Float and B of type Double"):
        L.solve(tf.tensor(np.eye(3), dtype=tf.float32), tf.tensor(np.ones(3)))
    with pytest.raises(RuntimeError, match=r"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                                           r"\(3x3 and 4x2\)"):
        L.solve(tf.tensor(np.eye(3)), tf.tensor(np.ones((4, 2))))
    with pytest.raises(RuntimeError, match=r"linalg.solve: Incompatible shapes of A and B for the equation XA = B "
                                           r"\(3x3 and 3x1\)"):  # vectors are columns, also with left=False
        L.solve(tf.tensor(np.eye(3)), tf.tensor(np.ones(3)), left=False)


def test_inv_ex_info_matches_torch():
    batch = np.stack([np.eye(3), np.array([[1.0, 2, 3], [2, 4, 6], [0, 0, 1]]), np.zeros((3, 3))])
    got = L.inv_ex(tf.tensor(batch))
    ref = torch.linalg.inv_ex(torch.tensor(batch))
    np.testing.assert_array_equal(got.info.numpy(), ref.info.numpy())
    assert got.info.dtype == tf.int32
    np.testing.assert_allclose(got.inverse.numpy()[0], ref.inverse.numpy()[0])
    with pytest.raises(L.LinAlgError, match=r"^linalg.inv_ex: \(Batch element 1\): The diagonal element 2 is zero"):
        L.inv_ex(tf.tensor(batch), check_errors=True)


# ------------------------------------------------------------------------------ determinants


@few
@given(batch=batches, n=sizes, seed=seeds)
def test_det_slogdet_logdet(batch, n, seed):
    a = normal(batch + (n, n), seed)
    assert gradcheck(L.det, [leaf(a)])
    assert gradcheck(lambda x: L.slogdet(x).logabsdet, [leaf(a)])
    parity(L.det, torch.linalg.det, a)
    parity(lambda x: tuple(L.slogdet(x)), lambda x: tuple(torch.linalg.slogdet(x)), a)
    parity(lambda x: tuple(tf.slogdet(x)), lambda x: tuple(torch.slogdet(x)), a)
    parity(tf.logdet, torch.logdet, a)  # NaN where det < 0
    parity(lambda x: x.det(), lambda x: x.det(), positive_definite(batch, n, seed))
    parity(lambda x: x.logdet(), lambda x: x.logdet(), positive_definite(batch, n, seed))


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_det_gradient_of_a_singular_matrix_is_finite_and_matches_torch(rank):
    rng = np.random.default_rng(rank)
    a = rng.standard_normal((3, rank)) @ rng.standard_normal((rank, 3))  # rank < 3: det = 0
    assert gradcheck(L.det, [leaf(a)])
    parity(L.det, torch.linalg.det, a, atol=1e-12)


def test_slogdet_gradient_of_a_singular_matrix_is_infinite_not_an_error():
    a = np.stack([np.eye(2), [[1.0, 2.0], [2.0, 4.0]]])
    x = leaf(a)
    L.slogdet(x).logabsdet.sum().backward()
    ref = torch.tensor(a, requires_grad=True)
    torch.linalg.slogdet(ref).logabsdet.sum().backward()
    np.testing.assert_allclose(x.grad.numpy()[0], ref.grad.numpy()[0])
    np.testing.assert_array_equal(np.isinf(x.grad.numpy()), np.isinf(ref.grad.numpy()))  # signs: rounding's


def test_slogdet_is_a_named_tuple_with_torch_fields():
    a = tf.tensor([[2.0, 0.0], [0.0, -3.0]])
    sign, logabsdet = L.slogdet(a)
    assert L.slogdet(a).sign.item() == sign.item() == -1.0
    assert L.slogdet(a).logabsdet.item() == pytest.approx(math.log(6.0))
    assert type(L.slogdet(a)).__name__ == "linalg_slogdet"
    assert tf.slogdet(a).logabsdet.item() == pytest.approx(math.log(6.0))
    assert tf.logdet(tf.tensor([[1.0, 0.0], [0.0, 0.0]])).item() == -math.inf
    with pytest.raises(RuntimeError, match=r"linalg.det: Expected a floating point or complex tensor as input. Got Int"):
        L.det(tf.tensor(np.eye(2, dtype=np.int32)))


# ------------------------------------------------------------------------------ Cholesky


@few
@given(batch=batches, n=sizes, upper=st.booleans(), seed=seeds)
def test_cholesky(batch, n, upper, seed):
    a = positive_definite(batch, n, seed)
    assert gradcheck(lambda x: L.cholesky(sym(x), upper=upper), [leaf(a / 2)])
    parity(lambda x: L.cholesky(sym(x), upper=upper), lambda x: torch.linalg.cholesky(sym(x), upper=upper), a / 2)
    parity(lambda x: L.cholesky_ex(x, upper=upper).L, lambda x: torch.linalg.cholesky_ex(x, upper=upper).L, a)
    parity(lambda x: tf.cholesky(x, upper=upper), lambda x: torch.linalg.cholesky(x, upper=upper), a)


@few
@given(batch=batches, n=sizes, k=sizes, upper=st.booleans(), seed=seeds)
def test_cholesky_solve_and_inverse(batch, n, k, upper, seed):
    factor = np.linalg.cholesky(positive_definite(batch, n, seed))
    if upper:
        factor = np.swapaxes(factor, -1, -2)
    b = normal(batch + (n, k), seed + 1)
    def triangle(f):  # the ops read one triangle; PyTorch's gradient is not projected onto it
        return f.triu() if upper else f.tril()

    assert gradcheck(lambda x, f: tf.cholesky_solve(x, triangle(f), upper=upper), [leaf(b), leaf(factor)])
    assert gradcheck(lambda f: triangle(f).cholesky_inverse(upper=upper), [leaf(factor)])
    parity(lambda x, f: tf.cholesky_solve(x, f, upper=upper), lambda x, f: torch.cholesky_solve(x, f, upper=upper),
           b, factor)
    parity(lambda f: f.cholesky_inverse(upper=upper), lambda f: torch.cholesky_inverse(f, upper=upper), factor)


def test_cholesky_errors_match_torch():
    bad = np.array([[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(L.LinAlgError, match=r"^linalg.cholesky: The factorization could not be completed because the "
                                            r"input is not positive-definite \(the leading minor of order 2 is not "
                                            r"positive-definite\).$"):
        L.cholesky(tf.tensor(bad))
    with pytest.raises(L.LinAlgError, match=r"^linalg.cholesky: \(Batch element 1\): The factorization"):
        L.cholesky(tf.tensor(np.stack([np.eye(2), bad])))
    batch = np.stack([np.eye(3), np.zeros((3, 3)), np.diag([1.0, 1.0, -1.0])])
    got = L.cholesky_ex(tf.tensor(batch))
    np.testing.assert_array_equal(got.info.numpy(), torch.linalg.cholesky_ex(torch.tensor(batch)).info.numpy())
    np.testing.assert_allclose(got.L.numpy()[0], np.eye(3))
    with pytest.raises(RuntimeError, match=r"linalg.cholesky: A must be batches of square matrices"):
        L.cholesky(tf.zeros(3, 4))


# ------------------------------------------------------------------------------ QR


def _signed_qr(qr_fn):
    """Q and R with R's diagonal made positive (unique for full-rank A): sign-free outputs."""
    def f(x):
        q, r = qr_fn(x)
        k = min(x.shape[-2], x.shape[-1])
        d = r.detach()[..., :k, :k].diagonal(0, -2, -1).sign()
        return q[..., :, :k] * d.unsqueeze(-2), r[..., :k, :] * d.unsqueeze(-1)
    return f


@pytest.mark.filterwarnings("ignore:torch.qr is deprecated")
@few
@given(batch=batches, m=sizes, n=sizes, seed=seeds)
def test_qr_reduced(batch, m, n, seed):
    a = normal(batch + (m, n), seed)
    assert gradcheck(_signed_qr(L.qr), [leaf(a)])
    parity(_signed_qr(L.qr), _signed_qr(torch.linalg.qr), a)
    parity(_signed_qr(tf.qr), _signed_qr(torch.qr), a)
    q, r = L.qr(tf.tensor(a), mode="complete")
    assert tuple(q.shape) == batch + (m, m) and tuple(r.shape) == batch + (m, n)
    np.testing.assert_allclose((q @ r).numpy(), a, atol=1e-12)
    np.testing.assert_allclose((q.mT @ q).numpy(), np.broadcast_to(np.eye(m), batch + (m, m)), atol=1e-12)


def test_qr_modes_and_backward_limits():
    a = normal((5, 3), 0)
    q, r = L.qr(tf.tensor(a), mode="r")
    assert tuple(q.shape) == (0,) and tuple(r.shape) == (3, 3)
    np.testing.assert_allclose(np.abs(r.numpy()), np.abs(torch.linalg.qr(torch.tensor(a), mode="r").R.numpy()))
    x = leaf(a)
    with pytest.raises(RuntimeError, match=r"mode='r'"):
        L.qr(x, mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match=r"mode='complete' and nrows > ncols"):
        L.qr(x, mode="complete").Q.sum().backward()
    with pytest.raises(RuntimeError, match=r"qr received unrecognized mode 'full'"):
        L.qr(x, mode="full")


# ------------------------------------------------------------------------------ SVD, eigh


def _svd_invariants(svd_fn):
    """U diag(S) Vh, S, U diag(S^2) U^T and Vh^T diag(S) Vh: independent of the vectors' signs."""
    def f(x):
        u, s, vh = svd_fn(x)
        k = s.shape[-1]
        u, vh = u[..., :, :k], vh[..., :k, :]
        return (u * s.unsqueeze(-2)) @ vh, s, (u * (s * s).unsqueeze(-2)) @ u.mT, (vh.mT * s.unsqueeze(-2)) @ vh
    return f


@few
@given(batch=batches, m=sizes, n=sizes, full=st.booleans(), seed=seeds)
def test_svd(batch, m, n, full, seed):
    a = normal(batch + (m, n), seed)
    ours = _svd_invariants(lambda x: L.svd(x, full_matrices=full))
    assert gradcheck(ours, [leaf(a)])
    parity(ours, _svd_invariants(lambda x: torch.linalg.svd(x, full_matrices=full)), a)
    parity(L.svdvals, torch.linalg.svdvals, a)
    u, s, vh = L.svd(tf.tensor(a), full_matrices=full)
    k = min(m, n)
    assert tuple(u.shape) == batch + ((m, m) if full else (m, k))
    assert tuple(vh.shape) == batch + ((n, n) if full else (k, n))
    assert type(L.svd(tf.tensor(a))).__name__ == "linalg_svd"


@few
@given(batch=batches, m=sizes, n=sizes, some=st.booleans(), seed=seeds)
def test_torch_svd_returns_v(batch, m, n, some, seed):
    a = normal(batch + (m, n), seed)
    old = _svd_invariants(lambda x: (lambda u, s, v: (u, s, v.mT))(*tf.svd(x, some=some)))
    parity(old, _svd_invariants(lambda x: (lambda u, s, v: (u, s, v.mT))(*torch.svd(x, some=some))), a)
    u, s, v = tf.tensor(a).svd(compute_uv=False)
    ref = torch.svd(torch.tensor(a), compute_uv=False)
    assert tuple(u.shape) == tuple(ref.U.shape) and tuple(v.shape) == tuple(ref.V.shape)
    assert not u.numpy().any() and not v.numpy().any()
    np.testing.assert_allclose(s.numpy(), ref.S.numpy())


@pytest.mark.parametrize("a", [np.eye(3), np.diag([2.0, 2.0, 1.0]), np.ones((4, 3)), np.zeros((2, 3))],
                         ids=["identity", "repeated", "rank-1", "zero"])
def test_singular_value_and_eigenvalue_gradients_at_repeated_values_match_torch(a):
    """At repeated singular values (eigenvalues) the singular vectors (eigenvectors) are any basis of
    their subspace, so the gradient U diag(gS) Vh of a loss that weights equal singular values
    differently depends on the basis the LAPACK build returns: it is not defined, and is not asserted.
    Asserted: the values, and the gradients of symmetric functions sum phi(s_i), which are defined
    (U diag(phi'(S)) Vh, the same for every basis) where phi' is equal on equal values and
    phi'(0) = 0 at zero singular values (Lewis 1995): sum s^3 everywhere, the sum of s (nuclear norm)
    only at full rank; sum phi(lambda_i) of a symmetric matrix's eigenvalues always (phi'(A))."""
    parity(L.svdvals, torch.linalg.svdvals, a, atol=1e-12, grad=False)
    parity(lambda x: L.svd(x).S, lambda x: torch.linalg.svd(x).S, a, atol=1e-12, grad=False)
    parity(lambda x: (L.svdvals(x) ** 3).sum(), lambda x: (torch.linalg.svdvals(x) ** 3).sum(), a)
    parity(lambda x: (L.svd(x).S ** 3).sum(), lambda x: (torch.linalg.svd(x).S ** 3).sum(), a)
    u, s, vh = np.linalg.svd(a, full_matrices=False)  # the definition, for any basis: U diag(3 s^2) Vh
    x = leaf(a)
    (L.svdvals(x) ** 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), (u * 3 * s**2) @ vh, rtol=1e-7, atol=1e-9)
    if s.min() > 1e-8 * s.max():  # full rank: the nuclear norm is differentiable, gradient U Vh
        parity(lambda x: L.svdvals(x).sum(), lambda x: torch.linalg.svdvals(x).sum(), a)
    parity(lambda x: L.matrix_norm(x, "nuc"), lambda x: torch.linalg.matrix_norm(x, "nuc"), a + 0.5 * np.eye(*a.shape))
    if a.shape[0] == a.shape[1]:
        parity(L.eigvalsh, torch.linalg.eigvalsh, a, atol=1e-12, grad=False)
        parity(lambda x: L.eigvalsh(x).sum(), lambda x: torch.linalg.eigvalsh(x).sum(), a)  # the trace
        parity(lambda x: L.eigvalsh(x).exp().sum(), lambda x: torch.linalg.eigvalsh(x).exp().sum(), a)
        x = leaf(a)
        L.eigvalsh(x).exp().sum().backward()
        w, v = np.linalg.eigh(a)
        np.testing.assert_allclose(x.grad.numpy(), (v * np.exp(w)) @ v.T, rtol=1e-7, atol=1e-9)  # exp(A)


def _eigh_invariants(eigh_fn):
    """Eigenvalues, V diag(w) V^T and the squared eigenvector entries (sign-free)."""
    def f(x):
        w, v = eigh_fn(x)
        return w, (v * w.unsqueeze(-2)) @ v.mT, v * v
    return f


@few
@given(batch=batches, n=sizes, uplo=st.sampled_from(["L", "U"]), seed=seeds)
def test_eigh(batch, n, uplo, seed):
    a = normal(batch + (n, n), seed)  # distinct eigenvalues almost surely
    ours = _eigh_invariants(lambda x: L.eigh(sym(x), UPLO=uplo))
    assert gradcheck(ours, [leaf(a)])
    parity(ours, _eigh_invariants(lambda x: torch.linalg.eigh(sym(x), UPLO=uplo)), a)
    parity(lambda x: L.eigvalsh(x, UPLO=uplo), lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), a)  # one triangle
    assert type(L.eigh(tf.tensor(a))).__name__ == "linalg_eigh"


# ------------------------------------------------------------------------------ pinv, lstsq, rank, cond


@few
@given(batch=batches, m=sizes, n=sizes, seed=seeds)
def test_pinv_and_pinverse(batch, m, n, seed):
    a = normal(batch + (m, n), seed)
    assert gradcheck(L.pinv, [leaf(a)])
    parity(L.pinv, torch.linalg.pinv, a)
    parity(tf.pinverse, torch.pinverse, a)
    square = positive_definite(batch, n, seed)
    parity(lambda x: L.pinv(x, hermitian=True), lambda x: torch.linalg.pinv(x, hermitian=True), square)


def test_pinv_drops_small_singular_values_like_torch():
    a = np.diag([3.0, 1.0, 1e-3])
    for kwargs in ({}, {"rtol": 1e-2}, {"atol": 0.5}, {"atol": 0.5, "rtol": 0.4}):
        got = L.pinv(tf.tensor(a), **kwargs).numpy()
        np.testing.assert_allclose(got, torch.linalg.pinv(torch.tensor(a), **kwargs).numpy(), rtol=1e-7)


@few
@given(batch=batches, n=sizes, extra=st.integers(0, 2), k=sizes, seed=seeds,
       driver=st.sampled_from([None, "gels", "gelsy", "gelsd", "gelss"]))
def test_lstsq(batch, n, extra, k, seed, driver):
    a = normal(batch + (n + extra, n), seed)  # full column rank
    b = normal(batch + (n + extra, k), seed + 1)
    assert gradcheck(lambda x, y: L.lstsq(x, y, driver=driver).solution, [leaf(a), leaf(b)])
    parity(lambda x, y: tuple(L.lstsq(x, y, driver=driver)), lambda x, y: tuple(torch.linalg.lstsq(x, y, driver=driver)),
           a, b, rtol=1e-6, atol=1e-8)
    if not batch:  # a vector right-hand side
        parity(lambda x, y: L.lstsq(x, y).solution, lambda x, y: torch.linalg.lstsq(x, y).solution, a, b[:, 0])


def test_lstsq_of_a_rank_deficient_matrix_is_the_minimum_norm_solution_as_torch():
    a = normal((5, 2), 0) @ normal((2, 3), 1)
    b = normal((5, 2), 2)
    for driver in (None, "gelsd", "gelss"):
        got = L.lstsq(tf.tensor(a), tf.tensor(b), driver=driver)
        ref = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        np.testing.assert_allclose(got.solution.numpy(), ref.solution.numpy(), rtol=1e-6, atol=1e-9)
        assert int(got.rank) == int(ref.rank) == 2
        assert tuple(got.residuals.shape) == tuple(ref.residuals.shape) == (0,)  # not full rank: none


@few
@given(batch=batches, m=sizes, n=sizes, rank=st.integers(0, 4), seed=seeds)
def test_matrix_rank(batch, m, n, rank, seed):
    rank = min(rank, m, n)
    a = normal(batch + (m, rank), seed) @ normal(batch + (rank, n), seed + 1)
    got = L.matrix_rank(tf.tensor(a))
    assert got.dtype == tf.int64 and tuple(got.shape) == batch
    np.testing.assert_array_equal(got.numpy(), torch.linalg.matrix_rank(torch.tensor(a)).numpy())
    np.testing.assert_array_equal(got.numpy(), np.full(batch, rank))
    np.testing.assert_array_equal(L.matrix_rank(tf.tensor(a), atol=1e9).numpy(), np.zeros(batch))


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf])
def test_cond(p):
    a = diagonally_dominant((2,), 3, 0)
    parity(lambda x: L.cond(x, p), lambda x: torch.linalg.cond(x, p), a, grad=False)


# ------------------------------------------------------------------------------ matrix functions


@few
@given(batch=batches, n=sizes, power=st.integers(-3, 5), seed=seeds)
def test_matrix_power(batch, n, power, seed):
    a = diagonally_dominant(batch, n, seed) / (2 * n)
    assert gradcheck(lambda x: L.matrix_power(x, power), [leaf(a)])
    parity(lambda x: L.matrix_power(x, power), lambda x: torch.linalg.matrix_power(x, power), a, rtol=1e-6)
    parity(lambda x: x.matrix_power(power), lambda x: x.matrix_power(power), a, rtol=1e-6)


@few
@given(batch=batches, n=sizes, scale=st.sampled_from([0.1, 1.0, 8.0]), seed=seeds)
def test_matrix_exp(batch, n, scale, seed):
    # entries bounded by scale / n, so ||A|| <= scale: with unbounded draws one entry of 30 makes
    # exp(A) ~ 1e13 and the central differences of the weighted sum lose every other entry's change
    a = np.tanh(normal(batch + (n, n), seed)) * scale / n
    assert gradcheck(L.matrix_exp, [leaf(a)], rtol=1e-4, atol=1e-5 * max(1.0, math.exp(scale)))
    parity(L.matrix_exp, torch.linalg.matrix_exp, a, rtol=1e-9, atol=1e-9)
    parity(tf.matrix_exp, torch.matrix_exp, a, rtol=1e-9, atol=1e-9)


def test_matrix_exp_of_a_rotation_generator():
    t = 0.7
    got = L.matrix_exp(tf.tensor([[0.0, -t], [t, 0.0]], dtype=tf.float64)).numpy()
    np.testing.assert_allclose(got, [[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]], atol=1e-14)


# ------------------------------------------------------------------------------ norms, products


@few
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), seed=seeds,
       ord=st.sampled_from([2, 1, 3.5, math.inf, -math.inf, 0, -1.5]), keepdim=st.booleans(), data=st.data())
def test_vector_norm(shape, seed, ord, keepdim, data):  # noqa: A002
    x = normal(shape, seed)
    dim = data.draw(st.sampled_from([None, -1, tuple(range(len(shape)))[:2]]))
    assert gradcheck(lambda t: L.vector_norm(t, ord, dim, keepdim), [leaf(x)])
    parity(lambda t: L.vector_norm(t, ord, dim, keepdim), lambda t: torch.linalg.vector_norm(t, ord, dim, keepdim), x)


def test_vector_norm_gradient_at_zero_is_zero_as_torch():
    parity(lambda t: L.vector_norm(t), lambda t: torch.linalg.vector_norm(t), np.zeros((3,)))
    parity(lambda t: L.vector_norm(t, 3.0), lambda t: torch.linalg.vector_norm(t, 3.0), np.zeros((3,)))


@few
@given(batch=batches, m=sizes, n=sizes, seed=seeds, keepdim=st.booleans(),
       ord=st.sampled_from(["fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf]), dim=st.sampled_from([(-2, -1), (-1, -2)]))
def test_matrix_norm(batch, m, n, seed, keepdim, ord, dim):  # noqa: A002
    a = normal(batch + (m, n), seed)
    assert gradcheck(lambda t: L.matrix_norm(t, ord, dim, keepdim), [leaf(a)])
    parity(lambda t: L.matrix_norm(t, ord, dim, keepdim), lambda t: torch.linalg.matrix_norm(t, ord, dim, keepdim), a)


@pytest.mark.parametrize("shape, ord, dim", [
    ((3, 4), None, None), ((4,), 1, None), ((3, 4), "nuc", None), ((3, 4), math.inf, None),
    ((2, 3, 4), None, (0, 2)), ((2, 3, 4), 3, 1), ((2, 3, 4), -1, (2, 1)),
])
def test_norm(shape, ord, dim):  # noqa: A002
    x = normal(shape, 0)
    parity(lambda t: L.norm(t, ord, dim), lambda t: torch.linalg.norm(t, ord, dim), x)


def test_norm_errors_match_torch():
    with pytest.raises(RuntimeError, match=r"linalg.norm: If dim is not specified but ord is, the input must be 1D or "
                                           r"2D. Got 3D."):
        L.norm(tf.zeros(2, 3, 3), 2)
    with pytest.raises(RuntimeError, match=r"linalg.matrix_norm: Order 3 not supported."):
        L.matrix_norm(tf.zeros(3, 3), 3)
    with pytest.raises(RuntimeError, match=r"linalg.matrix_norm: The input tensor A must have at least 2 dimensions."):
        L.matrix_norm(tf.zeros(3))
    with pytest.raises(RuntimeError, match=r"linalg.vector_norm: Expected a floating point or complex tensor as "
                                           r"input. Got Long"):
        L.vector_norm(tf.tensor([1, 2, 3]))


@few
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple), seed=seeds, data=st.data())
def test_cross(shape, seed, data):
    axis = data.draw(st.integers(0, len(shape)))
    a_shape = shape[:axis] + (3,) + shape[axis:]
    b_shape = tuple(1 if data.draw(st.booleans()) else s for s in a_shape[:axis]) + a_shape[axis:]
    a, b = normal(a_shape, seed), normal(b_shape, seed + 1)
    assert gradcheck(lambda x, y: L.cross(x, y, dim=axis), [leaf(a), leaf(b)])
    parity(lambda x, y: L.cross(x, y, dim=axis), lambda x, y: torch.linalg.cross(x, y, dim=axis), a, b)
    parity(lambda x, y: tf.cross(x, y, dim=axis), lambda x, y: torch.cross(x, y, dim=axis), a, b)


def test_cross_default_dim_and_errors_match_torch():
    a, b = normal((4, 3, 3), 0), normal((4, 3, 3), 1)
    with pytest.warns(UserWarning, match="torch.cross without specifying the dim arg is deprecated"):
        got = tf.cross(tf.tensor(a), tf.tensor(b))
    with pytest.warns(UserWarning):
        ref = torch.cross(torch.tensor(a), torch.tensor(b))
    np.testing.assert_allclose(got.numpy(), ref.numpy())
    with pytest.raises(RuntimeError, match=r"linalg.cross: inputs dimension -1 must have length 3. Got 3 and 4"):
        L.cross(tf.zeros(4, 3), tf.zeros(4, 4))
    with pytest.raises(RuntimeError, match=r"linalg.cross: inputs must have the same number of dimensions."):
        L.cross(tf.zeros(4, 3), tf.zeros(3))


@pytest.mark.parametrize("shapes", [[(3, 4), (4, 5)], [(4,), (4, 6), (6, 2), (2,)], [(2, 9), (9, 1), (1, 8), (8, 3)]])
def test_multi_dot_and_chain_matmul(shapes):
    arrays = [normal(s, i) for i, s in enumerate(shapes)]
    assert gradcheck(lambda *xs: L.multi_dot(xs), [leaf(a) for a in arrays])
    parity(lambda *xs: L.multi_dot(xs), lambda *xs: torch.linalg.multi_dot(xs), *arrays)
    if all(len(s) == 2 for s in shapes):
        np.testing.assert_allclose(tf.chain_matmul(*[tf.tensor(a) for a in arrays]).numpy(),
                                   np.linalg.multi_dot(arrays))


def test_multi_dot_errors_match_torch():
    with pytest.raises(RuntimeError, match=r"multi_dot\(\): expected at least 2 tensors but got 1"):
        L.multi_dot([tf.zeros(3)])
    with pytest.raises(RuntimeError, match=r"multi_dot\(\): the last tensor must be 1D or 2D but got 3D"):
        L.multi_dot([tf.zeros(3), tf.zeros(2, 3, 3)])


def test_vecdot_diagonal_matmul():
    x, y = normal((2, 3, 4), 0), normal((3, 4), 1)
    parity(lambda a, b: L.vecdot(a, b), lambda a, b: torch.linalg.vecdot(a, b), x, y)
    parity(lambda a, b: L.vecdot(a, b, dim=-2), lambda a, b: torch.linalg.vecdot(a, b, dim=-2), x, y)
    parity(lambda a: L.diagonal(a, offset=1), lambda a: torch.linalg.diagonal(a, offset=1), x)
    parity(lambda a, b: L.matmul(a, b.mT), lambda a, b: torch.linalg.matmul(a, b.mT), x, y)


# ------------------------------------------------------------------------------ dtypes, adjoints


@pytest.mark.parametrize("name", ["inv", "det", "cholesky", "matrix_exp", "pinv", "svdvals", "eigvalsh", "matrix_norm"])
def test_float32_in_float32_out(name):
    a = positive_definite((2,), 3, 0)
    got = getattr(L, name)(tf.tensor(a, dtype=tf.float32))
    ref = getattr(torch.linalg, name)(torch.tensor(a, dtype=torch.float32))
    assert got.dtype == tf.float32 and str(ref.dtype) == "torch.float32"
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["det", "slogdet", "cholesky", "qr", "svd", "eigh", "pinv", "matrix_exp",
                                  "svdvals", "solve"])
def test_integer_input_is_an_error_like_torch(name):
    a = tf.tensor(np.eye(3, dtype=np.int64))
    args = (a, a) if name == "solve" else (a,)
    with pytest.raises(RuntimeError, match=rf"linalg.{name}: Expected a floating point or complex tensor as input. "
                                           r"Got Long"):
        getattr(L, name)(*args)


def test_adjoints():
    x = normal((2, 3, 4), 0)
    parity(lambda a: a.mH, lambda a: a.mH, x)
    parity(lambda a: a.adjoint(), lambda a: a.adjoint(), x)
    parity(lambda a: tf.adjoint(a), lambda a: torch.adjoint(a), x)
    parity(lambda a: a.H, lambda a: a.H, x[0])
    assert tf.tensor(3.0).H.item() == 3.0
    with pytest.raises(RuntimeError, match=r"tensor.H is only supported on matrices \(2-D tensors\). Got 3-D tensor. "
                                           r"For batches of matrices, consider using tensor.mH"):
        _ = tf.tensor(x).H
    with pytest.raises(RuntimeError, match=r"tensor.mH is only supported on matrices or batches of matrices. Got 1-D"):
        _ = tf.zeros(3).mH
