"""softmax / log_softmax / logsumexp and the losses: gradchecks, stability, PyTorch parity."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.nn.functional as F
from tinyflow.testing import gradcheck

seeds = st.integers(0, 2**31 - 1)


def make(shape, seed, scale=2.0):
    return tf.tensor(np.random.default_rng(seed).standard_normal(shape) * scale, dtype=tf.float64, requires_grad=True)


@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), seed=seeds, data=st.data())
def test_softmax_family_gradcheck(shape, seed, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = make(tuple(shape), seed)
    gradcheck(lambda t: F.softmax(t, dim), [x])
    gradcheck(lambda t: F.log_softmax(t, dim), [x])
    gradcheck(lambda t: t.logsumexp(dim), [x])


@st.composite
def ce_case(draw):
    n, c = draw(st.integers(1, 5)), draw(st.integers(2, 5))
    spatial = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    target = rng.integers(0, c, size=(n,) + spatial)
    ignore = draw(st.booleans())
    if ignore:
        target.reshape(-1)[0] = -100  # at least one valid entry is kept below
        if target.size == 1:
            target.reshape(-1)[0] = 0
    return {
        "shape": (n, c) + spatial, "target": target, "seed": seed,
        "reduction": draw(st.sampled_from(["mean", "sum", "none"])),
        "smoothing": draw(st.sampled_from([0.0, 0.1, 0.3])),
        "weighted": draw(st.booleans()),
    }


@given(ce_case())
def test_cross_entropy_gradcheck(case):
    x = make(case["shape"], case["seed"])
    c = case["shape"][1]
    w = tf.tensor(np.linspace(0.5, 1.5, c), dtype=tf.float64) if case["weighted"] else None
    gradcheck(lambda t: F.cross_entropy(t, case["target"], weight=w, reduction=case["reduction"],
                                        label_smoothing=case["smoothing"]), [x])


@given(ce_case())
def test_cross_entropy_matches_torch(case):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(case["seed"])
    logits = rng.standard_normal(case["shape"]).astype(np.float32) * 3
    c = case["shape"][1]
    w = np.linspace(0.5, 1.5, c).astype(np.float32) if case["weighted"] else None
    kw = dict(reduction=case["reduction"], label_smoothing=case["smoothing"])
    x, xt = tf.tensor(logits, requires_grad=True), torch.tensor(logits, requires_grad=True)
    out = F.cross_entropy(x, case["target"], weight=None if w is None else tf.tensor(w), **kw)
    ref = torch.nn.functional.cross_entropy(xt, torch.tensor(case["target"]),
                                            weight=None if w is None else torch.tensor(w), **kw)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    g = np.random.default_rng(1).standard_normal(ref.shape).astype(np.float32)
    out.backward(g)
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_soft_targets_and_nll_and_mse_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((4, 3)).astype(np.float32)
    probs = rng.dirichlet(np.ones(3), size=4).astype(np.float32)
    target = np.array([0, 2, 1, 2])
    pairs = [
        (lambda t: F.cross_entropy(t, tf.tensor(probs), label_smoothing=0.2),
         lambda t: torch.nn.functional.cross_entropy(t, torch.tensor(probs), label_smoothing=0.2)),
        (lambda t: F.nll_loss(F.log_softmax(t, 1), target),
         lambda t: torch.nn.functional.nll_loss(torch.log_softmax(t, 1), torch.tensor(target))),
        (lambda t: F.mse_loss(t, tf.tensor(probs)), lambda t: torch.nn.functional.mse_loss(t, torch.tensor(probs))),
        (lambda t: F.softmax(t, 0), lambda t: torch.softmax(t, 0)),
    ]
    for ours, theirs in pairs:
        x, xt = tf.tensor(logits, requires_grad=True), torch.tensor(logits, requires_grad=True)
        y, yt = ours(x), theirs(xt)
        np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
        (y * y).sum().backward()
        (yt * yt).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-6)


@given(seed=seeds)
def test_nll_and_mse_gradcheck(seed):
    x = make((4, 3), seed)
    target = np.random.default_rng(seed).integers(0, 3, 4)
    gradcheck(lambda t: F.nll_loss(t, target), [x])
    y = make((4, 3), seed + 1)
    gradcheck(lambda a, b: F.mse_loss(a, b), [x, y])


def test_log_softmax_is_stable_for_huge_logits():
    x = tf.tensor([[1e4, 0.0, -1e4]], requires_grad=True)
    lp = F.log_softmax(x, 1)
    assert np.isfinite(lp.numpy()).all()
    np.testing.assert_allclose(lp.numpy()[0, 0], 0.0, atol=1e-6)
    loss = F.cross_entropy(x, [2])
    assert np.isfinite(loss.item())
    loss.backward()
    assert np.isfinite(x.grad.numpy()).all()


def test_cross_entropy_bad_targets_are_clear():
    with pytest.raises(ValueError, match=r"cross_entropy: input of shape \(2, 3\) needs a target of shape \(2,\)"):
        F.cross_entropy(tf.zeros(2, 3), [0, 1, 2])
    with pytest.raises(IndexError, match=r"target values must be in \[0, 3\)"):
        F.cross_entropy(tf.zeros(2, 3), [0, 5])


@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_over_a_large_vocabulary_matches_torch(weighted):
    """Rows wider than the kernel's exp block (the word-LM decoder's shape, scaled down): the
    blocked row sums and the in-place backward give PyTorch's loss and gradient in float32."""
    torch = pytest.importorskip("torch")
    from tinyflow.kernels import loss as kernels

    rng = np.random.default_rng(3)
    n, c = 37, kernels._BLOCK_BYTES // 4 // 3 + 11  # 3 rows per block, a partial last block
    z = (rng.standard_normal((n, c)) * 5).astype(np.float32)
    target = rng.integers(0, c, n)
    target[4] = -100
    weight = rng.random(c).astype(np.float32) + 0.5 if weighted else None
    x = tf.tensor(z, requires_grad=True)
    loss = F.cross_entropy(x, target, weight=None if weight is None else tf.tensor(weight))
    loss.backward()
    xt = torch.tensor(z, requires_grad=True)
    lt = torch.nn.functional.cross_entropy(xt, torch.tensor(target),
                                           weight=None if weight is None else torch.tensor(weight))
    lt.backward()
    np.testing.assert_allclose(loss.item(), lt.item(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-9)
    lp = F.log_softmax(tf.tensor(z), 1).numpy()
    np.testing.assert_allclose(lp, torch.log_softmax(torch.tensor(z), 1).numpy(), rtol=1e-5, atol=1e-5)
    plain = z - z.max(1, keepdims=True)
    np.testing.assert_array_equal(lp, plain - np.log(np.exp(plain).sum(1, keepdims=True)))
