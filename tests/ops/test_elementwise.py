"""Elementwise ops: float64 gradchecks over random broadcastable shapes, and PyTorch parity."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import tinyflow as tf
import tinyflow.nn.functional as F
from tinyflow.testing import gradcheck

shapes2 = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0, max_side=4)
shapes1 = st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple)
seeds = st.integers(0, 2**31 - 1)


def make(shape, seed, low=-2.0, high=2.0, away_from_zero=False):
    rng = np.random.default_rng(seed)
    a = rng.uniform(low, high, size=shape)
    if away_from_zero:  # keep kinks (abs, relu, division) away from finite-difference steps
        a = np.where(np.abs(a) < 0.1, 0.5, a)
    return tf.tensor(a, dtype=tf.float64, requires_grad=True)


BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "div": (lambda a, b: a / b, lambda a, b: a / b),
    "maximum": (lambda a, b: a.maximum(b), lambda a, b: a.maximum(b)),
    "minimum": (lambda a, b: a.minimum(b), lambda a, b: a.minimum(b)),
}

UNARY = {
    "neg": (lambda a: -a, lambda a: -a, {}),
    "exp": (lambda a: a.exp(), lambda a: a.exp(), {}),
    "log": (lambda a: a.log(), lambda a: a.log(), {"low": 0.2, "high": 3.0}),
    "sqrt": (lambda a: a.sqrt(), lambda a: a.sqrt(), {"low": 0.2, "high": 3.0}),
    "tanh": (lambda a: a.tanh(), lambda a: a.tanh(), {}),
    "sigmoid": (lambda a: a.sigmoid(), lambda a: a.sigmoid(), {}),
    "relu": (lambda a: a.relu(), lambda a: a.relu(), {"away_from_zero": True}),
    "abs": (lambda a: a.abs(), lambda a: a.abs(), {"away_from_zero": True}),
    "square": (lambda a: a**2, lambda a: a**2, {}),
    "cube": (lambda a: a**3, lambda a: a**3, {}),
    "pow_half": (lambda a: a**0.5, lambda a: a**0.5, {"low": 0.2, "high": 3.0}),
    "clip": (lambda a: a.clip(-1.0, 1.0), lambda a: a.clamp(-1.0, 1.0), {}),
    "gelu": (lambda a: F.gelu(a), lambda a: __import__("torch").nn.functional.gelu(a), {}),
    "gelu_tanh": (lambda a: F.gelu(a, "tanh"), lambda a: __import__("torch").nn.functional.gelu(a, approximate="tanh"), {}),
    "leaky_relu": (lambda a: F.leaky_relu(a, 0.1), lambda a: __import__("torch").nn.functional.leaky_relu(a, 0.1),
                   {"away_from_zero": True}),
    "rsub_scalar": (lambda a: 3.0 - a, lambda a: 3.0 - a, {}),
    "rdiv_scalar": (lambda a: 2.0 / a, lambda a: 2.0 / a, {"low": 0.5, "high": 3.0}),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@given(shapes=shapes2, seed=seeds)
def test_binary_gradcheck(name, shapes, seed):
    ours, _ = BINARY[name]
    sa, sb = shapes.input_shapes
    a = make(sa, seed)
    b = make(sb, seed + 1, low=0.5, high=2.0) if name == "div" else make(sb, seed + 1)
    gradcheck(ours, [a, b])


@pytest.mark.parametrize("name", sorted(UNARY))
@given(shape=shapes1, seed=seeds)
def test_unary_gradcheck(name, shape, seed):
    ours, _, kw = UNARY[name]
    gradcheck(ours, [make(shape, seed, **kw)])


def test_pow_tensor_exponent_gradcheck():
    a = make((3, 2), 0, low=0.5, high=2.0)
    b = make((2,), 1)
    gradcheck(lambda x, y: x**y, [a, b])


def test_where_gradcheck():
    a, b = make((3, 4), 0), make((4,), 1)
    cond = tf.tensor(np.random.default_rng(2).random((3, 4)) > 0.5)
    gradcheck(lambda x, y: tf.where(cond, x, y), [a, b])


def _torch_compare(ours, theirs, arrays):
    torch = pytest.importorskip("torch")
    tf_in = [tf.tensor(a, requires_grad=True) for a in arrays]
    th_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = ours(*tf_in), theirs(*th_in)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    g = np.random.default_rng(0).standard_normal(ref.shape).astype(np.float32)
    out.backward(g)
    ref.backward(torch.tensor(g))
    for t, r in zip(tf_in, th_in):
        np.testing.assert_allclose(t.grad.numpy(), r.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_torch(name):
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 2, (3, 1, 4)).astype(np.float32)
    b = rng.uniform(0.5, 2, (5, 1)).astype(np.float32)
    _torch_compare(*BINARY[name], [a, b])


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_torch(name):
    ours, theirs, kw = UNARY[name]
    low, high = kw.get("low", -2.0), kw.get("high", 2.0)
    a = np.random.default_rng(3).uniform(low, high, (4, 5)).astype(np.float32)
    if kw.get("away_from_zero"):
        a = np.where(np.abs(a) < 0.1, 0.5, a).astype(np.float32)
    _torch_compare(ours, theirs, [a])


def test_broadcast_mismatch_names_op_and_shapes():
    a, b = tf.ones(2, 3), tf.ones(4)
    with pytest.raises(ValueError, match=r"add: shapes \(2, 3\) and \(4,\)"):
        a + b
    with pytest.raises(ValueError, match=r"mul: shapes \(2, 3\) and \(4,\)"):
        a * b


def test_sigmoid_is_stable_for_large_inputs():
    x = tf.tensor([-1000.0, 0.0, 1000.0], requires_grad=True)
    y = x.sigmoid()
    np.testing.assert_allclose(y.numpy(), [0.0, 0.5, 1.0])
    y.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


def test_python_scalars_keep_float32():
    x = tf.ones(3)
    assert (x * 2.5).dtype == tf.float32
    assert (2.5 - x).dtype == tf.float32
    assert (x**2).dtype == tf.float32
