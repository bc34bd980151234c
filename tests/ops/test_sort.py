"""sort, argsort, topk, kthvalue, median, unique and max/min along a dim: (values, indices) as
torch.return_types, PyTorch's orders (stable ties, NaN largest), float64 gradchecks and parity."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")

few = settings(max_examples=10, deadline=None)
shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)
seeds = st.integers(0, 2**31 - 1)


def f64(shape, seed):
    """Distinct values (no ties), so that the order and the gradient are well defined."""
    rng = np.random.default_rng(seed)
    values = rng.permutation(int(np.prod(shape))).reshape(shape) + rng.uniform(0, 0.5, shape)
    return tf.tensor(values, dtype=tf.float64, requires_grad=True)


def same(ours, ref):
    assert tuple(ours.shape) == tuple(ref.shape)
    assert str(ours.dtype) == str(ref.dtype).replace("torch.", "")
    if ref.dtype.is_floating_point:
        np.testing.assert_allclose(ours.numpy(), ref.detach().numpy(), rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def parity(fn, a, grad=True):
    """fn on a tinyflow and a torch tensor: every output equal, named fields equal, gradients of
    the first output equal."""
    grad = grad and a.dtype.kind == "f"
    x, xt = tf.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)
    out, ref = fn(x), fn(xt)
    if isinstance(ref, tuple):
        assert type(out).__name__ == type(ref).__name__ and len(out) == len(ref)
        for o, r in zip(out, ref):
            same(o, r)
        same(out.values, ref.values)
        same(out.indices, ref.indices)
        out, ref = out[0], ref[0]
    else:
        same(out, ref)
    if grad and ref.requires_grad:
        w = np.random.default_rng(0).standard_normal(tuple(ref.shape)).astype(np.float32)
        (out * tf.tensor(w)).sum().backward()
        (ref * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-6)


@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_sort_topk_kthvalue_median_gradcheck(shape, seed, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[dim]
    k = data.draw(st.integers(1, n))
    largest = data.draw(st.booleans())
    x = f64(shape, seed)
    gradcheck(lambda t: t.sort(dim, descending=True).values, [x])
    gradcheck(lambda t: t.topk(k, dim, largest=largest).values, [x])
    gradcheck(lambda t: t.kthvalue(k, dim, keepdim=True).values, [x])
    gradcheck(lambda t: t.median(dim).values, [x])
    gradcheck(lambda t: t.median(), [x])


CASES = {
    "sort": lambda t: t.sort(),
    "sort_dim0": lambda t: t.sort(0),
    "sort_desc": lambda t: t.sort(dim=1, descending=True),
    "sort_stable": lambda t: t.sort(dim=-1, stable=True),
    "sort_stable_desc": lambda t: t.sort(dim=0, descending=True, stable=True),
    "argsort": lambda t: t.argsort(),
    "argsort_desc_stable": lambda t: t.argsort(dim=1, descending=True, stable=True),
    "topk": lambda t: t.topk(2),
    "topk_smallest": lambda t: t.topk(3, dim=0, largest=False),
    "kthvalue": lambda t: t.kthvalue(2, 1),
    "kthvalue_keepdim": lambda t: t.kthvalue(1, 0, keepdim=True),
    "median": lambda t: t.median(),
    "median_dim": lambda t: t.median(1),
    "max_dim": lambda t: t.max(1),
    "min_dim_keepdim": lambda t: t.min(0, keepdim=True),
    "max_other": lambda t: t.max(t.flip(0)),
    "msort": lambda t: t.msort(),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_sorting_matches_torch(name):
    rng = np.random.default_rng(1)
    a = rng.permutation(20).reshape(4, 5).astype(np.float32) + 0.25
    parity(CASES[name], a)
    parity(CASES[name], a.astype(np.int64), grad=False)


@pytest.mark.parametrize("name", ["sort_stable", "sort_stable_desc", "argsort_desc_stable"])
def test_stable_sort_keeps_ties_in_order_as_torch(name):
    a = np.array([[3, 1, 3, 2, 1], [0, 0, 0, 1, 0], [2, 2, 1, 1, 2], [1, 3, 1, 3, 1]], dtype=np.float32)
    parity(CASES[name], a, grad=False)
    parity(CASES[name], a.astype(np.int32), grad=False)
    parity(CASES[name], a > 1, grad=False)


def test_nan_sorts_as_largest():
    a = np.array([[1.0, np.nan, -2.0, 5.0, np.nan, 0.0]], dtype=np.float32)
    parity(lambda t: t.sort(stable=True), a, grad=False)
    parity(lambda t: t.sort(descending=True, stable=True), a, grad=False)


def test_functions_and_return_types():
    x = tf.tensor([[3.0, 1.0, 2.0]])
    values, indices = tf.sort(x, dim=1)
    np.testing.assert_array_equal(values.numpy(), [[1, 2, 3]])
    np.testing.assert_array_equal(indices.numpy(), [[1, 2, 0]])
    assert isinstance(tf.topk(x, 1), tf.return_types.topk)
    assert tf.kthvalue(x, 3).values.item() == 3.0
    assert tf.max(x, dim=1).indices.item() == 0
    assert tf.max(x, axis=1).values.item() == 3.0
    assert x.sort(axis=1).indices.tolist() == [[1, 2, 0]]
    assert tf.argsort(x, descending=True).tolist() == [[0, 2, 1]]
    assert tf.median(tf.tensor([1.0, 4.0, 2.0, 3.0])).item() == 2.0  # the lower median, as torch


def test_out_of_range_k_and_dim():
    x = tf.ones(2, 3)
    with pytest.raises(RuntimeError, match="topk"):
        x.topk(4)
    with pytest.raises(RuntimeError, match="kthvalue"):
        x.kthvalue(0)
    with pytest.raises(IndexError, match="dim 2 is out of range"):
        x.sort(2)
    s = tf.tensor(2.0)
    assert s.sort().values.item() == 2.0 and s.topk(1).indices.item() == 0


def test_unique_matches_torch():
    a = np.array([[3, 1, 3], [2, 1, 5]])
    same(tf.tensor(a).unique(), torch.tensor(a).unique())
    for o, r in zip(tf.unique(tf.tensor(a), return_inverse=True, return_counts=True),
                    torch.unique(torch.tensor(a), return_inverse=True, return_counts=True)):
        same(o, r)
    rows = np.array([[1, 2], [0, 5], [1, 2]])
    for o, r in zip(tf.tensor(rows).unique(dim=0, return_counts=True), torch.tensor(rows).unique(dim=0, return_counts=True)):
        same(o, r)
