"""max_pool2d, avg_pool2d, adaptive_avg_pool2d: float64 gradchecks, PyTorch comparisons, errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.testing import gradcheck

SETTINGS = settings(max_examples=25, deadline=None)


@st.composite
def pool_case(draw, dilation=True):
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    p = (draw(st.integers(0, k[0] // 2)), draw(st.integers(0, k[1] // 2)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if dilation else (1, 1)
    h = draw(st.integers(max(1, d[0] * (k[0] - 1) + 1 - 2 * p[0]), 6))
    w = draw(st.integers(max(1, d[1] * (k[1] - 1) + 1 - 2 * p[1]), 6))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), h, w)
    return dict(shape=shape, k=k, s=s, p=p, d=d, ceil_mode=draw(st.booleans()),
                seed=draw(st.integers(0, 2**31 - 1)))


def _distinct(shape, seed, dtype=np.float64):
    """Values with no ties, so the max is unique and finite differences are valid."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) / n + rng.uniform(-0.01, 0.01, shape) / n).astype(dtype)


@SETTINGS
@given(pool_case())
def test_max_pool2d_gradcheck(c):
    x = tf.tensor(_distinct(c["shape"], c["seed"]), dtype=tf.float64, requires_grad=True)
    # a dilated window can see only padding (-inf output, as in PyTorch): nothing to differentiate
    assume(np.isfinite(F.max_pool2d(x, c["k"], c["s"], c["p"], c["d"], c["ceil_mode"]).numpy()).all())
    gradcheck(lambda x: F.max_pool2d(x, c["k"], c["s"], c["p"], c["d"], c["ceil_mode"]), [x], eps=1e-7)


@SETTINGS
@given(pool_case(dilation=False), st.booleans())
def test_avg_pool2d_gradcheck(c, include_pad):
    x = tf.tensor(np.random.default_rng(c["seed"]).standard_normal(c["shape"]), dtype=tf.float64,
                  requires_grad=True)
    gradcheck(lambda x: F.avg_pool2d(x, c["k"], c["s"], c["p"], c["ceil_mode"], include_pad), [x])


@SETTINGS
@given(st.integers(1, 7), st.integers(1, 7), st.integers(1, 4), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_adaptive_avg_pool2d_gradcheck(h, w, oh, ow, seed):
    x = tf.tensor(np.random.default_rng(seed).standard_normal((2, 2, h, w)), dtype=tf.float64,
                  requires_grad=True)
    gradcheck(lambda x: F.adaptive_avg_pool2d(x, (oh, ow)), [x])


def _compare(torch, ours, theirs, x):
    tx = tf.tensor(x, requires_grad=True)
    y = ours(tx)
    g = np.random.default_rng(7).standard_normal(y.shape).astype(np.float32)
    y.backward(tf.tensor(g))
    px = torch.tensor(x, requires_grad=True)
    py = theirs(px)
    py.backward(torch.tensor(g))
    assert y.shape == tuple(py.shape) and y.dtype == tf.float32
    np.testing.assert_allclose(y.numpy(), py.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-5, atol=1e-6)


@SETTINGS
@given(pool_case())
def test_max_pool2d_matches_pytorch(c):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(c["seed"]).integers(-4, 5, c["shape"]).astype(np.float32)  # ties too
    args = (c["k"], c["s"], c["p"], c["d"], c["ceil_mode"])
    # a dilated window that sees only padding makes PyTorch's backward write out of bounds
    # (heap corruption in torch 2.13); compare only geometries where every window sees the input
    assume(np.isfinite(F.max_pool2d(tf.tensor(x), *args).numpy()).all())
    _compare(torch, lambda t: F.max_pool2d(t, *args), lambda t: torch.nn.functional.max_pool2d(t, *args), x)


@SETTINGS
@given(pool_case(dilation=False), st.booleans())
def test_avg_pool2d_matches_pytorch(c, include_pad):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(c["seed"]).standard_normal(c["shape"]).astype(np.float32)
    args = (c["k"], c["s"], c["p"], c["ceil_mode"], include_pad)
    _compare(torch, lambda t: F.avg_pool2d(t, *args), lambda t: torch.nn.functional.avg_pool2d(t, *args), x)


@SETTINGS
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 5), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_adaptive_avg_pool2d_matches_pytorch(h, w, oh, ow, seed):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(seed).standard_normal((2, 3, h, w)).astype(np.float32)
    _compare(torch, lambda t: F.adaptive_avg_pool2d(t, (oh, ow)),
             lambda t: torch.nn.functional.adaptive_avg_pool2d(t, (oh, ow)), x)


def test_alexnet_overlapping_pool_matches_pytorch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((2, 4, 27, 27)).astype(np.float32)
    _compare(torch, nn.MaxPool2d(3, 2), torch.nn.MaxPool2d(3, 2), x)
    _compare(torch, nn.MaxPool2d(3, 2, padding=1, ceil_mode=True),
             torch.nn.MaxPool2d(3, 2, padding=1, ceil_mode=True), x)
    _compare(torch, nn.AvgPool2d(3, 2, 1), torch.nn.AvgPool2d(3, 2, 1), x)
    _compare(torch, nn.AdaptiveAvgPool2d((6, 6)), torch.nn.AdaptiveAvgPool2d((6, 6)), x)
    _compare(torch, nn.AdaptiveAvgPool2d(1), torch.nn.AdaptiveAvgPool2d(1), x)
    _compare(torch, nn.AdaptiveAvgPool2d((None, 5)), torch.nn.AdaptiveAvgPool2d((None, 5)), x)


def test_pools_accept_unbatched_input():
    x = tf.randn(3, 6, 6)
    assert F.max_pool2d(x, 2).shape == (3, 3, 3)
    assert F.avg_pool2d(x, 3, 1, 1).shape == (3, 6, 6)
    assert F.adaptive_avg_pool2d(x, 2).shape == (3, 2, 2)


def test_adaptive_pool_to_same_size_is_identity():
    x = tf.randn(2, 3, 6, 6, requires_grad=True)
    y = F.adaptive_avg_pool2d(x, (6, 6))
    np.testing.assert_array_equal(y.numpy(), x.numpy())


@pytest.mark.parametrize(
    "fn, shape, words",
    [
        (lambda x: F.max_pool2d(x, 3, 2, padding=2), (1, 1, 8, 8), ["max_pool2d", "padding", "half"]),
        (lambda x: F.max_pool2d(x, 5), (1, 1, 3, 3), ["max_pool2d", "(1, 1, 3, 3)", "too small"]),
        (lambda x: F.max_pool2d(x, 2), (4, 4), ["max_pool2d", "(4, 4)"]),
        (lambda x: F.avg_pool2d(x, 2, stride=0), (1, 1, 4, 4), ["avg_pool2d", "stride"]),
        (lambda x: F.adaptive_avg_pool2d(x, 0), (1, 1, 4, 4), ["adaptive_avg_pool2d", "(1, 1, 4, 4)"]),
    ],
)
def test_pool_bad_input_raises_value_error(fn, shape, words):
    with pytest.raises(ValueError) as err:
        fn(tf.zeros(*shape))
    for word in words:
        assert word in str(err.value)


def test_maxpool_layer_returns_indices_that_unpool_inverts():
    x = tf.tensor(np.random.default_rng(0).uniform(0.1, 1, (2, 3, 6, 6)).astype(np.float32))  # > the zeros added
    values, indices = nn.MaxPool2d(2, return_indices=True)(x)
    assert values.shape == indices.shape == (2, 3, 3, 3) and indices.dtype == tf.int64
    restored = nn.MaxUnpool2d(2)(values, indices)
    np.testing.assert_array_equal(nn.MaxPool2d(2)(restored).numpy(), values.numpy())


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_adaptive_avg_pool2d_keeps_half_precision_and_matches_float32(half):
    """The averaging products run through matmul_array, so a half input stays half (NumPy's bf16
    matmul would return float32) and agrees with the float32 result to half precision."""
    if half == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        dtype = np.dtype(ml_dtypes.bfloat16)
    else:
        dtype = np.dtype(np.float16)
    x32 = np.random.default_rng(0).standard_normal((2, 3, 13, 11)).astype(np.float32)
    x = tf.tensor(x32.astype(dtype), requires_grad=True)
    out = F.adaptive_avg_pool2d(x, (6, 4))
    assert out.dtype == dtype
    want = F.adaptive_avg_pool2d(tf.tensor(x.numpy().astype(np.float32)), (6, 4)).numpy()
    np.testing.assert_allclose(out.numpy().astype(np.float32), want, rtol=2e-2, atol=2e-2)
    out.sum().backward()
    assert x.grad.dtype == dtype and x.grad.shape == x.shape
