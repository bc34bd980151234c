"""tinyflow.autograd.grad against torch.autograd.grad: leaf and intermediate inputs, grad_outputs,
unused inputs, .grad left alone, hooks, retain_graph, and the clear errors (float64, hypothesis)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import tinyflow as tf

torch = pytest.importorskip("torch")

vals = st.floats(-2, 2, allow_nan=False, width=64)


def _program(lib, x, w):
    """A small graph with a shared intermediate: returns (outputs, intermediate)."""
    h = (x * w).tanh()
    y = (h * h).sum() + (h.exp() * w).sum()
    z = h.sum(0) * 3.0
    return y, z, h


@settings(max_examples=30, deadline=None)
@given(x=arrays(np.float64, (3, 2), elements=vals), w=arrays(np.float64, (3, 2), elements=vals),
       gz=arrays(np.float64, (2,), elements=vals))
def test_grad_matches_torch_for_leaves_and_intermediates(x, w, gz):
    tx, tw = tf.tensor(x, requires_grad=True), tf.tensor(w, requires_grad=True)
    px, pw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty, tz, th = _program(tf, tx, tw)
    py, pz, ph = _program(torch, px, pw)
    ours = tf.autograd.grad([ty, tz], [tx, th, tw], grad_outputs=[None, tf.tensor(gz)])
    theirs = torch.autograd.grad([py, pz], [px, ph, pw], grad_outputs=[None, torch.tensor(gz)])
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
    assert tx.grad is None and tw.grad is None  # nothing accumulated


def test_grad_leaves_existing_grads_alone_and_runs_tensor_hooks():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    x.grad = tf.tensor([10.0, 10.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    (gx,) = tf.autograd.grad((x * x).sum(), x)
    np.testing.assert_allclose(gx.numpy(), [2.0, 4.0])
    np.testing.assert_allclose(x.grad.numpy(), [10.0, 10.0])
    assert len(seen) == 1


def test_unused_inputs_need_allow_unused_and_can_be_materialized():
    x, u = tf.ones(2, requires_grad=True), tf.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="input 1 was not used in the graph of the outputs; set allow_unused=True"):
        tf.autograd.grad(x.sum(), [x, u])
    assert tf.autograd.grad(x.sum(), [x, u], allow_unused=True)[1] is None
    zeros = tf.autograd.grad(x.sum(), [x, u], allow_unused=True, materialize_grads=True)[1]
    np.testing.assert_array_equal(zeros.numpy(), np.zeros(3))


def test_retain_graph_and_errors():
    x = tf.ones(2, requires_grad=True)
    y = (x * x).sum()
    tf.autograd.grad(y, x, retain_graph=True)
    tf.autograd.grad(y, x)  # the graph was kept for this second call
    with pytest.raises(RuntimeError):
        tf.autograd.grad(y, x)  # and freed by it
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        tf.autograd.grad(x * 2, x)
    with pytest.raises(RuntimeError, match="input 0 does not require grad"):
        tf.autograd.grad((x * 2).sum(), tf.ones(2))
    with pytest.raises(NotImplementedError, match="create_graph=True"):
        tf.autograd.grad((x * 2).sum(), x, create_graph=True)


def test_the_returned_gradients_own_their_memory():
    a, b = tf.ones(3, requires_grad=True), tf.ones(3, requires_grad=True)
    ga, gb = tf.autograd.grad((a + b).sum(), [a, b])  # Add hands one array to both inputs
    ga.add_(1.0)
    np.testing.assert_array_equal(gb.numpy(), np.ones(3))
