"""PyTorch's activation set: float64 gradchecks (hypothesis) and forward/backward parity with
torch, including the gradient PyTorch picks at each kink, plus the nn layers' signatures."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# name -> (tinyflow call, torch call); the kwargs exercise the non-default parameters
CASES = {
    "elu": (lambda t: F.elu(t, 0.7), lambda t: TF.elu(t, 0.7)),
    "selu": (F.selu, TF.selu),
    "celu": (lambda t: F.celu(t, 1.3), lambda t: TF.celu(t, 1.3)),
    "silu": (F.silu, TF.silu),
    "mish": (F.mish, TF.mish),
    "gelu": (F.gelu, TF.gelu),
    "gelu_tanh": (lambda t: F.gelu(t, approximate="tanh"), lambda t: TF.gelu(t, approximate="tanh")),
    "softplus": (F.softplus, TF.softplus),
    "softplus_beta": (lambda t: F.softplus(t, beta=2.0, threshold=3.0), lambda t: TF.softplus(t, beta=2.0, threshold=3.0)),
    "softsign": (F.softsign, TF.softsign),
    "hardtanh": (lambda t: F.hardtanh(t, -2.0, 1.5), lambda t: TF.hardtanh(t, -2.0, 1.5)),
    "relu6": (F.relu6, TF.relu6),
    "hardswish": (F.hardswish, TF.hardswish),
    "hardsigmoid": (F.hardsigmoid, TF.hardsigmoid),
    "logsigmoid": (F.logsigmoid, TF.logsigmoid),
    "leaky_relu": (lambda t: F.leaky_relu(t, 0.2), lambda t: TF.leaky_relu(t, 0.2)),
    "relu": (F.relu, TF.relu),
    "tanhshrink": (F.tanhshrink, TF.tanhshrink),
    "softshrink": (lambda t: F.softshrink(t, 0.7), lambda t: TF.softshrink(t, 0.7)),
    "hardshrink": (lambda t: F.hardshrink(t, 0.7), lambda t: TF.hardshrink(t, 0.7)),
    "threshold": (lambda t: F.threshold(t, 0.3, -2.0), lambda t: TF.threshold(t, 0.3, -2.0)),
    "glu": (lambda t: F.glu(t, 0), lambda t: TF.glu(t, 0)),
    "softmin": (lambda t: F.softmin(t, -1), lambda t: TF.softmin(t, -1)),
    "rrelu_eval": (F.rrelu, TF.rrelu),
}
# points where the one-sided derivatives differ (and where torch makes a choice)
KINKS = [-6.0, -3.0, -2.0, -1.0, -0.7, 0.0, 0.3, 0.7, 1.0, 1.5, 3.0, 6.0, 25.0, -25.0]


def _smooth_away_from_kinks(x: np.ndarray) -> np.ndarray:
    """Move values off the kinks by more than gradcheck's step, where a gradient is one-sided."""
    for k in KINKS:
        near = np.abs(x - k) < 1e-3
        x[near] = k + 1e-2
    return x


@given(name=st.sampled_from(sorted(CASES)), shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       seed=st.integers(0, 2**31 - 1))
def test_activation_gradcheck(name, shape, seed):
    shape = [2 * s for s in shape] if name == "glu" else shape
    x = _smooth_away_from_kinks(np.random.default_rng(seed).standard_normal(shape) * 4)
    gradcheck(CASES[name][0], [tf.tensor(x, dtype=tf.float64, requires_grad=True)])


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_activation_matches_torch_values_and_gradients_including_kinks(name, dtype):
    rng = np.random.default_rng(0)
    x = np.concatenate([np.array(KINKS), rng.standard_normal(50) * 5]).astype(dtype)
    ours, theirs = CASES[name]
    a, b = tf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = ours(a), theirs(b)
    assert out.dtype == np.dtype(dtype) and out.shape == tuple(ref.shape)
    tight = dtype == "float64"  # float64 to double precision (gelu's erf included)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-10 if tight else 1e-6,
                               atol=1e-12 if tight else 1e-6)
    g = rng.standard_normal(ref.shape).astype(dtype)
    out.backward(tf.tensor(g))
    ref.backward(torch.tensor(g))
    atol = 1e-5 if dtype == "float32" else 1e-9  # float32: rounding of tanh(...) differences
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=atol)


def test_extreme_inputs_stay_finite():
    x = tf.tensor([-1e4, -100.0, 0.0, 100.0, 1e4], requires_grad=True)
    for fn in (F.softplus, F.logsigmoid, F.mish, F.silu, F.elu, F.selu):
        y = fn(x)
        y.sum().backward()
        assert np.isfinite(y.numpy()).all() and np.isfinite(x.grad.numpy()).all(), fn.__name__
        x.grad = None


@pytest.mark.parametrize("channels", [1, 3])
def test_prelu_matches_torch_for_input_and_weight(channels):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    w = rng.uniform(-0.5, 0.5, channels).astype(np.float32)
    a, wa = tf.tensor(x, requires_grad=True), tf.tensor(w, requires_grad=True)
    b, wb = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    out, ref = F.prelu(a, wa), TF.prelu(b, wb)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-6)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(wa.grad.numpy(), wb.grad.numpy(), rtol=1e-5)
    gradcheck(lambda t, u: F.prelu(t, u), [tf.tensor(x + 0.05, dtype=tf.float64, requires_grad=True),
                                           tf.tensor(w, dtype=tf.float64, requires_grad=True)])


def test_prelu_rejects_a_weight_of_the_wrong_size():
    with pytest.raises(ValueError, match=r"prelu: weight has 2 elements but input \(2, 3, 4\) has 3"):
        F.prelu(tf.zeros(2, 3, 4), tf.zeros(2))


def test_softmax_dtype_and_implicit_dim_follow_torch():
    x = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    out = F.softmax(tf.tensor(x), 1, dtype=tf.float64)
    assert out.dtype == tf.float64
    np.testing.assert_allclose(out.numpy(), TF.softmax(torch.tensor(x), 1, dtype=torch.float64).numpy(), rtol=1e-12)
    assert F.log_softmax(tf.tensor(x), dim=-1, dtype="float64").dtype == tf.float64
    with pytest.warns(UserWarning, match="Implicit dimension"):
        implicit = F.softmax(tf.tensor(x))
    with pytest.warns(UserWarning):
        expected = TF.softmax(torch.tensor(x)).numpy()
    np.testing.assert_allclose(implicit.numpy(), expected, rtol=1e-6)


def test_rrelu_in_training_uses_slopes_between_lower_and_upper():
    x = -tf.ones(1000)
    y = F.rrelu(x, 0.1, 0.3, training=True).numpy()
    assert (y <= -0.1 + 1e-7).all() and (y >= -0.3 - 1e-7).all() and y.std() > 0.01


LAYERS = [
    ("ELU", dict(alpha=0.5)), ("SELU", {}), ("CELU", dict(alpha=2.0)), ("SiLU", {}), ("Mish", {}),
    ("GELU", dict(approximate="tanh")), ("Softplus", dict(beta=2, threshold=10)), ("Softsign", {}),
    ("Hardtanh", dict(min_val=-0.5, max_val=2.0)), ("ReLU6", {}), ("Hardswish", {}), ("Hardsigmoid", {}),
    ("LogSigmoid", {}), ("LeakyReLU", dict(negative_slope=0.2)), ("PReLU", dict(num_parameters=6, init=0.1)),
    ("Threshold", dict(threshold=0.1, value=20.0)), ("Hardshrink", dict(lambd=0.3)), ("Softshrink", {}),
    ("Tanhshrink", {}), ("GLU", dict(dim=1)), ("Softmin", dict(dim=1)), ("Softmax", dict(dim=-1)),
    ("LogSoftmax", dict(dim=1)), ("ReLU", dict(inplace=True)), ("Softmax2d", {}), ("RReLU", {}),
    ("Tanh", {}), ("Sigmoid", {}),
]


@pytest.mark.parametrize("name, kwargs", LAYERS)
def test_activation_layers_match_torch_layers(name, kwargs):
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    ours.eval()
    theirs.eval()
    x = np.random.default_rng(3).standard_normal((2, 6, 3, 2)).astype(np.float32) * 3
    np.testing.assert_allclose(ours(tf.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_empty_and_integer_inputs_follow_torch():
    empty = tf.zeros(2, 0, 3)
    for fn in (F.softmax, F.log_softmax, F.softmin):
        assert fn(empty, dim=-1).shape == (2, 0, 3)
    ints = tf.tensor([-2, 0, 3])
    assert F.relu(ints).tolist() == [0, 0, 3] and F.hardtanh(ints).tolist() == [-1, 0, 1]
    for fn in (F.elu, F.gelu, F.silu, F.leaky_relu, F.softplus):
        with pytest.raises(NotImplementedError, match="not implemented for int64"):
            fn(ints)
    with pytest.raises(NotImplementedError, match="softmax"):  # torch has no integer softmax either
        F.softmax(ints, 0)
    assert F.softmax(ints, 0, dtype=tf.float32).dtype == tf.float32
