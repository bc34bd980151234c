"""Elementwise maths, rounding, division modes, predicates, logical and bitwise ops, and the
products (einsum, dot, outer, mm, ...): float64 gradchecks over random shapes and PyTorch parity
of values, dtypes and gradients."""
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

shapes1 = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)
shapes2 = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=3)
seeds = st.integers(0, 2**31 - 1)
few = settings(max_examples=10, deadline=None)


def make(shape, seed, low=-2.0, high=2.0, avoid=None):
    """A float64 tensor that requires grad; ``avoid(a)`` marks entries to move (away from kinks)."""
    a = np.random.default_rng(seed).uniform(low, high, size=shape)
    if avoid is not None:
        a = np.where(avoid(a), (low + high) / 2 + 0.123, a)
    return tf.tensor(a, dtype=tf.float64, requires_grad=True)


def _outputs(x):
    if isinstance(x, tuple):
        return list(x)
    return [x]


def _torch_dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def parity(ours, theirs, *arrays, grad=True, rtol=1e-5, atol=1e-6):
    """ours(*tinyflow tensors) against theirs(*torch tensors): shapes, dtypes, values and (for
    float inputs, when ``grad``) the gradients of a random weighting of the float outputs."""
    need = [grad and a.dtype.kind == "f" for a in arrays]
    tf_in = [tf.tensor(a, requires_grad=n) for a, n in zip(arrays, need)]
    th_in = [torch.tensor(a, requires_grad=n) for a, n in zip(arrays, need)]
    outs, refs = _outputs(ours(*tf_in)), _outputs(theirs(*th_in))
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        if not isinstance(r, torch.Tensor):
            assert o == r
            continue
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
        if isinstance(r, torch.Tensor) and r.dtype.is_floating_point and r.requires_grad:
            w = rng.standard_normal(tuple(r.shape)).astype(np.float32)
            loss_tf = loss_tf + (o * tf.tensor(w)).sum()
            loss_th = loss_th + (r * torch.tensor(w)).sum()
    if isinstance(loss_th, int):
        return
    loss_tf.backward()
    loss_th.backward()
    for t, r, n in zip(tf_in, th_in, need):
        if n:
            ref = np.zeros(r.shape) if r.grad is None else r.grad.numpy()
            got = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def _near_int(a, eps=0.05):
    return np.abs(a - np.round(a)) < eps


# name: (tinyflow fn, torch fn, (low, high), avoid)
UNARY = {
    "sin": (lambda x: x.sin(), torch.sin, (-3, 3), None),
    "cos": (lambda x: tf.cos(x), torch.cos, (-3, 3), None),
    "tan": (lambda x: x.tan(), torch.tan, (-1.2, 1.2), None),
    "asin": (lambda x: x.asin(), torch.asin, (-0.9, 0.9), None),
    "acos": (lambda x: tf.acos(x), torch.acos, (-0.9, 0.9), None),
    "atan": (lambda x: x.arctan(), torch.atan, (-3, 3), None),
    "sinh": (lambda x: x.sinh(), torch.sinh, (-2, 2), None),
    "cosh": (lambda x: x.cosh(), torch.cosh, (-2, 2), None),
    "tanh": (lambda x: tf.tanh(x), torch.tanh, (-2, 2), None),
    "asinh": (lambda x: x.asinh(), torch.asinh, (-3, 3), None),
    "acosh": (lambda x: x.acosh(), torch.acosh, (1.2, 3), None),
    "atanh": (lambda x: x.atanh(), torch.atanh, (-0.9, 0.9), None),
    "rsqrt": (lambda x: x.rsqrt(), torch.rsqrt, (0.3, 3), None),
    "log2": (lambda x: tf.log2(x), torch.log2, (0.3, 3), None),
    "log10": (lambda x: x.log10(), torch.log10, (0.3, 3), None),
    "log1p": (lambda x: x.log1p(), torch.log1p, (-0.7, 3), None),
    "expm1": (lambda x: x.expm1(), torch.expm1, (-2, 2), None),
    "exp2": (lambda x: x.exp2(), torch.exp2, (-2, 2), None),
    "erf": (lambda x: x.erf(), torch.erf, (-3, 3), None),
    "erfinv": (lambda x: x.erfinv(), torch.erfinv, (-0.95, 0.95), None),
    "neg": (lambda x: x.neg(), torch.neg, (-2, 2), None),
    "reciprocal": (lambda x: x.reciprocal(), torch.reciprocal, (-2, 2), lambda a: np.abs(a) < 0.3),
    "square": (lambda x: tf.square(x), torch.square, (-2, 2), None),
    "frac": (lambda x: x.frac(), torch.frac, (-3, 3), _near_int),
    "floor": (lambda x: x.floor(), torch.floor, (-3, 3), _near_int),
    "ceil": (lambda x: tf.ceil(x), torch.ceil, (-3, 3), _near_int),
    "trunc": (lambda x: x.trunc(), torch.trunc, (-3, 3), _near_int),
    "round": (lambda x: x.round(), torch.round, (-3, 3), lambda a: _near_int(a - 0.5)),
    "round_decimals": (lambda x: x.round(decimals=1), lambda x: torch.round(x, decimals=1), (-3, 3),
                       lambda a: _near_int(a * 10 - 0.5, 0.1)),
    "sign": (lambda x: x.sign(), torch.sign, (-2, 2), lambda a: np.abs(a) < 0.1),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@few
@given(shape=shapes1, seed=seeds)
def test_unary_gradcheck(name, shape, seed):
    ours, _, (low, high), avoid = UNARY[name]
    gradcheck(ours, [make(shape, seed, low, high, avoid)])


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_torch(name):
    ours, theirs, (low, high), avoid = UNARY[name]
    a = np.random.default_rng(5).uniform(low, high, (3, 5))
    if avoid is not None:
        a = np.where(avoid(a), (low + high) / 2 + 0.123, a)
    parity(ours, theirs, a.astype(np.float32))


@pytest.mark.parametrize("name", ["sin", "erf", "rsqrt", "log2", "expm1", "reciprocal", "atan"])
def test_float_functions_of_integers_are_float32(name):
    ours, theirs, _, _ = UNARY[name]
    parity(ours, theirs, np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32))
    parity(ours, theirs, np.array([1, 2, 7], dtype=np.int64))


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round", "sign", "neg", "square"])
def test_integer_inputs_keep_their_dtype(name):
    ours, theirs, _, _ = UNARY[name]
    parity(ours, theirs, np.array([[-3, 0, 2], [5, -1, 7]], dtype=np.int64))
    parity(ours, theirs, np.array([-3, 0, 2], dtype=np.int32))


def test_sign_of_nan_and_inf_as_torch():
    x = np.array([np.nan, -np.inf, -2.0, -0.0, 0.0, 3.0, np.inf])
    parity(lambda t: t.sign(), torch.sign, x.astype(np.float32), grad=False)
    parity(lambda t: t.sign(), torch.sign, x, grad=False)


def test_frac_of_integers_is_an_error_as_in_torch():
    with pytest.raises(RuntimeError, match="frac"):
        tf.tensor([1, 2]).frac()


def test_erf_and_erfinv_are_exact_in_float64():
    x = np.linspace(-6, 6, 2001)
    ours = tf.tensor(x, dtype=tf.float64).erf().numpy()
    np.testing.assert_allclose(ours, [math.erf(v) for v in x], rtol=1e-14, atol=3e-16)
    y = np.linspace(-0.999999, 0.999999, 2001)
    back = tf.tensor(y, dtype=tf.float64).erfinv().erf().numpy()
    np.testing.assert_allclose(back, y, rtol=0, atol=2e-15)
    edges = tf.tensor([-1.0, 1.0, 1.5, float("nan")]).erfinv().numpy()
    assert edges[0] == -np.inf and edges[1] == np.inf and np.isnan(edges[2:]).all()


BINARY = {
    "atan2": (lambda a, b: a.atan2(b), torch.atan2, None),
    "logaddexp": (lambda a, b: tf.logaddexp(a, b), torch.logaddexp, None),
    "fmod": (lambda a, b: a.fmod(b), torch.fmod, "divisor"),
    "remainder": (lambda a, b: a.remainder(b), torch.remainder, "divisor"),
    "mod_operator": (lambda a, b: a % b, lambda a, b: a % b, "divisor"),
    "copysign": (lambda a, b: a.copysign(b), torch.copysign, "signs"),
    "div_trunc": (lambda a, b: a.div(b, rounding_mode="trunc"), lambda a, b: torch.div(a, b, rounding_mode="trunc"),
                  "divisor"),
    "div_floor": (lambda a, b: tf.div(a, b, rounding_mode="floor"),
                  lambda a, b: torch.div(a, b, rounding_mode="floor"), "divisor"),
}


def _binary_inputs(shapes, seed, kind):
    sa, sb = shapes.input_shapes
    a = make(sa, seed)
    b = make(sb, seed + 1)
    if kind == "divisor":  # keep a / b away from integers (the jumps) and b away from 0
        bv = np.random.default_rng(seed + 1).uniform(0.5, 1.5, sb) * np.where(
            np.random.default_rng(seed + 2).random(sb) < 0.5, -1, 1)
        q = np.broadcast_to(a.numpy(), np.broadcast_shapes(sa, sb)) / bv
        if np.any(_near_int(q)):
            return None
        b = tf.tensor(bv, dtype=tf.float64, requires_grad=True)
    if kind == "signs" and (np.any(np.abs(a.numpy()) < 0.05) or np.any(np.abs(b.numpy()) < 0.05)):
        return None
    return a, b


@pytest.mark.parametrize("name", sorted(BINARY))
@few
@given(shapes=shapes2, seed=seeds)
def test_binary_gradcheck(name, shapes, seed):
    ours, _, kind = BINARY[name]
    inputs = _binary_inputs(shapes, seed, kind)
    if inputs is not None:
        gradcheck(ours, list(inputs))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_torch(name):
    ours, theirs, _ = BINARY[name]
    rng = np.random.default_rng(7)
    a = rng.uniform(-3, 3, (2, 1, 4)).astype(np.float32)
    b = (rng.uniform(0.5, 1.5, (3, 1)) * np.array([[1], [-1], [1]])).astype(np.float32)
    parity(ours, theirs, a, b)


@pytest.mark.parametrize("name", ["fmod", "remainder", "mod_operator", "div_trunc", "div_floor"])
def test_integer_division_modes_match_torch(name):
    ours, theirs, _ = BINARY[name]
    a = np.array([[7, -7, 5, -5, 0, 9]], dtype=np.int64)
    b = np.array([[2], [-3]], dtype=np.int64)
    parity(ours, theirs, a, b)


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (lambda a: a // 2, lambda a: a // 2),
        (lambda a: a // 2.5, lambda a: a // 2.5),
        (lambda a: 7 // a, lambda a: 7 // a),
        (lambda a: a % 3, lambda a: a % 3),
        (lambda a: 7.5 % a, lambda a: 7.5 % a),
        (lambda a: a.fmod(2.5), lambda a: a.fmod(2.5)),
        (lambda a: tf.floor_divide(a, 4), lambda a: torch.floor_divide(a, 4)),
    ],
)
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float32])
def test_scalar_division_dtypes_match_torch(ours, theirs, dtype):
    parity(ours, theirs, np.array([-7, -3, 1, 6, 11], dtype=dtype), grad=False)


def test_floor_divide_has_no_derivative():
    x = tf.tensor([1.5, 2.5], requires_grad=True)
    with pytest.raises(RuntimeError, match="floor_divide"):
        (x // 2).sum().backward()


def test_div_rounding_mode_is_checked():
    with pytest.raises(RuntimeError, match="rounding_mode"):
        tf.ones(2).div(2, rounding_mode="ceil")


@few
@given(shapes=mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, min_side=1, max_side=3), seed=seeds)
def test_lerp_gradcheck(shapes, seed):
    sa, sb, sw = shapes.input_shapes
    gradcheck(lambda a, b, w: a.lerp(b, w), [make(sa, seed), make(sb, seed + 1), make(sw, seed + 2, -1, 2)])
    gradcheck(lambda a, b: tf.lerp(a, b, 0.3), [make(sa, seed), make(sb, seed + 1)])


def test_lerp_matches_torch():
    rng = np.random.default_rng(3)
    a, b, w = (rng.standard_normal(s).astype(np.float32) for s in [(2, 3), (3,), (2, 1)])
    parity(lambda x, y, z: x.lerp(y, z), lambda x, y, z: x.lerp(y, z), a, b, w)
    parity(lambda x, y: tf.lerp(x, y, 0.75), lambda x, y: torch.lerp(x, y, 0.75), a, b)


# ---------------------------------------------------------------------------- predicates
def test_predicates_match_torch():
    a = np.array([0.0, -0.0, 1.5, -np.inf, np.inf, np.nan, 3.0], dtype=np.float32)
    for name in ["isinf", "isnan", "isfinite", "isposinf", "isneginf", "signbit"]:
        parity(lambda x, n=name: getattr(x, n)(), lambda x, n=name: getattr(x, n)(), a, grad=False)
        parity(lambda x, n=name: getattr(tf, n)(x), lambda x, n=name: getattr(torch, n)(x), a, grad=False)
    parity(lambda x: x.isinf(), lambda x: x.isinf(), np.array([1, 2], dtype=np.int64), grad=False)


def test_isclose_allclose_equal_match_torch():
    a = np.array([1.0, 1.0 + 1e-6, np.nan, np.inf, 2.0, 0.0], dtype=np.float64)
    b = np.array([1.0, 1.0, np.nan, np.inf, 2.1, 1e-9], dtype=np.float64)
    for kw in [{}, {"equal_nan": True}, {"rtol": 0.1}, {"atol": 0.2, "rtol": 0}]:
        parity(lambda x, y, kw=kw: x.isclose(y, **kw), lambda x, y, kw=kw: x.isclose(y, **kw), a, b, grad=False)
        assert tf.tensor(a).allclose(tf.tensor(b), **kw) == torch.tensor(a).allclose(torch.tensor(b), **kw)
    assert tf.allclose(tf.tensor([1.0, 2.0]), tf.tensor([1.0, 2.0 + 1e-7]))
    assert tf.equal(tf.tensor([1, 2]), tf.tensor([1, 2])) and not tf.equal(tf.tensor([1, 2]), tf.tensor([1, 3]))
    assert not tf.tensor([1, 2]).equal(tf.tensor([[1, 2]]))


# ---------------------------------------------------------------------------- logical, bitwise
INTS = [np.array([[0, 1, 5, -3]], dtype=np.int64), np.array([[3], [0], [-1]], dtype=np.int64)]
BOOLS = [np.array([True, False, True, False]), np.array([True, True, False, False])]


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
                                  "bitwise_xor"])
@pytest.mark.parametrize("data", ["ints", "bools"])
def test_binary_logical_and_bitwise_match_torch(name, data):
    a, b = INTS if data == "ints" else BOOLS
    parity(lambda x, y: getattr(x, name)(y), lambda x, y: getattr(x, name)(y), a, b, grad=False)
    parity(lambda x, y: getattr(tf, name)(x, y), lambda x, y: getattr(torch, name)(x, y), a, b, grad=False)


@pytest.mark.parametrize(
    "expr",
    [lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y, lambda x, y: ~x, lambda x, y: x & 6,
     lambda x, y: 6 & x, lambda x, y: 6 | x, lambda x, y: 6 ^ x, lambda x, y: x << 2, lambda x, y: 1 << x.abs(),
     lambda x, y: x >> 1, lambda x, y: 64 >> x.abs(), lambda x, y: x.bitwise_not(), lambda x, y: x.logical_not(),
     lambda x, y: x.bitwise_left_shift(y.abs()), lambda x, y: x.bitwise_right_shift(y.abs())],
)
def test_bitwise_operators_and_reflections_match_torch(expr):
    a, b = INTS
    parity(expr, expr, a, b, grad=False)
    parity(expr, expr, a.astype(np.int32), b.astype(np.int32), grad=False)


def test_bool_operators_match_torch():
    a, b = BOOLS
    for expr in [lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y, lambda x, y: ~x,
                 lambda x, y: x & True, lambda x, y: False | x, lambda x, y: True ^ x]:
        parity(expr, expr, a, b, grad=False)


def test_inplace_bitwise_operators():
    m = tf.tensor([True, False, True])
    m &= tf.tensor([True, True, False])
    np.testing.assert_array_equal(m.numpy(), [True, False, False])
    m |= tf.tensor([False, True, False])
    np.testing.assert_array_equal(m.numpy(), [True, True, False])
    m ^= True
    np.testing.assert_array_equal(m.numpy(), [False, False, True])


def test_bitwise_on_floats_is_a_runtime_error():
    x = tf.ones(3)
    for expr in [lambda: x & x, lambda: x | 1, lambda: x.bitwise_xor(x), lambda: x << 1, lambda: x.bitwise_not()]:
        with pytest.raises(RuntimeError, match="bitwise"):
            expr()
    with pytest.raises(TypeError, match="operator.invert"):  # the operator's error, as torch's
        _ = ~x


# ---------------------------------------------------------------------------- products
EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(2,), (3,)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (4, 3, 2)]),
    ("b...,b->...", [(2, 3, 4), (2,)]),
    ("ij,ij->ij", [(1, 3), (2, 3)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("i j , j k -> i k", [(2, 3), (3, 1)]),
    ("Ab,bA", [(2, 3), (3, 2)]),
    ("iij->j", [(2, 2, 3)]),
    ("ijk->ik", [(2, 3, 2)]),
]


@pytest.mark.parametrize("equation, shapes", EINSUM)
def test_einsum_gradcheck_and_torch(equation, shapes):
    rng = np.random.default_rng(len(equation))
    arrays = [rng.standard_normal(s) for s in shapes]
    gradcheck(lambda *ts: tf.einsum(equation, *ts),
              [tf.tensor(a, dtype=tf.float64, requires_grad=True) for a in arrays])
    parity(lambda *ts: tf.einsum(equation, *ts), lambda *ts: torch.einsum(equation, *ts),
           *[a.astype(np.float32) for a in arrays])


def test_einsum_takes_a_list_and_names_bad_equations():
    a, b = tf.ones(2, 3), tf.ones(3, 4)
    assert tf.einsum("ij,jk->ik", [a, b]).shape == (2, 4)
    with pytest.raises(ValueError, match="einsum"):
        tf.einsum("ij,jk->ik", a)
    with pytest.raises(ValueError, match="einsum"):
        tf.einsum("ijk,jk->ik", a, b)
    with pytest.raises(ValueError, match="einsum"):
        tf.einsum("ij,jk->iz", a, b)
    with pytest.raises(ValueError, match="size"):
        tf.einsum("ij,jk->ik", a, tf.ones(2, 4))


PRODUCTS = {
    "dot": (lambda a, b: a.dot(b), lambda a, b: a.dot(b), [(4,), (4,)]),
    "inner": (lambda a, b: tf.inner(a, b), lambda a, b: torch.inner(a, b), [(4,), (4,)]),
    "outer": (lambda a, b: a.outer(b), lambda a, b: a.outer(b), [(3,), (4,)]),
    "ger": (lambda a, b: tf.ger(a, b), lambda a, b: torch.outer(a, b), [(3,), (2,)]),
    "mm": (lambda a, b: a.mm(b), lambda a, b: a.mm(b), [(2, 3), (3, 4)]),
    "bmm": (lambda a, b: tf.bmm(a, b), lambda a, b: torch.bmm(a, b), [(2, 2, 3), (2, 3, 4)]),
    "mv": (lambda a, b: a.mv(b), lambda a, b: a.mv(b), [(2, 3), (3,)]),
    "addmm": (lambda c, a, b: c.addmm(a, b, beta=0.5, alpha=2), lambda c, a, b: c.addmm(a, b, beta=0.5, alpha=2),
              [(2, 4), (2, 3), (3, 4)]),
    "addcmul": (lambda c, a, b: c.addcmul(a, b, value=0.5), lambda c, a, b: c.addcmul(a, b, value=0.5),
                [(2, 3), (2, 3), (3,)]),
    "addcdiv": (lambda c, a, b: tf.addcdiv(c, a, b, value=2), lambda c, a, b: torch.addcdiv(c, a, b, value=2),
                [(2, 3), (2, 3), (3,)]),
    "trace": (lambda a: a.trace(), lambda a: a.trace(), [(3, 3)]),
    "norm": (lambda a: a.norm(), lambda a: a.norm(), [(2, 3)]),
    "norm_dim": (lambda a: a.norm(dim=1, keepdim=True), lambda a: a.norm(dim=1, keepdim=True), [(2, 3)]),
    "norm_p1": (lambda a: a.norm(p=1, dim=0), lambda a: a.norm(p=1, dim=0), [(2, 3)]),
    "norm_p3": (lambda a: a.norm(3), lambda a: a.norm(3), [(2, 3)]),
    "norm_inf": (lambda a: tf.norm(a, float("inf")), lambda a: torch.norm(a, float("inf")), [(2, 3)]),
}


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_products_gradcheck_and_torch(name):
    ours, theirs, shapes = PRODUCTS[name]
    rng = np.random.default_rng(11)
    arrays = [rng.uniform(0.5, 2, s) * rng.choice([-1, 1], s) for s in shapes]
    gradcheck(ours, [tf.tensor(a, dtype=tf.float64, requires_grad=True) for a in arrays])
    parity(ours, theirs, *[a.astype(np.float32) for a in arrays])


def test_products_check_their_shapes():
    with pytest.raises(RuntimeError, match="dot"):
        tf.ones(2, 2).dot(tf.ones(2))
    with pytest.raises(RuntimeError, match="dot"):
        tf.ones(2).dot(tf.ones(3))
    with pytest.raises(RuntimeError, match="dtype"):
        tf.ones(2).dot(tf.ones(2, dtype=tf.float64))
    with pytest.raises(RuntimeError, match="mm"):
        tf.ones(2).mm(tf.ones(2, 2))
    with pytest.raises(RuntimeError, match="bmm"):
        tf.ones(2, 2, 3).bmm(tf.ones(3, 3, 2))


@few
@given(b=st.integers(1, 3), n=st.integers(1, 4), k=st.integers(1, 4), m=st.integers(1, 4), seed=seeds)
def test_einsum_dot_outer_gradcheck(b, n, k, m, seed):
    rng = np.random.default_rng(seed)
    x, y = (tf.tensor(rng.standard_normal(s), dtype=tf.float64, requires_grad=True) for s in [(b, n, k), (k, m)])
    gradcheck(lambda p, q: tf.einsum("bnk,km->bmn", p, q), [x, y])
    gradcheck(lambda p: tf.einsum("bnk->k", p), [x])
    u, v = (tf.tensor(rng.standard_normal(s), dtype=tf.float64, requires_grad=True) for s in [(k,), (k,)])
    gradcheck(lambda p, q: p.dot(q), [u, v])
    gradcheck(lambda p, q: tf.outer(p, q), [u, v])


def test_clamp_min_max_nan_to_num_diff_match_torch():
    a = np.array([[np.nan, 1.5, -np.inf], [np.inf, -0.5, 2.0]], dtype=np.float32)
    parity(lambda t: t.nan_to_num(), lambda t: t.nan_to_num(), a)
    parity(lambda t: tf.nan_to_num(t, nan=1.0, posinf=9.0), lambda t: torch.nan_to_num(t, nan=1.0, posinf=9.0), a)
    b = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    parity(lambda t: t.clamp_min(0.1), lambda t: t.clamp_min(0.1), b)
    parity(lambda t: tf.clamp_max(t, 0.2), lambda t: torch.clamp_max(t, 0.2), b)
    for kw in [{}, {"n": 2, "dim": 0}, {"dim": 1}]:
        parity(lambda t, kw=kw: t.diff(**kw), lambda t, kw=kw: t.diff(**kw), b)
    parity(lambda t: tf.diff(t, dim=0, prepend=t[:1], append=t[-1:]),
           lambda t: torch.diff(t, dim=0, prepend=t[:1], append=t[-1:]), b)
    with pytest.raises(RuntimeError, match="clamp"):
        tf.ones(2).clamp()


def test_bincount_matches_torch():
    a = np.array([1, 1, 3, 0, 7])
    parity(lambda t: t.bincount(), lambda t: t.bincount(), a)
    parity(lambda t: tf.bincount(t, minlength=10), lambda t: torch.bincount(t, minlength=10), a)
    w = np.array([0.5, 1.0, 2.0, 0.25, 1.0], dtype=np.float32)
    parity(lambda t, u: t.bincount(u), lambda t, u: t.bincount(u), a, w, grad=False)
