"""The batchnorm reference kernels (tinyflow/kernels/batchnorm.py) against PyTorch's
native_batch_norm / native_batch_norm_backward in float64, and against the formula per channel:
outputs, saved statistics, the in-place running statistics, the three gradients and their mask,
and the dtypes half inputs and mixed-dtype parameters give."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyflow.kernels.batchnorm import batch_norm_backward, batch_norm_forward

SHAPES = st.sampled_from([(4, 3), (1, 2, 5), (3, 2, 7), (2, 3, 1, 1), (2, 4, 3, 5), (3, 1, 2, 2, 3)])


def _case(shape, seed, scale=3.0, offset=2.0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = rng.standard_normal(shape) * scale + offset
    w, b = rng.standard_normal(c), rng.standard_normal(c)
    rm, rv = rng.standard_normal(c), rng.uniform(0.5, 2.0, c)
    g = rng.standard_normal(shape)
    return x, w, b, rm, rv, g


def _t(torch, a):
    return None if a is None else torch.tensor(a)


@settings(max_examples=25, deadline=None)
@given(SHAPES, st.booleans(), st.booleans(), st.sampled_from([0.1, 0.5, 1.0]),
       st.integers(0, 2**31 - 1))
def test_forward_and_backward_match_pytorch_native_batch_norm(shape, training, affine, momentum, seed):
    torch = pytest.importorskip("torch")
    x, w, b, rm, rv, g = _case(shape, seed)
    if not affine:
        w = b = None
    if training and x.size // shape[1] <= 1:
        return  # PyTorch refuses one value per channel in training (F.batch_norm does too)
    ours_rm, ours_rv = rm.copy(), rv.copy()
    y, save_mean, save_invstd = batch_norm_forward(x, w, b, ours_rm, ours_rv, training, momentum, 1e-5)
    t_rm, t_rv = torch.tensor(rm), torch.tensor(rv)
    ty, t_mean, t_invstd = torch.ops.aten.native_batch_norm(
        torch.tensor(x), _t(torch, w), _t(torch, b), t_rm, t_rv, training, momentum, 1e-5)
    np.testing.assert_allclose(y, ty.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours_rm, t_rm.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ours_rv, t_rv.numpy(), rtol=1e-12, atol=1e-14)
    if training:  # PyTorch's eval mode saves nothing; ours saves the running statistics it used
        np.testing.assert_allclose(save_mean, t_mean.numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(save_invstd, t_invstd.numpy(), rtol=1e-12)
    else:
        np.testing.assert_allclose(save_mean, rm, rtol=0, atol=0)
        np.testing.assert_allclose(save_invstd, 1 / np.sqrt(rv + 1e-5), rtol=1e-14)
    mask = (True, affine, affine)
    gx, gw, gb = batch_norm_backward(g, x, w, save_mean, save_invstd, training, mask)
    tgx, tgw, tgb = torch.ops.aten.native_batch_norm_backward(
        torch.tensor(g), torch.tensor(x), _t(torch, w), torch.tensor(rm), torch.tensor(rv),
        t_mean if training else None, t_invstd if training else None, training, 1e-5, list(mask))
    np.testing.assert_allclose(gx, tgx.numpy(), rtol=1e-10, atol=1e-11)
    if affine:
        np.testing.assert_allclose(gw, tgw.numpy(), rtol=1e-10, atol=1e-11)
        np.testing.assert_allclose(gb, tgb.numpy(), rtol=1e-10, atol=1e-11)
    else:
        assert gw is None and gb is None


@settings(max_examples=25, deadline=None)
@given(SHAPES, st.integers(0, 2**31 - 1))
def test_training_forward_is_the_per_channel_formula(shape, seed):
    """y[:, c] = (x[:, c] - mean) / sqrt(var + eps) * w[c] + b[c], channel by channel, with the
    biased variance; the running variance moves towards the unbiased one."""
    x, w, b, rm, rv, _ = _case(shape, seed, scale=0.5, offset=-4.0)
    if x.size // shape[1] <= 1:
        return
    new_rm, new_rv = rm.copy(), rv.copy()
    y, save_mean, save_invstd = batch_norm_forward(x, w, b, new_rm, new_rv, True, 0.25, 1e-3)
    for c in range(shape[1]):
        values = x[:, c].ravel()
        mean, var = values.mean(), values.var()
        np.testing.assert_allclose(y[:, c], (x[:, c] - mean) / np.sqrt(var + 1e-3) * w[c] + b[c],
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(save_mean[c], mean, rtol=1e-13)
        np.testing.assert_allclose(save_invstd[c], 1 / np.sqrt(var + 1e-3), rtol=1e-13)
        np.testing.assert_allclose(new_rm[c], 0.75 * rm[c] + 0.25 * mean, rtol=1e-13)
        np.testing.assert_allclose(new_rv[c], 0.75 * rv[c] + 0.25 * values.var(ddof=1), rtol=1e-13)


@settings(max_examples=15, deadline=None)
@given(SHAPES, st.booleans(), st.integers(0, 2**31 - 1))
def test_backward_mask_leaves_out_what_is_not_asked_and_keeps_the_rest(shape, training, seed):
    x, w, b, rm, rv, g = _case(shape, seed)
    _, save_mean, save_invstd = batch_norm_forward(x, w, b, rm.copy(), rv.copy(), training, 0.1, 1e-5)
    full = batch_norm_backward(g, x, w, save_mean, save_invstd, training, (True, True, True))
    for mask in [(True, False, False), (False, True, False), (False, False, True), (False, True, True)]:
        got = batch_norm_backward(g, x, w, save_mean, save_invstd, training, mask)
        for want, value, expected in zip(mask, got, full):
            if want:
                np.testing.assert_array_equal(value, expected)
            else:
                assert value is None


def test_eval_mode_without_running_statistics_is_an_error():
    x = np.zeros((2, 3, 4))
    with pytest.raises(ValueError, match="batch_norm_forward: eval mode needs running_mean"):
        batch_norm_forward(x, None, None, None, None, False, 0.1, 1e-5)


def test_training_updates_only_the_running_statistics_given():
    x, w, b, rm, rv, _ = _case((4, 3, 5), 1)
    new_rv = rv.copy()
    y, _, _ = batch_norm_forward(x, w, b, None, new_rv, True, 0.1, 1e-5)
    assert not np.array_equal(new_rv, rv)
    y2, _, _ = batch_norm_forward(x, w, b, None, None, True, 0.1, 1e-5)
    np.testing.assert_array_equal(y, y2)


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_half_inputs_normalise_in_float32_with_float32_statistics(half):
    """A half x with float32 parameters and running statistics (autocast's dtypes): y is in x's
    dtype and within one rounding of the float64 result; statistics, running statistics and the
    parameter gradients stay float32."""
    dtype = np.dtype(half) if half == "float16" else np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    x64, w, b, rm, rv, g64 = _case((4, 3, 6), 7)
    x = x64.astype(dtype)
    w32, b32, rm32, rv32 = (a.astype(np.float32) for a in (w, b, rm, rv))
    y, save_mean, save_invstd = batch_norm_forward(x, w32, b32, rm32, rv32, True, 0.1, 1e-5)
    assert y.dtype == dtype and save_mean.dtype == save_invstd.dtype == rm32.dtype == np.float32
    exact, _, _ = batch_norm_forward(x.astype(np.float64), w, b, rm.copy(), rv.copy(), True, 0.1, 1e-5)
    step = 2.0 ** (-10 if half == "float16" else -7)
    np.testing.assert_allclose(y.astype(np.float64), exact, rtol=step, atol=step)
    gx, gw, gb = batch_norm_backward(g64.astype(dtype), x, w32, save_mean, save_invstd, True)
    assert gx.dtype == dtype and gw.dtype == gb.dtype == np.float32


def test_running_statistics_of_another_dtype_are_updated_in_place_in_their_dtype():
    x, w, b, rm, rv, _ = _case((5, 2, 3), 3)
    rm64, rv64 = rm.copy(), rv.copy()
    y, save_mean, _ = batch_norm_forward(x.astype(np.float32), w, b, rm64, rv64, True, 0.1, 1e-5)
    assert y.dtype == np.float32 and save_mean.dtype == np.float32 and rm64.dtype == np.float64
    np.testing.assert_allclose(rm64, 0.9 * rm + 0.1 * x.mean(axis=(0, 2)), rtol=1e-6)
