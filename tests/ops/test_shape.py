"""Shape ops: reshape, permute, expand, indexing (basic, integer arrays, masks), cat/stack/split, pad."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.testing import gradcheck

seeds = st.integers(0, 2**31 - 1)


def make(shape, seed):
    return tf.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=tf.float64, requires_grad=True)


@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=4), seed=seeds, data=st.data())
def test_reshape_permute_gradcheck(shape, seed, data):
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    x = make(tuple(shape), seed)
    gradcheck(lambda t: t.permute(*perm).reshape(-1), [x])
    gradcheck(lambda t: t.T, [x])


@given(shape=st.lists(st.sampled_from([1, 3]), min_size=1, max_size=3), seed=seeds)
def test_expand_gradcheck(shape, seed):
    target = (2,) + tuple(3 for _ in shape)
    gradcheck(lambda t: t.expand(*target), [make(tuple(shape), seed)])


@given(seed=seeds, data=st.data())
def test_getitem_basic_and_advanced_gradcheck(seed, data):
    x = make((4, 5, 3), seed)
    idx = data.draw(st.sampled_from([
        (slice(1, 3), 2),
        (Ellipsis, 0),
        (None, slice(None, None, 2)),
        (-1,),
        (np.array([0, 2, 2, 3]),),                      # repeated rows: gradients add up
        (np.array([1, 1]), slice(None), np.array([0, 2])),
        (slice(None), np.array([[0, 1], [4, 4]])),
    ]))
    gradcheck(lambda t: t[idx], [x])


def test_boolean_mask_and_tensor_index():
    x = tf.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    mask = x > 2.5
    y = x[mask]
    assert y.tolist() == [3.0, 4.0, 5.0]
    y.sum().backward()
    assert x.grad.tolist() == [[0, 0, 0], [1, 1, 1]]
    idx = tf.tensor([0, 0, 1])
    x.grad = None
    x[idx].sum().backward()
    assert x.grad.tolist() == [[2, 2, 2], [1, 1, 1]]


@given(sizes=st.lists(st.integers(0, 3), min_size=1, max_size=4), dim=st.integers(0, 1), seed=seeds)
def test_cat_split_gradcheck(sizes, dim, seed):
    parts = [make((n, 2) if dim == 0 else (2, n), seed + i) for i, n in enumerate(sizes)]
    gradcheck(lambda *ps: tf.cat(ps, dim), parts)
    whole = make((sum(sizes), 2) if dim == 0 else (2, sum(sizes)), seed)
    gradcheck(lambda t: tuple(p * (i + 1) for i, p in enumerate(tf.split(t, sizes, dim))), [whole])


@given(n=st.integers(1, 4), dim=st.integers(-3, 2), seed=seeds)
def test_stack_gradcheck(n, dim, seed):
    parts = [make((2, 3), seed + i) for i in range(n)]
    gradcheck(lambda *ps: tf.stack(ps, dim), parts)


@given(pad=st.lists(st.integers(0, 2), min_size=2, max_size=4).filter(lambda p: len(p) % 2 == 0), seed=seeds)
def test_pad_gradcheck(pad, seed):
    gradcheck(lambda t: tf.pad(t, pad, 0.5), [make((2, 3), seed)])


def test_shape_ops_match_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    cases = [
        (lambda t: t.permute(2, 0, 1).reshape(4, 6), lambda t: t.permute(2, 0, 1).reshape(4, 6)),
        (lambda t: t[:, 1:, ::2], lambda t: t[:, 1:, ::2]),
        (lambda t: t[np.array([1, 1, 0])], lambda t: t[torch.tensor([1, 1, 0])]),
        (lambda t: tf.pad(t, (1, 2, 0, 1)), lambda t: torch.nn.functional.pad(t, (1, 2, 0, 1))),
        (lambda t: t.unsqueeze(1).expand(2, 5, 3, 4), lambda t: t.unsqueeze(1).expand(2, 5, 3, 4)),
        (lambda t: tf.cat([t, t * 2], 1), lambda t: torch.cat([t, t * 2], 1)),
        (lambda t: tf.stack([t, t], -1), lambda t: torch.stack([t, t], -1)),
        (lambda t: t.split(2, 2)[1], lambda t: t.split(2, 2)[1]),
    ]
    for ours, theirs in cases:
        x, xt = tf.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        y, yt = ours(x), theirs(xt)
        np.testing.assert_allclose(y.numpy(), yt.detach().numpy())
        w = np.random.default_rng(1).standard_normal(yt.shape).astype(np.float32)
        (y * tf.tensor(w)).sum().backward()
        (yt * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-6)


def test_squeeze_unsqueeze_view():
    x = tf.zeros(2, 1, 3)
    assert x.squeeze().shape == (2, 3)
    assert x.squeeze(1).shape == (2, 3)
    assert x.unsqueeze(0).shape == (1, 2, 1, 3)
    assert x.view(-1).shape == (6,)
    assert x.flatten(1).shape == (2, 3)


def test_reshape_and_cat_errors_name_shapes():
    with pytest.raises(ValueError, match=r"reshape: cannot reshape a tensor of shape \(2, 3\)"):
        tf.zeros(2, 3).reshape(4, 2)
    with pytest.raises(ValueError, match=r"cat: tensor 0 has shape \(2, 3\) but tensor 1 has shape \(2, 4\)"):
        tf.cat([tf.zeros(2, 3), tf.zeros(2, 4)], 0)
