"""clip_grad_norm_ and clip_grad_value_ against torch.nn.utils."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.nn as nn
from tinyflow.optim import clip_grad_norm_, clip_grad_value_

torch = pytest.importorskip("torch")

small_shapes = st.lists(st.integers(0, 5), min_size=1, max_size=3).map(tuple)


def make(grads: list[np.ndarray]):
    ours, theirs = [], []
    for g in grads:
        p = nn.Parameter(tf.tensor(np.zeros(g.shape, np.float32)))
        p.grad = tf.tensor(g.copy())
        q = torch.nn.Parameter(torch.zeros(g.shape))
        q.grad = torch.tensor(g.copy())
        ours.append(p)
        theirs.append(q)
    return ours, theirs


@settings(max_examples=25, deadline=None)
@given(
    shapes=st.lists(small_shapes, min_size=1, max_size=4),
    norm_type=st.sampled_from([1.0, 2.0, 3.0, math.inf]),
    max_norm=st.sampled_from([1e-3, 0.5, 2.0, 1e6]),
    seed=st.integers(0, 2**16),
)
def test_clip_grad_norm_matches_torch(shapes, norm_type, max_norm, seed) -> None:
    # torch refuses the inf-norm of an empty gradient (no identity for max); ours gives 0 there
    assume(not (norm_type == math.inf and any(0 in s for s in shapes)))
    rng = np.random.default_rng(seed)
    grads = [rng.standard_normal(s).astype(np.float32) * 3 for s in shapes]
    ours, theirs = make(grads)
    total = clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    assert isinstance(total, tf.Tensor) and total.shape == ()
    np.testing.assert_allclose(total.item(), expected.item(), rtol=1e-5, atol=1e-6)
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_clip_grad_norm_large_parameter_and_skips_missing_grads() -> None:
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal((300, 400)).astype(np.float32), rng.standard_normal(7).astype(np.float32)]
    ours, theirs = make(grads)
    extra = nn.Parameter(tf.tensor(np.ones(3, np.float32)))  # no grad: ignored
    total = clip_grad_norm_([*ours, extra], max_norm=10.0)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm=10.0)
    np.testing.assert_allclose(total.item(), expected.item(), rtol=1e-5)
    new_norm = math.sqrt(sum(float((p.grad.numpy().astype(np.float64) ** 2).sum()) for p in ours))
    assert new_norm == pytest.approx(10.0, rel=1e-4)
    assert extra.grad is None


def test_clip_grad_norm_single_tensor_and_no_grads() -> None:
    p = nn.Parameter(tf.tensor(np.zeros(2, np.float32)))
    assert clip_grad_norm_(p, 1.0).item() == 0.0  # no grad at all
    p.grad = tf.tensor(np.array([3.0, 4.0], np.float32))
    assert clip_grad_norm_(p, 1.0).item() == pytest.approx(5.0)
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)


def test_clip_grad_norm_nonfinite() -> None:
    p = nn.Parameter(tf.tensor(np.zeros(2, np.float32)))
    p.grad = tf.tensor(np.array([np.inf, 1.0], np.float32))
    with pytest.raises(RuntimeError, match="error_if_nonfinite"):
        clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    assert math.isinf(clip_grad_norm_([p], 1.0).item())
    with pytest.raises(ValueError, match="norm_type"):
        clip_grad_norm_([p], 1.0, norm_type=-1)


@settings(max_examples=25, deadline=None)
@given(shapes=st.lists(small_shapes, min_size=1, max_size=3), clip=st.floats(0.0, 2.0), seed=st.integers(0, 2**16))
def test_clip_grad_value_matches_torch(shapes, clip, seed) -> None:
    rng = np.random.default_rng(seed)
    ours, theirs = make([rng.standard_normal(s).astype(np.float32) for s in shapes])
    clip_grad_value_(ours, clip)
    torch.nn.utils.clip_grad_value_(theirs, clip)
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
