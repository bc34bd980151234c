"""Dropout masks (csrc/random.cu): rate, values, determinism."""
from __future__ import annotations

import numpy as np
import pytest

from kernel_backend import run


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
