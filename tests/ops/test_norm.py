"""local_response_norm and batch_norm: float64 gradchecks, PyTorch comparisons, errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.testing import gradcheck

SETTINGS = settings(max_examples=25, deadline=None)

lrn_params = st.tuples(st.integers(1, 6), st.floats(1e-4, 1.0), st.floats(0.1, 1.0), st.floats(0.5, 2.5))


@SETTINGS
@given(st.integers(1, 6), st.sampled_from([(3,), (2, 3)]), lrn_params, st.integers(0, 2**31 - 1))
def test_local_response_norm_gradcheck(c, spatial, prm, seed):
    size, alpha, beta, k = prm
    x = tf.tensor(np.random.default_rng(seed).standard_normal((2, c, *spatial)), dtype=tf.float64,
                  requires_grad=True)
    gradcheck(lambda x: F.local_response_norm(x, size, alpha, beta, k), [x])


@SETTINGS
@given(st.integers(1, 8), st.sampled_from([(4,), (3, 5)]), lrn_params, st.integers(0, 2**31 - 1))
def test_local_response_norm_matches_pytorch(c, spatial, prm, seed):
    torch = pytest.importorskip("torch")
    size, alpha, beta, k = prm
    x = np.random.default_rng(seed).standard_normal((2, c, *spatial)).astype(np.float32) * 3
    tx = tf.tensor(x, requires_grad=True)
    y = F.local_response_norm(tx, size, alpha, beta, k)
    g = np.random.default_rng(1).standard_normal(y.shape).astype(np.float32)
    y.backward(tf.tensor(g))
    px = torch.tensor(x, requires_grad=True)
    py = torch.nn.functional.local_response_norm(px, size, alpha, beta, k)
    py.backward(torch.tensor(g))
    assert y.dtype == tf.float32
    np.testing.assert_allclose(y.numpy(), py.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_lrn_layer_with_alexnet_2012_constants_matches_pytorch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((2, 16, 5, 5)).astype(np.float32) * 10
    ours = nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)
    ref = torch.nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)
    np.testing.assert_allclose(ours(tf.tensor(x)).numpy(), ref(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)


@SETTINGS
@given(st.sampled_from([(4, 3), (3, 2, 4), (2, 3, 2, 3)]), st.booleans(), st.booleans(),
       st.integers(0, 2**31 - 1))
def test_batch_norm_gradcheck_train_and_eval(shape, training, affine, seed):
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = tf.tensor(rng.standard_normal(shape), dtype=tf.float64, requires_grad=True)
    inputs = [x]
    if affine:
        inputs += [tf.tensor(rng.standard_normal(c), dtype=tf.float64, requires_grad=True),
                   tf.tensor(rng.standard_normal(c), dtype=tf.float64, requires_grad=True)]
    mean0, var0 = rng.standard_normal(c), rng.uniform(0.5, 2.0, c)

    def fn(x, w=None, b=None):
        # fresh running stats every call: training mode updates them in place
        rm, rv = tf.tensor(mean0.copy(), dtype=tf.float64), tf.tensor(var0.copy(), dtype=tf.float64)
        return F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.1, eps=1e-5)

    gradcheck(fn, inputs)


@SETTINGS
@given(st.sampled_from([(8, 3), (4, 3, 5), (4, 3, 3, 2)]), st.booleans(),
       st.sampled_from([0.1, 0.5, None]), st.integers(0, 2**31 - 1))
def test_batch_norm_matches_pytorch_including_running_stats(shape, training, momentum, seed):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = (rng.standard_normal(shape) * 2 + 1).astype(np.float32)
    w, b = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    rm, rv = rng.standard_normal(c).astype(np.float32), rng.uniform(0.5, 2, c).astype(np.float32)
    mom = 0.1 if momentum is None else momentum
    tx, tw, tb = (tf.tensor(a, requires_grad=True) for a in (x, w, b))
    trm, trv = tf.tensor(rm.copy()), tf.tensor(rv.copy())
    y = F.batch_norm(tx, trm, trv, tw, tb, training=training, momentum=mom, eps=1e-5)
    g = rng.standard_normal(shape).astype(np.float32)
    y.backward(tf.tensor(g))
    px, pw, pb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    prm, prv = torch.tensor(rm.copy()), torch.tensor(rv.copy())
    py = torch.nn.functional.batch_norm(px, prm, prv, pw, pb, training=training, momentum=mom, eps=1e-5)
    py.backward(torch.tensor(g))
    np.testing.assert_allclose(y.numpy(), py.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(trm.numpy(), prm.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(trv.numpy(), prv.numpy(), rtol=1e-5, atol=1e-6)  # unbiased update
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(tw.grad.numpy(), pw.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tb.grad.numpy(), pb.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("affine", [True, False])
def test_batchnorm2d_layer_tracks_like_pytorch(momentum, affine):
    torch = pytest.importorskip("torch")
    ours = nn.BatchNorm2d(3, momentum=momentum, affine=affine)
    ref = torch.nn.BatchNorm2d(3, momentum=momentum, affine=affine)
    assert list(ours.state_dict()) == list(ref.state_dict())
    rng = np.random.default_rng(0)
    for step in range(3):
        x = (rng.standard_normal((4, 3, 5, 5)) * (step + 1) + step).astype(np.float32)
        y, py = ours(tf.tensor(x)), ref(torch.tensor(x))
        np.testing.assert_allclose(y.numpy(), py.detach().numpy(), rtol=1e-4, atol=1e-5)
    for name, value in ref.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[name].numpy(), value.numpy(), rtol=1e-5, atol=1e-6)
    assert ours.num_batches_tracked.dtype == tf.int64 and int(ours.num_batches_tracked.item()) == 3
    ours.eval()
    ref.eval()
    x = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(ours(tf.tensor(x)).numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    assert int(ours.num_batches_tracked.item()) == 3  # eval does not count


def test_batchnorm2d_without_running_stats_always_uses_batch_stats():
    bn = nn.BatchNorm2d(2, track_running_stats=False).eval()
    x = tf.randn(4, 2, 3, 3) * 5 + 3
    y = bn(x).numpy()
    np.testing.assert_allclose(y.mean(axis=(0, 2, 3)), 0, atol=1e-5)
    assert "running_mean" not in bn.state_dict()


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: nn.BatchNorm2d(3)(tf.zeros(2, 4, 3, 3)), ["BatchNorm2d", "(2, 4, 3, 3)", "num_features=3"]),
        (lambda: nn.BatchNorm2d(3)(tf.zeros(2, 3, 3)), ["BatchNorm2d", "4-D", "(2, 3, 3)"]),
        (lambda: F.batch_norm(tf.zeros(1, 3), tf.zeros(3), tf.ones(3), training=True), ["batch_norm", "more than 1"]),
        (lambda: F.batch_norm(tf.zeros(2, 3), tf.zeros(4), tf.ones(3)), ["batch_norm", "running_mean", "(4,)", "(2, 3)"]),
        (lambda: F.local_response_norm(tf.zeros(2, 3), 2), ["local_response_norm", "(2, 3)"]),
        (lambda: F.local_response_norm(tf.zeros(2, 3, 4), 0), ["local_response_norm", "size"]),
    ],
)
def test_norm_bad_input_raises_value_error(call, words):
    with pytest.raises(ValueError) as err:
        call()
    for word in words:
        assert word in str(err.value)
