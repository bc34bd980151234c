"""NaN-aware and statistical reductions (nansum ... renorm), the products (kron, tensordot, baddbmm,
cdist, trapezoid, ...), PyTorch's aliases, Tensor properties and the random fills of
tinyflow/surface/tensor_methods_stats.py: float64 gradchecks over random shapes and PyTorch parity of values,
dtypes, shapes and gradients (NaN inputs included), and the errors of bad input."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")

shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)
seeds = st.integers(0, 2**31 - 1)
few = settings(max_examples=10, deadline=None)
NAN = float("nan")


def make(shape, seed, low=-2.0, high=2.0):
    """A float64 tensor that requires grad, with distinct entries (no ties)."""
    a = np.random.default_rng(seed).uniform(low, high, size=shape)
    return tf.tensor(a, dtype=tf.float64, requires_grad=True)


def with_nans(shape, seed, frac=0.3, dtype=np.float64):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2, 2, size=shape)
    a[rng.random(shape) < frac] = np.nan
    return a.astype(dtype)


def _outputs(x):
    if isinstance(x, tuple):
        return list(x)
    return [x]


def _torch_dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def parity(ours, theirs, *arrays, grad=True, rtol=1e-5, atol=1e-6, finite_grads_only=False):
    """ours(*tinyflow tensors) against theirs(*torch tensors): shapes, dtypes, values (NaN equal to
    NaN) and (for float inputs, when ``grad``) the gradients of a random weighting of the float
    outputs' finite entries (with ``finite_grads_only``, where torch's gradient is finite: an
    all-NaN slice's mean has gradient 0/0 = NaN in torch, 0 in tinyflow)."""
    need = [grad and a.dtype.kind == "f" for a in arrays]
    tf_in = [tf.tensor(a, requires_grad=n) for a, n in zip(arrays, need)]
    th_in = [torch.tensor(a, requires_grad=n) for a, n in zip(arrays, need)]
    outs, refs = _outputs(ours(*tf_in)), _outputs(theirs(*th_in))
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        if not isinstance(r, torch.Tensor):
            assert o == r
            continue
        assert tuple(o.shape) == tuple(r.shape)
        assert str(o.dtype) == _torch_dtype_name(r), (o.dtype, r.dtype)
        if r.dtype.is_floating_point:
            np.testing.assert_allclose(o.numpy(), r.detach().numpy(), rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(o.numpy(), r.numpy())
    if not any(need):
        return
    rng = np.random.default_rng(0)
    loss_tf, loss_th = 0, 0
    for o, r in zip(outs, refs):
        if isinstance(r, torch.Tensor) and r.dtype.is_floating_point and r.requires_grad:
            w = rng.standard_normal(tuple(r.shape))
            w[~np.isfinite(r.detach().numpy())] = 0  # d(NaN)/dx is NaN in both: leave those out
            w = w.astype(r.detach().numpy().dtype)
            loss_tf = loss_tf + (o.nan_to_num(0.0) * tf.tensor(w)).sum()
            loss_th = loss_th + (r.nan_to_num(0.0) * torch.tensor(w)).sum()
    if isinstance(loss_th, int):
        return
    loss_tf.backward()
    loss_th.backward()
    for t, r, n in zip(tf_in, th_in, need):
        if n:
            ref = np.zeros(r.shape) if r.grad is None else r.grad.numpy()
            got = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
            if finite_grads_only:
                got, ref = got[np.isfinite(ref)], ref[np.isfinite(ref)]
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def a_dim(shape, data):
    """A dim of ``shape`` (negative half of the time)."""
    d = data.draw(st.integers(0, len(shape) - 1))
    return d - len(shape) if data.draw(st.booleans()) else d


# ---------------------------------------------------------------------------------------- nansum, nanmean
@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_nansum_nanmean_match_torch_with_nans(shape, seed, data):
    a = with_nans(shape, seed)
    dim, keepdim = a_dim(shape, data), data.draw(st.booleans())
    parity(lambda x: x.nansum(dim, keepdim), lambda x: x.nansum(dim, keepdim), a)
    parity(lambda x: tf.nanmean(x, dim, keepdim), lambda x: torch.nanmean(x, dim, keepdim), a, finite_grads_only=True)
    parity(lambda x: x.nansum(), lambda x: x.nansum(), a)
    parity(lambda x: x.nanmean(), lambda x: x.nanmean(), a.astype(np.float32), finite_grads_only=True)


@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_nansum_nanmean_gradcheck(shape, seed, data):
    dim = a_dim(shape, data)
    x = make(shape, seed)
    gradcheck(lambda t: t.nansum(dim), [x])
    gradcheck(lambda t: t.nanmean(dim, keepdim=True), [x])


def test_nansum_of_integers_and_tuple_dims_and_axis_alias():
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    parity(lambda x: x.nansum((0, 2)), lambda x: x.nansum((0, 2)), a)
    parity(lambda x: x.nansum(axis=-1), lambda x: x.nansum(axis=-1), a)
    parity(lambda x: x.nansum(dtype=tf.float64), lambda x: x.nansum(dtype=torch.float64), a)
    parity(lambda x: x.nanmean((0, 1)), lambda x: x.nanmean((0, 1)), with_nans((2, 3, 4), 3))


def test_nanmean_of_integers_is_an_error_as_in_torch():
    with pytest.raises(RuntimeError, match="nanmean"):
        tf.tensor([1, 2]).nanmean()


# ---------------------------------------------------------------------------------------- nanmedian
@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_nanmedian_matches_torch(shape, seed, data):
    a = with_nans(shape, seed)
    # every row keeps a number (an all-NaN row's index is unspecified), and no two are equal
    first = np.random.default_rng(seed + 1).uniform(3, 4, size=(*a.shape[:-1], 1))
    np.put_along_axis(a, np.zeros_like(first, dtype=np.int64), first, axis=-1)
    a = np.moveaxis(a, -1, data.draw(st.integers(0, a.ndim - 1)))
    dim, keepdim = a_dim(a.shape, data), data.draw(st.booleans())
    parity(lambda x: tuple(x.nanmedian(dim, keepdim)), lambda x: tuple(x.nanmedian(dim, keepdim)), a)
    parity(lambda x: x.nanmedian(), lambda x: x.nanmedian(), a)


def test_nanmedian_of_all_nan_rows_and_integers():
    a = np.array([[1.0, NAN, 3.0, 2.0], [NAN] * 4, [5.0, 1.0, NAN, 2.0]])
    got, ref = tf.tensor(a).nanmedian(1), torch.tensor(a).nanmedian(1)
    np.testing.assert_array_equal(got.values.numpy(), ref.values.numpy())
    np.testing.assert_array_equal(got.indices.numpy()[[0, 2]], ref.indices.numpy()[[0, 2]])
    assert math.isnan(tf.tensor([NAN, NAN]).nanmedian().item())
    parity(lambda x: tuple(tf.nanmedian(x, 0)), lambda x: tuple(torch.nanmedian(x, 0)),
           np.array([[3, 1], [2, 7], [9, 4]], dtype=np.int64))
    assert type(got).__name__ == "nanmedian" and got.values is got[0]
    for ties in ([1.0, 2.0, 2.0, 3.0, NAN], [2.0, 2.0, NAN], [NAN, NAN]):  # the gradient shared among ties
        parity(lambda x: x.nanmedian(), lambda x: x.nanmedian(), np.array(ties))


@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_nanmedian_gradcheck(shape, seed, data):
    dim = a_dim(shape, data)
    gradcheck(lambda t: t.nanmedian(dim).values, [make(shape, seed)])


# ---------------------------------------------------------------------------------------- quantile
INTERPOLATIONS = ["linear", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_quantile_matches_torch(fn, shape, seed, data):
    a = with_nans(shape, seed, frac=0.2)
    how = data.draw(st.sampled_from(INTERPOLATIONS))
    dim = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    keepdim = data.draw(st.booleans())
    q = data.draw(st.one_of(st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.floats(0, 1)))
    parity(lambda x: getattr(x, fn)(q, dim, keepdim, interpolation=how),
           lambda x: getattr(x, fn)(q, dim, keepdim, interpolation=how), a)
    qs = np.array([0.0, 0.3, 0.5, 0.75, 1.0])
    parity(lambda x, t: getattr(tf, fn)(x, t, dim=dim, keepdim=keepdim, interpolation=how),
           lambda x, t: getattr(torch, fn)(x, t, dim=dim, keepdim=keepdim, interpolation=how), a, qs, grad=False)
    parity(lambda x: getattr(x, fn)(tf.tensor(qs, dtype=tf.float64), dim, keepdim, interpolation=how),
           lambda x: getattr(x, fn)(torch.tensor(qs), dim, keepdim, interpolation=how), a)


def test_quantile_of_float32_scalars_and_0d_q():
    a = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    q = np.array(0.4, dtype=np.float32)
    parity(lambda x, t: x.quantile(t, 1), lambda x, t: x.quantile(t, 1), a, q, grad=False)
    parity(lambda x: x.quantile(0.5, -1, True), lambda x: x.quantile(0.5, -1, True), a)
    parity(lambda x: x.quantile(0.7, keepdim=True), lambda x: x.quantile(0.7, keepdim=True), a)
    parity(lambda x: x.quantile(0.7, 0), lambda x: x.quantile(0.7, 0), np.array(2.5))
    parity(lambda x: x.quantile(0.7, 0, True), lambda x: x.quantile(0.7, 0, True), np.array(2.5))
    parity(lambda x: x.nanquantile(tf.tensor([0.5, 0.2], dtype=tf.float64), 0, True),
           lambda x: x.nanquantile(torch.tensor([0.5, 0.2], dtype=torch.float64), 0, True), np.array(2.5))


@pytest.mark.parametrize("how", INTERPOLATIONS)
@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_quantile_gradcheck(how, shape, seed, data):
    dim = a_dim(shape, data)
    q = data.draw(st.floats(0.05, 0.95))
    gradcheck(lambda t: t.quantile(q, dim, interpolation=how), [make(shape, seed)])
    gradcheck(lambda t: t.nanquantile(tf.tensor([0.1, q], dtype=tf.float64), interpolation=how), [make(shape, seed)])


def test_quantile_errors_as_in_torch():
    x = tf.tensor([1.0, 2.0])
    for bad in (1.5, -0.1):
        with pytest.raises(RuntimeError, match=r"q must be in the range \[0, 1\]"):
            x.quantile(bad)
    with pytest.raises(RuntimeError, match="range"):
        x.nanquantile(tf.tensor([0.5, 2.0]))
    with pytest.raises(RuntimeError, match="float or double"):
        tf.tensor([1, 2]).quantile(0.5)
    with pytest.raises(RuntimeError, match="same dtype"):
        x.quantile(tf.tensor([0.5], dtype=tf.float64))
    with pytest.raises(RuntimeError, match="scalar or 1D"):
        x.quantile(tf.tensor([[0.5]]))
    with pytest.raises(RuntimeError, match="interpolation must be one of"):
        x.quantile(0.5, interpolation="cubic")
    with pytest.raises(RuntimeError, match="non-empty"):
        tf.zeros(2, 0).quantile(0.5, 1)
    with pytest.raises(IndexError, match="out of range"):
        x.quantile(0.5, 3)


# ---------------------------------------------------------------------------------------- mode
@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_mode_matches_torch_with_ties(shape, seed, data):
    a = np.random.default_rng(seed).integers(0, 3, size=shape)
    dim, keepdim = a_dim(shape, data), data.draw(st.booleans())
    parity(lambda x: tuple(x.mode(dim, keepdim)), lambda x: tuple(x.mode(dim, keepdim)), a)
    parity(lambda x: tuple(tf.mode(x, dim)), lambda x: tuple(torch.mode(x, dim)), a.astype(np.float64))


def test_mode_of_0d_and_return_type():
    parity(lambda x: tuple(x.mode()), lambda x: tuple(x.mode()), np.array(3.0))
    m = tf.tensor([[1, 2, 2, 1, 3, 1, 2], [3, 3, 0, 0, 5, 5, 5]]).mode()
    assert type(m).__name__ == "mode" and m.values.tolist() == [1, 5] and m.indices.tolist() == [5, 6]
    with pytest.raises(IndexError, match="non-zero size"):
        tf.zeros(2, 0).mode(1)
    with pytest.raises(IndexError, match="non-zero size"):
        tf.zeros(2, 0).nanmedian(1)
    assert math.isnan(tf.zeros(0).nanmedian().item())


@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_mode_gradcheck(shape, seed, data):
    dim = a_dim(shape, data)  # distinct values: the mode is the smallest
    gradcheck(lambda t: t.mode(dim).values, [make(shape, seed)])


# ---------------------------------------------------------------------------------------- aminmax
@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_aminmax_matches_torch(shape, seed, data):
    a = np.random.default_rng(seed).integers(-2, 3, size=shape).astype(np.float32)  # with ties
    dim, keepdim = a_dim(shape, data), data.draw(st.booleans())
    parity(lambda x: tuple(x.aminmax(dim=dim, keepdim=keepdim)), lambda x: tuple(x.aminmax(dim=dim, keepdim=keepdim)), a)
    parity(lambda x: tuple(tf.aminmax(x, keepdim=keepdim)), lambda x: tuple(torch.aminmax(x, keepdim=keepdim)), a)
    parity(lambda x: tuple(x.aminmax()), lambda x: tuple(x.aminmax()), a.astype(np.int64))
    gradcheck(lambda t: tuple(t.aminmax(dim=dim)), [make(shape, seed)])


def test_aminmax_names_and_empty_error():
    r = tf.tensor([[1.0, 5.0], [-2.0, 3.0]]).aminmax(dim=1)
    assert type(r).__name__ == "aminmax" and r.min.tolist() == [1.0, -2.0] and r.max.tolist() == [5.0, 3.0]
    with pytest.raises(RuntimeError, match="empty"):
        tf.zeros(0).aminmax()


# ---------------------------------------------------------------------------------------- histc, histogram
@few
@given(shape=shapes, seed=seeds, bins=st.integers(1, 12), data=st.data())
def test_histc_and_histogram_match_torch(shape, seed, bins, data):
    a = np.random.default_rng(seed).uniform(-3, 3, size=shape).astype(data.draw(st.sampled_from([np.float32, np.float64])))
    parity(lambda x: x.histc(bins), lambda x: x.histc(bins), a, grad=False)
    parity(lambda x: tf.histc(x, bins, -1, 2), lambda x: torch.histc(x, bins, -1, 2), a, grad=False)
    if a.size and a.min() != a.max():  # one distinct value: the widened range puts it exactly on the middle edge
        # for even bins, and which side it lands on is float32 rounding in torch (the constant case is tested below)
        parity(lambda x: tuple(x.histogram(bins)), lambda x: tuple(x.histogram(bins)), a, grad=False)
    density = data.draw(st.booleans())
    w = np.random.default_rng(seed + 1).uniform(0, 2, size=shape).astype(a.dtype)
    parity(lambda x, v: tuple(tf.histogram(x, bins, range=(-1.5, 2.0), weight=v, density=density)),
           lambda x, v: tuple(torch.histogram(x, bins, range=(-1.5, 2.0), weight=v, density=density)), a, w, grad=False)
    edges = np.sort(np.random.default_rng(seed + 2).uniform(-2, 2, size=bins + 1)).astype(a.dtype)
    parity(lambda x, e: tuple(x.histogram(e, density=density)), lambda x, e: tuple(x.histogram(e, density=density)),
           a, edges, grad=False)


def test_histc_of_constant_data_and_histogram_return_type():
    parity(lambda x: x.histc(4), lambda x: x.histc(4), np.array([1.0, 1.0]), grad=False)
    parity(lambda x: tuple(x.histogram(4)), lambda x: tuple(x.histogram(4)), np.array([1.0, 1.0]), grad=False)
    a = np.array([1.0, 2.0, 3.0])  # an empty range given: histc takes the data's, histogram widens it
    parity(lambda x: x.histc(3, min=2, max=2), lambda x: x.histc(3, min=2, max=2), a, grad=False)
    parity(lambda x: tuple(x.histogram(3, range=(2.0, 2.0))), lambda x: tuple(x.histogram(3, range=(2.0, 2.0))), a,
           grad=False)
    h = tf.tensor([0.0, 1.0, 1.0]).histogram(2)
    assert type(h).__name__ == "histogram" and h.hist.tolist() == [1.0, 2.0] and h.bin_edges is h[1]


def test_histogram_errors_as_in_torch():
    x = tf.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        x.histc(0)
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        x.histogram(-1)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        x.histc(3, min=3, max=1)
    with pytest.raises(RuntimeError, match="min should not exceed max"):
        x.histogram(3, range=(2.0, 1.0))
    with pytest.raises(RuntimeError, match="one dimension"):
        x.histogram(tf.tensor([[1.0, 2.0]]))
    with pytest.raises(RuntimeError, match="weight"):
        x.histogram(3, weight=tf.ones(3))
    with pytest.raises(NotImplementedError, match="histc"):
        tf.tensor([1, 2]).histc(3)
    with pytest.raises(RuntimeError, match="not finite"):
        tf.tensor([1.0, NAN]).histc(3)


# ---------------------------------------------------------------------------------------- cov, corrcoef
@few
@given(rows=st.integers(1, 4), cols=st.integers(5, 7), seed=seeds, correction=st.integers(0, 2))
def test_cov_matches_torch(rows, cols, seed, correction):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((rows, cols))
    fw = rng.integers(1, 4, size=cols)
    aw = rng.uniform(1.0, 2.0, size=cols)  # so that the normalisation stays positive
    parity(lambda x: x.cov(correction=correction), lambda x: x.cov(correction=correction), a)
    parity(lambda x: tf.cov(x[0]), lambda x: torch.cov(x[0]), a)
    parity(lambda x, f: x.cov(correction=correction, fweights=f), lambda x, f: x.cov(correction=correction, fweights=f),
           a, fw)
    parity(lambda x, w: x.cov(correction=correction, aweights=w), lambda x, w: x.cov(correction=correction, aweights=w),
           a, aw)
    parity(lambda x, f, w: x.cov(correction=correction, fweights=f, aweights=w),
           lambda x, f, w: x.cov(correction=correction, fweights=f, aweights=w), a.astype(np.float32), fw,
           aw.astype(np.float32))
    if rows > 1:
        parity(lambda x: x.corrcoef(), lambda x: x.corrcoef(), a)
    gradcheck(lambda x, w: x.cov(correction=correction, aweights=w), [make((rows, cols), seed), make(cols, seed + 1, 1, 2)])
    gradcheck(lambda x: tf.corrcoef(x), [make((rows, cols), seed)])


def test_cov_and_corrcoef_of_integers_are_float():
    a = np.array([[1, 2, 4], [3, 1, 1]])
    parity(lambda x: x.cov(), lambda x: x.cov(), a)
    parity(lambda x: x.corrcoef(), lambda x: x.corrcoef(), a)
    parity(lambda x: x.corrcoef(), lambda x: x.corrcoef(), np.array([1.0, 2.0, 4.0]))


def test_cov_errors_as_in_torch():
    x = tf.ones(2, 3)
    with pytest.raises(RuntimeError, match="two or fewer dimensions"):
        tf.ones(2, 2, 2).cov()
    with pytest.raises(RuntimeError, match="fweights to have integral dtype"):
        x.cov(fweights=tf.ones(3))
    with pytest.raises(RuntimeError, match="fweights cannot be negative"):
        x.cov(fweights=tf.tensor([1, -1, 1]))
    with pytest.raises(RuntimeError, match="aweights to have floating point dtype"):
        x.cov(aweights=tf.tensor([1, 1, 1]))
    with pytest.raises(RuntimeError, match="aweights cannot be negative"):
        x.cov(aweights=tf.tensor([1.0, -1.0, 1.0]))
    with pytest.raises(RuntimeError, match="same numel as there are observations"):
        x.cov(fweights=tf.tensor([1, 1]))


# ---------------------------------------------------------------------------------------- dist, renorm
@pytest.mark.parametrize("p", [0, 1, 2, 3.5, math.inf])
def test_dist_matches_torch(p):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    grad = p != 0  # torch's backward of p=0 fails (it is 0 in tinyflow)
    parity(lambda x, y: x.dist(y, p), lambda x, y: x.dist(y, p), a, b, grad=grad)
    parity(lambda x, y: tf.dist(x, y, p), lambda x, y: torch.dist(x, y, p), a[0], a[0].copy(), grad=grad)  # zero distance
    x = tf.tensor(a, requires_grad=True)
    x.dist(tf.tensor(b), p).backward()
    assert x.grad is not None and (p != 0 or not x.grad.numpy().any())


@pytest.mark.parametrize("p", [1, 2, 3.0, math.inf])
@few
@given(shape=shapes, seed=seeds)
def test_dist_gradcheck(p, shape, seed):
    gradcheck(lambda x, y: x.dist(y, p), [make(shape, seed), make(shape[-1:], seed + 1)])


@pytest.mark.parametrize("p", [1, 2, 3.0])
@few
@given(shape=st.lists(st.integers(1, 4), min_size=2, max_size=3).map(tuple), seed=seeds, data=st.data())
def test_renorm_matches_torch_and_gradcheck(p, shape, seed, data):
    dim = a_dim(shape, data)
    a = np.random.default_rng(seed).uniform(-2, 2, size=shape)
    maxnorm = data.draw(st.sampled_from([0.0, 0.5, 1.5, 100.0]))
    parity(lambda x: x.renorm(p, dim, maxnorm), lambda x: x.renorm(p, dim, maxnorm), a)
    norms = np.linalg.norm(np.moveaxis(a, dim, 0).reshape(a.shape[dim], -1), ord=p, axis=1)
    if np.all(np.abs(norms - maxnorm) > 1e-3):  # away from the switch
        gradcheck(lambda x: tf.renorm(x, p, dim, maxnorm), [make(shape, seed)])


def test_renorm_errors_as_in_torch():
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        tf.tensor([1.0, 2.0]).renorm(2, 0, 1)
    with pytest.raises(RuntimeError, match="non-positive"):
        tf.ones(2, 2).renorm(0, 0, 1)
    with pytest.raises(RuntimeError, match="maxnorm"):
        tf.ones(2, 2).renorm(2, 0, -1)


# ---------------------------------------------------------------------------------------- products
@few
@given(sa=st.lists(st.integers(1, 3), max_size=3).map(tuple), sb=st.lists(st.integers(1, 3), max_size=3).map(tuple),
       seed=seeds)
def test_kron_matches_torch_and_gradcheck(sa, sb, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    parity(lambda x, y: x.kron(y), lambda x, y: x.kron(y), a, b)
    parity(lambda x, y: tf.kron(x, y), lambda x, y: torch.kron(x, y), a.astype(np.int64), b.astype(np.float32))
    gradcheck(lambda x, y: x.kron(y), [make(sa, seed), make(sb, seed + 1)])


@pytest.mark.parametrize("sa, sb, dims", [
    ((2, 3, 4), (3, 4, 5), 2), ((2, 3), (3, 4), 1), ((2, 3), (4, 5), 0), ((2, 3, 4), (4, 2), ([0, 2], [1, 0])),
    ((3, 4), (4, 3), ([1], [0])), ((3, 4), (4, 3), ([-1], [0])), ((2, 3), (2, 3), 2),
])
def test_tensordot_matches_torch_and_gradcheck(sa, sb, dims):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    parity(lambda x, y: tf.tensordot(x, y, dims), lambda x, y: torch.tensordot(x, y, dims), a, b)
    gradcheck(lambda x, y: tf.tensordot(x, y, dims=dims), [make(sa, 1), make(sb, 2)])
    if not isinstance(dims, int):
        as_tensor = tf.tensor([list(np.atleast_1d(dims[0])), list(np.atleast_1d(dims[1]))])
        np.testing.assert_allclose(tf.tensordot(tf.tensor(a), tf.tensor(b), as_tensor).numpy(),
                                   torch.tensordot(torch.tensor(a), torch.tensor(b), dims).numpy(), rtol=1e-6)


def test_tensordot_errors_as_in_torch():
    with pytest.raises(RuntimeError, match="contracted dimensions need to match"):
        tf.tensordot(tf.ones(2, 3), tf.ones(4, 3), dims=([1], [0]))
    with pytest.raises(RuntimeError, match="same dtype"):
        tf.tensordot(tf.ones(2, 3), tf.ones(3, 4, dtype=tf.float64), dims=1)
    with pytest.raises(RuntimeError, match="dims >= 0"):
        tf.tensordot(tf.ones(2, 3), tf.ones(3, 4), dims=-1)


def test_vdot_matches_torch_and_errors():
    rng = np.random.default_rng(3)
    parity(lambda x, y: x.vdot(y), lambda x, y: x.vdot(y), rng.standard_normal(5), rng.standard_normal(5))
    parity(lambda x, y: tf.vdot(x, y), lambda x, y: torch.vdot(x, y), np.arange(4), np.arange(4) + 2)
    gradcheck(lambda x, y: x.vdot(y), [make(4, 1), make(4, 2)])
    with pytest.raises(RuntimeError, match="inconsistent tensor size"):
        tf.ones(2).vdot(tf.ones(3))
    with pytest.raises(RuntimeError, match="same dtype"):
        tf.ones(2).vdot(tf.ones(2, dtype=tf.float64))


ADD_PRODUCTS = {  # name: (input shape, operand shapes)
    "baddbmm": ((1, 3, 4), [(2, 3, 5), (2, 5, 4)]),
    "addbmm": ((3, 4), [(2, 3, 5), (2, 5, 4)]),
    "addmv": ((3,), [(3, 5), (5,)]),
    "addr": ((1, 4), [(3,), (4,)]),
    "addmm": ((3, 4), [(3, 5), (5, 4)]),
}


@pytest.mark.parametrize("name", sorted(ADD_PRODUCTS))
@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, 2.0), (0, -1.5)])
def test_add_products_match_torch_and_gradcheck(name, beta, alpha):
    shape, operand_shapes = ADD_PRODUCTS[name]
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(s) for s in (shape, *operand_shapes)]
    if beta == 0:
        arrays[0][..., 0] = np.nan  # ignored with beta=0, as PyTorch
    parity(lambda x, a, b: getattr(x, name)(a, b, beta=beta, alpha=alpha),
           lambda x, a, b: getattr(torch, name)(x, a, b, beta=beta, alpha=alpha), *arrays)
    if name != "addmm":
        parity(lambda x, a, b: getattr(tf, name)(x, a, b), lambda x, a, b: getattr(torch, name)(x, a, b),
               *[a.astype(np.float32) for a in arrays])
    inputs = [make(s, i) for i, s in enumerate((shape, *operand_shapes))]
    gradcheck(lambda x, a, b: getattr(x, name)(a, b, beta=beta, alpha=alpha), inputs)


@pytest.mark.parametrize("name", sorted(ADD_PRODUCTS))
def test_inplace_add_products_match_torch(name):
    shape, operand_shapes = ADD_PRODUCTS[name]
    rng = np.random.default_rng(5)
    full = getattr(torch, name)(*[torch.tensor(rng.standard_normal(s)) for s in (shape, *operand_shapes)]).shape
    arrays = [rng.standard_normal(tuple(full))] + [rng.standard_normal(s) for s in operand_shapes]

    def ours(x, a, b):
        y = x * 1.0  # not a leaf: in place is recorded
        out = getattr(y, name + "_")(a, b, beta=0.5, alpha=2.0)
        assert out is y
        return y

    def theirs(x, a, b):
        y = x * 1.0
        getattr(y, name + "_")(a, b, beta=0.5, alpha=2.0)
        return y

    parity(ours, theirs, *arrays)


def test_add_products_shape_errors():
    with pytest.raises(RuntimeError, match="baddbmm"):
        tf.ones(2, 3, 5).baddbmm(tf.ones(2, 3, 4), tf.ones(2, 4, 4))
    with pytest.raises(RuntimeError, match="addbmm"):
        tf.ones(3, 4).addbmm(tf.ones(2, 3, 5), tf.ones(3, 5, 4))
    with pytest.raises(RuntimeError, match="addr"):
        tf.ones(4, 4).addr(tf.ones(3), tf.ones(4))


# ---------------------------------------------------------------------------------------- cdist
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, math.inf])
def test_cdist_matches_torch(p):
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4))
    parity(lambda x, y: tf.cdist(x, y, p), lambda x, y: torch.cdist(x, y, p), a, b)
    parity(lambda x, y: tf.cdist(x, y, p=p), lambda x, y: torch.cdist(x, y, p=p), a[0].astype(np.float32),
           a[0, :2].astype(np.float32))  # zero distances


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, math.inf])
@few
@given(p_rows=st.integers(1, 4), r_rows=st.integers(1, 4), m=st.integers(1, 3), batch=st.sampled_from([(), (2,)]),
       seed=seeds)
def test_cdist_gradcheck(p, p_rows, r_rows, m, batch, seed):
    gradcheck(lambda x, y: tf.cdist(x, y, p), [make((*batch, p_rows, m), seed), make((r_rows, m), seed + 1)])


def test_cdist_errors_as_in_torch():
    with pytest.raises(RuntimeError, match="at least 2D"):
        tf.cdist(tf.ones(3), tf.ones(3))
    with pytest.raises(RuntimeError, match="same number of columns"):
        tf.cdist(tf.ones(2, 3), tf.ones(2, 4))
    with pytest.raises(RuntimeError, match="non-negative p"):
        tf.cdist(tf.ones(2, 3), tf.ones(2, 3), p=-1)


# ---------------------------------------------------------------------------------------- trapezoid
@pytest.mark.parametrize("fn", ["trapezoid", "trapz", "cumulative_trapezoid"])
@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_trapezoid_matches_torch_and_gradcheck(fn, shape, seed, data):
    dim = a_dim(shape, data)
    rng = np.random.default_rng(seed)
    y = rng.standard_normal(shape)
    x1 = np.sort(rng.uniform(-2, 2, shape[dim]))
    xfull = np.sort(rng.uniform(-2, 2, shape), axis=dim)
    ours, theirs = getattr(tf, fn), getattr(torch, fn)
    parity(lambda a: ours(a, dim=dim), lambda a: theirs(a, dim=dim), y)
    parity(lambda a: ours(a, dx=0.5, dim=dim), lambda a: theirs(a, dx=0.5, dim=dim), y.astype(np.float32))
    parity(lambda a, x: ours(a, x, dim=dim), lambda a, x: theirs(a, x, dim=dim), y, x1)
    parity(lambda a, x: ours(a, x, dim=dim), lambda a, x: theirs(a, x, dim=dim), y, xfull)
    parity(lambda a: ours(a, dim=dim), lambda a: theirs(a, dim=dim), (y * 3).astype(np.int64))
    gradcheck(lambda a, x: ours(a, x, dim=dim), [make(shape, seed), make(shape, seed + 1)])


def test_trapezoid_errors_and_empty():
    with pytest.raises(RuntimeError, match="one `x` value for each sample point"):
        tf.trapezoid(tf.tensor([1.0, 2.0, 4.0]), tf.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="not both"):
        tf.trapezoid(tf.ones(3), tf.ones(3), dx=1.0)
    parity(lambda a: tf.trapezoid(a), lambda a: torch.trapezoid(a), np.zeros((2, 0)))
    parity(lambda a: tf.trapezoid(a, dim=0), lambda a: torch.trapezoid(a, dim=0), np.zeros((0, 3), dtype=np.int64))
    for fn in ("trapezoid", "cumulative_trapezoid"):
        with pytest.raises(IndexError, match="0-d"):
            getattr(tf, fn)(tf.tensor(2.0))


# ---------------------------------------------------------------------------------------- aliases
ALIASES = {  # alias: torch's name of the same op
    "multiply": "mul", "subtract": "sub", "greater": "gt", "greater_equal": "ge", "less": "lt",
    "less_equal": "le", "not_equal": "ne",
}


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_binary_aliases_match_torch(name):
    rng = np.random.default_rng(7)
    a, b = rng.integers(-2, 3, (3, 4)).astype(np.float64), rng.integers(-2, 3, 4).astype(np.float64)
    parity(lambda x, y: getattr(x, name)(y), lambda x, y: getattr(x, name)(y), a, b)
    parity(lambda x, y: getattr(tf, name)(x, y), lambda x, y: getattr(torch, name)(x, y), a.astype(np.int32), b)


def test_subtract_alpha_absolute_and_positive():
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal(3)
    parity(lambda x, y: x.subtract(y, alpha=2), lambda x, y: x.subtract(y, alpha=2), a, b)
    parity(lambda x: tf.absolute(x), lambda x: torch.absolute(x), a)
    parity(lambda x: x.positive(), lambda x: x.positive(), a)
    t = tf.tensor([1, -2])
    assert t.positive() is t and tf.positive(t) is t
    with pytest.raises(RuntimeError, match="bool"):
        tf.tensor([True]).positive()


INPLACE = {  # in-place alias: (operand, dtype of self)
    "multiply_": (2.5, np.float64), "subtract_": (1.5, np.float64), "divide_": (4.0, np.float64),
    "true_divide_": (3.0, np.float32), "floor_divide_": (2, np.int64), "absolute_": (None, np.float64),
    "eq_": (1.0, np.float32), "ne_": (1.0, np.float64), "lt_": (0.5, np.float32), "le_": (1.0, np.int64),
    "gt_": (0.5, np.float64), "ge_": (1.0, np.int32), "greater_": (0.0, np.float64),
    "greater_equal_": (1.0, np.float64), "less_": (1.0, np.float32), "less_equal_": (0.0, np.float64),
    "not_equal_": (2.0, np.float64), "logical_and_": ("tensor", np.float32), "logical_or_": ("tensor", np.int64),
    "logical_xor_": ("tensor", np.float64),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_aliases_keep_dtype_as_torch(name):
    operand, dtype = INPLACE[name]
    a = np.array([[-2, 0, 1], [2, 3, -1]]).astype(dtype)
    other_np = np.array([1, 0, 2]).astype(dtype)
    ours, theirs = tf.tensor(a), torch.tensor(a)
    args_tf = () if operand is None else (tf.tensor(other_np),) if operand == "tensor" else (operand,)
    args_th = () if operand is None else (torch.tensor(other_np),) if operand == "tensor" else (operand,)
    out = getattr(ours, name)(*args_tf)
    getattr(theirs, name)(*args_th)
    assert out is ours and str(ours.dtype) == _torch_dtype_name(theirs)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_inplace_alias_with_rounding_mode_and_grad():
    parity(lambda x: (x * 1.0).divide_(0.7, rounding_mode="floor"),
           lambda x: (x * 1.0).divide_(0.7, rounding_mode="floor"), np.array([1.0, -2.5, 3.2]))
    parity(lambda x, y: (x * 1.0).multiply_(y), lambda x, y: (x * 1.0).multiply_(y), np.array([1.0, -2.5]),
           np.array([0.5, 3.0]))
    parity(lambda x: (x * 1.0).gt_(0.0), lambda x: (x * 1.0).gt_(0.0), np.array([1.0, -2.5]))


# ---------------------------------------------------------------------------------------- properties
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "int8", "uint8", "bool"])
def test_dtype_queries_match_torch(dtype):
    a = np.zeros((2, 3), dtype=dtype)
    ours, theirs = tf.tensor(a), torch.tensor(a)
    assert ours.is_signed() == theirs.is_signed() == tf.is_signed(ours)
    assert ours.itemsize == theirs.itemsize
    assert ours.nbytes == theirs.nbytes
    assert ours.is_cpu is True


def test_is_nonzero_and_is_same_size():
    for v in (0.0, 1.5, -1, 0, True, False):
        assert tf.tensor([v]).is_nonzero() == torch.tensor([v]).is_nonzero()
    assert tf.is_nonzero(tf.tensor(2.0))
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        tf.tensor([1.0, 2.0]).is_nonzero()
    with pytest.raises(RuntimeError, match="no values is ambiguous"):
        tf.tensor([]).is_nonzero()
    assert tf.ones(2, 3).is_same_size(tf.zeros(2, 3)) and not tf.ones(2, 3).is_same_size(tf.ones(3, 2))
    assert tf.is_same_size(tf.ones(2), tf.ones(2))


def test_stride_matches_torch():
    cases = [
        (lambda m: m.ones(2, 3, 4), None), (lambda m: m.ones(2, 3, 4).transpose(0, 2), None),
        (lambda m: m.ones(3, 1).expand(3, 5), None), (lambda m: m.ones(2, 3, 4).permute(1, 2, 0), -1),
        (lambda m: m.ones(5, 6)[:, 1], None), (lambda m: m.ones(()), None), (lambda m: m.ones(2, 3), 0),
    ]
    for build, dim in cases:
        ours, theirs = build(tf), build(torch)
        assert ours.stride(dim) == (theirs.stride() if dim is None else theirs.stride(dim))
        assert ours.storage_offset() == 0
    with pytest.raises(IndexError, match="stride"):
        tf.ones(2, 3).stride(2)


def test_retains_grad_as_torch():
    for m in (tf, torch):
        x = m.ones(3, requires_grad=True)
        y = x * 2
        z = y * 3
        assert not x.retains_grad and not y.retains_grad
        y.retain_grad()
        x.retain_grad()  # a leaf: no effect
        assert y.retains_grad and not x.retains_grad and not z.retains_grad


# ---------------------------------------------------------------------------------------- random fills
N = 200_000


def test_exponential_moments_and_reproducibility():
    g = tf.Generator().manual_seed(11)
    x = tf.empty(N, dtype=tf.float64).exponential_(2.0, generator=g).numpy()
    assert x.min() >= 0
    assert abs(x.mean() - 0.5) < 0.01 and abs(x.var() - 0.25) < 0.01
    a = tf.empty(5).exponential_(generator=tf.Generator().manual_seed(3))
    b = tf.empty(5).exponential_(generator=tf.Generator().manual_seed(3))
    c = tf.empty(5).exponential_(generator=tf.Generator().manual_seed(4))
    assert a.dtype == tf.float32 and a.tolist() == b.tolist() and a.tolist() != c.tolist()


def test_geometric_moments_and_integer_tensors():
    p = 0.3
    x = tf.empty(N, dtype=tf.float64).geometric_(p, generator=tf.Generator().manual_seed(12)).numpy()
    assert x.min() >= 1 and np.all(x == np.round(x))
    assert abs(x.mean() - 1 / p) < 0.05 and abs(x.var() - (1 - p) / p**2) / ((1 - p) / p**2) < 0.05
    ints = tf.zeros(1000, dtype=tf.int64).geometric_(0.5, generator=tf.Generator().manual_seed(1))
    assert ints.dtype == tf.int64 and int(ints.min()) >= 1
    same = tf.zeros(1000, dtype=tf.int64).geometric_(0.5, generator=tf.Generator().manual_seed(1))
    assert ints.tolist() == same.tolist()


def test_log_normal_moments():
    x = tf.empty(N, dtype=tf.float64).log_normal_(0.5, 0.4, generator=tf.Generator().manual_seed(13)).numpy()
    assert x.min() > 0
    logs = np.log(x)
    assert abs(logs.mean() - 0.5) < 0.01 and abs(logs.std() - 0.4) < 0.01
    y = tf.empty(4, dtype=tf.float32).log_normal_(generator=tf.Generator().manual_seed(2))
    z = tf.empty(4, dtype=tf.float32).log_normal_(generator=tf.Generator().manual_seed(2))
    assert y.dtype == tf.float32 and y.tolist() == z.tolist()


def test_cauchy_quartiles():
    x = tf.empty(N, dtype=tf.float64).cauchy_(1.0, 2.0, generator=tf.Generator().manual_seed(14)).numpy()
    q1, med, q3 = np.quantile(x, [0.25, 0.5, 0.75])
    assert abs(med - 1.0) < 0.05 and abs(q1 - (1.0 - 2.0)) < 0.06 and abs(q3 - (1.0 + 2.0)) < 0.06
    a = tf.empty(6).cauchy_(generator=tf.Generator().manual_seed(5))
    b = tf.empty(6).cauchy_(generator=tf.Generator().manual_seed(5))
    assert a.tolist() == b.tolist()


def test_random_fills_write_in_place_and_errors():
    t = tf.zeros(3)
    assert t.exponential_() is t and t.cauchy_() is t and t.log_normal_() is t and t.geometric_(0.5) is t
    with pytest.raises(RuntimeError, match="lambda > 0"):
        tf.ones(2).exponential_(0)
    with pytest.raises(RuntimeError, match=r"p to be in \(0, 1\)"):
        tf.ones(2).geometric_(1.5)
    with pytest.raises(RuntimeError, match="std > 0"):
        tf.ones(2).log_normal_(1, 0)
    with pytest.raises(RuntimeError, match="sigma > 0"):
        tf.ones(2).cauchy_(0, -1)
    with pytest.raises(RuntimeError, match="floating point"):
        tf.tensor([1, 2]).exponential_()
    with pytest.raises(NotImplementedError, match="floating point"):
        tf.tensor([1, 2]).log_normal_()
    with pytest.raises(RuntimeError, match="floating point"):
        tf.tensor([1, 2]).cauchy_()
    leaf = tf.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.exponential_()


def test_initial_seed_is_the_default_generators_seed():
    state = tf.get_rng_state()
    try:
        tf.manual_seed(1234)
        assert tf.initial_seed() == 1234
        tf.randn(3)
        assert tf.initial_seed() == 1234
    finally:
        tf.set_rng_state(state)
