"""Local response norm (csrc/lrn.cu) against tinyflow/kernels/lrn.py, in all four dtypes."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel_backend import SETTINGS, reference, run
from tinyflow_cuda.kernels import _fastdiv

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = st.sampled_from([np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16])
SUFFIX = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}


def tol(dtype) -> dict:
    """fp32 pow and reciprocal against NumPy's; the halves compute in fp32 on both sides and
    round once, so they differ by at most a unit or two in the last place."""
    return {"float32": {"rtol": 2e-5, "atol": 1e-6}, "float64": {"rtol": 1e-12, "atol": 1e-13},
            "float16": {"rtol": 2e-3, "atol": 1e-4}, "bfloat16": {"rtol": 1e-2, "atol": 1e-4}}[np.dtype(dtype).name]


def wide(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


@SETTINGS
@given(n=st.integers(1, 2), c=st.integers(1, 7), spatial=st.sampled_from([(), (3,), (2, 3), (5, 7)]),
       size=st.integers(1, 6), alpha=st.floats(1e-4, 1.0), beta=st.floats(0.5, 1.0),
       k=st.floats(0.5, 2.0), dtype=DTYPES, seed=st.integers(0, 99))
def test_lrn_matches_reference(emu, n, c, spatial, size, alpha, beta, k, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, *spatial)).astype(dtype)
    out_ref, scale_ref = reference("lrn_forward")(x, size, alpha, beta, k)
    out, scale = run(emu, "lrn_forward", x, size, alpha, beta, k)
    assert emu.launches == [f"lrn_forward_{SUFFIX[dtype.name]}"]  # no fallback to the reference
    assert out.dtype == dtype and scale.dtype == dtype
    np.testing.assert_allclose(wide(scale), wide(scale_ref), **tol(dtype))
    np.testing.assert_allclose(wide(out), wide(out_ref), **tol(dtype))
    g = rng.standard_normal(x.shape).astype(dtype)
    gx_ref = reference("lrn_backward")(g, x, out_ref, scale_ref, size, alpha, beta, k)
    gx = run(emu, "lrn_backward", g, x, out_ref, scale_ref, size, alpha, beta, k)
    assert emu.launches == [f"lrn_backward_{SUFFIX[dtype.name]}"]
    assert gx.dtype == dtype
    np.testing.assert_allclose(wide(gx), wide(gx_ref), **tol(dtype))


def test_lrn_alexnet_layer_bf16(emu):
    """AlexNet's LRN (size 5, alpha 1e-4, beta 0.75, k 2) over 96 channels of 13x13, in bf16."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 96, 13, 13)) * 20).astype(BF16)
    out, scale = run(emu, "lrn_forward", x, 5, 1e-4, 0.75, 2.0)
    out_ref, scale_ref = reference("lrn_forward")(x, 5, 1e-4, 0.75, 2.0)
    np.testing.assert_allclose(wide(out), wide(out_ref), **tol(BF16))
    np.testing.assert_allclose(wide(scale), wide(scale_ref), **tol(BF16))


def test_an_inf_stays_in_its_own_windows(emu):
    """Direct window sums: an inf square makes only the scales whose window holds it inf (their
    outputs 0), where a running sum would leave inf - inf = NaN in every later channel."""
    x = np.ones((1, 8, 2), dtype=np.float32)
    x[0, 1, 0] = 1e30  # squares to inf in fp32
    out, scale = run(emu, "lrn_forward", x, 3, 1.0, 0.75, 1.0)
    assert np.isinf(scale[0, :3, 0]).all() and np.isfinite(scale[0, 3:, 0]).all()
    assert np.isfinite(out[0, 3:, 0]).all() and not np.isnan(out).any()


def test_lrn_past_the_32_bit_limit_launches_in_runs_of_images(emu, monkeypatch):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 4, 3, 2)).astype(np.float32)  # 5 images of 24 elements
    want = run(emu, "lrn_forward", x, 3, 0.1, 0.75, 1.0)
    g = rng.standard_normal(x.shape).astype(np.float32)
    want_gx = run(emu, "lrn_backward", g, x, *want, 3, 0.1, 0.75, 1.0)
    monkeypatch.setattr(_fastdiv, "MAX_INDEX", 2 * 24)
    got = run(emu, "lrn_forward", x, 3, 0.1, 0.75, 1.0)
    assert len(emu.launches) == 3  # ceil(5 / 2)
    gx = run(emu, "lrn_backward", g, x, *got, 3, 0.1, 0.75, 1.0)
    assert len(emu.launches) == 3
    for a, b in zip((*got, gx), (*want, want_gx)):
        np.testing.assert_array_equal(a, b)


def test_lrn_backward_takes_a_gradient_of_another_float_dtype(emu):
    """Autocast can hand LRN's backward an fp32 gradient for a bf16 output: one cast, the bf16 kernel."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 6, 4)).astype(BF16)
    out, scale = run(emu, "lrn_forward", x, 3, 0.1, 0.75, 1.0)
    g = rng.standard_normal(x.shape).astype(np.float32)
    gx = run(emu, "lrn_backward", g, x, out, scale, 3, 0.1, 0.75, 1.0)
    assert emu.launches == ["lrn_backward_bf16"] and gx.dtype == BF16
    want = reference("lrn_backward")(g.astype(BF16), x, out, scale, 3, 0.1, 0.75, 1.0)
    np.testing.assert_allclose(wide(gx), wide(want), **tol(BF16))

