"""SGD, Adam and AdamW against torch.optim, step by step on the same parameters and gradients."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.kernels.optim as optim_kernels
import tinyflow.nn as nn
from tinyflow.optim import SGD, Adam, AdamW

torch = pytest.importorskip("torch")

# With the block size set to 1000 below, the last shape takes the kernels' cache-blocked path
# (40 full blocks and a partial one); the others take the whole-array path.
SHAPES = [(3, 4), (5,), (1,), (200, 201)]
STEPS = 5


@pytest.fixture(autouse=True)
def small_kernel_blocks(monkeypatch):
    monkeypatch.setattr(optim_kernels, "_BLOCK", 1000)


class Pair:
    """The same parameters in tinyflow and torch, fed the same gradients each step."""

    def __init__(self, shapes: list[tuple[int, ...]], seed: int, dtype: type = np.float32) -> None:
        self.rng = np.random.default_rng(seed)
        self.dtype = dtype
        inits = [self.rng.standard_normal(s).astype(dtype) for s in shapes]
        self.ours = [nn.Parameter(tf.tensor(a.copy())) for a in inits]
        self.theirs = [torch.nn.Parameter(torch.tensor(a.copy())) for a in inits]

    def set_grads(self, skip: int | None = None) -> None:
        for i, (p, q) in enumerate(zip(self.ours, self.theirs)):
            if i == skip:
                p.grad, q.grad = None, None
                continue
            g = self.rng.standard_normal(p.shape).astype(self.dtype)
            p.grad = tf.tensor(g.copy())
            q.grad = torch.tensor(g.copy())

    def assert_close(self, rtol: float = 2e-5, atol: float = 1e-6) -> None:
        for i, (p, q) in enumerate(zip(self.ours, self.theirs)):
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=rtol, atol=atol, err_msg=f"param {i}")


def run_against_torch(ours_cls, theirs_cls, kwargs: dict, seed: int = 0, steps: int = STEPS, state_keys=(),
                      dtype: type = np.float32) -> None:
    pair = Pair(SHAPES, seed, dtype)
    ours = ours_cls(pair.ours, **kwargs)
    theirs = theirs_cls(pair.theirs, **kwargs)
    for step in range(steps):
        # parameter 1 has no gradient on step 2: it must be left alone, as torch does
        pair.set_grads(skip=1 if step == 2 else None)
        ours.step()
        theirs.step()
        pair.assert_close()
    for key in state_keys:
        for i, (p, q) in enumerate(zip(pair.ours, pair.theirs)):
            np.testing.assert_allclose(
                ours.state[p][key], theirs.state[q][key].numpy(), rtol=2e-5, atol=1e-6, err_msg=f"{key} of param {i}"
            )


SGD_CONFIGS = [
    dict(lr=0.1),
    dict(lr=0.1, weight_decay=0.01),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3),
    dict(lr=0.05, momentum=0.9, nesterov=True),
    dict(lr=0.05, momentum=0.5, weight_decay=0.1, nesterov=True),
    dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.05, maximize=True),
]


@pytest.mark.parametrize("kwargs", SGD_CONFIGS, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
def test_sgd_matches_torch(kwargs: dict) -> None:
    keys = ("momentum_buffer",) if kwargs.get("momentum", 0) else ()
    run_against_torch(SGD, torch.optim.SGD, kwargs, state_keys=keys)


ADAM_CONFIGS = [
    dict(lr=1e-2),
    dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6),
    dict(lr=1e-2, weight_decay=0.1),
    dict(lr=1e-2, amsgrad=True),
    dict(lr=1e-2, weight_decay=0.1, amsgrad=True, maximize=True),
    dict(lr=1e-2, betas=(0.3, 0.9)),  # beta1 < 0.5: the other branch of torch's lerp
]


@pytest.mark.parametrize("kwargs", ADAM_CONFIGS, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
def test_adam_matches_torch(kwargs: dict) -> None:
    keys = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if kwargs.get("amsgrad") else ())
    run_against_torch(Adam, torch.optim.Adam, kwargs, state_keys=keys)


@pytest.mark.parametrize("kwargs", [dict(), dict(lr=1e-2, weight_decay=0.3), dict(lr=1e-2, amsgrad=True)])
def test_adamw_matches_torch(kwargs: dict) -> None:
    run_against_torch(AdamW, torch.optim.AdamW, kwargs, state_keys=("exp_avg", "exp_avg_sq"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lr=st.floats(1e-3, 1.0),
    momentum=st.sampled_from([0.0, 0.5, 0.9, 0.99]),
    dampening=st.sampled_from([0.0, 0.2]),
    weight_decay=st.sampled_from([0.0, 1e-3, 0.1]),
    nesterov=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_sgd_random_hyperparameters(lr, momentum, dampening, weight_decay, nesterov, seed) -> None:
    if nesterov and (momentum == 0 or dampening != 0):
        nesterov = False
    kwargs = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
    run_against_torch(SGD, torch.optim.SGD, kwargs, seed=seed, steps=3)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lr=st.floats(1e-4, 0.1),
    beta1=st.floats(0.0, 0.99),
    beta2=st.floats(0.5, 0.9999),
    weight_decay=st.sampled_from([0.0, 0.01]),
    amsgrad=st.booleans(),
    decoupled=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_adam_random_hyperparameters(lr, beta1, beta2, weight_decay, amsgrad, decoupled, seed) -> None:
    # float64: with beta1 = 0 an element's step is lr * g / sqrt(v), nearly lr * sign(g) for any
    # tiny g, so float32 rounding of a gradient near zero (in either framework's order of
    # operations) can move that one element by ~lr * 1e-3 - ill-conditioning, not a bug.
    kwargs = dict(lr=lr, betas=(beta1, beta2), weight_decay=weight_decay, amsgrad=amsgrad)
    if decoupled:
        run_against_torch(AdamW, torch.optim.AdamW, kwargs, seed=seed, steps=3, dtype=np.float64)
    else:
        run_against_torch(Adam, torch.optim.Adam, kwargs, seed=seed, steps=3, dtype=np.float64)


def test_param_groups_with_own_hyperparameters_match_torch() -> None:
    pair = Pair([(4, 3), (3,), (2, 2)], seed=1)
    ours = SGD([{"params": pair.ours[:2]}, {"params": pair.ours[2:], "lr": 0.5, "momentum": 0.0}], lr=0.1, momentum=0.9)
    theirs = torch.optim.SGD(
        [{"params": pair.theirs[:2]}, {"params": pair.theirs[2:], "lr": 0.5, "momentum": 0.0}], lr=0.1, momentum=0.9
    )
    assert [g["lr"] for g in ours.param_groups] == [0.1, 0.5]
    assert ours.param_groups[1]["momentum"] == 0.0 and ours.param_groups[0]["momentum"] == 0.9
    for _ in range(4):
        pair.set_grads()
        ours.step()
        theirs.step()
        pair.assert_close()
    assert pair.ours[2] not in ours.state  # no momentum in group 1: no buffer, like torch


def test_zero_grad_to_none_and_to_zeros() -> None:
    p = nn.Parameter(tf.tensor(np.ones((2, 3), np.float32)))
    opt = SGD([p], lr=0.1)
    p.grad = tf.tensor(np.full((2, 3), 5.0, np.float32))
    opt.zero_grad(set_to_none=False)
    assert p.grad is not None and np.array_equal(p.grad.numpy(), np.zeros((2, 3), np.float32))
    opt.zero_grad()
    assert p.grad is None


def test_step_with_closure_returns_loss_and_records_graph() -> None:
    w = nn.Parameter(tf.tensor(np.array([1.0, -2.0], np.float32)))
    opt = SGD([w], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with tf.no_grad():
        loss = opt.step(closure)  # the closure must still be able to build a graph
    assert loss.item() == pytest.approx(5.0)
    np.testing.assert_allclose(w.numpy(), [0.5, -1.0])  # w - 0.25 * 2w


def test_training_a_real_model_decreases_loss() -> None:
    """SGD-momentum through the real autograd path fits a small least-squares problem."""
    rng = np.random.default_rng(0)
    x = tf.tensor(rng.standard_normal((64, 5)).astype(np.float32))
    true_w = rng.standard_normal((5, 1)).astype(np.float32)
    y = tf.tensor(x.numpy() @ true_w)
    model = nn.Linear(5, 1)
    opt = SGD(model.parameters(), lr=0.05, momentum=0.9)
    first = None
    for _ in range(100):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
    assert loss.item() < 1e-3 * first
    np.testing.assert_allclose(model.weight.numpy().reshape(-1), true_w.reshape(-1), atol=1e-2)


# ----------------------------------------------------------------------------- kernels
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("which", ["sgd", "adam", "adadelta"])
def test_blocked_kernel_path_is_bitwise_the_whole_array_path(which, dtype, monkeypatch) -> None:
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((37, 53)).astype(dtype) for _ in range(5)]
    arrays[3] = np.abs(arrays[3])  # exp_avg_sq >= 0
    arrays[4] = np.abs(arrays[4])  # max_exp_avg_sq >= 0
    results = []
    for block in (100, 10**9):  # blocked with a partial last block, then whole-array
        monkeypatch.setattr(optim_kernels, "_BLOCK", block)
        p, g, a, b, c = (x.copy() for x in arrays)
        for step in (1, 2):
            if which == "sgd":
                optim_kernels.sgd_momentum_update(
                    p,
                    g,
                    a,
                    lr=0.1,
                    momentum=0.9,
                    dampening=0.1,
                    weight_decay=0.01,
                    nesterov=False,
                    first_step=step == 1,
                )
            elif which == "adam":
                optim_kernels.adam_update(p, g, a, b, c, step=step, lr=0.01, weight_decay=0.01, amsgrad=True)
            else:
                optim_kernels.adadelta_update(p, g, b, c, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.01)
        results.append((p, a, b, c))
    for x, y in zip(*results):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adadelta_kernel_is_bitwise_the_plain_numpy_rule(dtype, weight_decay, monkeypatch) -> None:
    """The in-place, blocked adadelta_update computes exactly what the textbook expressions do."""
    monkeypatch.setattr(optim_kernels, "_BLOCK", 100)  # several blocks and a partial last one
    rng = np.random.default_rng(1)
    p, g = (rng.standard_normal((37, 53)).astype(dtype) for _ in range(2))
    v, u = (np.abs(rng.standard_normal((37, 53))).astype(dtype) for _ in range(2))
    want_p, want_v, want_u = p.copy(), v.copy(), u.copy()
    rho, eps, lr = 0.9, 1e-6, 1.0
    for _ in range(3):
        grad = g + weight_decay * want_p if weight_decay else g
        want_v *= rho
        want_v += (1 - rho) * grad * grad
        delta = np.sqrt(want_u + eps) / np.sqrt(want_v + eps) * grad
        want_u *= rho
        want_u += (1 - rho) * delta * delta
        want_p -= lr * delta
        assert optim_kernels.adadelta_update(p, g, v, u, lr=lr, rho=rho, eps=eps, weight_decay=weight_decay) is None
    for got, want in ((p, want_p), (v, want_v), (u, want_u)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("which", ["sgd", "adam", "adadelta"])
def test_blocked_kernels_on_two_threads_are_bitwise_the_whole_array_path(which, monkeypatch) -> None:
    """Blocks shared among threads (parallel_for) update the same elements the same way."""
    monkeypatch.setenv("TINYFLOW_NUM_THREADS", "2")
    rng = np.random.default_rng(3)
    arrays = [np.abs(rng.standard_normal(300_001)).astype(np.float32) for _ in range(5)]
    results = []
    for block in (4096, 10**9):
        monkeypatch.setattr(optim_kernels, "_BLOCK", block)
        p, g, a, b, c = (x.copy() for x in arrays)
        for step in (1, 2):
            if which == "sgd":
                optim_kernels.sgd_momentum_update(p, g, a, lr=0.1, momentum=0.9, weight_decay=0.01,
                                                  first_step=step == 1)
            elif which == "adam":
                optim_kernels.adam_update(p, g, a, b, c, step=step, lr=0.01, amsgrad=True)
            else:
                optim_kernels.adadelta_update(p, g, b, c, lr=1.0, weight_decay=0.01)
        results.append((p, a, b, c))
    for x, y in zip(*results):
        np.testing.assert_array_equal(x, y)


def test_kernels_update_non_contiguous_arrays_in_place() -> None:
    base = np.ones((4, 6), np.float32)
    p = base[:, ::2]  # a strided view: the kernel must write through it
    optim_kernels.sgd_momentum_update(p, np.ones((4, 3), np.float32), None, lr=0.5)
    np.testing.assert_array_equal(base[:, ::2], np.full((4, 3), 0.5, np.float32))
    np.testing.assert_array_equal(base[:, 1::2], np.ones((4, 3), np.float32))


# ----------------------------------------------------------------------------- bad input
def test_bad_hyperparameters_raise_clear_errors() -> None:
    p = nn.Parameter(tf.tensor(np.ones(2, np.float32)))
    with pytest.raises(ValueError, match="lr"):
        SGD([p], lr=-1.0)
    with pytest.raises(ValueError, match="nesterov"):
        SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="betas"):
        Adam([p], betas=(0.9, 1.5))
    with pytest.raises(ValueError, match="empty parameter list"):
        SGD([], lr=0.1)
    with pytest.raises(ValueError, match="required"):
        SGD([p])
    with pytest.raises(TypeError, match="only optimize Tensors"):
        SGD([np.ones(2)], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


def test_grad_of_wrong_shape_names_parameter_and_shapes() -> None:
    p = nn.Parameter(tf.tensor(np.ones((2, 3), np.float32)))
    opt = SGD([p], lr=0.1)
    p.grad = tf.tensor(np.ones((3, 2), np.float32))
    with pytest.raises(ValueError, match=r"parameter 0 has shape \(2, 3\).*\(3, 2\)"):
        opt.step()


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "Adadelta", "Adagrad",
                                  "RMSprop", "Rprop", "ASGD"])
def test_every_optimizer_names_the_parameter_by_its_place_over_all_groups(name) -> None:
    params = [nn.Parameter(tf.tensor(np.ones((2, 3), np.float32))) for _ in range(3)]
    opt = getattr(tf.optim, name)([{"params": params[:2]}, {"params": params[2:]}], lr=0.1)
    params[0].grad = tf.tensor(np.ones((2, 3), np.float32))
    params[2].grad = tf.tensor(np.ones((3, 2), np.float32))  # first of the second group
    with pytest.raises(ValueError, match=rf"{name}: parameter 2 has shape \(2, 3\) but its .grad has shape \(3, 2\)"):
        opt.step()
