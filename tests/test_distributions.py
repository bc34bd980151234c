"""tinyflow.distributions against torch.distributions: log_prob, entropy and their gradients in
float64 (hypothesis-drawn parameters), sample shapes and frequencies, argument errors."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import tinyflow as tf
from tinyflow.distributions import Bernoulli, Categorical, Normal

torch = pytest.importorskip("torch")

finite = st.floats(-3, 3, allow_nan=False, width=64)


def _pair(a: np.ndarray):
    return tf.tensor(a, dtype=tf.float64, requires_grad=True), torch.tensor(a, dtype=torch.float64, requires_grad=True)


@settings(max_examples=25, deadline=None)
@given(logits=arrays(np.float64, st.tuples(st.integers(1, 3), st.integers(2, 5)), elements=finite),
       seed=st.integers(0, 1000), use_probs=st.booleans())
def test_categorical_log_prob_entropy_and_grads_match_torch(logits, seed, use_probs):
    ours, theirs = _pair(np.exp(logits) if use_probs else logits)
    m = Categorical(probs=ours) if use_probs else Categorical(logits=ours)
    t = torch.distributions.Categorical(probs=theirs) if use_probs else torch.distributions.Categorical(logits=theirs)
    value = np.random.default_rng(seed).integers(0, logits.shape[1], size=logits.shape[0])
    lp, tlp = m.log_prob(tf.tensor(value)), t.log_prob(torch.tensor(value))
    np.testing.assert_allclose(lp.numpy(), tlp.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m.entropy().numpy(), t.entropy().detach().numpy(), rtol=1e-10, atol=1e-12)
    (lp.sum() + m.entropy().sum()).backward()
    (tlp.sum() + t.entropy().sum()).backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-8, atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(loc=arrays(np.float64, 3, elements=finite), log_scale=arrays(np.float64, 3, elements=st.floats(-2, 2)),
       x=arrays(np.float64, (2, 3), elements=finite))
def test_normal_log_prob_entropy_and_grads_match_torch(loc, log_scale, x):
    (l, tl), (s, ts) = _pair(loc), _pair(np.exp(log_scale))
    m, t = Normal(l, s), torch.distributions.Normal(tl, ts)
    lp, tlp = m.log_prob(tf.tensor(x)), t.log_prob(torch.tensor(x))
    np.testing.assert_allclose(lp.numpy(), tlp.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m.entropy().numpy(), t.entropy().detach().numpy(), rtol=1e-12)
    (lp.sum() + m.entropy().sum()).backward()
    (tlp.sum() + t.entropy().sum()).backward()
    np.testing.assert_allclose(l.grad.numpy(), tl.grad.numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), rtol=1e-8, atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(logits=arrays(np.float64, 4, elements=finite), bits=arrays(np.float64, 4, elements=st.sampled_from([0.0, 1.0])))
def test_bernoulli_log_prob_entropy_and_grads_match_torch(logits, bits):
    ours, theirs = _pair(logits)
    m, t = Bernoulli(logits=ours), torch.distributions.Bernoulli(logits=theirs)
    lp, tlp = m.log_prob(tf.tensor(bits)), t.log_prob(torch.tensor(bits))
    np.testing.assert_allclose(lp.numpy(), tlp.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m.entropy().numpy(), t.entropy().detach().numpy(), rtol=1e-9, atol=1e-12)
    (lp.sum() + m.entropy().sum()).backward()
    (tlp.sum() + t.entropy().sum()).backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_samples_have_torchs_shapes_and_the_right_frequencies():
    tf.manual_seed(0)
    m = Categorical(probs=tf.tensor([[0.1, 0.0, 0.9], [1.0, 0.0, 0.0]]))
    draws = m.sample((2000,))
    assert draws.shape == (2000, 2) and draws.dtype == tf.int64 and not draws.requires_grad
    first = draws[:, 0].numpy()
    assert set(first.tolist()) <= {0, 2} and 0.86 < (first == 2).mean() < 0.94
    assert (draws[:, 1].numpy() == 0).all()
    n = Normal(tf.tensor([0.0, 10.0]), tf.tensor([1.0, 0.1]))
    x = n.sample((4000,))
    assert x.shape == (4000, 2) and abs(float(x[:, 1].mean()) - 10.0) < 0.02 and abs(float(x[:, 0].std()) - 1.0) < 0.05
    b = Bernoulli(probs=tf.full((3,), 0.25)).sample((4000,))
    assert b.shape == (4000, 3) and 0.22 < float(b.mean()) < 0.28


def test_rsample_carries_gradients_and_sample_does_not():
    loc = tf.zeros(3, requires_grad=True)
    n = Normal(loc, tf.ones(3))
    n.rsample((5,)).sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), np.full(3, 5.0))
    assert not n.sample().requires_grad


def test_reinforce_step_as_pytorch_examples_writes_it():
    """pytorch/examples reinforcement_learning/reinforce.py's update, imports changed."""
    import tinyflow.nn as nn

    tf.manual_seed(0)
    policy = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2), nn.Softmax(dim=1))
    optimizer = tf.optim.Adam(policy.parameters(), lr=1e-2)
    log_probs = []
    for _ in range(5):
        m = Categorical(policy(tf.randn(1, 4)))
        action = m.sample()
        log_probs.append(m.log_prob(action))
    returns = tf.tensor([1.0, 0.5, 0.2, -0.3, 0.9])
    loss = tf.cat([-lp * r for lp, r in zip(log_probs, returns)]).sum()
    optimizer.zero_grad()
    loss.backward()
    assert all(p.grad is not None and np.isfinite(p.grad.numpy()).all() for p in policy.parameters())
    optimizer.step()


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="either probs or logits"):
        Categorical()
    with pytest.raises(ValueError, match="class indices in \\[0, 3\\)"):
        Categorical(logits=tf.zeros(3)).log_prob(tf.tensor(3))
    with pytest.raises(ValueError, match=r"parameter scale .* GreaterThan\(lower_bound=0.0\)"):
        Normal(tf.zeros(2), tf.tensor([1.0, 0.0]))


@pytest.mark.parametrize("make", [
    lambda L: L.distributions.Normal(L.zeros(2), L.tensor([1.0, float("nan")])),
    lambda L: L.distributions.Normal(L.tensor([float("nan")]), L.ones(1)),
    lambda L: L.distributions.Bernoulli(probs=L.tensor([1.5])),
    lambda L: L.distributions.Bernoulli(logits=L.tensor([float("nan")])),
    lambda L: L.distributions.Categorical(probs=L.tensor([float("nan"), 1.0])),
    lambda L: L.distributions.Categorical(probs=L.tensor([-0.5, 1.0])),
    lambda L: L.distributions.Categorical(logits=L.tensor([float("nan"), 1.0])),
], ids=["normal_nan_scale", "normal_nan_loc", "bernoulli_probs", "bernoulli_nan_logits", "categorical_nan_probs",
        "categorical_negative_probs", "categorical_nan_logits"])
def test_invalid_parameters_are_refused_as_torch_validates_them(make):
    """PyTorch validates a distribution's parameters by default (a policy whose softmax went NaN
    fails at Categorical(probs), not at sample()): the same ValueError, naming the same constraint."""
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError) as theirs:
        make(torch)
    constraint = str(theirs.value).split("to satisfy the constraint ")[1].split(", but")[0]
    with pytest.raises(ValueError, match=re.escape(constraint)):
        make(tf)


def test_validate_args_false_skips_the_parameter_check_as_torch():
    nan = float("nan")
    assert tf.distributions.Categorical(probs=tf.tensor([nan, 1.0]), validate_args=False).batch_shape == ()
    assert tf.distributions.Normal(tf.zeros(1), tf.tensor([-1.0]), validate_args=False).batch_shape == (1,)
    assert tf.distributions.Bernoulli(probs=tf.tensor([1.5]), validate_args=False).batch_shape == (1,)
