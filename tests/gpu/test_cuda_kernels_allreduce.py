"""The all-reduce arithmetic (csrc/allreduce.cu) in float32, float64, float16 and bfloat16."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel_backend import SETTINGS, reference, run
from kernel_dtypes import ALL_FLOATS, DTYPES, HALVES, as_float64, dtype_tol, is_half, widen

SUFFIX = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_reduce_add_and_scale(emu, dtype):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(1000).astype(dtype), rng.standard_normal(1000).astype(dtype)
    want = ((widen(a) + widen(b)) * np.float32(0.25)).astype(dtype)  # exact in fp32 for halves
    dst = a.copy()
    assert run(emu, "reduce_add", dst, b) is dst
    run(emu, "reduce_scale", dst, 0.25)
    sfx = SUFFIX[np.dtype(dtype).name]
    assert emu.launches == [f"reduce_scale_{sfx}"]
    np.testing.assert_allclose(as_float64(dst), as_float64(want), **dtype_tol(dtype))


@SETTINGS
@given(n=st.integers(0, 2000), dtype=ALL_FLOATS, seed=st.integers(0, 99),
       ranks=st.integers(2, 8), scale=st.sampled_from([1.0, 1e-3, 1e3]))
def test_reduce_add_rounds_once_per_add(emu, n, dtype, seed, ranks, scale):
    """dst + src summed in fp32 (exact for two half values of these magnitudes) and rounded once:
    bit for bit the reference's ``dst += src``, which NumPy and ml_dtypes compute the same way.
    The mean's scale by 1/ranks multiplies in fp32 by the fp32 factor and rounds once."""
    rng = np.random.default_rng(seed)
    a = (scale * rng.standard_normal(n)).astype(dtype)
    b = (scale * rng.standard_normal(n)).astype(dtype)
    dst = a.copy()
    run(emu, "reduce_add", dst, b, expect_kernel=True)
    sfx = SUFFIX[np.dtype(dtype).name]
    assert emu.launches == [f"reduce_add_{sfx}"]
    np.testing.assert_array_equal(as_float64(dst), as_float64(reference("reduce_add")(a.copy(), b)))
    run(emu, "reduce_scale", dst, 1.0 / ranks)
    if is_half(dtype):
        want = (widen(reference("reduce_add")(a.copy(), b)) * np.float32(1.0 / ranks)).astype(dtype)
        np.testing.assert_array_equal(as_float64(dst), as_float64(want))
    else:
        want = reference("reduce_scale")(reference("reduce_add")(a.copy(), b), 1.0 / ranks)
        np.testing.assert_allclose(dst, want, **dtype_tol(dtype))


@pytest.mark.parametrize("dtype", HALVES, ids=lambda d: np.dtype(d).name)
def test_half_sum_of_many_ranks_rounds_once_per_add(emu, dtype):
    """Eight ranks' chunks added one at a time, as the ring does: each add is the fp32 sum rounded
    once to the half type; and a mean's 1/3 multiplies in fp32 by the fp32 factor (not by 1/3
    rounded to the half type, which moves some of these 300 values by a step)."""
    rng = np.random.default_rng(1)
    chunks = [rng.uniform(0.5, 2.0, 300).astype(dtype) for _ in range(8)]
    dst, want = chunks[0].copy(), chunks[0].copy()
    for chunk in chunks[1:]:
        run(emu, "reduce_add", dst, chunk)
        want = (widen(want) + widen(chunk)).astype(dtype)
    np.testing.assert_array_equal(as_float64(dst), as_float64(want))
    once = sum(widen(c) for c in chunks).astype(dtype)  # rounded once at the end: not what a ring
    assert not np.array_equal(as_float64(dst), as_float64(once))  # of adds can do
    run(emu, "reduce_scale", dst, 1.0 / 3.0)
    want = (widen(want) * np.float32(1.0 / 3.0)).astype(dtype)
    np.testing.assert_array_equal(as_float64(dst), as_float64(want))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_nan_inf_and_overflow_follow_the_reference(emu, dtype):
    """inf + -inf is NaN, NaN propagates, and fp16 sums beyond 65504 overflow to inf, as the
    reference's ``+=``."""
    inf, nan = np.inf, np.nan
    a = np.array([inf, inf, nan, 60000.0, -60000.0, 1.0]).astype(dtype)
    b = np.array([-inf, 1.0, 1.0, 60000.0, -60000.0, nan]).astype(dtype)
    dst = a.copy()
    run(emu, "reduce_add", dst, b)
    with np.errstate(invalid="ignore", over="ignore"):
        want = reference("reduce_add")(a.copy(), b)
    np.testing.assert_array_equal(as_float64(dst), as_float64(want))
    assert np.isnan(as_float64(dst)[[0, 2, 5]]).all()
    scaled = dst.copy()
    run(emu, "reduce_scale", scaled, 0.5)
    np.testing.assert_array_equal(np.isnan(as_float64(scaled)), np.isnan(as_float64(dst)))


def test_mixed_dtypes_and_strided_buffers_take_the_xp_expression(emu):
    dst, src = np.ones(4, np.float16), np.ones(4, np.float32)
    run(emu, "reduce_add", dst, src, expect_kernel=False)
    assert emu.launches == [] and (dst == 2).all()
    strided = np.ones(8, np.float16)[::2]
    run(emu, "reduce_scale", strided, 0.5, expect_kernel=False)
    assert emu.launches == [] and (strided == 0.5).all()
