"""Adadelta, Adagrad, RMSprop and LBFGS against torch.optim, step by step on the same parameters
and gradients (LBFGS on the same closure), plus a half-precision parameter and the state dict."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.nn as nn
from tinyflow.optim import LBFGS, Adadelta, Adagrad, RMSprop

torch = pytest.importorskip("torch")

SHAPES = [(3, 4), (5,), (1,)]


def run_against_torch(ours_cls, theirs_cls, kwargs, seed=0, steps=6, state_keys=(), dtype=np.float32,
                      rtol=2e-5, atol=1e-6):
    rng = np.random.default_rng(seed)
    inits = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    ours_p = [nn.Parameter(tf.tensor(a.copy())) for a in inits]
    theirs_p = [torch.nn.Parameter(torch.tensor(a.copy())) for a in inits]
    ours, theirs = ours_cls(ours_p, **kwargs), theirs_cls(theirs_p, **kwargs)
    for step in range(steps):
        for i, (p, q) in enumerate(zip(ours_p, theirs_p)):
            if step == 2 and i == 1:  # no gradient: left alone, as torch does
                p.grad, q.grad = None, None
                continue
            g = rng.standard_normal(p.shape).astype(dtype)
            p.grad, q.grad = tf.tensor(g.copy()), torch.tensor(g.copy())
        ours.step()
        theirs.step()
        for i, (p, q) in enumerate(zip(ours_p, theirs_p)):
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"param {i} after step {step}")
    for key in state_keys:
        for p, q in zip(ours_p, theirs_p):
            np.testing.assert_allclose(ours.state[p][key], theirs.state[q][key].numpy(), rtol=rtol, atol=atol)
    assert [ours.state[p]["step"] for p in ours_p] == [int(theirs.state[q]["step"]) for q in theirs_p]
    return ours


@pytest.mark.parametrize("kwargs", [dict(), dict(lr=0.5, rho=0.8, eps=1e-4), dict(weight_decay=0.1),
                                    dict(lr=0.3, maximize=True)])
def test_adadelta_matches_torch(kwargs):
    run_against_torch(Adadelta, torch.optim.Adadelta, kwargs, state_keys=("square_avg", "acc_delta"))


@pytest.mark.parametrize("kwargs", [dict(), dict(lr=0.1, lr_decay=0.05), dict(weight_decay=0.1, eps=1e-6),
                                    dict(lr=0.05, initial_accumulator_value=0.5, maximize=True)])
def test_adagrad_matches_torch(kwargs):
    run_against_torch(Adagrad, torch.optim.Adagrad, kwargs, state_keys=("sum",))


@pytest.mark.parametrize("kwargs", [dict(), dict(lr=0.01, alpha=0.9), dict(momentum=0.9), dict(centered=True),
                                    dict(centered=True, momentum=0.5, weight_decay=0.1),
                                    dict(lr=0.02, maximize=True, eps=1e-6)])
def test_rmsprop_matches_torch(kwargs):
    keys = ("square_avg",) + (("momentum_buffer",) if kwargs.get("momentum") else ()) + \
        (("grad_avg",) if kwargs.get("centered") else ())
    run_against_torch(RMSprop, torch.optim.RMSprop, kwargs, state_keys=keys)


@settings(max_examples=15)
@given(cls=st.sampled_from(["Adadelta", "Adagrad", "RMSprop"]), lr=st.floats(1e-3, 0.5),
       wd=st.sampled_from([0.0, 0.01]), flag=st.booleans(), seed=st.integers(0, 2**16))
def test_random_hyperparameters_match_torch(cls, lr, wd, flag, seed):
    extra = {"Adadelta": dict(rho=0.95 if flag else 0.5), "Adagrad": dict(lr_decay=0.01 if flag else 0.0),
             "RMSprop": dict(centered=flag, momentum=0.9 if flag else 0.0)}[cls]
    ours_cls = {"Adadelta": Adadelta, "Adagrad": Adagrad, "RMSprop": RMSprop}[cls]
    run_against_torch(ours_cls, getattr(torch.optim, cls), dict(lr=lr, weight_decay=wd, **extra), seed=seed,
                      steps=3, dtype=np.float64, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("cls", [Adadelta, Adagrad, RMSprop])
def test_half_precision_parameters_step_in_float32(cls):
    p = nn.Parameter(tf.tensor(np.ones(4, np.float32)).to("float16"))
    opt = cls([p], lr=1.0 if cls is Adadelta else 1e-2)
    for _ in range(3):
        p.grad = tf.tensor(np.full(4, 1e-2, np.float16))
        opt.step()
    assert p.dtype == tf.float16 and float(p[0]) < 1.0
    assert all(v.dtype == np.float32 for v in opt.state[p].values() if hasattr(v, "dtype"))


def test_state_dict_round_trip_continues_identically():
    rng = np.random.default_rng(1)
    ps = [nn.Parameter(tf.tensor(rng.standard_normal(3).astype(np.float32))) for _ in range(2)]
    opt = RMSprop(ps, lr=0.1, momentum=0.9, centered=True)
    for p in ps:
        p.grad = tf.tensor(rng.standard_normal(3).astype(np.float32))
    opt.step()
    clone = [nn.Parameter(tf.tensor(p.numpy().copy())) for p in ps]
    opt2 = RMSprop(clone, lr=0.5)
    opt2.load_state_dict(opt.state_dict())
    assert opt2.param_groups[0]["lr"] == 0.1 and opt2.param_groups[0]["centered"] is True
    for p, q in zip(ps, clone):
        q.grad = p.grad
    opt.step()
    opt2.step()
    for p, q in zip(ps, clone):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


A = np.random.default_rng(3).standard_normal((7, 5))
B = np.random.default_rng(4).standard_normal(7)


def _objective(x, lib):
    """A least-squares fit with a quartic term: smooth, well conditioned, not quadratic."""
    a, b = lib.tensor(A), lib.tensor(B)
    r = a @ x - b
    return (r * r).sum() + 0.1 * (x**4).sum()


@pytest.mark.parametrize("line_search_fn, lr, history, max_iter", [
    (None, 1.0, 100, 20), ("strong_wolfe", 1.0, 100, 20), (None, 0.5, 3, 7), ("strong_wolfe", 1.0, 2, 5)])
def test_lbfgs_matches_torch(line_search_fn, lr, history, max_iter):
    ours_x = nn.Parameter(tf.tensor(np.linspace(-1, 1, 5)))
    theirs_x = torch.nn.Parameter(torch.tensor(np.linspace(-1, 1, 5)))
    kw = dict(lr=lr, history_size=history, max_iter=max_iter, line_search_fn=line_search_fn)
    ours, theirs = LBFGS([ours_x], **kw), torch.optim.LBFGS([theirs_x], **kw)

    def closure_ours():
        ours.zero_grad()
        loss = _objective(ours_x, tf)
        loss.backward()
        return loss

    def closure_theirs():
        theirs.zero_grad()
        loss = _objective(theirs_x, torch)
        loss.backward()
        return loss

    for _ in range(3):
        a, b = ours.step(closure_ours), theirs.step(closure_theirs)
        np.testing.assert_allclose(float(a), float(b.detach()), rtol=1e-9)
        np.testing.assert_allclose(ours_x.numpy(), theirs_x.detach().numpy(), rtol=1e-7, atol=1e-9)
    state, tstate = ours.state[ours_x], theirs.state[theirs_x]
    assert state["func_evals"] == tstate["func_evals"] and state["n_iter"] == tstate["n_iter"]


def test_lbfgs_fits_a_small_regression_like_torch():
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((20, 3)), rng.standard_normal((20, 1))
    tf.manual_seed(0)
    model = nn.Linear(3, 1, dtype=tf.float64)
    ref = torch.nn.Linear(3, 1, dtype=torch.float64)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(model.weight.numpy()))
        ref.bias.copy_(torch.tensor(model.bias.numpy()))
    opt = LBFGS(model.parameters(), line_search_fn="strong_wolfe")
    topt = torch.optim.LBFGS(ref.parameters(), line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = ((model(tf.tensor(x)) - tf.tensor(y)) ** 2).mean()
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = ((ref(torch.tensor(x)) - torch.tensor(y)) ** 2).mean()
        loss.backward()
        return loss

    opt.step(closure)
    topt.step(tclosure)
    np.testing.assert_allclose(model.weight.numpy(), ref.weight.detach().numpy(), rtol=1e-7, atol=1e-9)
    with pytest.raises(ValueError, match="parameter groups"):
        LBFGS([{"params": [model.weight]}, {"params": [model.bias]}])


ADAM_FAMILY = [
    ("Adamax", dict()), ("Adamax", dict(lr=0.01, betas=(0.5, 0.9), weight_decay=0.1)),
    ("NAdam", dict()), ("NAdam", dict(lr=0.01, momentum_decay=0.01, weight_decay=0.1)),
    ("NAdam", dict(weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict()), ("RAdam", dict(lr=0.01, weight_decay=0.1)), ("RAdam", dict(betas=(0.9, 0.9))),
    ("RAdam", dict(weight_decay=0.1, decoupled_weight_decay=True)),
    ("Rprop", dict()), ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)),
    ("ASGD", dict()), ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=2, weight_decay=0.1)),
]


@pytest.mark.parametrize("name, kwargs", ADAM_FAMILY)
def test_adam_variants_rprop_and_asgd_match_torch(name, kwargs):
    import tinyflow.optim as optim

    run_against_torch(getattr(optim, name), getattr(torch.optim, name), kwargs, steps=12)
