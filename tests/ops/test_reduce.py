"""Reductions: gradchecks over random shapes and dims, PyTorch parity."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.testing import gradcheck


@st.composite
def shape_and_dim(draw, min_side=1):
    shape = tuple(draw(st.lists(st.integers(min_side, 4), min_size=1, max_size=3)))
    dim = draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1),
                         st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True).map(tuple)))
    keep = draw(st.booleans())
    seed = draw(st.integers(0, 2**31 - 1))
    return shape, dim, keep, seed


def make(shape, seed):
    return tf.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=tf.float64, requires_grad=True)


@given(shape_and_dim(min_side=0))
def test_sum_gradcheck(case):
    shape, dim, keep, seed = case
    gradcheck(lambda x: x.sum(dim, keep), [make(shape, seed)])


@given(shape_and_dim())
def test_mean_gradcheck(case):
    shape, dim, keep, seed = case
    gradcheck(lambda x: x.mean(dim, keep), [make(shape, seed)])


@given(shape_and_dim())
def test_var_gradcheck(case):
    shape, dim, keep, seed = case
    x = make(shape, seed)
    n = x.numel() if dim is None else int(np.prod([shape[d] for d in ((dim,) if isinstance(dim, int) else dim)]))
    if n < 2:
        return
    gradcheck(lambda t: t.var(dim, keep), [x])


@given(shape_and_dim())
def test_max_min_gradcheck(case):
    shape, dim, keep, seed = case
    x = make(shape, seed)  # continuous values: no ties
    gradcheck(lambda t: t.amax(dim, keep), [x])
    gradcheck(lambda t: t.amin(dim, keep), [x])


@given(shape_and_dim())
def test_max_along_dim_gradcheck(case):
    shape, dim, keep, seed = case
    if not isinstance(dim, int):
        dim = 0
    gradcheck(lambda t: t.max(dim, keep)[0], [make(shape, seed)])


def test_reductions_match_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    cases = [
        (lambda t: t.sum((0, 2)), lambda t: t.sum((0, 2))),
        (lambda t: t.mean(1, True), lambda t: t.mean(1, keepdim=True)),
        (lambda t: t.var(2), lambda t: t.var(2)),
        (lambda t: t.var(None, unbiased=False), lambda t: t.var(unbiased=False)),
        (lambda t: t.std(1), lambda t: t.std(1)),
        (lambda t: t.max(), lambda t: t.max()),
        (lambda t: t.max(1)[0], lambda t: t.max(1)[0]),
        (lambda t: t.min(-1, True)[0], lambda t: t.min(-1, keepdim=True)[0]),
        (lambda t: t.logsumexp(1), lambda t: t.logsumexp(1)),
    ]
    for ours, theirs in cases:
        x, xt = tf.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        y, yt = ours(x), theirs(xt)
        np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
        y.sum().backward()
        yt.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_argmax_and_indices():
    x = tf.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    assert x.argmax(1).tolist() == [1, 0]
    assert x.argmax().item() == 3
    values, idx = x.max(1)
    assert values.tolist() == [5.0, 7.0] and idx.tolist() == [1, 0] and idx.dtype == tf.int64


def test_max_ties_split_gradient_evenly():
    x = tf.tensor([2.0, 2.0, 1.0], requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [0.5, 0.5, 0.0]


def test_dim_out_of_range_is_clear():
    with pytest.raises(IndexError, match="sum: dim 3 is out of range"):
        tf.ones(2, 2).sum(3)
