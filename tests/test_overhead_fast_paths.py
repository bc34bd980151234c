"""The fast paths of the engine and of the fused backward passes compute what the plain
expressions do: gradients summed in place, nodes built without Context.__init__, activation
backwards in one temporary."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tinyflow as tf
import tinyflow.nn.functional as F


def _torch_grads(fn, *arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    fn(*ts).backward()
    return [t.grad.numpy() for t in ts]


def _our_grads(fn, *arrays):
    ts = [tf.tensor(a, requires_grad=True) for a in arrays]
    fn(*ts).backward()
    return [t.grad.numpy() for t in ts]


def test_reused_tensors_sum_their_gradients_in_place_without_touching_shared_ones():
    """Sums made by the engine are added into in place; a gradient an op hands to two inputs
    (Add returns g, g) must never be one of them, or the other input's gradient would change."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4))

    def fn(x, y):
        z = x + y  # backward hands the same array to x and y
        w = z * 1.5 + z * 2.0 + z * 3.0 + x * x  # z and x used several times
        return (w * w).sum() + (x + x + x).sum()

    for got, want in zip(_our_grads(fn, a, b), _torch_grads(fn, a, b)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_leaf_used_many_times_in_a_chain_gets_the_full_sum():
    a = np.array([0.5, -1.0])
    b = np.array([2.0, 3.0])

    def fn(x, y):
        s = x
        for _ in range(50):
            s = s + y
        return (s * s).sum()

    for got, want in zip(_our_grads(fn, a, b), _torch_grads(fn, a, b)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_root_gradient_array_is_not_aliased_by_a_leaf_grad():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    g = tf.tensor([1.0, 1.0])
    y = x + 0.0
    y.backward(g)
    y2 = x + 0.0
    y2.backward(g)  # adds into x.grad: must not write into g
    assert g.tolist() == [1.0, 1.0]
    assert x.grad.tolist() == [2.0, 2.0]


def test_hooks_and_version_counters_still_work_on_the_fast_paths():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    seen = []
    y.register_hook(lambda g: seen.append(g.tolist()))
    x.register_post_accumulate_grad_hook(lambda t: seen.append("leaf"))
    (y * y).sum().backward()
    assert seen == [[4.0, 8.0], "leaf"]
    z = x.sigmoid()
    with tf.no_grad():
        z.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an in-place"):
        z.sum().backward()


def test_requires_grad_propagates_only_to_floating_outputs():
    x = tf.tensor([1.0, -2.0], requires_grad=True)
    assert (x * 2).requires_grad and (x * 2).grad_fn is not None
    assert not (x > 0).requires_grad
    with tf.no_grad():
        assert not (x * 2).requires_grad
    assert not (tf.tensor([1.0]) * 2).requires_grad


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["sigmoid", "tanh", "softmax", "log_softmax"])
def test_fused_activation_backwards_match_pytorch(name, dtype):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 7)).astype(dtype)
    w = rng.standard_normal((5, 7)).astype(dtype)
    ours = {"sigmoid": lambda x: x.sigmoid(), "tanh": lambda x: x.tanh(),
            "softmax": lambda x: F.softmax(x, dim=1), "log_softmax": lambda x: F.log_softmax(x, dim=1)}[name]
    theirs = {"sigmoid": torch.sigmoid, "tanh": torch.tanh,
              "softmax": lambda x: torch.softmax(x, dim=1), "log_softmax": lambda x: torch.log_softmax(x, dim=1)}[name]
    (got,) = _our_grads(lambda x: (ours(x) * tf.tensor(w)).sum(), a)
    (want,) = _torch_grads(lambda x: (theirs(x) * torch.tensor(w)).sum(), a)
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert got.dtype == dtype


def test_fused_backward_with_a_gradient_of_another_dtype_keeps_the_plain_expression():
    """A float64 gradient reaching a float32 sigmoid takes the unfused path (no downcast)."""
    from tinyflow.ops.activation import SigmoidFunction, TanhFunction

    out = np.array([0.2, 0.7], np.float32)
    g = np.array([1.0 / 3.0, 2.0], np.float64)

    class Ctx:
        xp = np
        saved_tensors = (out,)

    np.testing.assert_array_equal(SigmoidFunction.backward(Ctx, g), g * (1 - out) * out)
    np.testing.assert_array_equal(TanhFunction.backward(Ctx, g), g * (1 - out * out))


@pytest.mark.parametrize("name", ["sigmoid", "tanh"])
def test_fused_backwards_of_zero_dim_tensors(name):
    """0-d results are NumPy scalars, not writable arrays: the plain expression runs."""
    x = tf.tensor(np.float64(0.3), requires_grad=True)
    getattr(x, name)().backward()
    t = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    getattr(t, name)().backward()
    np.testing.assert_allclose(x.grad.item(), t.grad.item(), rtol=1e-14)


def test_python_floats_convert_straight_to_an_asked_dtype():
    """As torch.tensor: no detour through float32 when float64 is asked for."""
    assert tf.tensor(0.3, dtype=tf.float64).item() == 0.3
    np.testing.assert_array_equal(tf.tensor([0.1, 0.3], dtype=tf.float64).numpy(),
                                  torch.tensor([0.1, 0.3], dtype=torch.float64).numpy())
    assert tf.tensor(0.3).dtype == tf.float32
    assert tf.tensor(1 / 3, dtype=tf.float16).item() == torch.tensor(1 / 3, dtype=torch.float16).item()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (1,), (7, 5), (3, 4096)])
def test_sigmoid_kernel_is_bitwise_the_stable_two_branch_formula(dtype, shape):
    from tinyflow.ops.activation import _sigmoid

    a = (np.random.default_rng(2).standard_normal(shape) * 30).astype(dtype)
    if a.size >= 4:
        a.reshape(-1)[:4] = [0.0, -0.0, 200.0, -200.0]
    e = np.exp(-np.abs(a))
    want = np.where(a < 0, (1 / (1 + e)) * e, 1 / (1 + e)).astype(dtype)
    got = _sigmoid(np, a)
    assert isinstance(got, np.ndarray) and got.dtype == dtype and got.shape == a.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("method", ["add_", "sub_"])
@pytest.mark.parametrize("n", [5, 200_003])
def test_scaled_in_place_add_is_bitwise_the_plain_expression(method, dtype, n):
    """add_/sub_ with alpha (blocked for large arrays) equals a +/-= alpha * b exactly."""
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    want = a - 0.37 * b if method == "sub_" else a + (-0.37) * b
    p = tf.tensor(a)
    alpha = 0.37 if method == "sub_" else -0.37
    getattr(p.data, method)(tf.tensor(b), alpha=alpha)
    np.testing.assert_array_equal(p.numpy(), want)
    assert p._version == 0  # .data has its own counter, as in PyTorch
    q = tf.tensor(a[: n // 2 * 2].reshape(-1, 2)[:, 0].copy())  # a tensor in the graph sense: its counter moves
    r = tf.tensor(b[: n // 2 * 2].reshape(-1, 2)[:, 0])
    want_q = q.numpy() + 2.0 * r.numpy() if method == "add_" else q.numpy() - 2.0 * r.numpy()
    getattr(q, method)(r, alpha=2.0)
    np.testing.assert_array_equal(q.numpy(), want_q)
    assert q._version == 1
