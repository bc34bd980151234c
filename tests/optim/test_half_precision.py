"""SGD, Adam and AdamW on bfloat16 / float16 parameters: float32 buffers and master weights.

The master weight is rebuilt exactly each step, so a half-precision run fed the same gradients
as a float32 run holds, after every step, exactly the float32 run's parameters rounded to the
half dtype, and exactly its buffers.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.optim import SGD, Adam, AdamW

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
HALVES = [BF16, np.dtype(np.float16)]

OPTIMIZERS = [
    (SGD, dict(lr=0.1)),
    (SGD, dict(lr=0.1, momentum=0.9)),
    (SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-2)),
    (SGD, dict(lr=0.05, momentum=0.5, dampening=0.3, maximize=True)),
    (Adam, dict(lr=1e-2)),
    (Adam, dict(lr=1e-2, weight_decay=1e-2, amsgrad=True)),
    (AdamW, dict(lr=1e-2)),
]
IDS = [f"{cls.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for cls, kw in OPTIMIZERS]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16)


def _model(seed: int) -> nn.Module:
    tf.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def _loss(model: nn.Module, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    return F.cross_entropy(model(x).float(), y)


@pytest.mark.parametrize("half", HALVES, ids=str)
@pytest.mark.parametrize("cls, kwargs", OPTIMIZERS, ids=IDS)
def test_half_model_steps_like_an_fp32_reference(cls, kwargs, half) -> None:
    """A half model and an fp32 twin (same start, same gradients): params equal the twin's
    rounded to the half dtype and buffers equal the twin's, after every step."""
    model = _model(0).to(half)
    ref = _model(0)
    ref.load_state_dict({k: v.numpy().astype(np.float32) for k, v in model.state_dict().items()})
    opt, ref_opt = cls(model.parameters(), **kwargs), cls(ref.parameters(), **kwargs)
    rng = np.random.default_rng(0)
    for step in range(6):
        x = tf.tensor(rng.standard_normal((8, 6)), dtype=half)
        y = tf.tensor(rng.integers(0, 3, 8))
        opt.zero_grad()
        _loss(model, x, y).backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            assert p.grad.dtype == half
            q.grad = tf.tensor(p.grad.numpy().astype(np.float32))
        opt.step()
        ref_opt.step()
        for i, (p, q) in enumerate(zip(model.parameters(), ref.parameters())):
            assert p.dtype == half
            np.testing.assert_array_equal(_bits(p.numpy()), _bits(q.numpy().astype(half)),
                                          err_msg=f"param {i} after step {step}")
            for key, value in ref_opt.state[q].items():
                if isinstance(value, np.ndarray):
                    assert opt.state[p][key].dtype == np.float32, key
                    np.testing.assert_array_equal(opt.state[p][key], value, err_msg=key)
            assert opt.state[p]["master_residual"].dtype == np.float32


@pytest.mark.parametrize("half", HALVES, ids=str)
@pytest.mark.parametrize("cls, kwargs", [(SGD, dict(lr=1e-4)), (SGD, dict(lr=1e-5, momentum=0.9)),
                                         (Adam, dict(lr=1e-4)), (AdamW, dict(lr=1e-4, weight_decay=0))])
def test_updates_below_half_resolution_accumulate(cls, kwargs, half) -> None:
    """lr * grad is far below the resolution at 1.0 (2**-8 for bf16, 2**-11 for fp16): a step in
    the half dtype would change nothing; with the master weight 200 steps move the param."""
    p = nn.Parameter(tf.ones(4, dtype=half))
    ref = nn.Parameter(tf.ones(4))
    opt, ref_opt = cls([p], **kwargs), cls([ref], **kwargs)
    for _ in range(200):
        p.grad = tf.ones(4, dtype=half)
        ref.grad = tf.ones(4)
        opt.step()
        ref_opt.step()
    assert float(ref.numpy()[0]) < 1 - 2**-7  # the fp32 run moved by more than a bf16 ulp
    np.testing.assert_array_equal(_bits(p.numpy()), _bits(ref.numpy().astype(half)))


@given(lr=st.floats(1e-7, 1e-3), steps=st.integers(1, 50), start=st.floats(-4, 4),
       momentum=st.sampled_from([0.0, 0.9]))
def test_bf16_sgd_equals_fp32_sgd_rounded(lr, steps, start, momentum) -> None:
    start = float(np.float32(start).astype(BF16))
    p = nn.Parameter(tf.tensor([start], dtype=BF16))
    ref = nn.Parameter(tf.tensor([start]))
    opt, ref_opt = SGD([p], lr=lr, momentum=momentum), SGD([ref], lr=lr, momentum=momentum)
    for i in range(steps):
        g = np.float32(np.sin(i + 1.0)).astype(BF16)
        p.grad = tf.tensor([g])
        ref.grad = tf.tensor([np.float32(g)])
        opt.step()
        ref_opt.step()
    np.testing.assert_array_equal(_bits(p.numpy()), _bits(ref.numpy().astype(BF16)))


def test_fp32_params_keep_their_state_and_no_residual() -> None:
    p = nn.Parameter(tf.ones(3))
    opt = SGD([p], lr=0.1)
    p.grad = tf.ones(3)
    opt.step()
    assert p not in opt.state  # plain SGD keeps no state for fp32 params, as before
    adam = Adam([p])
    p.grad = tf.ones(3)
    adam.step()
    assert set(adam.state[p]) == {"step", "exp_avg", "exp_avg_sq"}


def test_edits_of_the_param_outside_the_optimizer_are_kept() -> None:
    """The master weight is the param plus a sub-ulp residual, never a stale copy."""
    p = nn.Parameter(tf.ones(2, dtype=BF16))
    opt = SGD([p], lr=1e-3, momentum=0.9)
    for _ in range(3):
        p.grad = tf.ones(2, dtype=BF16)
        opt.step()
    with tf.no_grad():
        p.data[...] = np.array([5.0, -5.0], dtype=BF16)  # e.g. load_state_dict or a broadcast
    p.grad = tf.zeros(2, dtype=BF16)
    opt.step()
    np.testing.assert_allclose(p.numpy().astype(np.float32), [5.0, -5.0], rtol=2**-7)


def test_resuming_from_a_state_dict_continues_exactly() -> None:
    def run(steps: int, resume_at: int | None) -> np.ndarray:
        p = nn.Parameter(tf.ones(5, dtype=BF16))
        opt = Adam([p], lr=3e-4)
        for i in range(steps):
            if i == resume_at:
                saved_p, saved_opt = p.numpy().copy(), opt.state_dict()
                p = nn.Parameter(tf.tensor(saved_p))
                opt = Adam([p], lr=3e-4)
                opt.load_state_dict(saved_opt)
            p.grad = tf.tensor(np.linspace(-1, 1, 5), dtype=BF16)
            opt.step()
        return p.numpy()

    np.testing.assert_array_equal(_bits(run(30, resume_at=None)), _bits(run(30, resume_at=17)))


def test_loaded_half_buffers_become_fp32() -> None:
    """A state dict whose buffers are bf16 (e.g. from PyTorch) loads as fp32 state."""
    p = nn.Parameter(tf.ones(3, dtype=BF16))
    opt = SGD([p], lr=0.1, momentum=0.9)
    buf = np.full(3, 0.5, dtype=BF16)
    opt.load_state_dict({"state": {0: {"momentum_buffer": buf}},
                         "param_groups": [dict(opt.state_dict()["param_groups"][0])]})
    assert opt.state[p]["momentum_buffer"].dtype == np.float32
    p.grad = tf.ones(3, dtype=BF16)
    opt.step()
    np.testing.assert_array_equal(p.numpy().astype(np.float32), np.float32(1 - 0.1 * (0.9 * 0.5 + 1)).astype(BF16))


def test_grad_scaler_with_fp16_params() -> None:
    p = nn.Parameter(tf.ones(3, dtype=np.float16))
    opt = SGD([p], lr=1e-4)
    scaler = tf.amp.GradScaler(init_scale=2.0**10)
    for _ in range(20):
        opt.zero_grad()
        scaler.scale((p * p).sum()).backward()  # grad 2 in fp16, scaled by 1024
        scaler.step(opt)
        scaler.update()
    np.testing.assert_allclose(p.numpy().astype(np.float32), (1 - 2e-4) ** 20, rtol=2**-11)
