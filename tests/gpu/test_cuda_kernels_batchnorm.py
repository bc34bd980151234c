"""Batch normalisation (csrc/batchnorm.cu) against tinyflow/kernels/batchnorm.py, in all four dtypes,
training and eval, with and without affine parameters and running statistics: the outputs, the
saved statistics, the in-place running statistics and the gradients; and the launches (two a
training forward, one an eval forward, two a backward)."""
from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from kernel_backend import SETTINGS, reference, run
from kernel_dtypes import ALL_FLOATS, as_float64, dtype_tol, is_half

import tinyflow_cuda.kernels.batchnorm as twin

SPATIAL = st.sampled_from([(), (1,), (7,), (1, 1), (3, 5), (2, 2, 3), (17, 17)])


def _stat_tol(dtype) -> dict:
    """Statistics, running statistics and parameter gradients: float64 for float64 inputs, else
    float32 (summed in another order than NumPy's)."""
    return dtype_tol(np.float64) if np.dtype(dtype) == np.float64 else {"rtol": 2e-5, "atol": 2e-5}


def _inputs(n, c, spatial, dtype, seed, affine):
    rng = np.random.default_rng(seed)
    acc = np.float64 if np.dtype(dtype) == np.float64 else np.float32
    x = (rng.standard_normal((n, c, *spatial)) * 2 + 0.5).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    w = rng.standard_normal(c).astype(acc) if affine else None
    b = rng.standard_normal(c).astype(acc) if affine else None
    rm, rv = rng.standard_normal(c).astype(acc), rng.uniform(0.5, 2.0, c).astype(acc)
    return x, g, w, b, rm, rv


def _close(got, want, tol, what):
    np.testing.assert_allclose(as_float64(got), as_float64(want), **tol, err_msg=what)


@SETTINGS
@given(n=st.integers(1, 9), c=st.integers(1, 5), spatial=SPATIAL, dtype=ALL_FLOATS,
       training=st.booleans(), affine=st.booleans(), seed=st.integers(0, 99))
def test_batch_norm_matches_reference(emu, n, c, spatial, dtype, training, affine, seed):
    x, g, w, b, rm, rv = _inputs(n, c, spatial, dtype, seed, affine)
    # one value per thread: the small cases still split a channel over several blocks (partials)
    with mock.patch.object(twin, "MIN_PER_THREAD", 1 / 256):
        ref_rm, ref_rv = rm.copy(), rv.copy()
        y_ref, mean_ref, invstd_ref = reference("batch_norm_forward")(x, w, b, ref_rm, ref_rv, training, 0.1, 1e-5)
        y, mean, invstd = run(emu, "batch_norm_forward", x, w, b, rm, rv, training, 0.1, 1e-5)
        assert emu.launches == [f"batch_norm_{k}_{_sfx(dtype)}" for k in (("stats", "normalize") if training
                                                                          else ("normalize",))]
        assert y.dtype == x.dtype and mean.dtype == invstd.dtype == rm.dtype
        _close(y, y_ref, dtype_tol(dtype), "y")
        for what, got, want in (("save_mean", mean, mean_ref), ("save_invstd", invstd, invstd_ref),
                                ("running_mean", rm, ref_rm), ("running_var", rv, ref_rv)):
            _close(got, want, _stat_tol(dtype), what)
        mask = (True, affine, affine)
        grads_ref = reference("batch_norm_backward")(g, x, w, mean_ref, invstd_ref, training, mask)
        grads = run(emu, "batch_norm_backward", g, x, w, mean, invstd, training, mask)
        assert emu.launches == [f"batch_norm_backward_{k}_{_sfx(dtype)}" for k in
                                (("reduce", "elemt") if training or affine else ("elemt",))]
        gx_tol = dtype_tol(dtype) if is_half(dtype) else _stat_tol(dtype)
        _close(grads[0], grads_ref[0], gx_tol, "gx")
        for what, got, want in (("gweight", grads[1], grads_ref[1]), ("gbias", grads[2], grads_ref[2])):
            if not affine:
                assert got is None
                continue
            _close(got, want, {"rtol": 1e-4, "atol": 1e-4} if is_half(dtype) else _stat_tol(dtype), what)


def _sfx(dtype) -> str:
    return {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}[np.dtype(dtype).name]


@SETTINGS
@given(mask=st.sampled_from([(False, True, False), (False, False, True), (True, False, False),
                             (False, True, True)]), training=st.booleans(), seed=st.integers(0, 99))
def test_backward_computes_only_the_masked_gradients(emu, mask, training, seed):
    x, g, w, b, rm, rv = _inputs(3, 2, (5,), np.float32, seed, True)
    _, mean, invstd = reference("batch_norm_forward")(x, w, b, rm, rv, training, 0.1, 1e-5)
    want = reference("batch_norm_backward")(g, x, w, mean, invstd, training, mask)
    got = run(emu, "batch_norm_backward", g, x, w, mean, invstd, training, mask)
    for wanted, value, expected in zip(mask, got, want):
        if wanted:
            _close(value, expected, _stat_tol(np.float32), "gradient")
        else:
            assert value is None
    # gx alone in eval mode needs no per-channel sums: one launch
    sums = mask[1] or mask[2] or (training and mask[0])
    assert len(emu.launches) == (2 if sums else 1)


def test_many_channels_loop_over_the_grid_and_many_partials_combine(emu):
    """Channels beyond the grid's y size are looped over by each block, and a channel read by many
    blocks (64 partials) is combined to the same statistics in every block of the normalise."""
    x, g, w, b, rm, rv = _inputs(40, 5, (300,), np.float32, 3, True)
    with mock.patch.object(twin, "MAX_GRID_Y", 2), mock.patch.object(twin, "MIN_PER_THREAD", 1 / 256):
        block, grid = twin.launch_shape(40, 5, 300)
        assert grid[1] == 2 and grid[0] * grid[2] > 8
        ref_rm, ref_rv = rm.copy(), rv.copy()
        y_ref, mean_ref, invstd_ref = reference("batch_norm_forward")(x, w, b, ref_rm, ref_rv, True, 0.1, 1e-5)
        y, mean, invstd = run(emu, "batch_norm_forward", x, w, b, rm, rv, True, 0.1, 1e-5)
        _close(y, y_ref, dtype_tol(np.float32), "y")
        _close(rv, ref_rv, _stat_tol(np.float32), "running_var")
        gx_ref, gw_ref, _ = reference("batch_norm_backward")(g, x, w, mean_ref, invstd_ref, True)
        gx, gw, _ = run(emu, "batch_norm_backward", g, x, w, mean, invstd, True)
        _close(gx, gx_ref, {"rtol": 1e-4, "atol": 1e-5}, "gx")
        _close(gw, gw_ref, {"rtol": 1e-4, "atol": 1e-4}, "gweight")


def test_statistics_of_a_large_mean_keep_float32_precision(emu):
    """Values 1000 +- 1 in float32: sums of squares would lose the variance to cancellation; the
    per-thread shifted sums and Chan's combination keep it to float32 rounding of the data."""
    rng = np.random.default_rng(5)
    x = (1000.0 + rng.standard_normal((16, 2, 64))).astype(np.float32)
    exact = x.astype(np.float64)
    y, mean, invstd = run(emu, "batch_norm_forward", x, None, None, None, None, True, 0.1, 0.0)
    np.testing.assert_allclose(mean, exact.mean(axis=(0, 2)), rtol=1e-6)
    np.testing.assert_allclose(invstd, 1 / exact.std(axis=(0, 2)), rtol=2e-4)


def test_mixed_dtype_parameters_and_running_statistics(emu):
    """float16 parameters with a float16 input are cast to float32 once; float64 running statistics
    of a float32 input are updated through a float32 copy and written back in float64."""
    x, g, w, b, rm, rv = _inputs(4, 3, (5,), np.float32, 1, True)
    rm64, rv64 = rm.astype(np.float64), rv.astype(np.float64)
    ref_rm, ref_rv = rm64.copy(), rv64.copy()
    y_ref, _, _ = reference("batch_norm_forward")(x, w.astype(np.float16), b, ref_rm, ref_rv, True, 0.1, 1e-5)
    y, _, _ = run(emu, "batch_norm_forward", x, w.astype(np.float16), b, rm64, rv64, True, 0.1, 1e-5)
    assert rm64.dtype == np.float64
    _close(y, y_ref, dtype_tol(np.float32), "y")
    _close(rm64, ref_rm, {"rtol": 1e-6, "atol": 1e-6}, "running_mean")
    _close(rv64, ref_rv, {"rtol": 1e-6, "atol": 1e-6}, "running_var")


@SETTINGS
@given(n=st.integers(1, 4096), c=st.integers(1, 4096), length=st.integers(1, 1 << 16))
def test_launch_shape_fits_the_kernels(n, c, length):
    """Blocks of 256 threads whose x covers L (a power of two), at most MAX_PARTIALS blocks per
    channel (the consumers combine them with one thread each), at least one of everything."""
    (tx, ty, tz), (gx, gy, gz) = twin.launch_shape(n, c, length)
    assert tx * ty == twin.THREADS and tz == 1 and tx & (tx - 1) == 0
    assert tx >= min(length, twin.THREADS) and tx < 2 * max(length, 1) or tx == twin.THREADS
    assert 1 <= gx * gz <= twin.MAX_PARTIALS <= twin.THREADS
    assert 1 <= gy <= min(c, twin.MAX_GRID_Y)
    assert gx <= -(-length // tx) and gz <= -(-n // ty)  # no block without work
