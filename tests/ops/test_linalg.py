"""matmul (batched, broadcasting, 1-D) and linear: gradchecks, PyTorch parity, shape errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.nn.functional as F
from tinyflow.testing import gradcheck


@st.composite
def matmul_shapes(draw):
    n, k, m = draw(st.integers(1, 4)), draw(st.integers(0, 4)), draw(st.integers(1, 4))
    batch_a = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    # b's batch dims broadcast against a's: each is equal, 1, or missing
    batch_b = tuple(draw(st.sampled_from([d, 1])) for d in batch_a)[draw(st.integers(0, len(batch_a))):]
    a_shape = (k,) if draw(st.booleans()) and not batch_a else batch_a + (n, k)
    b_shape = (k,) if draw(st.booleans()) and not batch_b else batch_b + (k, m)
    return a_shape, b_shape, draw(st.integers(0, 2**31 - 1))


def make(shape, seed):
    return tf.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=tf.float64, requires_grad=True)


@given(matmul_shapes())
def test_matmul_gradcheck(case):
    sa, sb, seed = case
    gradcheck(lambda a, b: a @ b, [make(sa, seed), make(sb, seed + 1)])


@given(lead=st.lists(st.integers(1, 3), max_size=2), i=st.integers(1, 5), o=st.integers(1, 5),
       bias=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_linear_gradcheck(lead, i, o, bias, seed):
    x, w = make(tuple(lead) + (i,), seed), make((o, i), seed + 1)
    b = make((o,), seed + 2) if bias else None
    gradcheck(lambda x, w, b: F.linear(x, w, b), [x, w, b])


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)),
                                   ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul_matches_torch(sa, sb):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    x, y = tf.tensor(a, requires_grad=True), tf.tensor(b, requires_grad=True)
    xt, yt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out, ref = x @ y, xt @ yt
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    (out * out).sum().backward()
    (ref * ref).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y.grad.numpy(), yt.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_linear_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in [(2, 3, 6), (4, 6), (4,)])
    ours = [tf.tensor(v, requires_grad=True) for v in (x, w, b)]
    theirs = [torch.tensor(v, requires_grad=True) for v in (x, w, b)]
    out, ref = F.linear(*ours), torch.nn.functional.linear(*theirs)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    out.sum().backward()
    ref.sum().backward()
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_matmul_mismatch_names_op_and_shapes():
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(4, 5\)"):
        tf.ones(2, 3) @ tf.ones(4, 5)
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 2, 3\) and \(3, 3, 1\).*batch"):
        tf.ones(2, 2, 3) @ tf.ones(3, 3, 1)


def test_linear_mismatch_names_shapes():
    with pytest.raises(ValueError, match=r"linear: input of shape \(2, 3\) does not match weight of shape \(4, 5\)"):
        F.linear(tf.ones(2, 3), tf.ones(4, 5))
