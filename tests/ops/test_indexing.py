"""gather, scatter (and _add, _reduce), index_select, index_add, masked_select, masked_fill,
nonzero and where: float64 gradchecks over random shapes and indices, PyTorch parity of values,
dtypes and gradients, and PyTorch's errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")

few = settings(max_examples=10, deadline=None)
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)
seeds = st.integers(0, 2**31 - 1)


def f64(a):
    return tf.tensor(a, dtype=tf.float64, requires_grad=True)


def both(a, grad=True):
    """The same data as a tinyflow and a torch tensor (float ones require grad)."""
    grad = grad and a.dtype.kind == "f"
    return tf.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def same(ours, ref):
    assert tuple(ours.shape) == tuple(ref.shape)
    assert str(ours.dtype) == str(ref.dtype).replace("torch.", "")
    if ref.dtype.is_floating_point:
        np.testing.assert_allclose(ours.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def same_grads(out, ref, pairs):
    w = np.random.default_rng(0).standard_normal(tuple(ref.shape)).astype(np.float32)
    (out * tf.tensor(w)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    for ours, theirs in pairs:
        got = np.zeros(ours.shape) if ours.grad is None else ours.grad.numpy()
        np.testing.assert_allclose(got, theirs.grad.numpy(), rtol=1e-5, atol=1e-6)


def index_for(shape, dim, seed, size=None, unique=False):
    """An int64 index for gather/scatter along ``dim``: no larger than ``shape`` elsewhere."""
    rng = np.random.default_rng(seed)
    ishape = tuple(rng.integers(1, n + 1) if d != dim else (size or rng.integers(1, 5)) for d, n in enumerate(shape))
    if unique:  # distinct targets along dim (scatter's result is then defined)
        ishape = tuple(min(n, shape[dim]) if d == dim else n for d, n in enumerate(ishape))
        perm = np.argsort(rng.random(ishape[:dim] + (shape[dim],) + ishape[dim + 1:]), axis=dim)
        return np.take(perm, np.arange(ishape[dim]), axis=dim).astype(np.int64)
    return rng.integers(0, shape[dim], ishape).astype(np.int64)


# ---------------------------------------------------------------------------- gather
@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_gather_gradcheck(shape, seed, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    index = tf.tensor(index_for(shape, dim % len(shape), seed))
    x = f64(np.random.default_rng(seed).standard_normal(shape))
    gradcheck(lambda t: t.gather(dim, index), [x])
    gradcheck(lambda t: tf.gather(t, dim, index), [x])


def test_gather_matches_torch():
    a = np.random.default_rng(0).standard_normal((3, 4, 2)).astype(np.float32)
    for dim, index in [(0, index_for((3, 4, 2), 0, 1, size=5)), (1, index_for((3, 4, 2), 1, 2)),
                       (-1, index_for((3, 4, 2), 2, 3))]:
        x, xt = both(a)
        out, ref = x.gather(dim, tf.tensor(index)), xt.gather(dim, torch.tensor(index))
        same(out, ref)
        same_grads(out, ref, [(x, xt)])
    x, xt = both(np.float32(2.5))
    same(x.gather(0, tf.tensor(0)), xt.gather(0, torch.tensor(0)))


def test_gather_errors_name_op_and_shapes():
    x = tf.ones(2, 3)
    with pytest.raises(RuntimeError, match=r"gather: index 3 is out of bounds for dimension 1 with size 3"):
        x.gather(1, tf.tensor([[0, 3]]))
    with pytest.raises(RuntimeError, match="gather: index of shape"):
        x.gather(1, tf.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="gather: index of shape"):
        x.gather(1, tf.zeros(3, 1, dtype=tf.int64))
    with pytest.raises(RuntimeError, match="integer"):
        x.gather(1, tf.zeros(2, 1))
    with pytest.raises(IndexError, match="dim 2 is out of range"):
        x.gather(2, tf.zeros(2, 1, dtype=tf.int64))
    assert x.gather(1, tf.zeros(2, 1, dtype=tf.int32)).shape == (2, 1)  # int32 indices work, as in torch


# ---------------------------------------------------------------------------- scatter family
@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_scatter_gradcheck(shape, seed, data):
    dim = data.draw(st.integers(0, len(shape) - 1))
    index = index_for(shape, dim, seed, unique=True)
    rng = np.random.default_rng(seed)
    x = f64(rng.standard_normal(shape))
    src = f64(rng.standard_normal(tuple(n + 1 for n in index.shape)))  # src may be larger than index
    idx = tf.tensor(index)
    gradcheck(lambda a, s: a.scatter(dim, idx, s), [x, src])
    gradcheck(lambda a: a.scatter(dim, idx, 0.5), [x])
    index2 = index_for(shape, dim, seed + 1)
    src2 = f64(rng.standard_normal(index2.shape))
    gradcheck(lambda a, s: a.scatter_add(dim, tf.tensor(index2), s), [x, src2])


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_scatter_and_scatter_add_match_torch():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 5)).astype(np.float32)
    src = rng.standard_normal((2, 5)).astype(np.float32)
    index = np.array([[0, 1, 2, 0, 1], [2, 0, 1, 1, 2]])
    x, xt = both(a)
    s, st_ = both(src)
    out, ref = x.scatter(0, tf.tensor(index), s), xt.scatter(0, torch.tensor(index), st_)
    same(out, ref)
    same_grads(out, ref, [(x, xt), (s, st_)])
    x, xt = both(a)
    s, st_ = both(src)
    out, ref = x.scatter_add(0, tf.tensor(index), s), xt.scatter_add(0, torch.tensor(index), st_)
    same(out, ref)
    same_grads(out, ref, [(x, xt), (s, st_)])
    same(tf.tensor(a).scatter(1, tf.tensor(index[:, :2]), value=7.0), torch.tensor(a).scatter(1, torch.tensor(index[:, :2]), 7.0))
    same(tf.tensor(a).scatter(0, tf.tensor(index), tf.tensor(src), reduce="add"),
         torch.tensor(a).scatter(0, torch.tensor(index), torch.tensor(src), reduce="add"))
    same(tf.tensor(a).scatter(0, tf.tensor(index), tf.tensor(src), reduce="multiply"),
         torch.tensor(a).scatter(0, torch.tensor(index), torch.tensor(src), reduce="multiply"))
    ints = np.arange(15).reshape(3, 5)
    same(tf.tensor(ints).scatter_add(0, tf.tensor(index), tf.tensor(ints[:2])),
         torch.tensor(ints).scatter_add(0, torch.tensor(index), torch.tensor(ints[:2])))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_torch(reduce, include_self):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 3)).astype(np.float32)
    src = rng.standard_normal((5, 3)).astype(np.float32)
    src[1, 0] = 0.0  # a zero factor for prod's gradient
    index = np.array([[0, 1, 3], [0, 0, 3], [2, 1, 1], [0, 1, 3], [2, 0, 1]])
    x, xt = both(a)
    s, st_ = both(src)
    out = x.scatter_reduce(0, tf.tensor(index), s, reduce, include_self=include_self)
    ref = xt.scatter_reduce(0, torch.tensor(index), st_, reduce, include_self=include_self)
    same(out, ref)
    same_grads(out, ref, [(x, xt), (s, st_)])


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@few
@given(seed=seeds)
def test_scatter_reduce_gradcheck(reduce, seed):
    rng = np.random.default_rng(seed)
    x, src = f64(rng.uniform(0.5, 2, (3, 2))), f64(rng.uniform(0.5, 2, (4, 2)))
    index = tf.tensor(rng.integers(0, 3, (4, 2)))
    for include_self in (True, False):
        gradcheck(lambda a, s, keep=include_self: a.scatter_reduce(0, index, s, reduce, include_self=keep), [x, src])


def test_scatter_reduce_prod_with_two_zeros_and_ints():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    s = tf.tensor([0.0, 0.0, 3.0], requires_grad=True)
    xt, st_ = torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([0.0, 0.0, 3.0], requires_grad=True)
    idx = [0, 0, 1]
    out, ref = x.scatter_reduce(0, tf.tensor(idx), s, "prod"), xt.scatter_reduce(0, torch.tensor(idx), st_, "prod")
    same(out, ref)
    same_grads(out, ref, [(x, xt), (s, st_)])
    a = np.array([5, 1, 4])
    for reduce in ["sum", "amax", "amin", "prod"]:
        same(tf.tensor(a).scatter_reduce(0, tf.tensor([2, 0]), tf.tensor([7, -2]), reduce),
             torch.tensor(a).scatter_reduce(0, torch.tensor([2, 0]), torch.tensor([7, -2]), reduce))


def test_scatter_errors():
    x = tf.ones(2, 3)
    with pytest.raises(RuntimeError, match="scatter: index 2 is out of bounds"):
        x.scatter(0, tf.tensor([[2]]), 1.0)
    with pytest.raises(RuntimeError, match="scatter_add: index of shape"):
        x.scatter_add(0, tf.tensor([[0, 0]]), tf.ones(1, 1))
    with pytest.raises(RuntimeError, match="reduce must be one of"):
        x.scatter_reduce(0, tf.tensor([[0]]), tf.ones(1, 1), "max")


def test_inplace_scatters_and_masked_fill():
    x = tf.zeros(2, 3)
    x.scatter_(1, tf.tensor([[2], [0]]), 5.0)
    x.scatter_add_(0, tf.tensor([[1, 1, 1]]), tf.ones(1, 3))
    x.index_add_(1, tf.tensor([0]), tf.ones(2, 1), alpha=2)
    x.masked_fill_(x == 0, -1)
    np.testing.assert_array_equal(x.numpy(), [[2, -1, 5], [8, 1, 1]])


def test_inplace_scatter_is_differentiable():
    w = tf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = w * 2
    h.masked_fill_(tf.tensor([True, False, False]), 0.0)
    h.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [0, 2, 2])


# ---------------------------------------------------------------------------- index_select, index_add
@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_index_select_and_index_add_gradcheck(shape, seed, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    d = dim % len(shape)
    rng = np.random.default_rng(seed)
    index = tf.tensor(rng.integers(0, shape[d], rng.integers(0, 5)))
    x = f64(rng.standard_normal(shape))
    gradcheck(lambda t: t.index_select(dim, index), [x])
    src = f64(rng.standard_normal(shape[:d] + (index.shape[0],) + shape[d + 1:]))
    gradcheck(lambda t, s: t.index_add(dim, index, s, alpha=0.5), [x, src])


def test_index_select_and_index_add_match_torch():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    idx = np.array([3, 0, 3])
    x, xt = both(a)
    out, ref = x.index_select(1, tf.tensor(idx)), xt.index_select(1, torch.tensor(idx))
    same(out, ref)
    same_grads(out, ref, [(x, xt)])
    x, xt = both(a)
    same(tf.index_select(x, 0, tf.tensor(1)), torch.index_select(xt, 0, torch.tensor(1)))
    x, xt = both(a)
    src = rng.standard_normal((3, 3)).astype(np.float32)
    s, st_ = both(src)
    out, ref = x.index_add(1, tf.tensor(idx), s, alpha=2.0), xt.index_add(1, torch.tensor(idx), st_, alpha=2.0)
    same(out, ref)
    same_grads(out, ref, [(x, xt), (s, st_)])
    with pytest.raises(IndexError, match="index_select: index 4 is out of bounds"):
        tf.tensor(a).index_select(1, tf.tensor([4]))
    with pytest.raises(IndexError, match="vector"):
        tf.tensor(a).index_select(1, tf.tensor([[0]]))


# ---------------------------------------------------------------------------- masks, nonzero, where
@few
@given(shape=shapes, seed=seeds)
def test_masked_select_and_masked_fill_gradcheck(shape, seed):
    rng = np.random.default_rng(seed)
    x = f64(rng.standard_normal(shape))
    mask = tf.tensor(rng.random(shape[-1:]) < 0.5)  # broadcast over the leading dims
    gradcheck(lambda t: t.masked_select(mask), [x])
    gradcheck(lambda t: t.masked_fill(mask, 3.0), [x])
    value = f64(np.array(1.5))
    gradcheck(lambda t, v: t.masked_fill(mask, v), [x, value])


def test_masks_match_torch():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    mask = rng.random((3, 1)) < 0.5
    x, xt = both(a)
    out, ref = x.masked_select(tf.tensor(mask)), xt.masked_select(torch.tensor(mask))
    same(out, ref)
    same_grads(out, ref, [(x, xt)])
    x, xt = both(a)
    out, ref = x.masked_fill(tf.tensor(mask), -2.0), xt.masked_fill(torch.tensor(mask), -2.0)
    same(out, ref)
    same_grads(out, ref, [(x, xt)])
    ints = np.arange(6).reshape(2, 3)
    m = ints % 2 == 0
    same(tf.tensor(ints).masked_fill(tf.tensor(m), 2.7), torch.tensor(ints).masked_fill(torch.tensor(m), 2.7))
    same(tf.tensor(ints).masked_fill(tf.tensor(m), tf.tensor(9)), torch.tensor(ints).masked_fill(torch.tensor(m), torch.tensor(9)))
    same(tf.masked_select(tf.tensor(ints), tf.tensor(m)), torch.masked_select(torch.tensor(ints), torch.tensor(m)))
    with pytest.raises(RuntimeError, match="bool"):
        tf.tensor(a).masked_select(tf.tensor(mask.astype(np.int64)))
    with pytest.raises(RuntimeError, match="0-d"):
        tf.tensor(a).masked_fill(tf.tensor(mask), tf.ones(2))


def test_nonzero_and_where_match_torch():
    a = np.array([[0, 1.5, 0], [2, 0, -1]], dtype=np.float32)
    same(tf.tensor(a).nonzero(), torch.tensor(a).nonzero())
    for ours, ref in zip(tf.tensor(a).nonzero(as_tuple=True), torch.tensor(a).nonzero(as_tuple=True)):
        same(ours, ref)
    for ours, ref in zip(tf.where(tf.tensor(a) > 0), torch.where(torch.tensor(a) > 0)):
        same(ours, ref)
    same(tf.nonzero(tf.tensor(3.0)), torch.nonzero(torch.tensor(3.0)))
    same(tf.argwhere(tf.tensor([0, 4, 5])), torch.argwhere(torch.tensor([0, 4, 5])))
    same(tf.tensor([[1, 0], [0, 0]]).nonzero(), torch.tensor([[1, 0], [0, 0]]).nonzero())
    x, xt = both(a)
    out, ref = tf.where(x > 0, x, 0.0), torch.where(xt > 0, xt, 0.0)
    same(out, ref)
    same_grads(out, ref, [(x, xt)])


def test_take_and_take_along_dim_match_torch():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[0, 11], [5, 5]])
    x, xt = both(a)
    out, ref = x.take(tf.tensor(idx)), xt.take(torch.tensor(idx))
    same(out, ref)
    same_grads(out, ref, [(x, xt)])
    order = np.argsort(a, axis=1)
    same(tf.take_along_dim(tf.tensor(a), tf.tensor(order), 1), torch.take_along_dim(torch.tensor(a), torch.tensor(order), 1))
    same(tf.tensor(a).take_along_dim(tf.tensor([[1], [2], [0]]), dim=1),
         torch.tensor(a).take_along_dim(torch.tensor([[1], [2], [0]]), dim=1))
