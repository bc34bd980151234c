"""Local response norm (csrc/lrn.cu) against tinyflow/kernels/lrn.py."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kernel_backend import FLOATS, SETTINGS, reference, run, tol


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
