"""Embedding backward (csrc/embedding.cu) against tinyflow/kernels/embedding.py."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kernel_backend import FLOATS, SETTINGS, reference, tol


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
