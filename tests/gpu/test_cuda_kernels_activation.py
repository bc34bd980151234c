"""csrc/activation.cu (relu_forward, relu_backward) against tinyflow/kernels/activation.py in
float32, float64, float16 and bfloat16, on the emulator and a GPU: vector and scalar paths,
partial last tiles, NaN and signed zeros."""
from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kernel_backend import SETTINGS, reference, run

DTYPES = st.sampled_from([np.float32, np.float64, np.float16, ml_dtypes.bfloat16])


@SETTINGS
@given(n=st.integers(1, 2600), dtype=DTYPES, offset=st.sampled_from([0, 1]), seed=st.integers(0, 2**16))
def test_relu_kernels_match_reference_bit_for_bit(emu, n, dtype, offset, seed):
    """``offset`` 1 shifts every array by one element off 16-byte alignment: the scalar path."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(n + 1).astype(dtype)
    base[rng.integers(0, n + 1, 3)] = [np.nan, 0.0, -0.0]
    x = base[offset:offset + n]
    y = run(emu, "relu_forward", x)
    want = reference("relu_forward")(x)
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(y.astype(np.float64), want.astype(np.float64))
    g = np.full(n + 1, np.inf, dtype=dtype)[offset:offset + n]
    g[:] = rng.standard_normal(n).astype(dtype)
    gx = run(emu, "relu_backward", g, y)
    np.testing.assert_array_equal(gx.astype(np.float64), reference("relu_backward")(g, y).astype(np.float64))


def test_relu_of_an_empty_or_multidimensional_array_keeps_its_shape(emu):
    x = np.arange(-6, 6, dtype=np.float32).reshape(2, 3, 2)
    np.testing.assert_array_equal(run(emu, "relu_forward", x), np.maximum(x, 0))
    empty = np.zeros((0, 3), dtype=np.float32)
    assert emu.call("relu_forward", empty, expect_kernel=False).shape == (0, 3)
