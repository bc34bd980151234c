"""``foreach`` of SGD, Adam and AdamW: PyTorch's meaning and default (None: the multi-tensor
kernels when every parameter is on a GPU, else the per-parameter loop). On the CPU,
``foreach=True`` runs the multi-tensor NumPy reference; it must step exactly as the loop does,
in every dtype (half-precision master weights included) and with parameters that join late."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.kernels as ref_kernels
from tinyflow.optim import SGD, Adam, AdamW

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)

OPTIMIZERS = [
    (SGD, dict(lr=0.1)),
    (SGD, dict(lr=0.1, momentum=0.9, weight_decay=1e-2)),
    (SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-2, maximize=True)),
    (SGD, dict(lr=0.05, momentum=0.5, dampening=0.3)),
    (Adam, dict(lr=1e-2)),
    (Adam, dict(lr=1e-2, weight_decay=1e-2, amsgrad=True, maximize=True)),
    (AdamW, dict(lr=1e-2, amsgrad=True)),
]
IDS = [f"{cls.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for cls, kw in OPTIMIZERS]


def _params(seed: int, dtypes: list) -> list[tf.Tensor]:
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (5,), (0,), (2, 3, 2), (7,)]
    return [tf.tensor(rng.standard_normal(shapes[i % len(shapes)]).astype(dt), requires_grad=True)
            for i, dt in enumerate(dtypes)]


def _set_grads(params: list[tf.Tensor], rng: np.random.Generator, skip: int | None) -> None:
    for i, p in enumerate(params):
        p.grad = None if i == skip else tf.tensor(rng.standard_normal(p.shape).astype(p.dtype))


def _snapshot(opt, params) -> list[np.ndarray]:
    out = [p.numpy().astype(np.float64) for p in params]
    for p in params:
        for key, value in sorted(opt.state[p].items()):
            out.append(np.asarray(value, dtype=np.float64))
    return out


@settings(max_examples=15, deadline=None)
@given(case=st.sampled_from(range(len(OPTIMIZERS))), seed=st.integers(0, 50),
       dtypes=st.lists(st.sampled_from([np.dtype(np.float32), np.dtype(np.float64),
                                        np.dtype(np.float16), BF16]), min_size=1, max_size=5))
def test_foreach_steps_exactly_as_the_per_parameter_loop(case, seed, dtypes):
    """Mixed dtypes, an empty parameter, and the first parameter without a gradient on the first
    step (its momentum buffer / Adam state starts a step later than the others'): bit for bit."""
    cls, kwargs = OPTIMIZERS[case]
    loop_params, multi_params = _params(seed, dtypes), _params(seed, dtypes)
    loop = cls(loop_params, **kwargs, foreach=False)
    multi = cls(multi_params, **kwargs, foreach=True)
    rng_a, rng_b = np.random.default_rng(seed), np.random.default_rng(seed)
    for step in range(3):
        skip = 0 if step == 0 else None
        _set_grads(loop_params, rng_a, skip)
        _set_grads(multi_params, rng_b, skip)
        loop.step()
        multi.step()
        for a, b in zip(_snapshot(loop, loop_params), _snapshot(multi, multi_params)):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("cls, kwargs", OPTIMIZERS, ids=IDS)
def test_foreach_matches_torch_foreach(cls, kwargs):
    """The same steps as ``torch.optim.<cls>(..., foreach=True)`` on float32 parameters."""
    rng = np.random.default_rng(3)
    init = [rng.standard_normal(s).astype(np.float32) for s in [(4, 3), (6,), (2, 2, 2)]]
    ours = [tf.tensor(a.copy(), requires_grad=True) for a in init]
    theirs = [torch.tensor(a.copy(), requires_grad=True) for a in init]
    opt = cls(ours, **kwargs, foreach=True)
    torch_opt = getattr(torch.optim, cls.__name__)(theirs, **kwargs, foreach=True)
    for _ in range(4):
        for p, q in zip(ours, theirs):
            g = rng.standard_normal(p.shape).astype(np.float32)
            p.grad, q.grad = tf.tensor(g), torch.tensor(g)
        opt.step()
        torch_opt.step()
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("foreach, calls", [(None, 0), (False, 0), (True, 1)])
def test_foreach_default_on_the_cpu_is_the_per_parameter_loop(monkeypatch, foreach, calls):
    """foreach=None leaves the CPU on the loop (PyTorch's default off CUDA), and the group keeps
    the value as PyTorch's does; True makes one multi-tensor call for the group."""
    seen = []
    real = ref_kernels.sgd_multi_tensor_update
    monkeypatch.setattr(ref_kernels, "sgd_multi_tensor_update",
                        lambda *a, **k: (seen.append(len(a[0])), real(*a, **k)))
    params = _params(0, [np.dtype(np.float32)] * 4)
    opt = SGD(params, lr=0.1, momentum=0.9, foreach=foreach)
    _set_grads(params, np.random.default_rng(0), None)
    opt.step()
    assert opt.param_groups[0]["foreach"] is foreach
    assert opt.state_dict()["param_groups"][0]["foreach"] is foreach
    assert len(seen) == calls and (not seen or seen[0] == 4)


def test_state_dict_without_foreach_loads_and_steps():
    """A checkpoint written before ``foreach`` existed (no key in its groups) loads; the group
    then takes the default."""
    params = _params(1, [np.dtype(np.float32)] * 2)
    opt = Adam(params, lr=1e-2)
    _set_grads(params, np.random.default_rng(0), None)
    opt.step()
    saved = opt.state_dict()
    for group in saved["param_groups"]:
        del group["foreach"]
    fresh = Adam(params, lr=1e-2)
    fresh.load_state_dict(saved)
    assert fresh.param_groups[0].get("foreach") is None
    _set_grads(params, np.random.default_rng(1), None)
    fresh.step()
    assert fresh.state[params[0]]["step"] == 2
