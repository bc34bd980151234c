"""Every .cu kernel, through its tinyflow_cuda.kernels twin, against the NumPy reference
kernel of the same name in tinyflow/kernels/, on random inputs.

Each test runs twice, on two backends:
- ``emulator``: the .cu sources compiled by g++ against csrc/emu.h and run on the CPU
  (tinyflow_cuda/emulator.py). Not a GPU test: it checks the kernels' index arithmetic and
  maths wherever g++ is, including machines without a GPU.
- ``cuda`` (marked gpu): the same inputs copied to the GPU and passed to the kernel module that
  the device picks for them (``tinyflow.device.kernels_of``), which must be the CUDA twin
  (checked: a .cu kernel must have been launched), with the results copied back.
"""
from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow.kernels as ref
import tinyflow_cuda
import tinyflow_cuda.kernels as cuk
from tinyflow.device import kernels_of
from tinyflow_cuda import emulator, runtime

SETTINGS = settings(max_examples=20, deadline=None)
FLOATS = st.sampled_from([np.float32, np.float64])


class Recorder:
    """A runtime that forwards to another and records the kernels launched."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.xp = inner.xp
        self.kernels = inner.kernels
        self.launches: list[str] = []

    def launch(self, name: str, grid: int, block: int, args: Any) -> None:
        self.launches.append(name)
        self.inner.launch(name, grid, block, args)

    def resident_blocks(self, name: str, block: int) -> int:
        return self.inner.resident_blocks(name, block)

    def on_device_of(self, arr: Any) -> Any:
        return self.inner.on_device_of(arr)

    def owns(self, arr: Any) -> bool:
        return self.inner.owns(arr)


class Backend:
    """Runs a CUDA twin on NumPy inputs and hands back NumPy results, on one backend."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.emu = emulator.EmulatorRuntime.build() if kind == "emulator" else None

    def call(self, name: str, *args: Any, expect_kernel: bool = True, **kwargs: Any) -> Any:
        if self.kind == "emulator":
            rec = Recorder(self.emu)
            with runtime.use(rec):
                out = getattr(cuk, name)(*args, **kwargs)
        else:
            cp = tinyflow_cuda.array_module(0)
            to_dev = {id(a): cp.asarray(a) for a in (*args, *kwargs.values()) if isinstance(a, np.ndarray)}
            dev_args = [to_dev.get(id(a), a) for a in args]
            dev_kwargs = {k: to_dev.get(id(v), v) for k, v in kwargs.items()}
            rec = Recorder(runtime.current())
            with runtime.use(rec):
                kernels = kernels_of(next(iter(to_dev.values())))
                assert kernels is cuk, f"{name}: the device picked {kernels.__name__}, not the CUDA twins"
                out = getattr(kernels, name)(*dev_args, **dev_kwargs)
            cp.cuda.Device().synchronize()
            back = {}
            for a in (*args, *kwargs.values()):
                if isinstance(a, np.ndarray):
                    a[...] = cp.asnumpy(to_dev[id(a)])  # in-place updates land in the inputs
                    back[id(to_dev[id(a)])] = a

            def host(o: Any) -> Any:
                if isinstance(o, tuple):
                    return tuple(host(x) for x in o)
                if id(o) in back:
                    return back[id(o)]  # the kernel returned one of its inputs (in place)
                return cp.asnumpy(o) if isinstance(o, cp.ndarray) else o

            out = host(out)
        if expect_kernel:
            assert rec.launches, f"{name}: the wrapper fell back to the reference, no kernel ran"
        self.launches = rec.launches
        return out


@pytest.fixture(scope="module", params=[
    pytest.param("emulator", marks=pytest.mark.skipif(emulator.compiler() is None,
                                                      reason="the emulator needs g++")),
    pytest.param("cuda", marks=pytest.mark.gpu),
])
def emu(request) -> Backend:
    if request.param == "cuda" and not tinyflow_cuda.is_available():
        pytest.skip(f"needs a CUDA GPU: {tinyflow_cuda.unavailable_reason()}")
    return Backend(request.param)


def tol(dtype) -> dict:
    return {"rtol": 1e-5, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-13}


def run(emu: Backend, name: str, *args, **kwargs):
    """Call the CUDA twin ``name`` on ``emu``'s backend and check that a .cu kernel ran."""
    return emu.call(name, *args, **kwargs)


def reference(name: str):
    """The CPU reference kernel ``name`` (tinyflow.kernels)."""
    return getattr(ref, name)


# ---- convolution ----------------------------------------------------------------------------
conv_cases = st.fixed_dictionaries({
    "n": st.integers(1, 2), "c": st.integers(1, 3), "h": st.integers(3, 7), "w": st.integers(3, 7),
    "kh": st.integers(1, 3), "kw": st.integers(1, 3), "sh": st.integers(1, 3),
    "sw": st.integers(1, 2), "ph": st.integers(0, 2), "pw": st.integers(0, 1),
    "dh": st.integers(1, 2), "dw": st.integers(1, 2), "dtype": FLOATS, "seed": st.integers(0, 99),
})


@SETTINGS
@given(case=conv_cases)
def test_im2col_and_col2im_match_reference(emu, case):
    k = (case["kh"], case["kw"])
    geo = dict(stride=(case["sh"], case["sw"]), padding=(case["ph"], case["pw"]),
               dilation=(case["dh"], case["dw"]))
    if case["h"] + 2 * case["ph"] < case["dh"] * (case["kh"] - 1) + 1 or \
            case["w"] + 2 * case["pw"] < case["dw"] * (case["kw"] - 1) + 1:
        return  # no output position: the op rejects this before any kernel runs
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal((case["n"], case["c"], case["h"], case["w"])).astype(case["dtype"])
    expected = reference("im2col")(x, k, **geo)
    got = run(emu, "im2col", x, k, **geo)
    assert got.shape == expected.shape and got.dtype == x.dtype
    np.testing.assert_array_equal(got, expected)  # a pure copy: exact

    col = rng.standard_normal(expected.shape).astype(case["dtype"])
    dx_ref = reference("col2im")(col, x.shape, k, **geo)
    dx = run(emu, "col2im", col, x.shape, k, **geo)
    assert dx.shape == x.shape
    np.testing.assert_allclose(dx, dx_ref, **tol(case["dtype"]))


def test_im2col_strided_input_and_odd_dtype_fall_back(emu):
    """A non-contiguous input is made contiguous; float16 runs the reference body."""
    x = np.arange(2 * 3 * 6 * 6, dtype=np.float32).reshape(2, 3, 6, 6)[:, :, ::2, ::2]
    np.testing.assert_array_equal(run(emu, "im2col", x, (2, 2)), reference("im2col")(x, (2, 2)))
    half = x.astype(np.float16)
    out = emu.call("im2col", half, (2, 2), expect_kernel=False)
    assert emu.launches == []  # float16 has no .cu kernel: the reference body ran
    np.testing.assert_array_equal(out, reference("im2col")(half, (2, 2)))


# ---- pooling --------------------------------------------------------------------------------
pool_cases = st.fixed_dictionaries({
    "n": st.integers(1, 2), "c": st.integers(1, 3), "h": st.integers(3, 8), "w": st.integers(3, 8),
    "k": st.integers(1, 3), "s": st.integers(1, 3), "p": st.integers(0, 1),
    "d": st.integers(1, 2), "ceil": st.booleans(), "include_pad": st.booleans(),
    "dtype": FLOATS, "seed": st.integers(0, 99), "ties": st.booleans(),
})


@SETTINGS
@given(case=pool_cases)
def test_pools_match_reference(emu, case):
    k, s, p, d = (case["k"],) * 2, (case["s"],) * 2, (case["p"],) * 2, (case["d"],) * 2
    span = case["d"] * (case["k"] - 1) + 1
    if case["p"] > case["k"] // 2 or min(case["h"], case["w"]) + 2 * case["p"] < span:
        return  # PyTorch rejects padding > kernel/2; and no output position
    rng = np.random.default_rng(case["seed"])
    shape = (case["n"], case["c"], case["h"], case["w"])
    x = rng.standard_normal(shape).astype(case["dtype"])
    if case["ties"]:
        x = np.round(x).astype(case["dtype"])  # many equal values: the first maximum must win
    out_ref, arg_ref = reference("maxpool2d_forward")(x, k, s, p, d, case["ceil"])
    out, arg = run(emu, "maxpool2d_forward", x, k, s, p, d, case["ceil"])
    np.testing.assert_array_equal(out, out_ref)
    np.testing.assert_array_equal(arg, arg_ref)
    assert arg.dtype == np.int32

    g = rng.standard_normal(out.shape).astype(case["dtype"])
    dx_ref = reference("maxpool2d_backward")(g, arg_ref, shape, k, s, p, d)
    dx = run(emu, "maxpool2d_backward", g, arg, shape, k, s, p, d)
    np.testing.assert_allclose(dx, dx_ref, **tol(case["dtype"]))

    avg_ref = reference("avgpool2d_forward")(x, k, s, p, case["ceil"], case["include_pad"])
    avg = run(emu, "avgpool2d_forward", x, k, s, p, case["ceil"], case["include_pad"])
    np.testing.assert_allclose(avg, avg_ref, **tol(case["dtype"]))
    ga = rng.standard_normal(avg.shape).astype(case["dtype"])
    gx_ref = reference("avgpool2d_backward")(ga, shape, k, s, p, case["ceil"], case["include_pad"])
    gx = run(emu, "avgpool2d_backward", ga, shape, k, s, p, case["ceil"], case["include_pad"])
    np.testing.assert_allclose(gx, gx_ref, **tol(case["dtype"]))


# ---- LRN --------------------------------------------------------------------------------------
@SETTINGS
@given(n=st.integers(1, 2), c=st.integers(1, 7), spatial=st.sampled_from([(), (3,), (2, 3)]),
       size=st.integers(1, 6), alpha=st.floats(1e-4, 1.0), beta=st.floats(0.5, 1.0),
       k=st.floats(0.5, 2.0), dtype=FLOATS, seed=st.integers(0, 99))
def test_lrn_matches_reference(emu, n, c, spatial, size, alpha, beta, k, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, *spatial)).astype(dtype)
    out_ref, scale_ref = reference("lrn_forward")(x, size, alpha, beta, k)
    out, scale = run(emu, "lrn_forward", x, size, alpha, beta, k)
    t = {"rtol": 2e-5, "atol": 1e-6} if dtype == np.float32 else tol(dtype)
    np.testing.assert_allclose(scale, scale_ref, **t)
    np.testing.assert_allclose(out, out_ref, **t)
    g = rng.standard_normal(x.shape).astype(dtype)
    gx_ref = reference("lrn_backward")(g, x, out_ref, scale_ref, size, alpha, beta, k)
    gx = run(emu, "lrn_backward", g, x, out, scale, size, alpha, beta, k)
    np.testing.assert_allclose(gx, gx_ref, **t)


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


@SETTINGS
@given(n=st.integers(0, 30), v=st.integers(1, 8), d=st.integers(1, 5), dtype=FLOATS,
       seed=st.integers(0, 99), padding=st.sampled_from([None, 0, -1]))
def test_embedding_backward_matches_reference(emu, n, v, d, dtype, seed, padding):
    rng = np.random.default_rng(seed)
    grad = rng.standard_normal((n, d)).astype(dtype)
    idx = rng.integers(0, v, size=n)  # many repeats: the atomics must add them all
    pad = None if padding is None else padding % v
    want = reference("embedding_backward")(grad, idx, v, pad)
    got = emu.call("embedding_backward", grad, idx, v, pad, expect_kernel=n > 0)
    assert got.shape == (v, d)
    np.testing.assert_allclose(got, want, **tol(dtype))


# ---- softmax cross-entropy ---------------------------------------------------------------------
@SETTINGS
@given(n=st.integers(1, 5), c=st.integers(1, 300), dtype=FLOATS, seed=st.integers(0, 99),
       smoothing=st.sampled_from([0.0, 0.1]), weighted=st.booleans(), ignore=st.booleans())
def test_softmax_cross_entropy_matches_reference(emu, n, c, dtype, seed, smoothing, weighted,
                                                 ignore):
    rng = np.random.default_rng(seed)
    logits = (5 * rng.standard_normal((n, c))).astype(dtype)
    target = rng.integers(0, c, size=n).astype(np.int64)
    if ignore:
        target[0] = -100
    weight = rng.uniform(0.5, 2.0, size=c).astype(dtype) if weighted else None
    loss_ref, lp_ref = reference("softmax_cross_entropy_forward")(logits, target, -100, smoothing,
                                                                  weight)
    loss, lp = run(emu, "softmax_cross_entropy_forward", logits, target, -100, smoothing, weight)
    t = {"rtol": 1e-5, "atol": 1e-5} if dtype == np.float32 else tol(dtype)
    np.testing.assert_allclose(lp, lp_ref, **t)
    np.testing.assert_allclose(loss, loss_ref, **t)

    grad_loss = rng.standard_normal(n).astype(dtype)
    g_ref = reference("softmax_cross_entropy_backward")(lp_ref, target, grad_loss, -100,
                                                        smoothing, weight)
    g = run(emu, "softmax_cross_entropy_backward", lp, target, grad_loss, -100, smoothing, weight)
    np.testing.assert_allclose(g, g_ref, **t)


def test_log_softmax_last_axis_matches_reference(emu):
    x = np.random.default_rng(0).standard_normal((2, 3, 17)) * 10
    np.testing.assert_allclose(run(emu, "log_softmax_forward", x, -1),
                               reference("log_softmax_forward")(x, -1), rtol=1e-12, atol=1e-12)


def test_cross_entropy_target_out_of_range_is_nan_not_a_wild_read(emu):
    logits = np.zeros((2, 3), np.float32)
    loss, _ = run(emu, "softmax_cross_entropy_forward", logits, np.array([1, 7]))
    assert np.isfinite(loss[0]) and np.isnan(loss[1])


# ---- dropout ------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9])
def test_dropout_mask_rate_values_and_determinism(emu, p):
    like = np.empty((64, 1000), np.float32)
    mask = run(emu, "dropout_mask", like, p, 1234)
    scale = np.float32(1 / (1 - p))
    assert mask.shape == like.shape and mask.dtype == np.float32
    assert set(np.unique(mask)) <= {np.float32(0), scale}
    kept = (mask != 0).mean()
    # 64000 Bernoulli draws: 6 standard deviations of the keep rate
    assert abs(kept - (1 - p)) <= 6 * np.sqrt(p * (1 - p) / mask.size) + 1e-12
    np.testing.assert_array_equal(mask, run(emu, "dropout_mask", like, p, 1234))
    if 0 < p:
        assert not np.array_equal(mask, run(emu, "dropout_mask", like, p, 1235))
    # neighbouring elements are uncorrelated (a counter hash with a weak mix would fail this)
    flat = (mask.reshape(-1) != 0).astype(np.float64)
    if 0 < p:
        corr = np.corrcoef(flat[:-1], flat[1:])[0, 1]
        assert abs(corr) < 0.05


# ---- optimizers ----------------------------------------------------------------------------------
@SETTINGS
@given(n=st.integers(1, 700), dtype=FLOATS, seed=st.integers(0, 99),
       momentum=st.sampled_from([0.0, 0.9]), dampening=st.sampled_from([0.0, 0.3]),
       weight_decay=st.sampled_from([0.0, 1e-2]), nesterov=st.booleans(), first=st.booleans())
def test_sgd_momentum_update_matches_reference(emu, n, dtype, seed, momentum, dampening,
                                               weight_decay, nesterov, first):
    rng = np.random.default_rng(seed)
    p, g, buf = (rng.standard_normal(n).astype(dtype) for _ in range(3))
    p_ref, buf_ref = p.copy(), buf.copy()
    kw = dict(momentum=momentum, dampening=dampening, weight_decay=weight_decay,
              nesterov=nesterov, first_step=first)
    reference("sgd_momentum_update")(p_ref, g, buf_ref if momentum else None, 0.1, **kw)
    assert run(emu, "sgd_momentum_update", p, g, buf if momentum else None, 0.1, **kw) is None
    np.testing.assert_allclose(p, p_ref, **tol(dtype))
    np.testing.assert_allclose(buf, buf_ref, **tol(dtype))


@SETTINGS
@given(n=st.integers(1, 700), dtype=FLOATS, seed=st.integers(0, 99), step=st.integers(1, 50),
       weight_decay=st.sampled_from([0.0, 1e-2]), amsgrad=st.booleans(),
       decoupled=st.booleans(), beta1=st.sampled_from([0.9, 0.3]))
def test_adam_update_matches_reference(emu, n, dtype, seed, step, weight_decay, amsgrad,
                                       decoupled, beta1):
    rng = np.random.default_rng(seed)
    p, g, m = (rng.standard_normal(n).astype(dtype) for _ in range(3))
    v, vmax = (rng.uniform(0, 1, n).astype(dtype) for _ in range(2))
    states = [a.copy() for a in (p, m, v, vmax)]
    kw = dict(beta1=beta1, beta2=0.999, eps=1e-8, weight_decay=weight_decay, amsgrad=amsgrad,
              decoupled_weight_decay=decoupled)
    reference("adam_update")(states[0], g, states[1], states[2], states[3], step, 1e-3, **kw)
    run(emu, "adam_update", p, g, m, v, vmax, step, 1e-3, **kw)
    for got, want in zip((p, m, v, vmax), states):
        np.testing.assert_allclose(got, want, **tol(dtype))


# ---- all-reduce arithmetic --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reduce_add_and_scale(emu, dtype):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(1000).astype(dtype), rng.standard_normal(1000).astype(dtype)
    want = (a + b) * dtype(0.25)
    dst = a.copy()
    assert run(emu, "reduce_add", dst, b) is dst
    run(emu, "reduce_scale", dst, 0.25)
    np.testing.assert_allclose(dst, want, **tol(dtype))


def test_every_kernel_in_the_sources_is_exercised_by_a_wrapper():
    """Each extern "C" kernel is launched by the twin module of its own family (no dead .cu code,
    and csrc/<family>.cu pairs with tinyflow_cuda/kernels/<family>.py)."""
    for name, info in runtime.discover().items():
        base = name.rsplit("_", 1)[0]  # the symbol without its dtype suffix
        family = getattr(cuk, info.source.stem, None)
        assert family is not None, f"{info.source.name} has no twin module tinyflow_cuda/kernels/{info.source.stem}.py"
        assert f'"{base}"' in inspect.getsource(family), \
            f"kernel {name} of {info.source.name} is launched by no twin in {family.__name__}"


@pytest.mark.parametrize("family", ref.FAMILIES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_twin_module_mirrors_its_reference_family(family):
    """tinyflow_cuda/kernels/<family>.py defines every kernel of tinyflow/kernels/<family>.py,
    with the same parameter names in the same order, and nothing else."""
    short = family.__name__.rsplit(".", 1)[1]
    twin = getattr(cuk, short)
    assert twin.__name__ == f"tinyflow_cuda.kernels.{short}"
    assert sorted(twin.__all__) == sorted(family.__all__), f"{short}: twin names differ from the reference's"
    for name in family.__all__:
        want = list(inspect.signature(getattr(family, name)).parameters)
        got = list(inspect.signature(getattr(twin, name)).parameters)
        assert got == want, f"{short}.{name}: twin parameters {got} != reference {want}"
    assert [m.__name__.rsplit(".", 1)[1] for m in cuk.FAMILIES] == [m.__name__.rsplit(".", 1)[1] for m in ref.FAMILIES]
