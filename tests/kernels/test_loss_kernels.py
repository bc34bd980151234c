"""The softmax cross-entropy kernels split their rows over tinyflow's CPU threads: the result is
the plain formulas' bit for bit, whatever the thread count (every row is computed alike)."""
from __future__ import annotations

import numpy as np
import pytest

from tinyflow.kernels import _cpu
from tinyflow.kernels.loss import log_softmax_forward, softmax_cross_entropy_backward


@pytest.fixture(params=[1, 2, 3])
def threads(request, monkeypatch):
    monkeypatch.setattr(_cpu, "_set_threads", request.param)
    return request.param


def _plain_log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


@pytest.mark.parametrize("n, c", [(700, 3000), (5, 40000), (33, 7)])
def test_log_softmax_rows_split_over_threads_equal_the_formula_bitwise(threads, n, c):
    x = np.random.default_rng(n).standard_normal((n, c)).astype(np.float32) * 4
    np.testing.assert_array_equal(log_softmax_forward(x), _plain_log_softmax(x))


@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_backward_split_over_threads_equals_the_formula_bitwise(threads, weighted):
    rng = np.random.default_rng(1)
    n, c = 600, 2500
    lp = _plain_log_softmax(rng.standard_normal((n, c)).astype(np.float32))
    target = rng.integers(0, c, n)
    target[::7] = -100  # ignored rows
    grad_loss = rng.random(n).astype(np.float32)
    weight = rng.random(c).astype(np.float32) if weighted else None
    want = np.exp(lp)
    safe = np.where(target != -100, target, 0)
    want[np.arange(n), safe] -= 1
    if weighted:
        want *= weight[safe][:, None]
    want *= np.where(target != -100, grad_loss, 0).astype(np.float32)[:, None]
    got = softmax_cross_entropy_backward(lp, target, grad_loss, weight=weight)
    np.testing.assert_array_equal(got, want)
