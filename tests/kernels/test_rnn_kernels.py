"""The fused LSTM / GRU cell kernels against the plain formulas in float64, float32 included
at saturating pre-activations (where exp(-x) overflows and the sigmoid must be 0, not NaN)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from tinyflow.kernels.rnn import gru_cell_forward, lstm_cell_forward


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def plain_lstm(gates, c_prev):
    i, f, g, o = np.split(gates.astype(np.float64), 4)
    i, f, g, o = sigmoid(i), sigmoid(f), np.tanh(g), sigmoid(o)
    c = f * c_prev + i * g
    return o * np.tanh(c), c, np.concatenate([i, f, g, o])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lstm_cell_forward_matches_the_formulas_also_when_saturated(dtype):
    rng = np.random.default_rng(0)
    hidden, batch = 5, 7
    gates = (rng.standard_normal((4 * hidden, batch)) * 4).astype(dtype)
    gates[0, :3] = [-200.0, -90.0, 200.0]  # exp(-x) overflows in float32 at the first two
    gates[3 * hidden, 0] = -30.0  # o = 9.4e-14: must keep its relative accuracy
    c_prev = rng.standard_normal((hidden, batch)).astype(dtype)
    with np.errstate(over="ignore"):
        want_h, want_c, want_acts = plain_lstm(gates, c_prev.astype(np.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning either
        h, c, acts = lstm_cell_forward(gates.copy(), c_prev)
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    assert h.dtype == c.dtype == acts.dtype == dtype
    np.testing.assert_allclose(acts, want_acts, rtol=rtol, atol=1e-30)  # relative, but for underflow
    np.testing.assert_allclose(c, want_c, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(h, want_h, rtol=rtol, atol=rtol)
    assert acts[0, 2] == 1.0 and acts[0, 0] == (0.0 if dtype == np.float32 else sigmoid(-200.0))


def test_gru_cell_forward_matches_the_formulas():
    rng = np.random.default_rng(1)
    hidden, batch = 4, 3
    gi, gh = (rng.standard_normal((2, 3 * hidden, batch)) * 3).astype(np.float32)
    gi[0, 0] = -150.0
    h_prev = rng.standard_normal((hidden, batch)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h, acts = gru_cell_forward(gi.copy(), gh, h_prev)
    a, b = gi.astype(np.float64), gh.astype(np.float64)
    with np.errstate(over="ignore"):
        r = sigmoid(a[:hidden] + b[:hidden])
        z = sigmoid(a[hidden:2 * hidden] + b[hidden:2 * hidden])
    n = np.tanh(a[2 * hidden:] + r * b[2 * hidden:])
    np.testing.assert_allclose(acts, np.concatenate([r, z, n]), rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(h, (1 - z) * n + z * h_prev, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lstm_sequence_backward_reading_tanh_c_from_the_states_agrees(reverse, dtype):
    """Given ``hs`` the backward takes tanh(c_t) as h_t / o_t instead of recomputing it: the same
    gradients to float rounding, also where an output gate is saturated to exactly 0."""
    from tinyflow.kernels.rnn import lstm_sequence_backward, lstm_sequence_forward

    rng = np.random.default_rng(2)
    steps, hidden, batch = 6, 5, 4
    proj = (rng.standard_normal((4 * hidden, steps, batch)) * 3).astype(dtype)
    proj[3 * hidden, 2, 1] = -1000.0  # o = 0 at one unit of one step
    w_hh = (rng.standard_normal((4 * hidden, hidden)) * 0.5).astype(dtype)
    h0, c0 = rng.standard_normal((2, hidden, batch)).astype(dtype)
    acts, hs, cs = lstm_sequence_forward(proj, w_hh, h0, c0, reverse)
    assert (acts[:, 3 * hidden :] == 0).any()
    dout = rng.standard_normal((steps, hidden, batch)).astype(dtype)
    dh_n, dc_n = rng.standard_normal((2, hidden, batch)).astype(dtype)
    want = lstm_sequence_backward(dout, dh_n, dc_n, w_hh, acts, cs, reverse)
    got = lstm_sequence_backward(dout, dh_n, dc_n, w_hh, acts, cs, reverse, hs=hs)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for g, w in zip(got, want):
        assert np.isfinite(g).all()
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


def test_lstm_cell_backward_reading_tanh_c_from_the_output_agrees():
    from tinyflow.kernels.rnn import lstm_cell_backward

    rng = np.random.default_rng(4)
    hidden, batch = 6, 5
    gates = (rng.standard_normal((4 * hidden, batch)) * 3).astype(np.float32)
    gates[3 * hidden + 1, 2] = -500.0  # a saturated output gate: o = 0, h = 0
    c_prev, dh, dc = rng.standard_normal((3, hidden, batch)).astype(np.float32)
    h, c, acts = lstm_cell_forward(gates, c_prev)
    want = lstm_cell_backward(dh, dc, acts, c_prev, c)
    got = lstm_cell_backward(dh, dc, acts, c_prev, c, h=h)
    for g, w in zip(got, want):
        assert np.isfinite(g).all()
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
