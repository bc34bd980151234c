"""Log-softmax and softmax cross-entropy (csrc/loss.cu) against tinyflow/kernels/loss.py."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kernel_backend import FLOATS, SETTINGS, reference, run, tol


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
