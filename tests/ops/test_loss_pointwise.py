"""The pointwise losses (l1, smooth_l1, huber, binary cross-entropy on probabilities and on
logits, kl_div) and the composite ones: float64 gradchecks for input and target, and values and
gradients against torch for every reduction; the nn loss layers' signatures and buffers."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional
REDUCTIONS = ["mean", "sum", "none"]
seeds = st.integers(0, 2**31 - 1)
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)


def f64(a, grad=True):
    return tf.tensor(a, dtype=tf.float64, requires_grad=grad)


def _regression_pair(shape, seed, beta=1.0):
    """Input and target whose differences stay away from the kinks at 0 and +-beta."""
    rng = np.random.default_rng(seed)
    t = rng.standard_normal(shape)
    d = rng.uniform(0.05, 2.5, shape) * rng.choice([-1, 1], shape)
    d[np.abs(np.abs(d) - beta) < 0.02] += 0.05
    return t + d, t


@given(shape=shapes, seed=seeds, reduction=st.sampled_from(REDUCTIONS), beta=st.sampled_from([0.0, 0.5, 1.0]))
def test_regression_losses_gradcheck(shape, seed, reduction, beta):
    x, t = _regression_pair(shape, seed, beta or 1.0)
    gradcheck(lambda a, b: F.l1_loss(a, b, reduction=reduction), [f64(x), f64(t)])
    gradcheck(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=beta), [f64(x), f64(t)])
    gradcheck(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=beta or 1.0), [f64(x), f64(t)])


@given(shape=shapes, seed=seeds, reduction=st.sampled_from(REDUCTIONS), weighted=st.booleans())
def test_binary_cross_entropy_gradcheck(shape, seed, reduction, weighted):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.95, shape)
    t = rng.uniform(0, 1, shape)
    w = tf.tensor(rng.uniform(0.5, 2, shape[-1:]), dtype=tf.float64) if weighted else None
    gradcheck(lambda a, b: F.binary_cross_entropy(a, b, weight=w, reduction=reduction), [f64(p), f64(t)])


@given(shape=shapes, seed=seeds, reduction=st.sampled_from(REDUCTIONS), pos=st.booleans(), weighted=st.booleans())
def test_binary_cross_entropy_with_logits_gradcheck(shape, seed, reduction, pos, weighted):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3
    t = rng.uniform(0, 1, shape)
    pw = tf.tensor(rng.uniform(0.5, 3, shape[-1:]), dtype=tf.float64) if pos else None
    w = tf.tensor(rng.uniform(0.5, 2, shape), dtype=tf.float64) if weighted else None
    gradcheck(lambda a, b: F.binary_cross_entropy_with_logits(a, b, weight=w, reduction=reduction, pos_weight=pw),
              [f64(x), f64(t)])


@given(shape=shapes, seed=seeds, reduction=st.sampled_from(["sum", "none", "batchmean"]), log_target=st.booleans())
def test_kl_div_gradcheck(shape, seed, reduction, log_target):
    rng = np.random.default_rng(seed)
    inp = np.log(rng.uniform(0.05, 1, shape))
    t = np.log(rng.uniform(0.05, 1, shape)) if log_target else rng.uniform(0.05, 1, shape)
    gradcheck(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target), [f64(inp), f64(t)])


def _against_torch(ours, theirs, arrays, grads=None, rtol=1e-5, atol=1e-6):
    """Values and gradients (of the arrays flagged in ``grads``) against torch, float32."""
    grads = grads or [True] * len(arrays)
    a = [tf.tensor(x, requires_grad=g) for x, g in zip(arrays, grads)]
    b = [torch.tensor(x, requires_grad=g) for x, g in zip(arrays, grads)]
    out, ref = ours(*a), theirs(*b)
    assert out.shape == tuple(ref.shape) and out.dtype == tf.float32
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    g = np.random.default_rng(9).standard_normal(ref.shape).astype(np.float32)
    out.backward(tf.tensor(g))
    ref.backward(torch.tensor(g))
    for x, y, flag in zip(a, b, grads):
        if flag:
            np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_pointwise_losses_match_torch(reduction):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 4, 5)) * 2).astype(np.float32)
    t = (rng.standard_normal((3, 4, 5)) * 2).astype(np.float32)
    t[0, 0, :2] = x[0, 0, :2]  # ties: l1's gradient is 0 there
    p = 1 / (1 + np.exp(-x))
    q = rng.uniform(0, 1, x.shape).astype(np.float32)
    w = rng.uniform(0.5, 2, (4, 5)).astype(np.float32)
    pw = rng.uniform(0.5, 3, 5).astype(np.float32)
    lp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    kw = dict(reduction=reduction)
    cases = [
        (lambda a, b: F.l1_loss(a, b, **kw), lambda a, b: TF.l1_loss(a, b, **kw), [x, t]),
        (lambda a, b: F.mse_loss(a, b, **kw), lambda a, b: TF.mse_loss(a, b, **kw), [x, t]),
        (lambda a, b: F.smooth_l1_loss(a, b, beta=0.5, **kw), lambda a, b: TF.smooth_l1_loss(a, b, beta=0.5, **kw), [x, t]),
        (lambda a, b: F.smooth_l1_loss(a, b, beta=0.0, **kw), lambda a, b: TF.smooth_l1_loss(a, b, beta=0.0, **kw), [x, t]),
        (lambda a, b: F.huber_loss(a, b, delta=0.7, **kw), lambda a, b: TF.huber_loss(a, b, delta=0.7, **kw), [x, t]),
        (lambda a, b: F.binary_cross_entropy(a, b, weight=tf.tensor(w), **kw),
         lambda a, b: TF.binary_cross_entropy(a, b, weight=torch.tensor(w), **kw), [p, q]),
        (lambda a, b: F.binary_cross_entropy_with_logits(a, b, tf.tensor(w), pos_weight=tf.tensor(pw), **kw),
         lambda a, b: TF.binary_cross_entropy_with_logits(a, b, torch.tensor(w), pos_weight=torch.tensor(pw), **kw),
         [x, q]),
        (lambda a, b: F.binary_cross_entropy_with_logits(a, b, **kw),
         lambda a, b: TF.binary_cross_entropy_with_logits(a, b, **kw), [x, q]),
        (lambda a, b: F.kl_div(a, b, **kw), lambda a, b: TF.kl_div(a, b, **kw), [lp, q]),
        (lambda a, b: F.kl_div(a, b, log_target=True, **kw), lambda a, b: TF.kl_div(a, b, log_target=True, **kw),
         [lp, lp[::-1].copy()]),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kl_div's 'mean' warning, from both
        for ours, theirs, arrays in cases:
            _against_torch(ours, theirs, arrays)
        _against_torch(lambda a, b: F.kl_div(a, b, reduction="batchmean"),
                       lambda a, b: TF.kl_div(a, b, reduction="batchmean"), [lp, q])


def test_binary_cross_entropy_clamps_logs_like_torch():
    p = np.array([0.0, 1.0, 0.5, 1e-30], dtype=np.float32)
    t = np.array([1.0, 0.0, 1.0, 1.0], dtype=np.float32)
    _against_torch(lambda a, b: F.binary_cross_entropy(a, b, reduction="none"),
                   lambda a, b: TF.binary_cross_entropy(a, b, reduction="none"), [p, t], grads=[True, False])


def test_binary_cross_entropy_with_logits_is_stable_for_huge_logits():
    x = tf.tensor([-1e4, -50.0, 50.0, 1e4], requires_grad=True)
    loss = F.binary_cross_entropy_with_logits(x, tf.tensor([1.0, 0.0, 1.0, 0.0]), reduction="none")
    loss.sum().backward()
    np.testing.assert_allclose(loss.numpy(), [1e4, 0, 0, 1e4], atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), [-1, 0, 0, 1], atol=1e-6)


def test_loss_argument_errors_follow_torch():
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(tf.tensor([1.5]), tf.tensor([1.0]))
    with pytest.raises(ValueError, match="target size"):
        F.binary_cross_entropy(tf.tensor([0.5, 0.5]), tf.tensor([1.0]))
    with pytest.raises(ValueError, match="target size"):
        F.binary_cross_entropy_with_logits(tf.zeros(2, 3), tf.zeros(3))
    with pytest.raises(ValueError, match="reduction"):
        F.l1_loss(tf.zeros(2), tf.zeros(2), reduction="avg")
    with pytest.warns(UserWarning, match="different to the input size"):
        out = F.l1_loss(tf.zeros(2, 3), tf.ones(3))
    assert float(out) == 1.0
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(tf.zeros(2, 3), tf.ones(2, 3))


def test_legacy_size_average_and_reduce_map_to_reduction():
    x, t = tf.tensor([1.0, 3.0]), tf.tensor([0.0, 0.0])
    assert float(F.l1_loss(x, t, size_average=False)) == 4.0
    assert F.l1_loss(x, t, reduce=False).shape == (2,)
    assert float(F.mse_loss(x, t, True, True)) == 5.0
    assert nn.L1Loss(size_average=False).reduction == "sum"


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_composite_losses_match_torch(reduction):
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal((6, 5)).astype(np.float32) for _ in range(3))
    y = np.sign(rng.standard_normal(6)).astype(np.float32)
    yy = np.sign(rng.standard_normal((6, 5))).astype(np.float32)
    kw = dict(reduction=reduction)
    cases = [
        (lambda u: F.soft_margin_loss(u, tf.tensor(yy), **kw), lambda u: TF.soft_margin_loss(u, torch.tensor(yy), **kw), [a]),
        (lambda u: F.multilabel_soft_margin_loss(u, tf.tensor((yy > 0).astype(np.float32)), **kw),
         lambda u: TF.multilabel_soft_margin_loss(u, torch.tensor((yy > 0).astype(np.float32)), **kw), [a]),
        (lambda u, v: F.margin_ranking_loss(u, v, tf.tensor(y), margin=0.2, **kw),
         lambda u, v: TF.margin_ranking_loss(u, v, torch.tensor(y), margin=0.2, **kw), [a[:, 0].copy(), b[:, 0].copy()]),
        (lambda u: F.hinge_embedding_loss(u, tf.tensor(yy), margin=0.5, **kw),
         lambda u: TF.hinge_embedding_loss(u, torch.tensor(yy), margin=0.5, **kw), [a]),
        (lambda u, v: F.cosine_embedding_loss(u, v, tf.tensor(y), margin=0.1, **kw),
         lambda u, v: TF.cosine_embedding_loss(u, v, torch.tensor(y), margin=0.1, **kw), [a, b]),
        (lambda u, v, w: F.triplet_margin_loss(u, v, w, swap=True, **kw),
         lambda u, v, w: TF.triplet_margin_loss(u, v, w, swap=True, **kw), [a, b, c]),
        (lambda u: F.poisson_nll_loss(u, tf.tensor(np.abs(b) * 3), full=True, **kw),
         lambda u: TF.poisson_nll_loss(u, torch.tensor(np.abs(b) * 3), full=True, **kw), [a]),
        (lambda u, v: F.gaussian_nll_loss(u, tf.tensor(b), v, full=True, **kw),
         lambda u, v: TF.gaussian_nll_loss(u, torch.tensor(b), v, full=True, **kw), [a, np.abs(c) + 0.1]),
    ]
    for ours, theirs, arrays in cases:
        _against_torch(ours, theirs, arrays, rtol=1e-4, atol=1e-5)


def test_unbatched_cross_entropy_and_nll_match_torch():
    x = np.random.default_rng(2).standard_normal(5).astype(np.float32)
    _against_torch(lambda u: F.cross_entropy(u, tf.tensor(3)), lambda u: TF.cross_entropy(u, torch.tensor(3)), [x])
    _against_torch(lambda u: F.nll_loss(u, tf.tensor(1), reduction="none"),
                   lambda u: TF.nll_loss(u, torch.tensor(1), reduction="none"), [x])


LOSS_LAYERS = [
    ("L1Loss", {}, 2), ("MSELoss", dict(reduction="sum"), 2), ("SmoothL1Loss", dict(beta=0.5), 2),
    ("HuberLoss", dict(delta=0.5), 2), ("BCELoss", {}, 2), ("BCEWithLogitsLoss", {}, 2),
    ("KLDivLoss", dict(reduction="batchmean"), 2), ("SoftMarginLoss", {}, 2), ("MarginRankingLoss", dict(margin=0.1), 3),
    ("HingeEmbeddingLoss", {}, 2), ("CosineEmbeddingLoss", {}, 3), ("TripletMarginLoss", {}, 3),
    ("PoissonNLLLoss", {}, 2), ("GaussianNLLLoss", {}, 3), ("MultiLabelSoftMarginLoss", {}, 2),
]


@pytest.mark.parametrize("name, kwargs, nargs", LOSS_LAYERS)
def test_loss_layers_match_torch(name, kwargs, nargs):
    rng = np.random.default_rng(4)
    args = [rng.uniform(0.1, 0.9, (4, 3)).astype(np.float32) for _ in range(nargs)]
    if name in ("MarginRankingLoss", "CosineEmbeddingLoss"):
        args[-1] = np.array([1, -1, 1, -1], np.float32) if name == "CosineEmbeddingLoss" else np.sign(args[-1] - 0.5)
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    out = ours(*[tf.tensor(a) for a in args])
    ref = theirs(*[torch.tensor(a) for a in args])
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


def test_loss_weights_are_buffers_as_in_torch():
    w = np.array([1.0, 2.0, 3.0], np.float32)
    for name in ("CrossEntropyLoss", "NLLLoss", "BCELoss"):
        ours, theirs = getattr(nn, name)(weight=tf.tensor(w)), getattr(torch.nn, name)(weight=torch.tensor(w))
        assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    ours = nn.BCEWithLogitsLoss(pos_weight=tf.tensor(w))
    assert list(ours.state_dict()) == list(torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(w)).state_dict())
    assert list(nn.CrossEntropyLoss().state_dict()) == []


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_losses_match_torch(reduction):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    y = np.array([0, 3, 4, 1])
    w = rng.uniform(0.5, 2, 5).astype(np.float32)
    for p in (1, 2):
        _against_torch(lambda u, p=p: F.multi_margin_loss(u, tf.tensor(y), p=p, margin=0.7, weight=tf.tensor(w),
                                                     reduction=reduction),
                       lambda u, p=p: TF.multi_margin_loss(u, torch.tensor(y), p=p, margin=0.7, weight=torch.tensor(w),
                                                      reduction=reduction), [x])
    labels = np.array([[3, 0, -1, 1, 1], [1, 2, 4, 0, 3], [-1, 0, 0, 0, 0], [4, -1, 2, 2, 2]])
    _against_torch(lambda u: F.multilabel_margin_loss(u, tf.tensor(labels), reduction=reduction),
                   lambda u: TF.multilabel_margin_loss(u, torch.tensor(labels), reduction=reduction), [x])
    _against_torch(lambda u: F.multi_margin_loss(u, tf.tensor(2), reduction=reduction),
                   lambda u: TF.multi_margin_loss(u, torch.tensor(2), reduction=reduction), [x[0]])
