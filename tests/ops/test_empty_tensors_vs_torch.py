"""Tensors with a zero-size dimension through the ops, against PyTorch.

An empty batch (the last, short batch of a filtered data set), an empty selection (``x[x > t]``
with no hit) or an empty dimension reaches reductions, losses, normalisations, joins and matmuls.
Each case runs in both libraries on float64 tensors of shapes (0,), (0, 3), (3, 0) and (2, 0, 4):
both return the same shape, dtype and values (``mean`` of nothing is NaN, ``logsumexp`` -inf), or
both raise; tinyflow never lets NumPy's RuntimeWarning ("Mean of empty slice", "zero-size array")
through, and warns where PyTorch warns (``var`` with no degrees of freedom).
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn.functional as TFF

torch = pytest.importorskip("torch")

SHAPES = [(0,), (0, 3), (3, 0), (2, 0, 4)]


def _F(L: Any) -> Any:
    return torch.nn.functional if L is torch else TFF


CASES: dict[str, Callable[[Any, Any], Any]] = {
    "sum": lambda L, x: x.sum(), "sum0": lambda L, x: x.sum(0), "mean": lambda L, x: x.mean(),
    "mean-1": lambda L, x: x.mean(-1), "prod": lambda L, x: x.prod(), "max": lambda L, x: x.max(),
    "max0": lambda L, x: x.max(0).values, "amax-1": lambda L, x: x.amax(-1), "argmax": lambda L, x: x.argmax(),
    "min": lambda L, x: x.min(), "std": lambda L, x: x.std(), "var0": lambda L, x: x.var(0),
    "norm": lambda L, x: x.norm(), "logsumexp-1": lambda L, x: x.logsumexp(-1),
    "softmax-1": lambda L, x: _F(L).softmax(x, -1), "log_softmax0": lambda L, x: _F(L).log_softmax(x, 0),
    "cumsum0": lambda L, x: x.cumsum(0), "sort-1": lambda L, x: x.sort(-1).values, "exp": lambda L, x: x.exp(),
    "add": lambda L, x: x + L.ones(x.shape[-1:], dtype=x.dtype),
    "matmul": lambda L, x: x.reshape(-1, x.shape[-1]) @ L.ones(x.shape[-1], 2, dtype=x.dtype),
    "gram": lambda L, x: x.reshape(x.shape[0], -1).T @ x.reshape(x.shape[0], -1),
    "cat": lambda L, x: L.cat([x, x], 0), "stack": lambda L, x: L.stack([x, x]), "flatten": lambda L, x: x.flatten(),
    "transpose": lambda L, x: x.transpose(0, -1), "slice": lambda L, x: x[..., :1], "mask": lambda L, x: x[x > 0],
    "where": lambda L, x: L.where(x > 0, x, -x), "mse": lambda L, x: _F(L).mse_loss(x, x),
    "l1_sum": lambda L, x: _F(L).l1_loss(x, x, reduction="sum"),
    "linear": lambda L, x: _F(L).linear(x.reshape(-1, x.shape[-1]), L.ones(2, x.shape[-1], dtype=x.dtype)),
    "layer_norm": lambda L, x: _F(L).layer_norm(x, x.shape[-1:]), "all": lambda L, x: (x > 0).all(),
    "any": lambda L, x: (x > 0).any(), "median": lambda L, x: x.median(), "unique": lambda L, x: L.unique(x),
    "nonzero": lambda L, x: x.nonzero(), "repeat": lambda L, x: x.repeat(*([2] * x.ndim)),
    "pad": lambda L, x: _F(L).pad(x, (1, 1)),
    "cross_entropy": lambda L, x: _F(L).cross_entropy(x.reshape(-1, 1)[:0].expand(0, 3), L.zeros(0, dtype=L.int64)),
    "cross_entropy_sum": lambda L, x: _F(L).cross_entropy(L.ones(0, 3, dtype=x.dtype), L.zeros(0, dtype=L.int64),
                                                          reduction="sum"),
    "conv2d_batch0": lambda L, x: _F(L).conv2d(L.ones(0, 2, 5, 5, dtype=x.dtype), L.ones(3, 2, 3, 3, dtype=x.dtype)),
    "max_pool_batch0": lambda L, x: _F(L).max_pool2d(L.ones(0, 2, 5, 5, dtype=x.dtype), 2),
    "bmm": lambda L, x: L.bmm(L.ones(0, 2, 3, dtype=x.dtype), L.ones(0, 3, 4, dtype=x.dtype)),
    "einsum": lambda L, x: L.einsum("ij,jk->ik", L.ones(2, 0, dtype=x.dtype), L.ones(0, 3, dtype=x.dtype)),
}


def _run(L: Any, fn: Callable[[Any, Any], Any], shape: tuple[int, ...]) -> tuple[Any, list[str]]:
    """(result or the exception, the warnings' categories and first words)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result: Any = fn(L, L.ones(shape, dtype=L.float64))
        except Exception as exc:  # compared below
            result = exc
    return result, [f"{w.category.__name__}: {str(w.message)[:20]}" for w in caught
                    if "deprecated" not in str(w.message)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
def test_an_empty_tensor_through_the_op_as_torch(case: str, shape: tuple[int, ...]) -> None:
    want, torch_warnings = _run(torch, CASES[case], shape)
    got, our_warnings = _run(tf, CASES[case], shape)
    assert not any(w.startswith("RuntimeWarning") for w in our_warnings), our_warnings  # NumPy's, leaked
    assert our_warnings == torch_warnings
    if isinstance(want, Exception):
        assert isinstance(got, Exception), f"torch raised {type(want).__name__}: {want}; tinyflow returned {got}"
        return
    assert not isinstance(got, Exception), f"tinyflow raised {type(got).__name__}: {got}"
    assert tuple(got.shape) == tuple(want.shape)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(np.asarray(got.numpy(), dtype=float), want.double().numpy())
