"""tinyflow.special and the extra elementwise maths (lgamma, digamma, polygamma, erfc, i0, logit,
xlogy, hypot, fmax, frexp, gcd, ...): float64 gradchecks over random shapes, PyTorch parity of
values, dtypes and gradients, accuracy over wide ranges (SciPy as a second oracle), NaN/inf
propagation, in-place forms and the errors of bad input."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import tinyflow as tf
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")

shapes1 = st.lists(st.integers(1, 4), min_size=0, max_size=2).map(tuple)
shapes2 = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, min_side=1, max_side=3)
seeds = st.integers(0, 2**31 - 1)
few = settings(max_examples=10, deadline=None)


def make(shape, seed, low=-2.0, high=2.0, avoid=None):
    """A float64 tensor that requires grad; ``avoid(a)`` marks entries to move (away from poles, kinks)."""
    a = np.random.default_rng(seed).uniform(low, high, size=shape)
    if avoid is not None:
        a = np.where(avoid(a), (low + high) / 2 + 0.123, a)
    return tf.tensor(a, dtype=tf.float64, requires_grad=True)


def _outputs(x):
    return list(x) if isinstance(x, tuple) else [x]


def _torch_dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def parity(ours, theirs, *arrays, grad=True, rtol=1e-12, atol=1e-14, grad_rtol=1e-9):
    """ours(*tinyflow tensors) against theirs(*torch tensors): shapes, dtypes, values and (for
    float inputs, when ``grad``) the gradients of a random weighting of the float outputs."""
    need = [grad and a.dtype.kind == "f" for a in arrays]
    tf_in = [tf.tensor(a, requires_grad=n) for a, n in zip(arrays, need)]
    th_in = [torch.tensor(a, requires_grad=n) for a, n in zip(arrays, need)]
    outs, refs = _outputs(ours(*tf_in)), _outputs(theirs(*th_in))
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert tuple(o.shape) == tuple(r.shape)
        assert str(o.dtype) == _torch_dtype_name(r), (o.dtype, r.dtype)
        if r.dtype.is_floating_point:
            np.testing.assert_allclose(o.numpy(), r.detach().numpy(), rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(o.numpy(), r.numpy())
    if not any(need):
        return
    rng = np.random.default_rng(0)
    loss_tf, loss_th = 0, 0
    for o, r in zip(outs, refs):
        if r.dtype.is_floating_point and r.requires_grad:
            w = rng.standard_normal(tuple(r.shape))
            loss_tf = loss_tf + (o * tf.tensor(w)).sum()
            loss_th = loss_th + (r * torch.tensor(w)).sum()
    loss_tf.backward()
    loss_th.backward()
    for t, r, n in zip(tf_in, th_in, need):
        if n:
            ref = np.zeros(r.shape) if r.grad is None else r.grad.numpy(force=True)
            got = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
            np.testing.assert_allclose(got, ref, rtol=grad_rtol, atol=1e-12)


def _near_int(a, eps=0.05):
    return np.abs(a - np.round(a)) < eps


def _pole(a):
    """Near 0 or a negative integer (the poles of lgamma, digamma, polygamma)."""
    return (a < 0.05) & _near_int(a)


# name: (tinyflow fn, torch fn, (low, high), avoid, value rtol against torch)
UNARY = {
    "lgamma": (lambda x: x.lgamma(), torch.lgamma, (-4.5, 6), _pole, 1e-12),
    "digamma": (lambda x: tf.digamma(x), torch.digamma, (-4.5, 6), _pole, 1e-12),
    "polygamma1": (lambda x: x.polygamma(1), lambda x: torch.polygamma(1, x), (-3.5, 6), _pole, 1e-8),
    "polygamma2": (lambda x: tf.polygamma(2, x), lambda x: torch.polygamma(2, x), (-3.5, 6), _pole, 1e-12),
    "polygamma4": (lambda x: tf.special.polygamma(4, x), lambda x: torch.special.polygamma(4, x), (0.2, 6), None,
                   1e-12),
    "mvlgamma": (lambda x: x.mvlgamma(3), lambda x: torch.mvlgamma(x, 3), (1.2, 6), None, 1e-12),
    "multigammaln": (lambda x: tf.special.multigammaln(x, 2), lambda x: torch.special.multigammaln(x, 2), (0.7, 6),
                     None, 1e-12),
    "erfc": (lambda x: tf.erfc(x), torch.erfc, (-4, 6), None, 1e-12),
    "i0": (lambda x: tf.i0(x), torch.i0, (-8, 8), None, 1e-12),
    "i0e": (lambda x: tf.special.i0e(x), torch.special.i0e, (-30, 30), None, 1e-12),
    "i1": (lambda x: tf.special.i1(x), torch.special.i1, (-8, 8), None, 1e-12),
    "i1e": (lambda x: tf.special.i1e(x), torch.special.i1e, (-30, 30), None, 1e-12),
    "logit": (lambda x: x.logit(), torch.logit, (0.05, 0.95), None, 1e-12),
    "logit_eps": (lambda x: tf.special.logit(x, eps=0.1), lambda x: torch.special.logit(x, eps=0.1), (0.0, 1.0),
                  lambda a: (np.abs(a - 0.1) < 0.02) | (np.abs(a - 0.9) < 0.02), 1e-12),
    "sinc": (lambda x: tf.sinc(x), torch.sinc, (-3, 3), None, 1e-12),
    "deg2rad": (lambda x: x.deg2rad(), torch.deg2rad, (-200, 200), None, 1e-14),
    "rad2deg": (lambda x: tf.rad2deg(x), torch.rad2deg, (-4, 4), None, 1e-14),
    "erfcx": (lambda x: tf.special.erfcx(x), torch.special.erfcx, (-3, 30), None, 1e-12),
    "ndtr": (lambda x: tf.special.ndtr(x), torch.special.ndtr, (-4, 6), None, 1e-9),
    "ndtri": (lambda x: tf.special.ndtri(x), torch.special.ndtri, (0.01, 0.99), None, 1e-12),
    "log_ndtr": (lambda x: tf.special.log_ndtr(x), torch.special.log_ndtr, (-30, 5), None, 1e-12),
    "entr": (lambda x: tf.special.entr(x), torch.special.entr, (0.05, 3), None, 1e-12),
    "expit": (lambda x: tf.special.expit(x), torch.special.expit, (-5, 5), None, 1e-12),
    "gammaln": (lambda x: tf.special.gammaln(x), torch.special.gammaln, (0.1, 30), None, 1e-12),
    "psi": (lambda x: tf.special.psi(x), torch.special.psi, (0.1, 30), None, 1e-12),
    "special_erfc": (lambda x: tf.special.erfc(x), torch.special.erfc, (-2, 2), None, 1e-12),
    "special_sinc": (lambda x: tf.special.sinc(x), torch.special.sinc, (-2, 2), None, 1e-12),
    "special_exp2": (lambda x: tf.special.exp2(x), torch.special.exp2, (-2, 2), None, 1e-12),
    "special_log1p": (lambda x: tf.special.log1p(x), torch.special.log1p, (-0.5, 2), None, 1e-12),
    "special_expm1": (lambda x: tf.special.expm1(x), torch.special.expm1, (-2, 2), None, 1e-12),
    "sgn": (lambda x: x.sgn(), torch.sgn, (-2, 2), lambda a: np.abs(a) < 0.05, 1e-12),
    "frexp_mantissa": (lambda x: x.frexp().mantissa, lambda x: torch.frexp(x).mantissa, (-9, 9),
                       lambda a: _near_int(np.log2(np.abs(a)), 0.01) | (np.abs(a) < 0.01), 1e-12),
}

# The digamma's zeros (near 1.4616 and -0.5, -1.57, -2.61, -3.64): both libraries lose relative
# accuracy there, so values are compared with an absolute tolerance as well.
UNARY_ATOL = {"digamma": 1e-13, "psi": 1e-13, "lgamma": 1e-13}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(shape=shapes1, seed=seeds)
@few
def test_unary_gradcheck(name, shape, seed):
    ours, _, (low, high), avoid, _ = UNARY[name]
    gradcheck(ours, [make(shape, seed, low, high, avoid)])


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_torch(name):
    ours, theirs, (low, high), avoid, rtol = UNARY[name]
    a = np.random.default_rng(1).uniform(low, high, size=(40,))
    if avoid is not None:
        a = np.where(avoid(a), (low + high) / 2 + 0.123, a)
    parity(ours, theirs, a, rtol=rtol, atol=UNARY_ATOL.get(name, 1e-14), grad_rtol=max(rtol, 1e-9))


# name: (tinyflow fn, torch fn, (low, high) of both operands, which inputs get a gradient)
BINARY = {
    "xlogy": (lambda a, b: a.xlogy(b), torch.xlogy, (0.1, 3)),
    "xlogy_fn": (lambda a, b: tf.xlogy(a, b), torch.xlogy, (0.1, 3)),
    "special_xlogy": (lambda a, b: tf.special.xlogy(a, b), torch.special.xlogy, (0.1, 3)),
    "xlog1py": (lambda a, b: tf.special.xlog1py(a, b), torch.special.xlog1py, (0.1, 3)),
    "hypot": (lambda a, b: a.hypot(b), torch.hypot, (-3, 3)),
    "logaddexp2": (lambda a, b: tf.logaddexp2(a, b), torch.logaddexp2, (-3, 3)),
    "fmax": (lambda a, b: tf.fmax(a, b), torch.fmax, (-3, 3)),
    "fmin": (lambda a, b: a.fmin(b), torch.fmin, (-3, 3)),
    "float_power": (lambda a, b: tf.float_power(a, b), torch.float_power, (0.3, 3)),
    "ldexp": (lambda a, b: a.ldexp(b), torch.ldexp, (-3, 3)),
    "nextafter": (lambda a, b: a.nextafter(b), torch.nextafter, (-3, 3)),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@given(shapes=shapes2, seed=seeds)
@few
def test_binary_gradcheck(name, shapes, seed):
    ours, _, (low, high) = BINARY[name]
    a = make(shapes.input_shapes[0], seed, low, high)
    b = make(shapes.input_shapes[1], seed + 1, low, high)
    if name in ("fmax", "fmin"):  # away from ties, where the max is not differentiable
        b = tf.tensor(np.where(np.abs(b.numpy() - a.numpy().mean()) < 0.05, 2.7, b.numpy()), requires_grad=True)
    gradcheck(ours, [a, b])


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_torch(name):
    ours, theirs, (low, high) = BINARY[name]
    rng = np.random.default_rng(2)
    a, b = rng.uniform(low, high, size=(3, 4)), rng.uniform(low, high, size=(4,))
    parity(ours, theirs, a, b)


@given(shapes=shapes2, seed=seeds)
@few
def test_zeta_gradcheck_in_q(shapes, seed):
    x = make(shapes.input_shapes[0], seed, 1.5, 6).detach()
    q = make(shapes.input_shapes[1], seed + 1, -2.5, 4, avoid=lambda a: (a < 0.05) & _near_int(a, 0.1))
    x = x.round() if seed % 2 else x  # integer x allows a negative q
    q = q if seed % 2 else tf.tensor(np.abs(q.numpy()) + 0.1, requires_grad=True)
    gradcheck(lambda b: tf.special.zeta(x, b), [q])


def test_zeta_matches_torch_and_differentiates_in_q_only():
    rng = np.random.default_rng(3)
    x, q = rng.uniform(1.1, 8, size=(30,)), rng.uniform(0.1, 20, size=(30,))
    parity(lambda a, b: tf.special.zeta(a.detach(), b), lambda a, b: torch.special.zeta(a.detach(), b), x, q)
    gradcheck(lambda b: tf.special.zeta(tf.tensor(x), b), [tf.tensor(q, requires_grad=True)])
    out = tf.special.zeta(tf.tensor(x, requires_grad=True), tf.tensor(q))
    with pytest.raises(NotImplementedError, match="zeta: the derivative with respect to x"):
        out.sum().backward()
    # a number on either side, and the edge cases: pole at x == 1, NaN below, q a non-positive integer
    edge_x = torch.tensor([2.0, 1.0, 0.5, 3.0, 3.0, 2.5, 4.0], dtype=torch.float64)
    edge_q = torch.tensor([1.0, 1.0, 1.0, -1.5, -2.0, -1.5, 1e9], dtype=torch.float64)
    got = tf.special.zeta(tf.tensor(edge_x.numpy()), tf.tensor(edge_q.numpy())).numpy()
    np.testing.assert_allclose(got, torch.special.zeta(edge_x, edge_q).numpy(), rtol=1e-12)
    np.testing.assert_allclose(tf.special.zeta(2.0, tf.tensor([1.0, 2.0])).numpy(),
                               torch.special.zeta(2.0, torch.tensor([1.0, 2.0])).numpy(), rtol=1e-6)
    assert tf.special.zeta(tf.tensor([2, 3]), 1).dtype == tf.float32


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
@given(shapes=shapes2, seed=seeds)
@few
def test_incomplete_gamma_gradcheck_in_x(name, shapes, seed):
    a = make(shapes.input_shapes[0], seed, 0.3, 8).detach()
    x = make(shapes.input_shapes[1], seed + 1, 0.1, 10)
    gradcheck(lambda t: getattr(tf.special, name)(a, t), [x])


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_incomplete_gamma_matches_torch_mpmath_and_its_edges(name):
    """PyTorch's float64 incomplete gammas are good to about 1e-9 for a > 5: mpmath is the tight oracle."""
    mp = pytest.importorskip("mpmath")
    rng = np.random.default_rng(10)
    a = np.concatenate([rng.uniform(0.01, 3, 20), rng.uniform(3, 200, 20)])
    x = a * np.exp(rng.uniform(-1.5, 1.5, a.shape))
    parity(lambda s, t: getattr(tf.special, name)(s.detach(), t),
           lambda s, t: getattr(torch.special, name)(s.detach(), t), a, x, rtol=1e-8, grad_rtol=1e-8)
    got = getattr(tf.special, name)(tf.tensor(a), tf.tensor(x)).numpy()
    with mp.workdps(30):
        bounds = (lambda s, t: (0, t)) if name == "gammainc" else (lambda s, t: (t, mp.inf))
        exact = np.array([float(mp.gammainc(mp.mpf(float(s)), *bounds(s, mp.mpf(float(t))), regularized=True))
                          for s, t in zip(a, x)])
    assert _rel_err(got, exact).max() < 1e-13
    edge_a = np.array([0.0, 0.0, 1.0, -1.0, np.inf, np.inf, 2.0, 2.0, np.nan, 1.0, 1e-3])
    edge_x = np.array([1.0, 0.0, 0.0, 1.0, 1.0, np.inf, np.inf, -1.0, 1.0, np.nan, 1e-3])
    _same(getattr(tf.special, name)(tf.tensor(edge_a), tf.tensor(edge_x)).numpy(),
          getattr(torch.special, name)(torch.tensor(edge_a), torch.tensor(edge_x)).numpy())
    out = getattr(tf.special, name)(tf.tensor(a, requires_grad=True), tf.tensor(x))
    with pytest.raises(NotImplementedError, match=f"{name}: the derivative with respect to input"):
        out.sum().backward()
    assert getattr(tf.special, name)(tf.tensor([1.0, 2.0]), 1).dtype == tf.float32


# ------------------------------------------------------------------ accuracy over wide ranges


def _wide_points(rng):
    return np.concatenate([rng.uniform(-40, 40, 400), np.exp(rng.uniform(-30, 30, 200)),
                           -np.exp(rng.uniform(-30, 5, 100)), 1 + rng.uniform(-1e-4, 1e-4, 20),
                           2 + rng.uniform(-1e-4, 1e-4, 20), [1e-300, 1.0, 2.0, 0.5, 1e15, 1e300]])


def _rel_err(got, ref, atol=0.0):
    got, ref = np.asarray(got), np.asarray(ref)
    same = (got == ref) | (np.isnan(got) & np.isnan(ref))
    with np.errstate(all="ignore"):
        err = np.abs(got - ref) / (np.abs(ref) + atol)
    return np.where(same, 0.0, err)


def _avoid_negative_integers(x):
    return x[~((x <= 0) & (np.abs(x - np.round(x)) < 1e-6))]


@pytest.mark.parametrize("name", ["lgamma", "digamma"])
def test_gamma_family_wide_range(name):
    """Against torch (glibc's lgamma, Cephes' digamma) over +-40, 1e-13..1e13, near the zeros of
    lgamma at 1 and 2, and at huge arguments; an absolute term at the functions' other zeros."""
    x = _avoid_negative_integers(_wide_points(np.random.default_rng(4)))
    got = getattr(tf.tensor(x), name)().numpy()
    ref = getattr(torch, name)(torch.tensor(x)).numpy()
    assert _rel_err(got, ref, atol=1e-13).max() < 1e-12


def test_lgamma_near_its_positive_zeros_is_relatively_accurate():
    x = np.concatenate([1 + np.geomspace(1e-12, 1e-3, 30), 1 - np.geomspace(1e-12, 1e-3, 30),
                        2 + np.geomspace(1e-12, 1e-3, 30), 2 - np.geomspace(1e-12, 1e-3, 30)])
    got = tf.tensor(x).lgamma().numpy()
    ref = torch.tensor(x).lgamma().numpy()
    assert _rel_err(got, ref).max() < 1e-12


def test_polygamma_against_scipy():
    """PyTorch's trigamma is accurate to about 1e-9 only, so SciPy is the tight oracle."""
    special = pytest.importorskip("scipy.special")
    x = np.concatenate([np.random.default_rng(5).uniform(0.01, 50, 200), [1e-5, 1e5]])
    for n in (1, 2, 3, 6):
        got = tf.polygamma(n, tf.tensor(x)).numpy()
        assert _rel_err(got, special.polygamma(n, x)).max() < 1e-13, n


@pytest.mark.parametrize("name", ["erfc", "erfcx", "ndtr", "log_ndtr", "ndtri", "i0", "i0e", "i1", "i1e"])
def test_error_and_bessel_functions_against_scipy(name):
    """Deep tails included: erfc to 1e-300, log_ndtr at -1e10, i0 near its overflow."""
    special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(6)
    if name == "ndtri":
        x = np.concatenate([rng.uniform(0, 1, 300), np.exp(rng.uniform(-700, 0, 200)),
                            1 - np.exp(rng.uniform(-36, -1, 100)), [0.5, 0.5 + 1e-9]])
    elif name == "erfc":
        x = np.concatenate([rng.uniform(-6, 26, 500), [0.0, 1.0, 8.0]])
    elif name in ("ndtr", "log_ndtr"):
        x = np.concatenate([rng.uniform(-37, 9, 500), [-1e10] if name == "log_ndtr" else [-1.0]])
    else:
        x = np.concatenate([rng.uniform(-50, 50, 400), rng.uniform(-700, 700, 100), [0.0, 25.0, -25.0]])
    got = getattr(tf.special, name)(tf.tensor(x)).numpy()
    if name in ("erfc", "erfcx", "ndtr"):  # SciPy's own tails are good to 2e-13 only: mpmath decides
        mp = pytest.importorskip("mpmath")
        exact = {"erfc": mp.erfc, "erfcx": lambda v: mp.exp(v * v) * mp.erfc(v), "ndtr": mp.ncdf}[name]
        with mp.workdps(30):
            ref = np.array([float(exact(mp.mpf(float(v)))) for v in x])
    else:
        ref = getattr(special, name)(x)
    assert _rel_err(got, ref).max() < 5e-14


def test_log_ndtr_gradient_deep_in_the_left_tail():
    """pdf/cdf without cancellation: about -x at x = -1e10 (exp(-x^2/2 - log_ndtr) would be noise)."""
    special = pytest.importorskip("scipy.special")
    x = np.array([-1e10, -1e5, -300.0, -40.0, -5.0, -1.5])
    t = tf.tensor(x, requires_grad=True)
    tf.special.log_ndtr(t).sum().backward()
    expected = math.sqrt(2 / math.pi) / special.erfcx(-x / math.sqrt(2))
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-13)


def test_erfc_is_not_one_minus_erf():
    x = np.array([5.0, 10.0, 20.0, 26.0])
    got = tf.tensor(x).erfc().numpy()
    np.testing.assert_allclose(got, [math.erfc(v) for v in x], rtol=1e-14)
    assert (got > 0).all()


# ------------------------------------------------------------------ NaN, inf, poles


def _same(got, ref):
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    finite = ~np.isnan(ref)
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-12)


EDGE = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, -2.0, 1.0, 1e-320])


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfc", "i0", "sinc", "logit", "sgn", "deg2rad"])
def test_methods_propagate_nan_and_inf_as_torch(name):
    _same(getattr(tf.tensor(EDGE), name)().numpy(), getattr(torch.tensor(EDGE), name)().numpy())


@pytest.mark.parametrize("name", ["erfcx", "i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "entr", "expit",
                                  "gammaln", "psi"])
def test_special_propagates_nan_and_inf_as_torch(name):
    got = getattr(tf.special, name)(tf.tensor(EDGE)).numpy()
    _same(got, getattr(torch.special, name)(torch.tensor(EDGE)).numpy())


def test_polygamma_poles_and_xlogy_zeros_as_torch():
    x = np.array([0.0, -1.0, np.inf, np.nan, 0.5])
    for n in (2, 3):
        _same(tf.polygamma(n, tf.tensor(x)).numpy(), torch.polygamma(n, torch.tensor(x)).numpy())
    a = np.array([0.0, 0.0, 0.0, 1.0, 2.0, 0.0])
    b = np.array([np.nan, 0.0, np.inf, 0.0, -1.0, -1.0])
    _same(tf.xlogy(tf.tensor(a), tf.tensor(b)).numpy(), torch.xlogy(torch.tensor(a), torch.tensor(b)).numpy())
    _same(tf.special.xlog1py(tf.tensor(a), tf.tensor(b)).numpy(),
          torch.special.xlog1py(torch.tensor(a), torch.tensor(b)).numpy())


def test_fmax_fmin_ignore_nan_and_route_gradients_as_torch():
    a = np.array([1.0, np.nan, 2.0, np.nan, 3.0])
    b = np.array([np.nan, 1.0, 2.0, np.nan, -1.0])
    for name in ("fmax", "fmin"):
        ta, tb = tf.tensor(a, requires_grad=True), tf.tensor(b, requires_grad=True)
        ra, rb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        out, ref = getattr(ta, name)(tb), getattr(torch, name)(ra, rb)
        _same(out.numpy(), ref.detach().numpy())
        out.sum().backward()
        ref.sum().backward()
        np.testing.assert_array_equal(ta.grad.numpy(), ra.grad.numpy())
        np.testing.assert_array_equal(tb.grad.numpy(), rb.grad.numpy())


# ------------------------------------------------------------------ dtypes


DTYPE_CASES = {
    "lgamma": (lambda m, x: m.lgamma(x), 3),
    "digamma": (lambda m, x: m.digamma(x), 3),
    "polygamma": (lambda m, x: m.polygamma(2, x), 3),
    "mvlgamma": (lambda m, x: m.mvlgamma(x, 2), 3),
    "erfc": (lambda m, x: m.erfc(x), 1),
    "i0": (lambda m, x: m.i0(x), 1),
    "sinc": (lambda m, x: m.sinc(x), 1),
    "deg2rad": (lambda m, x: m.deg2rad(x), 1),
    "logit": (lambda m, x: m.logit(x, 0.25), 0),
    "float_power": (lambda m, x: m.float_power(x, 2), 1),
    "xlogy": (lambda m, x: m.xlogy(x, 2), 1),
    "hypot_float": (lambda m, x: m.hypot(x, x.double() if m is torch else x.double()), 1),
    "fmax": (lambda m, x: m.fmax(x, x), 1),
    "ldexp": (lambda m, x: m.ldexp(x, x.long() if m is torch else x.long()), 1),
    "special_i1e": (lambda m, x: m.special.i1e(x), 1),
    "special_ndtr": (lambda m, x: m.special.ndtr(x), 1),
    "special_entr": (lambda m, x: m.special.entr(x), 1),
    "special_zeta": (lambda m, x: m.special.zeta(x + 2, 1.5), 1),
}


@pytest.mark.parametrize("name", sorted(DTYPE_CASES))
@pytest.mark.parametrize("dtype", ["int64", "float32", "float64"])
def test_result_dtypes(name, dtype):
    fn, start = DTYPE_CASES[name]
    if name == "hypot_float" and dtype == "int64":
        return  # torch has no integer hypot
    values = np.arange(start, start + 3).astype(dtype)
    ours, ref = fn(tf, tf.tensor(values)), fn(torch, torch.tensor(values))
    assert str(ours.dtype) == _torch_dtype_name(ref)
    single = str(ours.dtype) == "float32"
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-6 if single else 1e-12, atol=1e-6 if single else 1e-14)


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfc", "i0", "sinc", "logit", "deg2rad"])
def test_half_precision_keeps_its_dtype(name):
    values = np.array([0.25, 0.75, 1.5, 3.0], dtype=np.float16)
    ours, ref = getattr(tf.tensor(values), name)(), getattr(torch.tensor(values), name)()
    assert ours.dtype == tf.float16
    np.testing.assert_allclose(ours.numpy().astype(np.float64), ref.numpy().astype(np.float64), rtol=2e-3, atol=2e-3)


def test_float_power_with_a_number_as_base_or_exponent():
    e = np.array([1.0, 2.0, -0.5])
    parity(lambda t: tf.float_power(2.5, t), lambda t: torch.float_power(2.5, t), e)
    parity(lambda t: tf.float_power(t, 3), lambda t: torch.float_power(t, 3), e + 2)
    parity(lambda t: t.float_power(-1.5), lambda t: t.float_power(-1.5), e.astype(np.float32) + 2, rtol=1e-6)
    with pytest.raises(TypeError, match="float_power: expected at least one Tensor"):
        tf.float_power(2.0, 3.0)


# ------------------------------------------------------------------ integer and bit-level ops


def test_gcd_lcm_frexp_nextafter_heaviside():
    a = np.array([0, -4, 6, 12, 7])
    b = np.array([0, 6, -9, 18, 0])
    parity(lambda x, y: tf.gcd(x, y), torch.gcd, a, b)
    parity(lambda x, y: x.lcm(y), torch.lcm, a, b)
    x = np.array([1.0, 0.0, 3.0, -0.75, 1e-310, 1e300, np.inf, np.nan])
    parity(lambda t: tf.frexp(t), torch.frexp, x[:6])
    mantissa, exponent = tf.tensor(x).frexp()
    assert exponent.dtype == tf.int32 and mantissa.dtype == tf.float64
    assert tf.tensor(x[:4], dtype=tf.float32).frexp().mantissa.dtype == tf.float32
    parity(lambda s, t: tf.nextafter(s, t), torch.nextafter, x[:6], np.array([2.0, -1.0, 3.0, 0.0, 1.0, -np.inf]))
    n = np.array([-1.5, 0.0, 2.0, 0.0])
    parity(lambda s, v: tf.heaviside(s, v), torch.heaviside, n, np.array([7.0, 0.5, 7.0, 0.25]), grad=False)
    out = tf.tensor(n, requires_grad=True).heaviside(tf.tensor(0.5, dtype=tf.float64))
    with pytest.raises(RuntimeError, match="heaviside: the derivative is not implemented"):
        out.sum().backward()


def test_sgn_and_rounding_namespace_functions():
    x = np.array([-2.5, -0.0, 0.0, 0.5, 1.5, 3.25])
    parity(lambda t: t.sgn(), torch.sgn, x)
    parity(lambda t: tf.special.round(t), torch.special.round, x, grad=False)
    parity(lambda t: tf.special.round(t, decimals=1), lambda t: torch.special.round(t, decimals=1), x, grad=False)
    m = np.random.default_rng(7).standard_normal((3, 4))
    parity(lambda t: tf.special.softmax(t, 1), lambda t: torch.special.softmax(t, 1), m)
    parity(lambda t: tf.special.log_softmax(t, 0), lambda t: torch.special.log_softmax(t, 0), m)
    parity(lambda t: tf.special.logsumexp(t, 1, keepdim=True), lambda t: torch.special.logsumexp(t, 1, keepdim=True), m)
    parity(lambda t: tf.special.erf(t), torch.special.erf, m[0])
    parity(lambda t: tf.special.erfinv(t), torch.special.erfinv, m[0] / 4)
    parity(lambda t: tf.special.i0(t), torch.special.i0, m[0])
    f32 = tf.special.softmax(tf.tensor(m, dtype=tf.float32), 1, dtype=tf.float64)
    assert f32.dtype == tf.float64


# ------------------------------------------------------------------ in place


INPLACE = {
    "lgamma_": ((), (0.5, 4)), "digamma_": ((), (0.5, 4)), "polygamma_": ((2,), (0.5, 4)),
    "mvlgamma_": ((2,), (1.0, 4)), "erfc_": ((), (-2, 2)), "i0_": ((), (-2, 2)), "logit_": ((), (0.1, 0.9)),
    "xlogy_": ((2.0,), (0.5, 2)), "hypot_": (("t",), (-2, 2)), "sinc_": ((), (-2, 2)), "sgn_": ((), (-2, 2)),
    "deg2rad_": ((), (-90, 90)), "rad2deg_": ((), (-2, 2)), "ldexp_": (("t",), (-2, 2)),
    "nextafter_": (("t",), (-2, 2)), "float_power_": ((3,), (0.5, 2)), "heaviside_": (("t",), (-2, 2)),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_forms(name):
    args, (low, high) = INPLACE[name]
    a = np.random.default_rng(8).uniform(low, high, size=(5,))
    other = np.array([1.0, -1.0, 2.0, 0.0, 3.0])
    if name == "ldexp_":
        ours_args, th_args = (tf.tensor(other.astype(np.int64)),), (torch.tensor(other.astype(np.int64)),)
    else:
        ours_args = tuple(tf.tensor(other) if v == "t" else v for v in args)
        th_args = tuple(torch.tensor(other) if v == "t" else v for v in args)
    x, y = tf.tensor(a), torch.tensor(a)
    assert getattr(x, name)(*ours_args) is x
    getattr(y, name)(*th_args)
    np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-12)


def test_inplace_integer_ops_and_dtype_errors():
    x, y = tf.tensor([4, 6, 9]), torch.tensor([4, 6, 9])
    x.gcd_(tf.tensor([6, 4, 3]))
    y.gcd_(torch.tensor([6, 4, 3]))
    np.testing.assert_array_equal(x.numpy(), y.numpy())
    x.lcm_(tf.tensor([3, 5, 2]))
    y.lcm_(torch.tensor([3, 5, 2]))
    np.testing.assert_array_equal(x.numpy(), y.numpy())
    with pytest.raises(RuntimeError, match="lgamma_: result type float32 can't be cast"):
        tf.tensor([1, 2]).lgamma_()
    with pytest.raises(RuntimeError, match="float_power_ has dtype float32"):
        tf.tensor([1.0, 2.0]).float_power_(2)


# ------------------------------------------------------------------ errors


def test_errors_of_bad_input():
    x = tf.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="polygamma.*negative n"):
        tf.polygamma(-1, x)
    with pytest.raises(RuntimeError, match="mvlgamma: p has to be greater than or equal to 1"):
        x.mvlgamma(0)
    with pytest.raises(NotImplementedError, match="gcd: not implemented for dtype float32"):
        tf.gcd(x, x)
    with pytest.raises(NotImplementedError, match="lcm: not implemented for dtype float32"):
        x.lcm(tf.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="frexp.*only supports floating-point dtypes"):
        tf.tensor([1, 2]).frexp()
    with pytest.raises(RuntimeError, match="heaviside is not yet implemented for tensors with different dtypes"):
        x.heaviside(tf.tensor([1, 2]))
    with pytest.raises(TypeError, match="heaviside: values must be a Tensor"):
        x.heaviside(0.5)
    with pytest.raises(NotImplementedError, match="nextafter: not implemented for dtype int64"):
        tf.tensor([1, 2]).nextafter(tf.tensor([2, 3]))
    with pytest.raises(TypeError, match="special.erfcx: expected a Tensor"):
        tf.special.erfcx([1.0, 2.0])
    with pytest.raises(TypeError, match="special.zeta: expected at least one Tensor"):
        tf.special.zeta(2.0, 1.0)
    with pytest.raises(TypeError, match="tinyflow.polygamma: expected a Tensor"):
        tf.polygamma(1, 2.0)
    with pytest.raises(NotImplementedError, match="sgn: complex tensors are not supported"):
        tf.tensor(np.array([1 + 1j])).sgn()


# ------------------------------------------------------------------ Bessel functions without gradients


@pytest.mark.parametrize("name", ["bessel_j0", "bessel_j1", "modified_bessel_i0", "modified_bessel_i1",
                                  "spherical_bessel_j0"])
def test_bessel_functions_without_gradients(name):
    """PyTorch records no gradient for these; its float64 bessel_j0/j1 are good to about 1e-6 only
    on [2, 10], so mpmath is the tight oracle (absolute error, as near the functions' zeros)."""
    mp = pytest.importorskip("mpmath")
    rng = np.random.default_rng(9)
    x = np.concatenate([rng.uniform(-40, 40, 200), rng.uniform(-2.5, 2.5, 50), [0.0, 2.0, -25.0, 1e4]])
    out = getattr(tf.special, name)(tf.tensor(x, requires_grad=True))
    ref = getattr(torch.special, name)(torch.tensor(x, requires_grad=True))
    assert not out.requires_grad and not ref.requires_grad
    assert out.dtype == tf.float64
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
    if name.startswith("bessel_j"):
        order = int(name[-1])
        with mp.workdps(30):
            exact = np.array([float(mp.besselj(order, mp.mpf(float(v)))) for v in x])
        np.testing.assert_allclose(out.numpy(), exact, rtol=0, atol=5e-16)
    assert getattr(tf.special, name)(tf.tensor([1, 2])).dtype == tf.float32
    edge = EDGE[:-1]  # not the subnormal: PyTorch's j1(1e-320) is not x/2
    _same(getattr(tf.special, name)(tf.tensor(edge)).numpy(), getattr(torch.special, name)(torch.tensor(edge)).numpy())


def test_lgamma_at_minus_one_half_and_polygamma_far_below_zero():
    """lgamma(-0.5) sat on the border of two branches; polygamma / zeta at large negative x summed
    about -x terms (digamma's backward at -1e30 never returned): now the reflection formula."""
    mpmath = pytest.importorskip("mpmath")
    assert tf.tensor([-0.5], dtype=tf.float64).lgamma().item() == pytest.approx(float(mpmath.loggamma(-0.5).real),
                                                                               rel=1e-14)
    xs = [-0.5, -1.3, -2.7, -10.25, -1000.3, -123456.7]
    for n in (1, 2, 3):
        got = tf.polygamma(n, tf.tensor(xs, dtype=tf.float64)).numpy()
        want = [float(mpmath.polygamma(n, x)) for x in xs]
        np.testing.assert_allclose(got, want, rtol=1e-9)
    x = tf.tensor([-1e30, -2.0, -1e6 + 0.5], dtype=tf.float64, requires_grad=True)
    x.digamma().sum().backward()  # trigamma: +inf at the poles, finite between them
    assert np.isinf(x.grad.numpy()[:2]).all() and np.isfinite(x.grad.numpy()[2])
    got = tf.special.zeta(tf.tensor([4.0, 2.5], dtype=tf.float64), tf.tensor([-1e5 - 0.25, -1e6 + 0.5],
                                                                           dtype=tf.float64)).numpy()
    want = torch.special.zeta(torch.tensor([4.0], dtype=torch.float64), torch.tensor([-1e5 - 0.25], dtype=torch.float64))
    assert got[0] == pytest.approx(want.item(), rel=1e-9) and np.isnan(got[1])  # (mpmath continues zeta in q)
