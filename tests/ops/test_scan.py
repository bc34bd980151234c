"""cumsum, cumprod, cummax, cummin, logcumsumexp and prod: float64 gradchecks (with zeros for the
products), PyTorch parity of values, dtypes (integers accumulate in int64), index choices and
gradients."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")

few = settings(max_examples=12, deadline=None)
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)
seeds = st.integers(0, 2**31 - 1)


def f64(a):
    return tf.tensor(a, dtype=tf.float64, requires_grad=True)


def same(ours, ref):
    assert tuple(ours.shape) == tuple(ref.shape)
    assert str(ours.dtype) == str(ref.dtype).replace("torch.", "")
    if ref.dtype.is_floating_point:
        np.testing.assert_allclose(ours.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def parity(fn, a, grad=True):
    grad = grad and a.dtype.kind == "f"
    x, xt = tf.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)
    out, ref = fn(x), fn(xt)
    if isinstance(ref, tuple):
        assert type(out).__name__ == type(ref).__name__
        same(out.values, ref.values)
        same(out.indices, ref.indices)
        out, ref = out.values, ref.values
    else:
        same(out, ref)
    if grad:
        w = np.random.default_rng(0).standard_normal(tuple(ref.shape)).astype(np.float32)
        (out * tf.tensor(w)).sum().backward()
        (ref * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)


SCANS = {
    "cumsum": lambda t, d: t.cumsum(d),
    "cumprod": lambda t, d: t.cumprod(d),
    "cummax": lambda t, d: t.cummax(d).values,
    "cummin": lambda t, d: tf.cummin(t, d).values,
    "logcumsumexp": lambda t, d: t.logcumsumexp(d),
    "prod": lambda t, d: t.prod(d),
    "prod_keepdim": lambda t, d: t.prod(d, keepdim=True),
    "prod_all": lambda t, d: t.prod(),
}


@pytest.mark.parametrize("name", sorted(SCANS))
@few
@given(shape=shapes, seed=seeds, data=st.data())
def test_scan_gradcheck(name, shape, seed, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(seed)
    a = rng.permutation(int(np.prod(shape))).reshape(shape) * 0.3 - 1 + rng.uniform(0, 0.1, shape)  # distinct
    if name.startswith(("cumprod", "prod")) and data.draw(st.booleans()):
        a.reshape(-1)[rng.integers(0, a.size, 2)] = 0.0  # exact zeros: one or two per product
    gradcheck(lambda t: SCANS[name](t, dim), [f64(a)])


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "logcumsumexp", "prod", "prod_keepdim", "prod_all"])
def test_scans_match_torch(name):
    rng = np.random.default_rng(2)
    a = rng.uniform(-1.5, 1.5, (3, 4)).astype(np.float32)
    for dim in (0, 1, -1):
        parity(lambda t, d=dim: SCANS[name](t, d), a)
    a[1, 2] = 0.0
    parity(lambda t: SCANS[name](t, 1), a)
    a[1, 0] = 0.0
    parity(lambda t: SCANS[name](t, 1), a)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cumulative_extremes_match_torch_with_ties_and_nan(name):
    a = np.array([[1, 3, 2, 3, 1, 0], [2, 2, 2, 1, 1, 3]], dtype=np.float32)
    parity(lambda t: getattr(t, name)(1), a)
    parity(lambda t: getattr(t, name)(0), a)
    parity(lambda t: getattr(t, name)(1), a.astype(np.int64), grad=False)
    parity(lambda t: getattr(torch if isinstance(t, torch.Tensor) else tf, name)(t, dim=1), a.astype(np.int32),
           grad=False)
    nan = np.array([1.0, np.nan, 0.5, 4.0, np.nan, 2.0], dtype=np.float32)
    parity(lambda t: getattr(t, name)(0), nan, grad=False)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_, np.uint8])
def test_integer_scans_accumulate_in_int64(dtype):
    a = (np.arange(6).reshape(2, 3) % 3).astype(dtype)
    for fn in [lambda t: t.cumsum(1), lambda t: t.cumprod(0), lambda t: t.prod(), lambda t: t.prod(1),
               lambda t: t.cumsum(0, dtype=tf.float64 if not isinstance(t, torch.Tensor) else torch.float64)]:
        parity(fn, a, grad=False)


def test_logcumsumexp_is_stable_over_large_ranges():
    a = np.array([-1000.0, 0.0, 1000.0, -1000.0, 1e-3], dtype=np.float64)
    parity(lambda t: t.logcumsumexp(0), a)


def test_zero_dim_scans_and_dim_checks():
    s = tf.tensor(2.5, requires_grad=True)
    assert s.cumsum(0).item() == 2.5 and s.cumprod(-1).item() == 2.5 and s.prod().item() == 2.5
    values, indices = s.cummax(0)
    assert values.item() == 2.5 and indices.item() == 0
    with pytest.raises(IndexError, match="cumsum: dim 2 is out of range"):
        tf.ones(2, 3).cumsum(2)
    assert tf.ones(2, 3).cumsum(axis=1)[0, 2].item() == 3.0
