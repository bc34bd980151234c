"""LRN kernels against a naive per-channel loop, and the backward against central differences."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyflow.kernels.lrn import lrn_backward, lrn_forward


def naive_lrn(x, size, alpha, beta, k):
    c = x.shape[1]
    out = np.empty_like(x)
    for ci in range(c):
        lo, hi = max(0, ci - size // 2), min(c - 1, ci + (size - 1) // 2)
        s = k + alpha / size * np.sum(x[:, lo:hi + 1] ** 2, axis=1)
        out[:, ci] = x[:, ci] * s ** -beta
    return out


params = st.tuples(st.integers(1, 6), st.floats(1e-3, 2.0), st.floats(0.1, 1.5), st.floats(0.5, 3.0))


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 7), st.sampled_from([(), (3,), (2, 3)]), params, st.integers(0, 2**31 - 1))
def test_lrn_forward_matches_naive(c, spatial, prm, seed):
    size, alpha, beta, k = prm
    x = np.random.default_rng(seed).standard_normal((2, c, *spatial))
    out, scale = lrn_forward(x, size, alpha, beta, k)
    np.testing.assert_allclose(out, naive_lrn(x, size, alpha, beta, k), rtol=1e-12, atol=1e-12)
    assert scale.shape == x.shape and np.all(scale >= k)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), params, st.integers(0, 2**31 - 1))
def test_lrn_backward_matches_finite_differences(c, prm, seed):
    size, alpha, beta, k = prm
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, c, 3))
    g = rng.standard_normal(x.shape)
    out, scale = lrn_forward(x, size, alpha, beta, k)
    gx = lrn_backward(g, x, out, scale, size, alpha, beta, k)
    eps = 1e-6
    num = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp_, xm = x.copy(), x.copy()
        xp_[idx] += eps
        xm[idx] -= eps
        num[idx] = np.sum(g * (naive_lrn(xp_, size, alpha, beta, k) - naive_lrn(xm, size, alpha, beta, k))) / (2 * eps)
    np.testing.assert_allclose(gx, num, rtol=1e-5, atol=1e-7)


def _half_dtypes():
    import pytest

    ml_dtypes = pytest.importorskip("ml_dtypes")
    return [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]


def test_half_precision_lrn_is_the_float32_result_rounded_once():
    """fp16 / bf16 compute in float32 and round once (as the CUDA kernels): the window sum of
    squares in half precision would drop the small terms."""
    rng = np.random.default_rng(6)
    for dtype in _half_dtypes():
        x = rng.standard_normal((2, 5, 3)).astype(dtype)
        out, scale = lrn_forward(x, 3, 0.5, 0.75, 1.0)
        out32, scale32 = lrn_forward(x.astype(np.float32), 3, 0.5, 0.75, 1.0)
        assert out.dtype == dtype and scale.dtype == dtype
        np.testing.assert_array_equal(out.astype(np.float64), out32.astype(dtype).astype(np.float64))
        np.testing.assert_array_equal(scale.astype(np.float64), scale32.astype(dtype).astype(np.float64))
        g = rng.standard_normal(x.shape).astype(dtype)
        gx = lrn_backward(g, x, out, scale, 3, 0.5, 0.75, 1.0)
        wide = [a.astype(np.float32) for a in (g, x, out, scale)]
        want = lrn_backward(*wide, 3, 0.5, 0.75, 1.0).astype(dtype)
        assert gx.dtype == dtype
        np.testing.assert_array_equal(gx.astype(np.float64), want.astype(np.float64))
