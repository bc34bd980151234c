"""The fused LSTM / GRU cell kernels, the cell and sequence ops, and embedding.

Kernels are checked against a plain NumPy transcription of PyTorch's equations and their
backward against central differences; the ops through ``tinyflow.testing.gradcheck`` (float64)
and against PyTorch.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyflow.kernels.rnn import (
    embedding_backward,
    gru_cell_backward,
    gru_cell_forward,
    lstm_cell_backward,
    lstm_cell_forward,
)

SETTINGS = settings(max_examples=25, deadline=None)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def lstm_reference(gates: np.ndarray, c_prev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's LSTM cell equations, written out plainly."""
    i, f, g, o = np.split(gates, 4, axis=1)
    c = sigmoid(f) * c_prev + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def gru_reference(gi: np.ndarray, gh: np.ndarray, h_prev: np.ndarray) -> np.ndarray:
    """PyTorch's GRU cell equations, written out plainly."""
    ir, iz, in_ = np.split(gi, 3, axis=1)
    hr, hz, hn = np.split(gh, 3, axis=1)
    r, z = sigmoid(ir + hr), sigmoid(iz + hz)
    n = np.tanh(in_ + r * hn)
    return (1 - z) * n + z * h_prev


def numeric_grad(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar function f at x (float64)."""
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + eps
        up = f()
        x[idx] = old - eps
        down = f()
        x[idx] = old
        grad[idx] = (up - down) / (2 * eps)
    return grad


cell_shapes = st.tuples(st.integers(1, 4), st.integers(1, 5), st.integers(0, 2**31 - 1))


@SETTINGS
@given(cell_shapes, st.sampled_from([0.5, 3.0, 30.0]))
def test_lstm_cell_kernel_matches_reference_and_finite_differences(shape, scale):
    batch, hidden, seed = shape
    rng = np.random.default_rng(seed)
    gates = rng.normal(scale=scale, size=(batch, 4 * hidden))  # large scales saturate the gates
    c_prev = rng.normal(size=(batch, hidden))
    wh, wc = rng.normal(size=(batch, hidden)), rng.normal(size=(batch, hidden))

    h, c, acts = lstm_cell_forward(gates.copy(), c_prev)
    h_ref, c_ref = lstm_reference(gates, c_prev)
    np.testing.assert_allclose(h, h_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(c, c_ref, rtol=1e-12, atol=1e-12)
    assert np.isfinite(acts).all()

    def loss() -> float:
        h_, c_ = lstm_reference(gates, c_prev)
        return float((h_ * wh).sum() + (c_ * wc).sum())

    dgates, dc_prev = lstm_cell_backward(wh, wc, acts, c_prev, c)
    np.testing.assert_allclose(dgates, numeric_grad(loss, gates), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dc_prev, numeric_grad(loss, c_prev), rtol=1e-5, atol=1e-7)


def test_lstm_cell_kernel_writes_into_given_buffers_and_accepts_no_dc():
    rng = np.random.default_rng(1)
    gates = rng.normal(size=(2, 12)).astype(np.float32)
    c_prev = rng.normal(size=(2, 3)).astype(np.float32)
    h_out, c_out = np.empty((2, 3), np.float32), np.empty((2, 3), np.float32)
    h, c, acts = lstm_cell_forward(gates, c_prev, h_out=h_out, c_out=c_out)
    assert h is h_out and c is c_out and acts is gates
    assert h.dtype == np.float32
    dh = rng.normal(size=(2, 3)).astype(np.float32)
    d_none, dc_none = lstm_cell_backward(dh, None, acts, c_prev, c)
    d_zero, dc_zero = lstm_cell_backward(dh, np.zeros_like(dh), acts, c_prev, c)
    np.testing.assert_array_equal(d_none, d_zero)
    np.testing.assert_array_equal(dc_none, dc_zero)


def test_lstm_cell_kernel_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"lstm_cell_forward: gates \(2, 10\)"):
        lstm_cell_forward(np.zeros((2, 10)), np.zeros((2, 3)))


@SETTINGS
@given(cell_shapes, st.sampled_from([0.5, 3.0]))
def test_gru_cell_kernel_matches_reference_and_finite_differences(shape, scale):
    batch, hidden, seed = shape
    rng = np.random.default_rng(seed)
    gi = rng.normal(scale=scale, size=(batch, 3 * hidden))
    gh = rng.normal(scale=scale, size=(batch, 3 * hidden))
    h_prev = rng.normal(size=(batch, hidden))
    w = rng.normal(size=(batch, hidden))

    h, acts = gru_cell_forward(gi.copy(), gh, h_prev)
    np.testing.assert_allclose(h, gru_reference(gi, gh, h_prev), rtol=1e-12, atol=1e-12)

    def loss() -> float:
        return float((gru_reference(gi, gh, h_prev) * w).sum())

    dgi, dgh, dh_direct = gru_cell_backward(w, acts, gh, h_prev)
    np.testing.assert_allclose(dgi, numeric_grad(loss, gi), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dgh, numeric_grad(loss, gh), rtol=1e-5, atol=1e-7)
    # dh_prev = dh * z plus the path through gh, which the op adds as dgh @ W_hh; here gh is fixed.
    np.testing.assert_allclose(dh_direct, numeric_grad(loss, h_prev), rtol=1e-5, atol=1e-7)


@SETTINGS
@given(st.integers(1, 6), st.integers(0, 20), st.integers(1, 4), st.integers(0, 2**31 - 1), st.booleans())
def test_embedding_backward_kernel_is_a_scatter_add(num, n, dim, seed, pad):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, num, size=n)
    grad = rng.normal(size=(n, dim))
    padding_idx = int(rng.integers(0, num)) if pad else None
    expected = np.zeros((num, dim))
    for k, i in enumerate(idx):  # the definition, one row at a time
        if i != padding_idx:
            expected[i] += grad[k]
    np.testing.assert_allclose(embedding_backward(grad, idx, num, padding_idx), expected, atol=1e-12)
