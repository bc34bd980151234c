"""The all-reduce arithmetic (csrc/allreduce.cu)."""
from __future__ import annotations

import numpy as np
import pytest

from kernel_backend import run, tol


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
