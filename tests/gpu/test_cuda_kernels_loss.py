"""Log-softmax and softmax cross-entropy (csrc/loss.cu) against tinyflow/kernels/loss.py, in
float32, float64, float16 and bfloat16 (half precision against the reference run in float32 and
rounded once: tests/gpu/kernel_dtypes.py)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernel_backend import SETTINGS, reference, run
from kernel_dtypes import ALL_FLOATS, DTYPES, HALVES, as_float64, dtype_tol, via_fp32

SUFFIX = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}


def close(got, want, dtype, what: str) -> None:
    assert got.dtype == np.dtype(dtype), f"{what}: dtype {got.dtype}, expected {np.dtype(dtype)}"
    np.testing.assert_allclose(as_float64(got), as_float64(want), err_msg=what, **dtype_tol(dtype))


def forward_and_backward(emu, logits, target, smoothing, weight, grad_loss):
    """The kernels' and the reference's (loss, lp, grad); backward of both from the reference's
    lp, so that the comparison of the gradients does not carry the forward's rounding."""
    dtype = logits.dtype
    loss_ref, lp_ref = via_fp32(reference("softmax_cross_entropy_forward"), dtype, logits, target,
                                -100, smoothing, weight)
    loss, lp = run(emu, "softmax_cross_entropy_forward", logits, target, -100, smoothing, weight)
    assert emu.launches == [f"softmax_cross_entropy_forward_{SUFFIX[dtype.name]}"], emu.launches
    g_ref = via_fp32(reference("softmax_cross_entropy_backward"), dtype, lp_ref, target,
                     grad_loss, -100, smoothing, weight)
    g = run(emu, "softmax_cross_entropy_backward", lp_ref, target, grad_loss, -100, smoothing,
            weight)
    assert emu.launches == [f"softmax_cross_entropy_backward_{SUFFIX[dtype.name]}"], emu.launches
    return (loss, lp, g), (loss_ref, lp_ref, g_ref)


# ---- softmax cross-entropy ---------------------------------------------------------------------
@SETTINGS
@given(n=st.integers(1, 5), c=st.integers(1, 300), dtype=ALL_FLOATS, seed=st.integers(0, 99),
       smoothing=st.sampled_from([0.0, 0.1]), weighted=st.booleans(), ignore=st.booleans())
def test_softmax_cross_entropy_matches_reference(emu, n, c, dtype, seed, smoothing, weighted,
                                                 ignore):
    rng = np.random.default_rng(seed)
    logits = (5 * rng.standard_normal((n, c))).astype(dtype)
    target = rng.integers(0, c, size=n).astype(np.int64)
    if ignore:
        target[0] = -100
    weight = rng.uniform(0.5, 2.0, size=c).astype(dtype) if weighted else None
    grad_loss = rng.standard_normal(n).astype(dtype)
    got, want = forward_and_backward(emu, logits, target, smoothing, weight, grad_loss)
    for name, g, w in zip(("loss", "log-probabilities", "gradient"), got, want):
        close(g, w, dtype, name)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_log_softmax_last_axis_matches_reference(emu, dtype):
    x = (np.random.default_rng(0).standard_normal((2, 3, 17)) * 10).astype(dtype)
    got = run(emu, "log_softmax_forward", x, -1)
    assert emu.launches == [f"log_softmax_forward_{SUFFIX[np.dtype(dtype).name]}"]
    close(got, via_fp32(reference("log_softmax_forward"), dtype, x, -1), dtype, "log_softmax")


@pytest.mark.parametrize("dtype", HALVES, ids=lambda d: np.dtype(d).name)
def test_half_rows_accumulate_in_fp32(emu, dtype):
    """A row of 2^20 equal logits: each of the block's 256 threads sums 4096 exponentials equal to
    1, which a half-precision running sum stops growing at 256 (bf16) or 2048 (fp16); the loss
    would be log(2^19) or less instead of log(2^20). With label smoothing, sum(lp) is -1.5e7,
    beyond fp16's range (65504): a half accumulator makes the loss inf."""
    c = 1 << 20
    logits = np.zeros((1, c), dtype)
    target = np.array([3])
    for smoothing in (0.0, 0.1):
        loss, lp = run(emu, "softmax_cross_entropy_forward", logits, target, -100, smoothing)
        want = np.log(c)  # 13.86
        close(loss, np.array([want]).astype(dtype), dtype, f"loss, smoothing {smoothing}")
        close(lp[0, :5], np.full(5, -want).astype(dtype), dtype, "log-probabilities")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_nan_and_inf_logits_follow_the_reference(emu, dtype):
    """A NaN or +inf logit makes its row NaN (inf - inf), a -inf logit has probability 0 and
    log-probability -inf, a row of -inf only is NaN: as the reference, forward and backward."""
    inf, nan = np.inf, np.nan
    logits = np.array([[1.0, nan, 2.0, 0.0],
                       [1.0, inf, 2.0, 0.0],
                       [1.0, -inf, 2.0, 0.0],
                       [-inf, -inf, -inf, -inf],
                       [3.0, 1.0, 2.0, 0.0]]).astype(dtype)
    target = np.array([0, 1, 2, 0, 1])
    grad_loss = np.ones(5, dtype)
    for smoothing in (0.0, 0.1):
        with np.errstate(invalid="ignore"):  # the reference's inf - inf
            got, want = forward_and_backward(emu, logits, target, smoothing, None, grad_loss)
        for name, g, w in zip(("loss", "log-probabilities", "gradient"), got, want):
            g64, w64 = as_float64(g), as_float64(w)
            np.testing.assert_array_equal(np.isnan(g64), np.isnan(w64), err_msg=name)
            np.testing.assert_array_equal(np.isinf(g64), np.isinf(w64), err_msg=name)
            close(g, w, dtype, name)
        losses = as_float64(got[0])
        assert np.isnan(losses[[0, 1, 3]]).all()
        # label smoothing takes every log-probability in: the -inf one makes row 2's loss inf
        assert np.isfinite(losses[4]) and np.isfinite(losses[2]) == (smoothing == 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_cross_entropy_target_out_of_range_is_nan_not_a_wild_read(emu, dtype):
    logits = np.zeros((3, 3), dtype)
    target = np.array([1, 7, -100])
    loss, lp = run(emu, "softmax_cross_entropy_forward", logits, target)
    loss = as_float64(loss)
    assert np.isfinite(loss[0]) and np.isnan(loss[1]) and loss[2] == 0
    g = as_float64(run(emu, "softmax_cross_entropy_backward", lp, target, np.ones(3, dtype)))
    assert np.isfinite(g[0]).all() and np.isnan(g[1]).all() and (g[2] == 0).all()


def test_mixed_logits_and_weight_dtypes_run_the_reference(emu):
    """A float32 weight with float16 logits has no kernel (the op casts the weight first)."""
    logits = np.zeros((2, 3), np.float16)
    loss, _ = run(emu, "softmax_cross_entropy_forward", logits, np.array([0, 1]), -100, 0.0,
                  np.ones(3, np.float32), expect_kernel=False)
    assert emu.launches == [] and np.allclose(loss.astype(np.float64), np.log(3), rtol=1e-3)
