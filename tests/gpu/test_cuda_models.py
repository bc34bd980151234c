"""A full AlexNet and LSTM-LM training step on cuda against the same step on cpu (gpu tests).

Both models start from identical weights (one state_dict), see the same batch, and take two
SGD-momentum steps; the losses, the gradients of every parameter and the updated parameters
must agree. In float64 the agreement is tight; in float32 (the real training dtype, where the
GPU's reductions run in another order) it is within float32 rounding.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn.functional as F

pytestmark = [pytest.mark.gpu, pytest.mark.cupy_strict]


def _two_steps(model: Any, device: str, batch: tuple[np.ndarray, np.ndarray],
               loss_fn: Callable[[Any, Any, Any], Any]) -> tuple[list[float], dict, dict]:
    model = model.to(device)
    model.train()
    opt = tf.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = tf.tensor(batch[0], device=device)
    y = tf.tensor(batch[1], device=device)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        loss = loss_fn(model, x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    grads = {k: p.grad.numpy() for k, p in model.named_parameters()}
    params = {k: p.numpy() for k, p in model.named_parameters()}
    return losses, grads, params


def _compare(build: Callable[[], Any], batch, loss_fn, dtype, rtol: float, atol: float) -> None:
    tf.manual_seed(0)
    cpu_model = build().to(dtype)
    gpu_model = build().to(dtype)
    gpu_model.load_state_dict(cpu_model.state_dict())
    cpu = _two_steps(cpu_model, "cpu", batch, loss_fn)
    gpu = _two_steps(gpu_model, "cuda:0", batch, loss_fn)
    np.testing.assert_allclose(gpu[0], cpu[0], rtol=rtol, atol=atol, err_msg="losses")
    for what, c, g in (("gradient", cpu[1], gpu[1]), ("parameter", cpu[2], gpu[2])):
        assert c.keys() == g.keys()
        for k in c:
            np.testing.assert_allclose(g[k], c[k], rtol=rtol, atol=atol, err_msg=f"{what} {k}")


def _image_loss(model: Any, x: Any, y: Any) -> Any:
    return F.cross_entropy(model(x), y)


def _alexnet(preset: str, **overrides: Any) -> Callable[[], Any]:
    from tinyflow.models import get_model  # lazily: models import the whole nn stack

    return lambda: get_model(preset, dropout=0.0, **overrides)


@pytest.mark.parametrize("dtype,rtol,atol", [
    pytest.param(np.float64, 1e-8, 1e-10, marks=pytest.mark.slow),  # ~14 s on the stand-in
    (np.float32, 2e-3, 2e-4),
])
def test_alexnet64_training_step_matches_cpu(dtype, rtol, atol):
    rng = np.random.default_rng(0)
    batch = (rng.standard_normal((4, 3, 64, 64)).astype(dtype), rng.integers(0, 10, 4))
    _compare(_alexnet("alexnet", num_classes=10), batch, _image_loss, dtype, rtol, atol)


@pytest.mark.slow  # ~20 s on the stand-in; grouped convs and LRN are op tests in test_cuda_ops / test_cuda_pool_ops
def test_alexnet2012_with_groups_and_lrn_matches_cpu():
    """The two-tower 224 layout: grouped convs and LRN, the paths AlexNet-64 does not take."""
    rng = np.random.default_rng(1)
    batch = (rng.standard_normal((2, 3, 224, 224)), rng.integers(0, 10, 2))
    _compare(_alexnet("alexnet-2012", num_classes=10, hidden=256), batch, _image_loss,
             np.float64, 1e-8, 1e-10)


def _lm_loss(model: Any, ids: Any, targets: Any) -> Any:
    logits, _ = model(ids)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@pytest.mark.parametrize("dtype,rtol,atol", [(np.float64, 1e-8, 1e-10), (np.float32, 2e-3, 2e-4)])
def test_lstm_lm_training_step_matches_cpu(dtype, rtol, atol):
    from tinyflow.models import get_model

    rng = np.random.default_rng(2)
    ids = rng.integers(0, 50, size=(12, 4))
    batch = (ids, np.roll(ids, -1, axis=0))
    _compare(lambda: get_model("lstm-lm", vocab_size=50, embedding_dim=16, hidden_size=32),
             batch, _lm_loss, dtype, rtol, atol)


def test_module_to_cuda_and_back_keeps_values_and_names():
    from tinyflow.models import get_model

    model = get_model("lstm-lm", vocab_size=20, embedding_dim=8, hidden_size=8)
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    model.to("cuda:0")
    assert all(p.device == tf.Device("cuda:0") for p in model.parameters())
    model.to("cpu")
    after = {k: v.numpy() for k, v in model.state_dict().items()}
    assert before.keys() == after.keys()
    for k in before:
        np.testing.assert_array_equal(after[k], before[k])


def test_resnet20_training_step_matches_cpu():
    """Batch norm and residual adds: what neither AlexNet has."""
    from tinyflow.models import get_model

    rng = np.random.default_rng(4)
    batch = (rng.standard_normal((4, 3, 32, 32)), rng.integers(0, 10, 4))
    _compare(lambda: get_model("resnet20", num_classes=10), batch, _image_loss, np.float64, 1e-8, 1e-10)
