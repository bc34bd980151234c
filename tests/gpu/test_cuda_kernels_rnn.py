"""LSTM/GRU cells and whole sequences (csrc/rnn.cu) against tinyflow/kernels/rnn.py."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel_backend import FLOATS, SETTINGS, reference, run, tol
from kernel_backend import Recorder

import tinyflow_cuda.kernels as cuk
from tinyflow_cuda import emulator, runtime


# ---- recurrent cells (feature-major: gates (G*H, B), states (H, B)) ---------------------------
@SETTINGS
@given(b=st.integers(1, 4), h=st.integers(1, 6), dtype=FLOATS, seed=st.integers(0, 99),
       with_dc=st.booleans(), given_out=st.booleans())
def test_lstm_cell_matches_reference(emu, b, h, dtype, seed, with_dc, given_out):
    rng = np.random.default_rng(seed)
    gates = (3 * rng.standard_normal((4 * h, b))).astype(dtype)
    c_prev = rng.standard_normal((h, b)).astype(dtype)
    h_ref, c_ref, acts_ref = reference("lstm_cell_forward")(gates.copy(), c_prev)
    g_emu = gates.copy()
    outs = (np.empty((h, b), dtype), np.empty((h, b), dtype)) if given_out else (None, None)
    h_new, c_new, acts = run(emu, "lstm_cell_forward", g_emu, c_prev, *outs)
    assert acts is g_emu  # in place, as the reference
    if given_out:
        assert h_new is outs[0] and c_new is outs[1]
    for got, want in ((h_new, h_ref), (c_new, c_ref), (acts, acts_ref)):
        np.testing.assert_allclose(got, want, **tol(dtype))

    dh = rng.standard_normal((h, b)).astype(dtype)
    dc = rng.standard_normal((h, b)).astype(dtype) if with_dc else None
    dgates_ref, dc_prev_ref = reference("lstm_cell_backward")(dh, dc, acts_ref, c_prev, c_ref)
    dgates, dc_prev = run(emu, "lstm_cell_backward", dh, dc, acts, c_prev, c_new)
    np.testing.assert_allclose(dgates, dgates_ref, **tol(dtype))
    np.testing.assert_allclose(dc_prev, dc_prev_ref, **tol(dtype))


@SETTINGS
@given(b=st.integers(1, 4), h=st.integers(1, 6), dtype=FLOATS, seed=st.integers(0, 99))
def test_gru_cell_matches_reference(emu, b, h, dtype, seed):
    rng = np.random.default_rng(seed)
    gi = (2 * rng.standard_normal((3 * h, b))).astype(dtype)
    gh = (2 * rng.standard_normal((3 * h, b))).astype(dtype)
    h_prev = rng.standard_normal((h, b)).astype(dtype)
    h_ref, acts_ref = reference("gru_cell_forward")(gi.copy(), gh, h_prev)
    gi_emu = gi.copy()
    h_new, acts = run(emu, "gru_cell_forward", gi_emu, gh, h_prev)
    assert acts is gi_emu
    np.testing.assert_allclose(h_new, h_ref, **tol(dtype))
    np.testing.assert_allclose(acts, acts_ref, **tol(dtype))

    dh = rng.standard_normal((h, b)).astype(dtype)
    want = reference("gru_cell_backward")(dh, acts_ref, gh, h_prev)
    got = run(emu, "gru_cell_backward", dh, acts, gh, h_prev)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **tol(dtype))


# ---- recurrent sequences: all T steps of a layer in one persistent kernel ----------------------
sequence_cases = st.fixed_dictionaries({
    "steps": st.integers(1, 6), "batch": st.integers(1, 4), "hidden": st.integers(1, 7),
    "reverse": st.booleans(), "with_state": st.booleans(), "dtype": FLOATS,
    "seed": st.integers(0, 99),
})


def seq_tol(dtype) -> dict:
    """The recurrence compounds rounding over the steps: a little looser than one cell."""
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-12}


def _sequence_inputs(case: dict, gates: int) -> tuple:
    rng = np.random.default_rng(case["seed"])
    steps, batch, hidden, dtype = case["steps"], case["batch"], case["hidden"], case["dtype"]
    proj = (2 * rng.standard_normal((gates * hidden, steps, batch))).astype(dtype)
    w_hh = (rng.standard_normal((gates * hidden, hidden)) / np.sqrt(hidden)).astype(dtype)
    states = [rng.standard_normal((hidden, batch)).astype(dtype) if case["with_state"] else None
              for _ in range(2)]
    dout = rng.standard_normal((steps, hidden, batch)).astype(dtype)
    d_final = [rng.standard_normal((hidden, batch)).astype(dtype) for _ in range(2)]
    return rng, proj, w_hh, states, dout, d_final


@SETTINGS
@given(case=sequence_cases)
def test_lstm_sequence_matches_reference(emu, case):
    _, proj, w_hh, (h0, c0), dout, (dh_n, dc_n) = _sequence_inputs(case, 4)
    rev, t = case["reverse"], seq_tol(case["dtype"])
    want = reference("lstm_sequence_forward")(proj, w_hh, h0, c0, rev)
    got = run(emu, "lstm_sequence_forward", proj, w_hh, h0, c0, rev)
    assert emu.launches == [f"lstm_sequence_forward_{'f32' if case['dtype'] == np.float32 else 'f64'}"]
    for g, w in zip(got, want):  # acts, hs, cs
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, **t)

    acts, _, cs = want
    if not case["with_state"]:
        dh_n = dc_n = None  # zero gradients at the final state
    want = reference("lstm_sequence_backward")(dout, dh_n, dc_n, w_hh, acts, cs, rev)
    got = run(emu, "lstm_sequence_backward", dout, dh_n, dc_n, w_hh, acts, cs, rev)
    assert len(emu.launches) == 1  # all T steps backwards in one launch
    for g, w in zip(got, want):  # dgates, dh0, dc0
        np.testing.assert_allclose(g, w, **t)


@SETTINGS
@given(case=sequence_cases, bias=st.booleans())
def test_gru_sequence_matches_reference(emu, case, bias):
    rng, proj, w_hh, (h0, _), dout, (dh_n, _) = _sequence_inputs(case, 3)
    b_hh = rng.standard_normal(w_hh.shape[0]).astype(case["dtype"]) if bias else None
    rev, t = case["reverse"], seq_tol(case["dtype"])
    want = reference("gru_sequence_forward")(proj, w_hh, b_hh, h0, rev)
    got = run(emu, "gru_sequence_forward", proj, w_hh, b_hh, h0, rev)
    assert len(emu.launches) == 1
    for g, w in zip(got, want):  # acts, gh, hs
        np.testing.assert_allclose(g, w, **t)

    acts, gh, hs = want
    dh_n = dh_n if case["with_state"] else None
    want = reference("gru_sequence_backward")(dout, dh_n, w_hh, acts, gh, hs, rev)
    got = run(emu, "gru_sequence_backward", dout, dh_n, w_hh, acts, gh, hs, rev)
    assert len(emu.launches) == 1
    for g, w in zip(got, want):  # dgi, dgh, dh0
        np.testing.assert_allclose(g, w, **t)


def test_sequence_kernels_accept_strided_and_mixed_dtype_inputs(emu):
    """The op hands over transposed views (h0.T, dout.transpose) and a float32 recurrence may
    meet float64 states: the twin makes them contiguous in the kernel's dtype."""
    rng = np.random.default_rng(1)
    steps, batch, hidden = 3, 2, 5
    proj = rng.standard_normal((4 * hidden, steps, batch)).astype(np.float32)
    w_hh = (0.4 * rng.standard_normal((4 * hidden, hidden))).astype(np.float32)
    h0 = rng.standard_normal((batch, hidden)).T  # float64, a transposed view
    want = reference("lstm_sequence_forward")(proj, w_hh, h0, None, True)
    got = run(emu, "lstm_sequence_forward", proj, w_hh, h0, None, True)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **seq_tol(np.float32))
    dout = rng.standard_normal((steps, batch, hidden)).astype(np.float32).transpose(0, 2, 1)
    want = reference("lstm_sequence_backward")(dout, None, None, w_hh, want[0], want[2], True)
    got = run(emu, "lstm_sequence_backward", dout, None, None, w_hh, got[0], got[2], True)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **seq_tol(np.float32))


@pytest.mark.skipif(emulator.compiler() is None, reason="the emulator needs g++")
@pytest.mark.parametrize("layer", ["lstm", "gru"])
def test_sequence_layer_launches_do_not_grow_with_the_sequence_length(monkeypatch, layer):
    """One layer, forward and backward, through the op with the CUDA twins on the emulator: the
    same two launches for 4 and for 32 steps (the per-step loop made 2 * T), and the results of
    the reference kernels."""
    import importlib

    import tinyflow as tf
    from tinyflow.ops.rnn import gru_layer, lstm_layer

    device_module = importlib.import_module("tinyflow.device")

    gates, fn = (4, lstm_layer) if layer == "lstm" else (3, gru_layer)
    rng = np.random.default_rng(0)
    batch, inputs, hidden = 2, 3, 5

    def step(steps: int) -> tuple[list, list]:
        x = tf.tensor(rng.standard_normal((steps, batch, inputs)), dtype=tf.float32, requires_grad=True)
        w = [tf.tensor(0.5 * rng.standard_normal(shape), dtype=tf.float32, requires_grad=True)
             for shape in ((gates * hidden, inputs), (gates * hidden, hidden), (gates * hidden,),
                           (gates * hidden,))]
        h0 = [tf.tensor(rng.standard_normal((batch, hidden)), dtype=tf.float32, requires_grad=True)
              for _ in range(gates // 2)]  # (h0, c0) for the LSTM, h0 for the GRU

        def once() -> list:
            for t in (x, *w, *h0):
                t.grad = None
            outs = fn(x, *h0, *w)
            sum((o * tf.tensor(np.linspace(-1, 1, o.numel()).reshape(o.shape), dtype=tf.float32)).sum()
                for o in outs).backward()
            return [o.numpy() for o in outs] + [t.grad.numpy() for t in (x, *w, *h0)]

        want = once()  # the NumPy references
        rec = Recorder(emulator.EmulatorRuntime.build())
        with monkeypatch.context() as m, runtime.use(rec):
            m.setitem(device_module._kernel_modules, np, cuk)  # numpy arrays, CUDA twins
            got = once()
        return rec.launches, list(zip(got, want))

    short, pairs_short = step(4)
    long, pairs_long = step(32)
    assert short == long == [f"{layer}_sequence_forward_f32", f"{layer}_sequence_backward_f32"]
    for g, w in pairs_short + pairs_long:
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
