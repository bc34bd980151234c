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

import tinyflow as tf
from tinyflow.kernels.embedding import embedding_backward
from tinyflow.kernels.rnn import (
    gru_cell_backward,
    gru_cell_forward,
    lstm_cell_backward,
    lstm_cell_forward,
)
from tinyflow.nn.functional import embedding
from tinyflow.ops.rnn import GRULayer, LSTMLayer, gru_cell, gru_layer, lstm_cell, lstm_layer
from tinyflow.testing import gradcheck, numerical_grad

SETTINGS = settings(max_examples=25, deadline=None)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def lstm_reference(gates: np.ndarray, c_prev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's LSTM cell equations, written out plainly (feature-major: gates (4H, B))."""
    i, f, g, o = np.split(gates, 4, axis=0)
    c = sigmoid(f) * c_prev + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def gru_reference(gi: np.ndarray, gh: np.ndarray, h_prev: np.ndarray) -> np.ndarray:
    """PyTorch's GRU cell equations, written out plainly (feature-major: gates (3H, B))."""
    ir, iz, in_ = np.split(gi, 3, axis=0)
    hr, hz, hn = np.split(gh, 3, axis=0)
    r, z = sigmoid(ir + hr), sigmoid(iz + hz)
    n = np.tanh(in_ + r * hn)
    return (1 - z) * n + z * h_prev


cell_shapes = st.tuples(st.integers(1, 4), st.integers(1, 5), st.integers(0, 2**31 - 1))


@SETTINGS
@given(cell_shapes, st.sampled_from([0.5, 3.0, 30.0]))
def test_lstm_cell_kernel_matches_reference_and_finite_differences(shape, scale):
    batch, hidden, seed = shape
    rng = np.random.default_rng(seed)
    gates = rng.normal(scale=scale, size=(4 * hidden, batch))  # large scales saturate the gates
    c_prev = rng.normal(size=(hidden, batch))
    wh, wc = rng.normal(size=(hidden, batch)), rng.normal(size=(hidden, batch))

    h, c, acts = lstm_cell_forward(gates.copy(), c_prev)
    h_ref, c_ref = lstm_reference(gates, c_prev)
    np.testing.assert_allclose(h, h_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(c, c_ref, rtol=1e-12, atol=1e-12)
    assert np.isfinite(acts).all()

    def loss() -> float:
        h_, c_ = lstm_reference(gates, c_prev)
        return float((h_ * wh).sum() + (c_ * wc).sum())

    dgates, dc_prev = lstm_cell_backward(wh, wc, acts, c_prev, c)
    np.testing.assert_allclose(dgates, numerical_grad(loss, gates), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dc_prev, numerical_grad(loss, c_prev), rtol=1e-5, atol=1e-7)


def test_lstm_cell_kernel_writes_into_given_buffers_and_accepts_no_dc():
    rng = np.random.default_rng(1)
    gates = rng.normal(size=(12, 2)).astype(np.float32)
    c_prev = rng.normal(size=(3, 2)).astype(np.float32)
    h_out, c_out = np.empty((3, 2), np.float32), np.empty((3, 2), np.float32)
    h, c, acts = lstm_cell_forward(gates, c_prev, h_out=h_out, c_out=c_out)
    assert h is h_out and c is c_out and acts is gates
    assert h.dtype == np.float32
    dh = rng.normal(size=(3, 2)).astype(np.float32)
    d_none, dc_none = lstm_cell_backward(dh, None, acts, c_prev, c)
    d_zero, dc_zero = lstm_cell_backward(dh, np.zeros_like(dh), acts, c_prev, c)
    np.testing.assert_array_equal(d_none, d_zero)
    np.testing.assert_array_equal(dc_none, dc_zero)


def test_lstm_cell_kernel_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"lstm_cell_forward: gates \(10, 2\)"):
        lstm_cell_forward(np.zeros((10, 2)), np.zeros((3, 2)))


@SETTINGS
@given(cell_shapes, st.sampled_from([0.5, 3.0]))
def test_gru_cell_kernel_matches_reference_and_finite_differences(shape, scale):
    batch, hidden, seed = shape
    rng = np.random.default_rng(seed)
    gi = rng.normal(scale=scale, size=(3 * hidden, batch))
    gh = rng.normal(scale=scale, size=(3 * hidden, batch))
    h_prev = rng.normal(size=(hidden, batch))
    w = rng.normal(size=(hidden, batch))

    h, acts = gru_cell_forward(gi.copy(), gh, h_prev)
    np.testing.assert_allclose(h, gru_reference(gi, gh, h_prev), rtol=1e-12, atol=1e-12)

    def loss() -> float:
        return float((gru_reference(gi, gh, h_prev) * w).sum())

    dgi, dgh, dh_direct = gru_cell_backward(w, acts, gh, h_prev)
    np.testing.assert_allclose(dgi, numerical_grad(loss, gi), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dgh, numerical_grad(loss, gh), rtol=1e-5, atol=1e-7)
    # dh_prev = dh * z plus the path through gh, which the op adds as dgh @ W_hh; here gh is fixed.
    np.testing.assert_allclose(dh_direct, numerical_grad(loss, h_prev), rtol=1e-5, atol=1e-7)


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


# --------------------------------------------------------------------------------------------
# The ops: float64 gradient checks against central differences (tinyflow.testing.gradcheck)
# --------------------------------------------------------------------------------------------

op_shapes = st.fixed_dictionaries(
    {
        "steps": st.integers(1, 4),
        "batch": st.integers(1, 3),
        "inputs": st.integers(1, 3),
        "hidden": st.integers(1, 3),
        "bias": st.booleans(),
        "with_state": st.booleans(),
        "seed": st.integers(0, 2**31 - 1),
    }
)


def _param(rng: np.random.Generator, *shape: int, scale: float = 0.7) -> tf.Tensor:
    return tf.tensor(rng.normal(scale=scale, size=shape), dtype=tf.float64, requires_grad=True)


def _weights(rng: np.random.Generator, gates: int, s: dict) -> list:
    rows = gates * s["hidden"]
    w = [_param(rng, rows, s["inputs"]), _param(rng, rows, s["hidden"])]
    return w + ([_param(rng, rows), _param(rng, rows)] if s["bias"] else [None, None])


@SETTINGS
@given(op_shapes)
def test_lstm_cell_op_gradcheck(s):
    rng = np.random.default_rng(s["seed"])
    x = _param(rng, s["batch"], s["inputs"], scale=1.0)
    h, c = _param(rng, s["batch"], s["hidden"]), _param(rng, s["batch"], s["hidden"])
    gradcheck(lstm_cell, [x, h, c, *_weights(rng, 4, s)])


@SETTINGS
@given(op_shapes)
def test_gru_cell_op_gradcheck(s):
    rng = np.random.default_rng(s["seed"])
    x, h = _param(rng, s["batch"], s["inputs"], scale=1.0), _param(rng, s["batch"], s["hidden"])
    gradcheck(gru_cell, [x, h, *_weights(rng, 3, s)])


@SETTINGS
@given(op_shapes, st.booleans())
def test_lstm_layer_op_gradcheck(s, reverse):
    rng = np.random.default_rng(s["seed"])
    x = _param(rng, s["steps"], s["batch"], s["inputs"], scale=1.0)
    state = [_param(rng, s["batch"], s["hidden"]) for _ in range(2)] if s["with_state"] else [None, None]
    gradcheck(lambda *a: lstm_layer(*a, reverse=reverse), [x, *state, *_weights(rng, 4, s)])


@SETTINGS
@given(op_shapes, st.booleans())
def test_gru_layer_op_gradcheck(s, reverse):
    rng = np.random.default_rng(s["seed"])
    x = _param(rng, s["steps"], s["batch"], s["inputs"], scale=1.0)
    h0 = _param(rng, s["batch"], s["hidden"]) if s["with_state"] else None
    gradcheck(lambda *a: gru_layer(*a, reverse=reverse), [x, h0, *_weights(rng, 3, s)])


@pytest.mark.parametrize("layer,gates", [(LSTMLayer, 4), (GRULayer, 3)])
def test_layer_op_equals_the_cell_op_unrolled(layer, gates):
    """The sequence op (one input GEMM, fused steps) computes exactly the cell op applied step by step."""
    rng = np.random.default_rng(0)
    steps, batch, inputs, hidden = 6, 2, 3, 4
    x = rng.normal(size=(steps, batch, inputs))
    w = [rng.normal(size=(gates * hidden, inputs)), rng.normal(size=(gates * hidden, hidden)),
         rng.normal(size=gates * hidden), rng.normal(size=gates * hidden)]  # fmt: skip
    w = [tf.tensor(a, dtype=tf.float64) for a in w]
    for reverse in (False, True):
        h = tf.zeros(batch, hidden, dtype=tf.float64)
        c = tf.zeros(batch, hidden, dtype=tf.float64)
        outs = [None] * steps
        for t in (reversed(range(steps)) if reverse else range(steps)):
            xt = tf.tensor(x[t], dtype=tf.float64)
            if gates == 4:
                h, c = lstm_cell(xt, h, c, *w)
            else:
                h = gru_cell(xt, h, *w)
            outs[t] = h.numpy()
        args = [tf.tensor(x, dtype=tf.float64), None] + ([None] if gates == 4 else []) + w
        result = layer.apply(*args, reverse=reverse)
        np.testing.assert_allclose(result[0].numpy(), np.stack(outs), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(result[1].numpy(), h.numpy(), rtol=1e-12, atol=1e-12)


def test_layer_op_is_one_graph_node_and_rejects_bad_shapes():
    x = tf.randn(5, 2, 3, requires_grad=True)
    w_ih, w_hh = tf.randn(8, 3, requires_grad=True), tf.randn(8, 2, requires_grad=True)
    out, h_n, c_n = lstm_layer(x, None, None, w_ih, w_hh)
    assert out.grad_fn is h_n.grad_fn is c_n.grad_fn  # all 5 steps in one node
    assert out.shape == (5, 2, 2) and h_n.shape == (2, 2)
    with pytest.raises(ValueError, match=r"lstm: input \(5, 2, 3\) with weight_ih \(8, 4\)"):
        lstm_layer(x, None, None, tf.randn(8, 4), w_hh)
    with pytest.raises(ValueError, match=r"lstm: h0 has shape \(3, 2\), expected \(batch, hidden\) = \(2, 2\)"):
        lstm_layer(x, tf.zeros(3, 2), None, w_ih, w_hh)
    with pytest.raises(ValueError, match=r"gru: input must be \(seq_len, batch, input_size\), got \(2, 3\)"):
        gru_layer(tf.randn(2, 3), None, tf.randn(6, 3), tf.randn(6, 2))


@SETTINGS
@given(st.integers(1, 5), st.integers(1, 3), st.integers(0, 2**31 - 1), st.booleans())
def test_embedding_op_gradcheck(num, dim, seed, pad):
    rng = np.random.default_rng(seed)
    weight = _param(rng, num, dim)
    ids = tf.tensor(rng.integers(0, num, size=(3, 4)))
    padding_idx = int(rng.integers(0, num)) if pad else None
    if padding_idx is None:
        gradcheck(lambda w: embedding(ids, w), [weight])
    else:
        # The padding row's gradient is zero by definition (PyTorch's semantics), not by calculus.
        weight.grad = None
        (embedding(ids, weight, padding_idx) * tf.tensor(rng.normal(size=(3, 4, dim)))).sum().backward()
        np.testing.assert_array_equal(weight.grad.numpy()[padding_idx], 0.0)


# --------------------------------------------------------------------------------------------
# Autocast: the GEMMs in half precision, the recurrence and the parameter gradients in float32
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("amp_dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "LSTMCell", "GRUCell"])
def test_recurrent_gemms_follow_autocast(monkeypatch, kind, amp_dtype):
    import tinyflow.kernels
    import tinyflow.nn as nn
    import tinyflow.ops.rnn as rnn_ops

    half = np.dtype(np.float16) if amp_dtype == "fp16" else tf.bfloat16
    gemms: list[tuple] = []
    real_matmul = rnn_ops.matmul_array

    def spy_matmul(xp, a, b, *args, **kwargs):
        gemms.append((a.dtype, b.dtype))
        return real_matmul(xp, a, b, *args, **kwargs)

    recurrences: list = []
    for name in ("lstm_sequence_forward", "gru_sequence_forward"):
        real = getattr(tinyflow.kernels, name)
        monkeypatch.setattr(tinyflow.kernels, name,
                            lambda proj, *a, _real=real: recurrences.append(proj.dtype) or _real(proj, *a))  # fmt: skip
    monkeypatch.setattr(rnn_ops, "matmul_array", spy_matmul)

    tf.manual_seed(0)
    sequence = "Cell" not in kind
    module = getattr(nn, kind)(3, 4, num_layers=2, bidirectional=True) if sequence else getattr(nn, kind)(3, 4)
    rng = np.random.default_rng(0)
    x = tf.tensor(rng.normal(size=(5, 2, 3) if sequence else (2, 3)), dtype=tf.float32)

    def run(autocast: bool) -> tuple[list, dict]:
        for p in module.parameters():
            p.grad = None
        with tf.amp.autocast(amp_dtype, enabled=autocast):
            out = module(x)
        first, states = {"LSTM": lambda: (out[0], out[1]), "GRU": lambda: (out[0], (out[1],)),
                         "LSTMCell": lambda: (out[0], (out[1],)), "GRUCell": lambda: (out, ())}[kind]()  # fmt: skip
        weight = tf.tensor(np.linspace(-1, 1, first.numel()).reshape(first.shape), dtype=tf.float32)
        (first.to(tf.float32) * weight).sum().backward()
        return [first, *states], {n: p.grad for n, p in module.named_parameters()}

    outs32, grads32 = run(False)
    assert all(a == b == np.float32 for a, b in gemms)
    gemms.clear()
    recurrences.clear()
    outs, grads = run(True)
    assert gemms and all(a == b == half for a, b in gemms), gemms  # every GEMM of the op ran in half
    if sequence:
        assert recurrences and all(d == np.float32 for d in recurrences)  # the recurrence: float32
        assert outs[0].dtype == half and all(s.dtype == tf.float32 for s in outs[1:])
    for name, g in grads.items():
        assert g.dtype == tf.float32, name  # float32 master weights get float32 gradients
        scale = np.abs(grads32[name].numpy()).max()
        np.testing.assert_allclose(g.numpy(), grads32[name].numpy(), atol=0.03 * scale + 1e-6, err_msg=name)
    for o, o32 in zip(outs, outs32):
        np.testing.assert_allclose(o.to(tf.float32).numpy(), o32.numpy(), atol=0.02)
