"""autocast's weight-cast cache (``cache_enabled``, PyTorch's default True): within a region a
parameter is cast to the half dtype once however often the forward uses it; its gradient reaches
the float32 parameter exactly as without the cache; the cache goes when the outermost region exits."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

import tinyflow as tf
import tinyflow.nn as nn
from tinyflow.amp import autocast_mode as amp  # its private cache and cast, patched below
from tinyflow.ops import copy as copy_ops

try:
    import ml_dtypes  # noqa: F401
    HALVES = ["fp16", "bf16"]
except ImportError:  # a base install: float16 only
    HALVES = ["fp16"]


@pytest.fixture
def casts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """The float32 -> half casts made (Cast ops and cache fills), as the shapes cast."""
    seen: list[tuple[int, ...]] = []
    real_forward, real_fill = copy_ops.Cast.forward, amp._cast_array

    def forward(ctx, a, dtype):
        if a.dtype == np.float32:
            seen.append(a.shape)
        return real_forward(ctx, a, dtype)

    def fill(arr, dtype):
        seen.append(arr.shape)
        return real_fill(arr, dtype)

    monkeypatch.setattr(copy_ops.Cast, "forward", staticmethod(forward))
    monkeypatch.setattr(amp, "_cast_array", fill)
    return seen


def _tied(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """A weight used twice in one forward (as a tied or recurrent weight is)."""
    h = (x @ w + b).tanh()
    return (h @ w).float().sum()


def _grads(cache_enabled: bool, dtype: str, seed: int) -> tuple[float, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    w = tf.tensor(rng.standard_normal((5, 5)).astype(np.float32), requires_grad=True)
    b = tf.tensor(rng.standard_normal(5).astype(np.float32), requires_grad=True)
    x = tf.tensor(rng.standard_normal((3, 5)).astype(np.float32), requires_grad=True)
    with tf.autocast(dtype, cache_enabled=cache_enabled):
        loss = _tied(x, w, b)
    loss.backward()
    return loss.item(), [t.grad.numpy() for t in (w, b, x)]


@pytest.mark.parametrize("dtype", HALVES)
def test_a_weight_used_twice_is_cast_once(casts, dtype) -> None:
    w = tf.tensor(np.ones((5, 5), np.float32), requires_grad=True)
    x = tf.tensor(np.ones((3, 5), np.float32))  # an input: no grad, not cached (PyTorch's rule)
    with tf.autocast(dtype):
        assert amp.is_autocast_cache_enabled()
        (x @ w) @ w
        x @ w
    assert casts == [(3, 5), (5, 5), (3, 5)]  # x twice, w once
    casts.clear()
    with tf.autocast(dtype, cache_enabled=False):
        assert not amp.is_autocast_cache_enabled()
        (x @ w) @ w
    assert casts == [(3, 5), (5, 5), (5, 5)]


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000), dtype=st.sampled_from(HALVES))
def test_gradients_are_exactly_those_without_the_cache(seed, dtype) -> None:
    loss, grads = _grads(True, dtype, seed)
    loss_ref, grads_ref = _grads(False, dtype, seed)
    assert loss == loss_ref
    for g, g_ref in zip(grads, grads_ref):
        assert g.dtype == np.float32
        np.testing.assert_array_equal(g, g_ref)


def test_cache_lives_until_the_outermost_region_exits(casts) -> None:
    w = tf.tensor(np.ones((4, 4), np.float32), requires_grad=True)
    with tf.autocast("fp16"):
        w @ w
        with tf.autocast("fp16"):
            w @ w  # cached by the outer region
        with tf.autocast("fp16", enabled=False):
            w @ w  # a float32 island: no cast at all
        w @ w
        assert casts == [(4, 4)]
        with tf.autocast("fp16", cache_enabled=False):
            w @ w  # this region casts each operand afresh, and leaves the cache as it was
        assert casts == [(4, 4)] * 3 and amp.is_autocast_cache_enabled()
    assert not amp._local.cache  # dropped at the outermost exit: the memory goes
    with tf.autocast("fp16"):
        w @ w
    assert casts == [(4, 4)] * 4


def test_an_in_place_edit_casts_again(casts) -> None:
    w = tf.tensor(np.ones((2, 2), np.float32), requires_grad=True)
    with tf.autocast("fp16"):
        first = (w @ w).numpy()
        with tf.no_grad():
            w.mul_(2.0)
        second = (w @ w).numpy()
    np.testing.assert_array_equal(second, 4 * first)
    assert len(casts) == 2


def test_two_backwards_through_one_cached_cast() -> None:
    """Each use has its own node over the cached array: the first backward frees only its own."""
    w = tf.tensor(np.eye(3, dtype=np.float32), requires_grad=True)
    x = tf.tensor(np.ones((2, 3), np.float32))
    with tf.autocast("fp16"):
        with tf.no_grad():
            x @ w  # a cast under no_grad first: it must not cut later uses off the graph
        a = (x @ w).float().sum()
        b = (2 * (x @ w)).float().sum()
    a.backward()
    b.backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((3, 3), 6.0, np.float32))


def test_module_parameters_are_cached_and_train() -> None:
    tf.manual_seed(0)
    lin = nn.Linear(4, 4)
    x = tf.tensor(np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32))
    with tf.autocast("fp16"):
        out = lin(lin(x)).float().sum()
        assert len(amp._local.cache) == 2  # weight and bias
    out.backward()
    assert lin.weight.grad.dtype == np.float32 and np.isfinite(lin.weight.grad.numpy()).all()


class _TorchCasts(TorchDispatchMode):
    """The shapes of the float32 -> bfloat16 copies torch makes (``aten._to_copy``)."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if (func is torch.ops.aten._to_copy.default and args[0].dtype == torch.float32
                and kwargs.get("dtype") == torch.bfloat16):
            self.shapes.append(tuple(args[0].shape))
        return func(*args, **kwargs)


@pytest.mark.parametrize("cache_enabled", [True, False])
def test_casts_are_those_torch_autocast_makes(casts, cache_enabled) -> None:
    """``_tied`` under torch.autocast("cpu", bfloat16): torch casts the same float32 tensors to
    bfloat16 as tinyflow (x, w, and h: bias + GEMM promotes to float32 in both), w once with the
    cache and twice without; and the losses agree."""
    pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(1)
    w_np, x_np, b_np = (rng.standard_normal(s).astype(np.float32) for s in [(5, 5), (3, 5), (5,)])
    w, b = (torch.tensor(a, requires_grad=True) for a in (w_np, b_np))
    torch_casts = _TorchCasts()
    with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=cache_enabled), torch_casts:
        torch_loss = (torch.tanh(torch.tensor(x_np) @ w + b) @ w).float().sum()
    ours = [tf.tensor(a, requires_grad=True) for a in (w_np, b_np)]
    with tf.autocast("cpu", dtype=tf.bfloat16, cache_enabled=cache_enabled):
        loss = _tied(tf.tensor(x_np), *ours)
    assert sorted(casts) == sorted(torch_casts.shapes)
    assert casts.count((5, 5)) == (1 if cache_enabled else 2)
    assert abs(loss.item() - torch_loss.item()) < 5e-2 * max(1.0, abs(torch_loss.item()))
