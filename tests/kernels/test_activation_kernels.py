"""The activation reference kernels (tinyflow/kernels/activation.py): relu_forward / relu_backward
against torch, and ReLU's gradient (through them) checked numerically in float64."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import tinyflow as tf
from tinyflow.kernels.activation import relu_backward, relu_forward

torch = pytest.importorskip("torch")

finite = st.floats(-1e3, 1e3, allow_nan=False, width=64)
with_specials = st.one_of(finite, st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan]))


@settings(max_examples=50, deadline=None)
@given(arrays(np.float64, st.integers(0, 40), elements=with_specials), st.sampled_from([np.float32, np.float64, np.float16]))
def test_relu_forward_and_backward_match_torch(x, dtype):
    """Values at 0, -0, +-inf and NaN included: torch.relu forward, threshold_backward (the
    gradient from the output; NaN passes it)."""
    x = x.astype(dtype)
    g = np.linspace(-2, 3, x.size).astype(dtype)
    y = relu_forward(x)
    want = torch.relu(torch.from_numpy(x))
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y, want.numpy())
    want_g = torch.ops.aten.threshold_backward(torch.from_numpy(g), want, 0).numpy()
    np.testing.assert_array_equal(relu_backward(g, y), want_g)


def test_relu_backward_passes_no_inf_gradient_where_the_relu_cut():
    """A cut position gets 0, not inf * 0 = NaN (the old ``g * mask`` gave NaN)."""
    got = relu_backward(np.array([np.inf, -np.inf, 1.0]), np.array([0.0, -0.0, 2.0]))
    np.testing.assert_array_equal(got, [0.0, 0.0, 1.0])


def test_relu_forward_keeps_integer_dtypes():
    x = np.array([-3, 0, 5], dtype=np.int8)
    y = relu_forward(x)
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, [0, 0, 5])


@settings(max_examples=30, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 5)),
              elements=st.floats(-5, 5, allow_nan=False).filter(lambda v: abs(v) > 1e-3)))
def test_relu_gradient_is_the_numerical_derivative_in_float64(x):
    """Away from the kink, d/dx <relu(x), u> by central differences equals the op's gradient."""
    u = np.cos(np.arange(x.size, dtype=np.float64)).reshape(x.shape) + 0.5
    t = tf.tensor(x, dtype=tf.float64, requires_grad=True)
    (tf.relu(t) * tf.tensor(u, dtype=tf.float64)).sum().backward()
    h = 1e-6
    numeric = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        numeric[i] = ((relu_forward(x + e) - relu_forward(x - e)) * u).sum() / (2 * h)
    np.testing.assert_allclose(t.grad.numpy(), numeric, rtol=1e-7, atol=1e-8)
