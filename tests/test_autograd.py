"""The backward engine: long chains, reuse, retain_graph, no_grad, hooks, anomaly detection, errors."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinyflow as tf
from tinyflow.autograd import Function


def test_20000_op_chain_backpropagates_without_recursion():
    x = tf.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(20_000):
        y = y * 1.0001
    y.backward()
    np.testing.assert_allclose(x.grad.item(), 1.0001**20_000, rtol=1e-3)


def test_reused_node_accumulates_gradients():
    x = tf.tensor([2.0, 3.0], requires_grad=True)
    y = x * x          # used three times below
    z = (y + y * x + y).sum()
    z.backward()
    # z = 2x^2 + x^3 -> dz/dx = 4x + 3x^2
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.array([2, 3]) + 3 * np.array([4, 9]))


def test_gradients_accumulate_across_backward_calls():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]


def test_second_backward_needs_retain_graph():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_graph_is_freed_after_backward():
    x = tf.tensor(np.ones(1000), requires_grad=True)
    y = x * x
    ctx = y.grad_fn
    y.sum().backward()
    assert ctx.freed and ctx._saved == ()


def test_backward_of_non_scalar_needs_gradient():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        y.backward()
    y.backward(tf.tensor([1.0, 10.0]))
    assert x.grad.tolist() == [2.0, 20.0]


def test_backward_from_tensor_without_grad_is_an_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        tf.ones(2).sum().backward()


def test_integer_tensors_cannot_require_grad():
    with pytest.raises(RuntimeError, match="only floating point tensors"):
        tf.tensor([1, 2], requires_grad=True)


def test_no_grad_and_enable_grad():
    x = tf.tensor([1.0], requires_grad=True)
    with tf.no_grad():
        y = x * 2
        with tf.enable_grad():
            z = x * 2
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad

    @tf.no_grad()
    def f(t):
        return t * 3

    assert not f(x).requires_grad


def test_broadcast_gradients_are_summed_to_input_shape():
    a = tf.tensor(np.ones((3, 1)), requires_grad=True)
    b = tf.tensor(np.ones(4), requires_grad=True)
    (a * b).sum().backward()
    assert a.grad.shape == (3, 1) and a.grad.tolist() == [[4.0]] * 3
    assert b.grad.shape == (4,) and b.grad.tolist() == [3.0] * 4


def test_inplace_on_a_leaf_that_requires_grad_is_rejected_and_on_a_non_leaf_is_recorded():
    w = tf.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="add_: a leaf tensor that requires grad"):
        w += 1
    with pytest.raises(RuntimeError, match="setitem: a leaf tensor"):
        w[0] = 3.0
    with tf.no_grad():
        w -= 0.5
    assert w.tolist() == [0.5]
    h = w * 2
    h.mul_(3)  # PyTorch records it: h's history is now mul_(w * 2)
    assert h.grad_fn is not None and not h.is_leaf
    h.sum().backward()
    assert w.grad.tolist() == [6.0]


def test_detect_anomaly_names_the_op():
    x = tf.tensor([-1.0, 1.0], requires_grad=True)
    with tf.detect_anomaly():
        with pytest.raises(RuntimeError, match="Log.forward produced NaN"):
            x.log()
        y = (x * 0).sqrt()  # forward is finite (0), backward divides by 0
        with pytest.raises(RuntimeError, match="Sqrt.backward produced NaN or Inf"):
            y.sum().backward()


def test_hooks_see_complete_gradients():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.tolist()))
    done = []
    x.register_post_accumulate_grad_hook(lambda p: done.append(p.grad.tolist()))
    y = x * 2
    y.register_hook(lambda g: g * 10)  # rescales what flows back through y
    (y + x).sum().backward()
    assert seen == [[21.0, 21.0]]  # one call, with the sum over both uses
    assert done == [[21.0, 21.0]]


def test_retain_grad_on_intermediate():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.retain_grad()
    (y * y).sum().backward()
    assert y.grad.tolist() == [6.0, 12.0]


def test_custom_function_with_two_outputs():
    class SinCos(Function):
        tensor_api = False  # tinyflow's op contract: forward/backward on raw arrays

        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return np.sin(a), np.cos(a)

        @staticmethod
        def backward(ctx, gs, gc):
            (a,) = ctx.saved_tensors
            return gs * np.cos(a) - gc * np.sin(a)

    x = tf.tensor(np.linspace(0, 1, 5), dtype=tf.float64, requires_grad=True)
    s, c = SinCos.apply(x)
    s.sum().backward()  # the unused output gets a zero gradient
    np.testing.assert_allclose(x.grad.numpy(), np.cos(x.numpy()))
    tf.testing.gradcheck(lambda t: SinCos.apply(t), [x])


def test_grad_arrays_are_owned_by_each_leaf():
    a = tf.tensor([1.0], requires_grad=True)
    b = tf.tensor([1.0], requires_grad=True)
    (a + b).sum().backward()
    a.grad.data *= 5  # clipping does this in place; b's gradient must not change
    assert b.grad.tolist() == [1.0]


def test_modifying_a_saved_tensor_in_place_is_an_error_at_backward():
    w = tf.tensor([1.0, 2.0], requires_grad=True)
    x = tf.tensor([1.0, 1.0])
    y = (w * x).sum()
    x += 10  # x does not need grad, but Mul saved it for w's gradient
    with pytest.raises(RuntimeError, match="Mul.backward: one of the tensors it needs was modified"):
        y.backward()
    a = tf.tensor([0.5, 1.0], requires_grad=True)
    b = a.exp()
    b.detach().add_(100)  # detach shares the data and the in-place counter
    with pytest.raises(RuntimeError, match="Exp.backward"):
        b.sum().backward()
    r = tf.tensor([[1.0, -1.0]], requires_grad=True)
    s = r.relu()
    s.reshape(2).detach().mul_(0)  # views share the counter too
    with pytest.raises(RuntimeError, match="ReLUFunction.backward"):
        s.sum().backward()


def test_inplace_shape_errors_name_the_op():
    with pytest.raises(ValueError, match=r"setitem: a value of shape \(4,\) cannot be assigned"):
        tf.zeros(3)[:] = tf.ones(4)
    with pytest.raises(ValueError, match=r"add_: shapes \(3,\) and \(4,\)"):
        tf.zeros(3).add_(tf.ones(4))


# PyTorch's spellings of the autograd names, in a fresh interpreter: each is one module of the
# tinyflow/autograd/ package, reached by the same import forms as torch.autograd's.
_IMPORT_FORMS = """
import sys
import tinyflow.autograd.functional as AF
from tinyflow.autograd.functional import jacobian
from tinyflow.autograd.function import Function, FunctionCtx, once_differentiable
from tinyflow.autograd import Variable, grad
import tinyflow as tf
x = tf.randn(3, requires_grad=True)
assert AF is tf.autograd.functional is sys.modules["tinyflow.autograd.functional"] and jacobian is AF.jacobian
assert AF.__name__ == AF.__spec__.name == "tinyflow.autograd.functional"
assert Function is tf.autograd.Function and FunctionCtx is tf.autograd.Context and tf.autograd.function.Function is Function
assert callable(once_differentiable) and Variable is tf.autograd.Variable and grad is tf.autograd.grad
assert tf.autograd.functional.jacobian(lambda t: t * t, tf.ones(2)).shape == (2, 2)
assert tf.autograd.Variable([1.0]).tolist() == [1.0]
assert tf.autograd.grad((x * x).sum(), x)[0].shape == (3,)
assert not [m for m in sys.modules if m.startswith("tinyflow.autograd_")]  # no second spelling
"""


def test_autograd_names_have_pytorchs_import_forms():
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-c", _IMPORT_FORMS], cwd=root, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert run.returncode == 0, run.stderr
