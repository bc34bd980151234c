"""tinyflow.utils.checkpoint: the same gradients as without it (inputs and parameters), dropout
replayed from the same random state, tuple outputs, and torch.utils.checkpoint's values."""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
from tinyflow.utils.checkpoint import checkpoint, checkpoint_sequential


def _block(p: float = 0.0) -> nn.Module:
    tf.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(p), nn.Linear(8, 3)).double()


def _grads(model: nn.Module, x: tf.Tensor) -> dict[str, np.ndarray]:
    return {"x": x.grad.numpy().copy(), **{n: p.grad.numpy().copy() for n, p in model.named_parameters()}}


@pytest.mark.parametrize("p", [0.0, 0.5])
def test_checkpointed_block_gives_the_same_values_and_gradients(p):
    xs = np.random.default_rng(0).standard_normal((5, 4))
    results = []
    for use in (False, True):
        model = _block(p)
        x = tf.tensor(xs, requires_grad=True)
        tf.manual_seed(7)  # the dropout masks
        h = x * 2.0
        y = checkpoint(model, h, use_reentrant=False) if use else model(h)
        (y ** 2).sum().backward()
        results.append((y.detach().numpy(), _grads(model, x)))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    for name in results[0][1]:
        np.testing.assert_allclose(results[1][1][name], results[0][1][name], rtol=1e-12, atol=1e-14, err_msg=name)


def test_tuple_outputs_non_tensor_arguments_and_inputs_without_grad():
    lin = nn.Linear(3, 3).double()

    def two(a, scale, b):
        return lin(a) * scale, (a + b).sum(1)

    a, b = tf.randn(2, 3, dtype=tf.float64, requires_grad=True), tf.randn(2, 3, dtype=tf.float64)
    u, v = checkpoint(two, a, 3.0, b)
    (u.sum() + v.sum()).backward()
    want = lin.weight.detach().numpy().sum(0) * 3.0 + 1.0
    np.testing.assert_allclose(a.grad.numpy(), np.tile(want, (2, 1)), rtol=1e-12)
    assert b.grad is None and lin.weight.grad is not None
    # no input requires grad: the block runs as usual, so the parameters still get gradients
    lin.zero_grad()
    checkpoint(lin, tf.randn(2, 3, dtype=tf.float64)).sum().backward()
    assert lin.weight.grad is not None


def test_checkpoint_sequential_matches_the_plain_model():
    xs = np.random.default_rng(1).standard_normal((3, 4))
    out = []
    for use in (False, True):
        model = _block()
        x = tf.tensor(xs, requires_grad=True)
        y = checkpoint_sequential(model, 2, x) if use else model(x)
        y.sum().backward()
        out.append(_grads(model, x))
    for name in out[0]:
        np.testing.assert_allclose(out[1][name], out[0][name], rtol=1e-12, err_msg=name)


def test_matches_torch_utils_checkpoint():
    torch = pytest.importorskip("torch")
    import torch.utils.checkpoint as tcp

    xs = np.random.default_rng(2).standard_normal((4, 4))
    model = _block()
    tmodel = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).double()
    tmodel.load_state_dict({k.replace("3.", "2."): torch.tensor(v.numpy()) for k, v in model.state_dict().items()})
    x, tx = tf.tensor(xs, requires_grad=True), torch.tensor(xs, requires_grad=True)
    checkpoint(model, x).pow(2).sum().backward()
    tcp.checkpoint(tmodel, tx, use_reentrant=False).pow(2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(model[0].weight.grad.numpy(), tmodel[0].weight.grad.numpy(), rtol=1e-10)


def test_the_block_records_no_graph_in_forward():
    model = _block()
    x = tf.randn(2, 4, dtype=tf.float64, requires_grad=True)
    y = checkpoint(model, x)
    assert y._ctx.fn.__name__ == "CheckpointFunction"  # one node for the whole block
    assert [t is x for t in y._ctx.inputs] == [True]  # its only input is x: no Linear/Tanh nodes kept
