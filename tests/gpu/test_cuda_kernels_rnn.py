"""LSTM/GRU cells and whole sequences (csrc/rnn.cu) against tinyflow/kernels/rnn.py."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_backend import FLOATS, SETTINGS, Recorder, reference, run, tol

import tinyflow_cuda.kernels as cuk
from cuda_tools import emulator
from tinyflow_cuda import runtime


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


# ---- the persistent kernels' cuts: blocks, staged chunks, split dot products, the fallback -------
from kernel_dtypes import HALVES, as_float64, widen  # noqa: E402

import tinyflow_cuda.kernels.rnn as rnn_twin  # noqa: E402
from tinyflow_cuda.kernels.rnn import plan_sequence, sequence_shared_bytes  # noqa: E402

MODES: list[tuple[str, int]] = []
"""(kernel, mode) of every persistent launch of this module (the mode says tensor cores or not)."""


@pytest.fixture(scope="module", autouse=True)
def _record_modes():
    real = rnn_twin._launch_persistent

    def spy(call, plan, args, hidden, batch, steps, reverse, mode):
        MODES.append((call.kernel, mode))
        real(call, plan, args, hidden, batch, steps, reverse, mode)

    rnn_twin._launch_persistent = spy
    yield
    rnn_twin._launch_persistent = real


def _ran(emu, kernel: str, tensor_cores: bool, weights: int = 0) -> None:
    """The one launch of the last call was ``kernel`` on tensor cores or not (and weight kind)."""
    assert emu.launches == [kernel]
    if emu.kind == "emulator":
        assert MODES[-1] == (kernel, (rnn_twin.MODE_TENSOR_CORES if tensor_cores else 0) | weights)


cut_cases = st.fixed_dictionaries({
    "steps": st.integers(1, 4), "batch": st.integers(1, 9), "hidden": st.integers(1, 9),
    "reverse": st.booleans(), "with_state": st.booleans(), "dtype": FLOATS,
    "seed": st.integers(0, 99), "blocks": st.sampled_from([1, 2, 4, 7]),
})


def _with_cut(emu, case: dict, gates: int, tensor_cores: bool = False):
    """The emulator runtime patched to ``blocks`` resident blocks."""
    if emu.kind != "emulator":
        pytest.skip("the cut is patched into the emulator's runtime")
    mp = pytest.MonkeyPatch()
    mp.setattr(emu.emu, "resident_blocks", lambda name, block: case["blocks"])
    return mp


@SETTINGS
@given(case=cut_cases)
def test_lstm_sequence_over_blocks_chunks_and_splits(emu, case):
    """Uneven unit groups over 1 to 7 blocks, products split over K (few outputs a block: up to
    32 slices) or not, the backward's partial sums from 1 to 7 unit groups."""
    _, proj, w_hh, (h0, c0), dout, (dh_n, dc_n) = _sequence_inputs(case, 4)
    rev, t = case["reverse"], seq_tol(case["dtype"])
    mp = _with_cut(emu, case, 4)
    try:
        want = reference("lstm_sequence_forward")(proj, w_hh, h0, c0, rev)
        got = run(emu, "lstm_sequence_forward", proj, w_hh, h0, c0, rev)
        assert len(emu.launches) == 1 and emu.launches[0].startswith("lstm_sequence_forward")
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **t)
        acts, _, cs = want
        want = reference("lstm_sequence_backward")(dout, dh_n, dc_n, w_hh, acts, cs, rev)
        got = run(emu, "lstm_sequence_backward", dout, dh_n, dc_n, w_hh, acts, cs, rev)
        assert len(emu.launches) == 1
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **t)
    finally:
        mp.undo()


@SETTINGS
@given(case=cut_cases, bias=st.booleans())
def test_gru_sequence_over_blocks_chunks_and_splits(emu, case, bias):
    rng, proj, w_hh, (h0, _), dout, (dh_n, _) = _sequence_inputs(case, 3)
    b_hh = rng.standard_normal(w_hh.shape[0]).astype(case["dtype"]) if bias else None
    rev, t = case["reverse"], seq_tol(case["dtype"])
    mp = _with_cut(emu, case, 3)
    try:
        want = reference("gru_sequence_forward")(proj, w_hh, b_hh, h0, rev)
        got = run(emu, "gru_sequence_forward", proj, w_hh, b_hh, h0, rev)
        assert len(emu.launches) == 1
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **t)
        acts, gh, hs = want
        dh_n = dh_n if case["with_state"] else None
        want = reference("gru_sequence_backward")(dout, dh_n, w_hh, acts, gh, hs, rev)
        got = run(emu, "gru_sequence_backward", dout, dh_n, w_hh, acts, gh, hs, rev)
        assert len(emu.launches) == 1
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **t)
    finally:
        mp.undo()


def tc_seq_tol(dtype) -> dict:
    """Tensor cores round fp32 inputs to TF32 (10-bit mantissa: 2^-11 relative) before the exact
    products; over a few steps of sigmoids and tanh that stays within 1e-2. f64 data runs the
    kernels' scalar FMAs anyway: the float64 tolerance."""
    return {"rtol": 1e-2, "atol": 1e-2} if dtype == np.float32 else seq_tol(dtype)


@SETTINGS
@given(case=cut_cases, layer=st.sampled_from(["lstm", "gru"]), bias=st.booleans())
def test_tensor_core_sequences_over_blocks_and_chunks(emu, case, layer, bias):
    """The tensor-core path (per-step products as warp tiles through mma.sync, zero-padded where
    the gate rows, the batch columns or H are not multiples of the tile) against the reference,
    over the same cuts as the scalar kernels: 1 to 7 blocks, uneven units, K split over warps."""
    gates = 4 if layer == "lstm" else 3
    rng, proj, w_hh, (h0, c0), dout, (dh_n, dc_n) = _sequence_inputs(case, gates)
    rev, t = case["reverse"], tc_seq_tol(case["dtype"])
    sfx = "f32" if case["dtype"] == np.float32 else "f64"
    if layer == "lstm":
        fwd_args = (proj, w_hh, h0, c0, rev)
        bwd_args = lambda acts, hs, cs: (dout, dh_n, dc_n, w_hh, acts, cs, rev)  # noqa: E731
    else:
        b_hh = rng.standard_normal(w_hh.shape[0]).astype(case["dtype"]) if bias else None
        fwd_args = (proj, w_hh, b_hh, h0, rev)
        bwd_args = lambda acts, gh, hs: (dout, dh_n, w_hh, acts, gh, hs, rev)  # noqa: E731
    mp = _with_cut(emu, case, gates)
    mp.setattr(rnn_twin, "TENSOR_CORES", True)
    try:
        want = reference(f"{layer}_sequence_forward")(*fwd_args)
        got = run(emu, f"{layer}_sequence_forward", *fwd_args)
        _ran(emu, f"{layer}_sequence_forward_{sfx}", True)  # f64: scalar FMAs inside
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **t)
        args = bwd_args(*want)
        want = reference(f"{layer}_sequence_backward")(*args)
        got = run(emu, f"{layer}_sequence_backward", *args)
        _ran(emu, f"{layer}_sequence_backward_{sfx}", True)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **t)
    finally:
        mp.undo()


@pytest.mark.parametrize("layer", ["lstm", "gru"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_tensor_core_sequences_with_several_tiles_a_block(emu, layer, dtype):
    """Shapes past one tile: 3 blocks of 14 units (forward: 56 or 42 rows, 4 row tiles; backward:
    K = 160 or 120, several k steps), 21 columns (3 column tiles, the last one padded), spread over
    the block's 8 warps. bf16 against the float32 reference on the same values."""
    if emu.kind != "emulator":
        pytest.skip("the cut is patched into the emulator's runtime")
    gates = 4 if layer == "lstm" else 3
    case = {"steps": 3, "batch": 21, "hidden": 40, "with_state": True, "dtype": np.float32, "seed": 4}
    _, proj, w_hh, (h0, c0), dout, (dh_n, dc_n) = _sequence_inputs(case, gates)
    half = dtype == "bfloat16"
    cast = (lambda a: a.astype(ml_dtypes.bfloat16)) if half else (lambda a: a)  # noqa: E731
    proj, w_hh, h0, c0, dout, dh_n, dc_n = map(cast, (proj, w_hh, h0, c0, dout, dh_n, dc_n))
    if layer == "lstm":
        fwd_args = (proj, w_hh, h0, c0, False)
        bwd_args = lambda acts, hs, cs: (dout, dh_n, dc_n, w_hh, acts, cs, False)  # noqa: E731
    else:
        fwd_args = (proj, w_hh, None, h0, False)
        bwd_args = lambda acts, gh, hs: (dout, dh_n, w_hh, acts, gh, hs, False)  # noqa: E731
    t = half_seq_tol(ml_dtypes.bfloat16) if half else tc_seq_tol(np.float32)
    sfx = "bf16" if half else "f32"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(emu.emu, "resident_blocks", lambda name, block: 3)
        mp.setattr(rnn_twin, "TENSOR_CORES", True)
        wide = (lambda a: a) if not half else widen
        want = reference(f"{layer}_sequence_forward")(*map(wide, fwd_args))
        got = run(emu, f"{layer}_sequence_forward", *fwd_args)
        _ran(emu, f"{layer}_sequence_forward_{sfx}", True)  # f64: scalar FMAs inside
        for g, w in zip(got, want):
            np.testing.assert_allclose(as_float64(g), w, **t)
        args = bwd_args(*got)
        want = reference(f"{layer}_sequence_backward")(*map(wide, args))
        got = run(emu, f"{layer}_sequence_backward", *args)
        _ran(emu, f"{layer}_sequence_backward_{sfx}", True)
        for g, w in zip(got, want):
            np.testing.assert_allclose(as_float64(g), w, **t)


def _tf32(x: np.ndarray) -> np.ndarray:
    """x rounded to TF32 (to nearest, ties away), as cvt.rna.tf32.f32."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)


@pytest.mark.skipif(emulator.compiler() is None, reason="the emulator needs g++")
def test_tf32_steps_round_exactly_the_products_inputs(monkeypatch):
    """What the f32 tensor-core path changes is the rounding of W_hh and h_{t-1} to TF32, nothing
    else: one step from a TF32-exact W_hh and h0 matches the float32 reference to fp32 rounding,
    while from arbitrary float32 ones it is off by TF32's rounding (far more than the scalar
    kernel's), so the test sees which path ran."""
    rng = np.random.default_rng(5)
    hidden, batch = 20, 12  # 4 x 20 rows, 12 columns, K = 20: every tile edge padded
    proj = rng.standard_normal((4 * hidden, 1, batch)).astype(np.float32)
    w_hh = (rng.standard_normal((4 * hidden, hidden)) / 4).astype(np.float32)
    h0 = rng.standard_normal((hidden, batch)).astype(np.float32)
    monkeypatch.setattr(rnn_twin, "TENSOR_CORES", True)
    rt = emulator.EmulatorRuntime.build()

    def error(w: np.ndarray, h: np.ndarray) -> float:
        want = reference("lstm_sequence_forward")(proj, w, h, None, False)
        with runtime.use(rt):
            got = cuk.lstm_sequence_forward(proj, w, h, None, False)
        return max(float(np.abs(g - x).max()) for g, x in zip(got, want))

    assert error(_tf32(w_hh), _tf32(h0)) < 2e-6
    assert 1e-4 < error(w_hh, h0) < 1e-2


def test_tensor_cores_follow_the_dtype_and_the_tf32_switch(monkeypatch):
    """16-bit data always; float32 only where TF32 is allowed (CUPY_TF32=1, the switch of
    tinyflow's float32 GEMMs through CuPy, which bench/gpu sets for its tf32 runs); float64 never.
    tinyflow.backends.cuda.matmul.allow_tf32 is a documented no-op and stays one."""
    from tinyflow import backends

    monkeypatch.delenv("CUPY_TF32", raising=False)
    assert rnn_twin.TENSOR_CORES is None  # the default decides by dtype
    assert rnn_twin.tensor_cores(ml_dtypes.bfloat16) and rnn_twin.tensor_cores(np.float16)
    assert not rnn_twin.tensor_cores(np.float32) and not rnn_twin.tensor_cores(np.float64)
    monkeypatch.setattr(backends.cuda.matmul, "allow_tf32", True)
    assert not rnn_twin.tensor_cores(np.float32)
    monkeypatch.setenv("CUPY_TF32", "1")
    assert rnn_twin.tensor_cores(np.float32) and not rnn_twin.tensor_cores(np.float64)
    monkeypatch.setattr(rnn_twin, "TENSOR_CORES", False)
    assert not rnn_twin.tensor_cores(ml_dtypes.bfloat16)


@pytest.mark.skipif(emulator.compiler() is None, reason="the emulator needs g++")
def test_with_cupy_tf32_a_float32_layer_launches_the_tensor_core_kernels(emu, monkeypatch):
    """The switch reaches the launch: CUPY_TF32=1 turns one float32 LSTM layer's two kernels into
    their tensor-core mode, whose result is within TF32 rounding of the reference."""
    monkeypatch.setenv("CUPY_TF32", "1")
    case = {"steps": 3, "batch": 5, "hidden": 6, "with_state": True, "dtype": np.float32, "seed": 2}
    _, proj, w_hh, (h0, c0), dout, (dh_n, dc_n) = _sequence_inputs(case, 4)
    want = reference("lstm_sequence_forward")(proj, w_hh, h0, c0, False)
    got = run(emu, "lstm_sequence_forward", proj, w_hh, h0, c0, False)
    _ran(emu, "lstm_sequence_forward_f32", True)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **tc_seq_tol(np.float32))
    acts, _, cs = want
    run(emu, "lstm_sequence_backward", dout, dh_n, dc_n, w_hh, acts, cs, False)
    _ran(emu, "lstm_sequence_backward_f32", True)


def half_seq_tol(dtype) -> dict:
    """h_t is stored (and read back by the next step) in the half dtype, as cuDNN's half RNNs do,
    so each step adds a rounding of h to the float32 reference's error: a few steps' worth."""
    return {"rtol": 2e-2, "atol": 2e-2} if np.dtype(dtype).name == "bfloat16" else {"rtol": 4e-3, "atol": 4e-3}


@SETTINGS
@given(case=sequence_cases, half=st.sampled_from(HALVES), layer=st.sampled_from(["lstm", "gru"]),
       tc=st.booleans())
def test_half_sequences_against_the_float32_reference(emu, case, half, layer, tc):
    """bf16 and fp16 kernels (fp32 arithmetic and running state inside) against the reference
    in float32 on the same half inputs: forward and backward, both directions, with the per-step
    products as scalar FMAs or on tensor cores (16-bit mma, exact products, fp32 sums: the same
    tolerance)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rnn_twin, "TENSOR_CORES", tc)
        _half_sequences(emu, case, half, layer, tc)


def _half_sequences(emu, case, half, layer, tc):
    gates = 4 if layer == "lstm" else 3
    case = {**case, "dtype": np.float32, "steps": min(case["steps"], 4)}
    _, proj, w_hh, (h0, c0), dout, (dh_n, dc_n) = _sequence_inputs(case, gates)
    proj, w_hh, dout = (a.astype(half) for a in (proj, w_hh, dout))
    h0, c0, dh_n, dc_n = (None if a is None else a.astype(half) for a in (h0, c0, dh_n, dc_n))
    rev, t = case["reverse"], half_seq_tol(half)
    sfx = "bf16" if np.dtype(half).name == "bfloat16" else "f16"
    if layer == "lstm":
        want = reference("lstm_sequence_forward")(*map(widen, (proj, w_hh, h0, c0)), rev)
        got = run(emu, "lstm_sequence_forward", proj, w_hh, h0, c0, rev)
        grads = lambda acts, hs, cs, src: (dout, dh_n, dc_n, w_hh, acts, cs, rev)  # noqa: E731
    else:
        want = reference("gru_sequence_forward")(*map(widen, (proj, w_hh, None, h0)), rev)
        got = run(emu, "gru_sequence_forward", proj, w_hh, None, h0, rev)
        grads = lambda acts, gh, hs, src: (dout, dh_n, w_hh, acts, gh, hs, rev)  # noqa: E731
    _ran(emu, f"{layer}_sequence_forward_{sfx}", tc)
    for g, w in zip(got, want):
        assert g.dtype == half
        np.testing.assert_allclose(as_float64(g), w, **t)
    # the backward from the kernel's own (half) forward, against the reference on it widened
    args = grads(*got, None)
    want = reference(f"{layer}_sequence_backward")(*map(widen, args))
    got = run(emu, f"{layer}_sequence_backward", *args)
    _ran(emu, f"{layer}_sequence_backward_{sfx}", tc)
    for g, w in zip(got, want):
        assert g.dtype == half
        np.testing.assert_allclose(as_float64(g), w, **t)


@pytest.mark.parametrize("layer", ["lstm", "gru"])
def test_without_room_for_w_hh_the_twins_take_a_gemm_and_a_fused_cell_a_step(emu, layer):
    if emu.kind != "emulator":
        pytest.skip("the shared-memory limit is patched into the emulator's runtime")
    case = {"steps": 3, "batch": 2, "hidden": 5, "reverse": True, "with_state": True,
            "dtype": np.float32, "seed": 3}
    gates = 4 if layer == "lstm" else 3
    rng, proj, w_hh, (h0, c0), dout, (dh_n, dc_n) = _sequence_inputs(case, gates)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(emu.emu, "shared_memory_per_block", lambda: 1024)  # not even one unit's rows
        if layer == "lstm":
            want = reference("lstm_sequence_forward")(proj, w_hh, h0, c0, True)
            got = run(emu, "lstm_sequence_forward", proj, w_hh, h0, c0, True)
            back = (dout, dh_n, dc_n, w_hh, want[0], want[2], True)
        else:
            b_hh = rng.standard_normal(3 * 5).astype(np.float32)
            want = reference("gru_sequence_forward")(proj, w_hh, b_hh, h0, True)
            got = run(emu, "gru_sequence_forward", proj, w_hh, b_hh, h0, True)
            back = (dout, dh_n, w_hh, *want, True)
        assert emu.launches == [f"{layer}_cell_forward_f32"] * 3  # the GEMMs are NumPy's here
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **seq_tol(np.float32))
        want = reference(f"{layer}_sequence_backward")(*back)
        got = run(emu, f"{layer}_sequence_backward", *back)
        assert emu.launches == [f"{layer}_cell_backward_f32"] * 3
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **seq_tol(np.float32))


H100 = {"blocks_available": 132, "shared_limit": 227 * 1024}


@pytest.mark.parametrize("gates, lstm, backward, itemsize, tc, weights, last", [
    (4, True, False, 4, False, None, 1320), (4, True, True, 4, False, None, 1184),
    (3, False, False, 4, False, None, 1320), (3, False, True, 4, False, None, 1184),
    (4, True, False, 4, True, None, 1104), (4, True, True, 4, True, None, 1184),
    (4, True, True, 2, False, None, 1808), (4, True, True, 2, True, None, 1584),
    (3, False, True, 2, True, None, 1584), (4, True, False, 4, True, 2, 1632),
])
def test_where_w_hh_stops_fitting_on_chip(gates, lstm, backward, itemsize, tc, weights, last):
    """The switch to the per-step path on an H100 at batch 64 (docs/lstm.md): the largest hidden
    size whose slice of W_hh a block holds, and none above it. Scalar fp32, TF32 (its forward
    pads the gate rows to whole tiles), 16-bit data, and half W_hh with fp32 data (autocast)."""
    def fits(hidden: int) -> bool:
        return plan_sequence(gates, hidden, 64, itemsize, backward=backward, lstm=lstm,
                             tensor_cores=tc, weight_itemsize=weights, **H100) is not None

    assert fits(last) and not fits(last + 1)
    assert all(fits(h) for h in (1, 7, 64, 512, 1024)) and not any(fits(h) for h in (last + 100, 4096))


@settings(max_examples=200, deadline=None)
@given(gates=st.sampled_from([3, 4]), hidden=st.integers(1, 3000), batch=st.integers(1, 512),
       itemsize=st.sampled_from([2, 4, 8]), backward=st.booleans(), blocks=st.integers(1, 200),
       limit=st.integers(1024, 256 * 1024), tc=st.booleans(), half_weights=st.booleans())
def test_sequence_plans_fit_and_cover(gates, hidden, batch, itemsize, backward, blocks, limit, tc,
                                      half_weights):
    """Every plan fits its shared memory (the kernel's layout, byte for byte), covers every unit
    and column with no empty group, keeps a batch group at 32 columns or more unless the batch is
    smaller, splits K only in powers of two, stages h in whole 16-row chunks, and counts its round
    trips from its own staging or reduction rounds."""
    from tinyflow_cuda.kernels.rnn import BARRIER_TRIPS, CELL_TRIPS, GPU_THREAD_CHOICES, THREAD_CHOICES, operands

    lstm = gates == 4
    weights = 2 if half_weights and itemsize == 4 else None
    plan = plan_sequence(gates, hidden, batch, itemsize, backward=backward, lstm=lstm,
                         blocks_available=blocks, shared_limit=limit, tensor_cores=tc,
                         weight_itemsize=weights)
    if plan is None:
        return
    assert plan.shared_mem <= limit and plan.blocks == plan.groups * plan.batch_groups <= blocks
    assert plan.groups * plan.units >= hidden > (plan.groups - 1) * plan.units
    assert plan.batch_groups * plan.cols >= batch > (plan.batch_groups - 1) * plan.cols
    assert plan.cols >= min(batch, 32)
    assert plan.width >= max(32, plan.cols) and plan.width & (plan.width - 1) == 0
    assert plan.split & (plan.split - 1) == 0 and plan.split <= 32
    assert plan.threads in (GPU_THREAD_CHOICES if blocks >= 16 else THREAD_CHOICES)
    assert backward or (plan.kchunk % 16 == 0 and 16 <= plan.kchunk <= -(-hidden // 16) * 16)
    assert plan.trips == plan.stage_rounds + CELL_TRIPS + BARRIER_TRIPS and plan.stage_rounds >= 1
    assert plan.shared_mem == sequence_shared_bytes(
        hidden, plan.units, plan.width, plan.cols, plan.split, plan.kchunk, plan.threads,
        operands(itemsize, tc, weights), backward=backward, lstm=lstm)
    quad = 2 if itemsize == 8 else 4  # accumulators a 16-byte load
    assert plan.partials == (2 * plan.blocks * hidden * -(-plan.cols // quad) * quad if backward else 0)


kchunk_cases = st.fixed_dictionaries({
    "steps": st.integers(1, 3), "batch": st.integers(1, 5), "hidden": st.integers(17, 40),
    "reverse": st.booleans(), "with_state": st.booleans(), "dtype": FLOATS,
    "seed": st.integers(0, 99), "blocks": st.sampled_from([1, 3]),
})


@settings(max_examples=10, deadline=None)
@given(case=kchunk_cases, layer=st.sampled_from(["lstm", "gru"]), tc=st.booleans())
def test_the_forward_stages_h_in_k_chunks(emu, case, layer, tc):
    """Where h_{t-1} does not fit beside the block's rows of W_hh, the forward stages it 16 rows
    at a time and adds each chunk's products to the partial sums: the same results."""
    gates = 4 if layer == "lstm" else 3
    rng, proj, w_hh, (h0, c0), _, _ = _sequence_inputs(case, gates)
    itemsize = np.dtype(case["dtype"]).itemsize
    free = plan_sequence(gates, case["hidden"], case["batch"], itemsize, backward=False,
                         lstm=layer == "lstm", blocks_available=case["blocks"],
                         shared_limit=227 * 1024, tensor_cores=tc)
    limit = sequence_shared_bytes(case["hidden"], free.units, free.width, free.cols, free.split, 16,
                                  free.threads, rnn_twin.operands(itemsize, tc),
                                  backward=False, lstm=layer == "lstm")
    tight = plan_sequence(gates, case["hidden"], case["batch"], itemsize, backward=False,
                          lstm=layer == "lstm", blocks_available=case["blocks"], shared_limit=limit,
                          tensor_cores=tc)
    assert tight.kchunk == 16 < case["hidden"]  # two or three chunks
    args = (proj, w_hh, h0, c0, case["reverse"]) if layer == "lstm" else \
        (proj, w_hh, rng.standard_normal(3 * case["hidden"]).astype(case["dtype"]), h0, case["reverse"])
    mp = _with_cut(emu, case, gates)
    mp.setattr(emu.emu, "shared_memory_per_block", lambda: limit)
    mp.setattr(rnn_twin, "TENSOR_CORES", tc)
    try:
        want = reference(f"{layer}_sequence_forward")(*args)
        got = run(emu, f"{layer}_sequence_forward", *args)
        assert emu.launches[0].startswith(f"{layer}_sequence_forward")
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **(tc_seq_tol if tc else seq_tol)(case["dtype"]))
    finally:
        mp.undo()


@pytest.mark.parametrize("layer", ["lstm", "gru"])
@pytest.mark.parametrize("tc", [False, True])
def test_batch_groups_split_the_columns(emu, layer, tc):
    """A batch of 70 over 7 blocks: 2 unit groups x 3 batch groups of 32 columns (the last one
    6), each block staging only its columns and reducing only its partial sums; forward and
    backward against the reference."""
    gates = 4 if layer == "lstm" else 3
    case = {"steps": 3, "batch": 70, "hidden": 11, "reverse": True, "with_state": True,
            "dtype": np.float32, "seed": 7, "blocks": 7}
    rng, proj, w_hh, (h0, c0), dout, (dh_n, dc_n) = _sequence_inputs(case, gates)
    plan = plan_sequence(gates, 11, 70, 4, backward=True, lstm=layer == "lstm", blocks_available=7,
                         shared_limit=227 * 1024, tensor_cores=tc)
    assert (plan.groups, plan.batch_groups, plan.cols) == (2, 3, 32)  # columns 32 + 32 + 6
    if layer == "lstm":
        fwd_args = (proj, w_hh, h0, c0, True)
        bwd_args = lambda acts, hs, cs: (dout, dh_n, dc_n, w_hh, acts, cs, True)  # noqa: E731
    else:
        fwd_args = (proj, w_hh, rng.standard_normal(3 * 11).astype(np.float32), h0, True)
        bwd_args = lambda acts, gh, hs: (dout, dh_n, w_hh, acts, gh, hs, True)  # noqa: E731
    t = tc_seq_tol(np.float32) if tc else seq_tol(np.float32)
    mp = _with_cut(emu, case, gates)
    mp.setattr(rnn_twin, "TENSOR_CORES", tc)
    try:
        want = reference(f"{layer}_sequence_forward")(*fwd_args)
        got = run(emu, f"{layer}_sequence_forward", *fwd_args)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **t)
        args = bwd_args(*want)
        want = reference(f"{layer}_sequence_backward")(*args)
        got = run(emu, f"{layer}_sequence_backward", *args)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **t)
    finally:
        mp.undo()


@SETTINGS
@given(case=cut_cases, layer=st.sampled_from(["lstm", "gru"]), half=st.sampled_from(HALVES))
def test_float32_sequences_with_half_w_hh_take_tensor_cores(emu, case, layer, half):
    """Under autocast the ops hand the recurrence half W_hh with float32 data: the f32 kernel
    (mode: tensor cores, weight kind 1 bf16 / 2 fp16) multiplies half operands and keeps states
    and sums in float32. The reference defines the same product (tinyflow/kernels/rnn.py,
    recurrent_weight: h and dgates rounded to W_hh's dtype, exact products summed in float32), so
    the two agree to float32 rounding, forward and backward, over 1 to 7 blocks."""
    gates = 4 if layer == "lstm" else 3
    case = {**case, "dtype": np.float32}
    rng, proj, w_hh, (h0, c0), dout, (dh_n, dc_n) = _sequence_inputs(case, gates)
    w_half = w_hh.astype(half)
    rev = case["reverse"]
    if layer == "lstm":
        fwd_args = (proj, w_half, h0, c0, rev)
        bwd_args = lambda acts, hs, cs: (dout, dh_n, dc_n, w_half, acts, cs, rev)  # noqa: E731
    else:
        fwd_args = (proj, w_half, rng.standard_normal(3 * case["hidden"]).astype(np.float32), h0, rev)
        bwd_args = lambda acts, gh, hs: (dout, dh_n, w_half, acts, gh, hs, rev)  # noqa: E731
    mp = _with_cut(emu, case, gates)
    try:
        forward = reference(f"{layer}_sequence_forward")(*fwd_args)
        got = run(emu, f"{layer}_sequence_forward", *fwd_args)
        _ran(emu, f"{layer}_sequence_forward_f32", True, rnn_twin.weight_kind(np.float32, half))
        for g, w in zip(got, forward):
            assert g.dtype == np.float32
            np.testing.assert_allclose(g, w, **seq_tol(np.float32))
        args = bwd_args(*forward)
        want = reference(f"{layer}_sequence_backward")(*args)
        got = run(emu, f"{layer}_sequence_backward", *args)
        _ran(emu, f"{layer}_sequence_backward_f32", True, rnn_twin.weight_kind(np.float32, half))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **seq_tol(np.float32))
    finally:
        mp.undo()
    if case["with_state"] or case["steps"] > 1:  # a product ran: h was rounded for it
        widened = reference(f"{layer}_sequence_forward")(proj, w_half.astype(np.float32), *fwd_args[2:])
        assert not all(np.array_equal(a, b) for a, b in zip(widened, forward))


@pytest.mark.gpu
@pytest.mark.cupy_strict
def test_lstm_layer_with_over_48k_of_shared_memory_on_the_stand_in():
    """H = 72, batch 64: the forward's block needs more than 48 KB of shared memory, so the
    runtime must raise the kernel's max_dynamic_shared_size_bytes and launch cooperatively (the
    stand-in refuses otherwise, as CUDA does); the results are the CPU's."""
    import tinyflow as tf
    from tinyflow.ops.rnn import lstm_layer

    rng = np.random.default_rng(0)
    steps, batch, inputs, hidden = 2, 64, 3, 72
    plan = plan_sequence(4, hidden, batch, 4, backward=False, lstm=True, blocks_available=3,
                         shared_limit=227 * 1024)
    assert plan is not None and plan.shared_mem > 48 * 1024
    arrays = [rng.standard_normal((steps, batch, inputs)), 0.2 * rng.standard_normal((4 * hidden, inputs)),
              0.2 * rng.standard_normal((4 * hidden, hidden)), rng.standard_normal(4 * hidden),
              rng.standard_normal(4 * hidden)]

    def run_on(device: str) -> list[np.ndarray]:
        x, w_ih, w_hh, b_ih, b_hh = (tf.tensor(a, dtype=tf.float32, device=device, requires_grad=True)
                                     for a in arrays)
        out, h_n, c_n = lstm_layer(x, None, None, w_ih, w_hh, b_ih, b_hh)
        (out.sum() + (h_n * c_n).sum()).backward()
        return [t.numpy() for t in (out, h_n, c_n)] + [t.grad.numpy() for t in (x, w_ih, w_hh, b_ih)]

    for g, w in zip(run_on("cuda:0"), run_on("cpu")):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
