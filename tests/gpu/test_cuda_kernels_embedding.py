"""Embedding backward (csrc/embedding.cu) against tinyflow/kernels/embedding.py, in float32,
float64, float16 and bfloat16 (half precision against the reference run in float32 and rounded
once: tests/gpu/kernel_dtypes.py)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel_backend import SETTINGS, reference
from kernel_dtypes import ALL_FLOATS, DTYPES, HALVES, as_float64, dtype_tol, is_half, via_fp32

SUFFIX = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}


def expected_launches(dtype) -> list[str]:
    """The scatter, and for the half types the rounding of the fp32 accumulator."""
    sfx = SUFFIX[np.dtype(dtype).name]
    return [f"embedding_backward_{sfx}"] + ([f"embedding_grad_round_{sfx}"] if is_half(dtype) else [])


@SETTINGS
@given(n=st.integers(0, 30), v=st.integers(1, 8), d=st.sampled_from([1, 3, 5, 33, 300]),
       dtype=ALL_FLOATS, seed=st.integers(0, 99), padding=st.sampled_from([None, 0, -1]))
def test_embedding_backward_matches_reference(emu, n, v, d, dtype, seed, padding):
    """Narrow rows (8 rows a block) and rows wider than a block (300 > 256 lanes)."""
    rng = np.random.default_rng(seed)
    grad = rng.standard_normal((n, d)).astype(dtype)
    idx = rng.integers(0, v, size=n)  # many repeats: the atomics must add them all
    pad = None if padding is None else padding % v
    want = via_fp32(reference("embedding_backward"), dtype, grad, idx, v, pad)
    got = emu.call("embedding_backward", grad, idx, v, pad, expect_kernel=n > 0)
    assert got.shape == (v, d) and got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(as_float64(got), as_float64(want), **dtype_tol(dtype))
    assert emu.launches == (expected_launches(dtype) if n else [])


@pytest.mark.parametrize("dtype", HALVES, ids=lambda d: np.dtype(d).name)
def test_half_gradients_accumulate_in_fp32(emu, dtype):
    """4096 gradient rows of one id: a 16-bit running sum (a CAS on the containing word, rounded
    after every add) stops at 256 ones in bf16 and 2048 in fp16; the fp32 accumulator reaches
    4096, and 4096 * 0.1 rounds once."""
    n = 4096
    grad = np.ones((n, 4), dtype)
    grad[:, 1] = dtype(0.1)
    grad[:, 2] = dtype(-1.0)
    idx = np.zeros(n, np.int64)
    idx[::2] = 1  # two ids interleaved, 2048 rows each, and id 2 never seen
    got = as_float64(emu.call("embedding_backward", grad, idx, 3))
    want = np.zeros((3, 4))
    want[:2] = [2048.0, 2048 * float(dtype(0.1)), -2048.0, 2048.0]
    np.testing.assert_array_equal(got, want.astype(dtype).astype(np.float64))
    got = as_float64(emu.call("embedding_backward", grad, np.zeros(n, np.int64), 1))
    np.testing.assert_array_equal(got[0, [0, 2, 3]], [4096.0, -4096.0, 4096.0])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_nan_and_inf_gradients_follow_the_reference(emu, dtype):
    """inf adds up to inf, inf + -inf and anything + NaN to NaN, as the reference; in fp16 a sum
    beyond 65504 rounds to inf at the end (the fp32 accumulator itself does not overflow)."""
    inf, nan = np.inf, np.nan
    grad = np.array([[inf, 1.0, nan, 1.0],
                     [inf, -inf, 2.0, 1.0],
                     [1.0, 2.0, 3.0, 1.0]]).astype(dtype)
    idx = np.array([0, 0, 1])
    with np.errstate(invalid="ignore"):  # the reference's inf - inf
        want = via_fp32(reference("embedding_backward"), dtype, grad, idx, 2)
    got = emu.call("embedding_backward", grad, idx, 2)
    g64, w64 = as_float64(got), as_float64(want)
    np.testing.assert_array_equal(np.isnan(g64), np.isnan(w64))
    np.testing.assert_array_equal(g64, w64)  # NaN positions equal, the rest exactly
    big = np.full((2, 1), 60000.0).astype(dtype)
    got = as_float64(emu.call("embedding_backward", big, np.array([0, 0]), 1))
    with np.errstate(over="ignore"):
        want = as_float64(np.array([[120000.0]]).astype(dtype))
    np.testing.assert_array_equal(got, want)


def test_empty_and_unsupported_dtypes(emu):
    """No rows: zeros in the gradient's dtype, no launch; an int gradient runs the reference."""
    for dtype in DTYPES:
        got = emu.call("embedding_backward", np.zeros((0, 3), dtype), np.zeros(0, np.int64), 4,
                       expect_kernel=False)
        assert got.shape == (4, 3) and got.dtype == np.dtype(dtype) and emu.launches == []
    got = emu.call("embedding_backward", np.ones((2, 2), np.int32), np.array([1, 1]), 2,
                   expect_kernel=False)
    np.testing.assert_array_equal(got, [[0, 0], [2, 2]])
