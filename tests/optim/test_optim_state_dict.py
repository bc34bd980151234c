"""Optimizer state_dict: PyTorch's layout, round trips through tf.save, and exchange with torch."""

from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
from tinyflow.optim import SGD, Adam, AdamW

torch = pytest.importorskip("torch")

SHAPES = [(4, 3), (3,), (150, 250)]


def make_params(seed: int) -> list[nn.Parameter]:
    rng = np.random.default_rng(seed)
    return [nn.Parameter(tf.tensor(rng.standard_normal(s).astype(np.float32))) for s in SHAPES]


def clone_params(params: list[nn.Parameter]) -> list[nn.Parameter]:
    return [nn.Parameter(tf.tensor(p.numpy().copy())) for p in params]


def grads_for(step: int) -> list[np.ndarray]:
    rng = np.random.default_rng(1000 + step)
    return [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


def apply(opt, params, step: int) -> None:
    for p, g in zip(params, grads_for(step)):
        p.grad = tf.tensor(g)
    opt.step()


OPTIMIZERS = [
    (SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    (Adam, dict(lr=1e-2, amsgrad=True)),
    (AdamW, dict(lr=1e-2, weight_decay=0.1)),
]


@pytest.mark.parametrize("cls,kwargs", OPTIMIZERS, ids=lambda v: getattr(v, "__name__", ""))
def test_state_dict_round_trip_through_a_file_continues_identically(cls, kwargs, tmp_path) -> None:
    params = make_params(0)
    opt = cls(params, **kwargs)
    for step in range(3):
        apply(opt, params, step)
    path = tmp_path / "opt.ckpt"
    tf.save({"optim": opt.state_dict()}, path)

    params2 = clone_params(params)
    opt2 = cls(params2, lr=123.0)  # hyper-parameters come back from the checkpoint too
    opt2.load_state_dict(tf.load(path)["optim"])
    assert opt2.param_groups[0]["lr"] == kwargs["lr"]
    for step in range(3, 7):
        apply(opt, params, step)
        apply(opt2, params2, step)
        for p, q in zip(params, params2):
            assert np.array_equal(p.numpy(), q.numpy())


def test_state_dict_layout_is_pytorchs() -> None:
    params = make_params(0)
    opt = Adam([{"params": params[:2]}, {"params": params[2:], "lr": 0.1}], lr=1e-3)
    apply(opt, params, 0)
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert sd["param_groups"][1]["lr"] == 0.1 and sd["param_groups"][0]["betas"] == (0.9, 0.999)
    assert set(sd["state"]) == {0, 1, 2}
    assert set(sd["state"][2]) == {"step", "exp_avg", "exp_avg_sq"}
    assert sd["state"][2]["step"] == 1 and sd["state"][2]["exp_avg"].shape == SHAPES[2]


def test_loading_state_is_a_copy() -> None:
    params = make_params(0)
    opt = SGD(params, lr=0.1, momentum=0.9)
    apply(opt, params, 0)
    opt2 = SGD(clone_params(params), lr=0.1, momentum=0.9)
    opt2.load_state_dict(opt.state_dict())
    apply(opt, params, 1)  # changes opt's buffers in place; opt2's must not move
    buf2 = opt2.state_dict()["state"][0]["momentum_buffer"]
    assert not np.shares_memory(buf2, opt.state_dict()["state"][0]["momentum_buffer"])


@pytest.mark.parametrize("ours_cls,theirs_cls", [(SGD, "SGD"), (Adam, "Adam")])
def test_state_dict_moves_between_torch_and_tinyflow(ours_cls, theirs_cls) -> None:
    """torch's state_dict loads into tinyflow, and ours into torch; both continue as the source."""
    kwargs = dict(lr=0.05, momentum=0.9) if ours_cls is SGD else dict(lr=1e-2)
    theirs_cls = getattr(torch.optim, theirs_cls)
    init = make_params(3)
    tparams = [torch.nn.Parameter(torch.tensor(p.numpy().copy())) for p in init]
    topt = theirs_cls(tparams, **kwargs)
    for step in range(2):
        for q, g in zip(tparams, grads_for(step)):
            q.grad = torch.tensor(g)
        topt.step()

    # torch -> tinyflow: the state tensors go through numpy
    ours = [nn.Parameter(tf.tensor(q.detach().numpy().copy())) for q in tparams]
    opt = ours_cls(ours, **kwargs)
    tsd = topt.state_dict()
    opt.load_state_dict(
        {
            "state": {k: {n: v.numpy() for n, v in s.items()} for k, s in tsd["state"].items()},
            "param_groups": tsd["param_groups"],
        }
    )
    # tinyflow -> torch: a fresh torch optimizer from our state_dict
    tparams2 = [torch.nn.Parameter(torch.tensor(p.numpy().copy())) for p in ours]
    topt2 = theirs_cls(tparams2, **kwargs)
    sd = opt.state_dict()
    topt2.load_state_dict(
        {
            "state": {
                k: {n: torch.tensor(np.asarray(v, dtype=np.float32)) for n, v in s.items()}
                for k, s in sd["state"].items()
            },
            "param_groups": sd["param_groups"],
        }
    )
    for step in range(2, 5):
        for p, q, q2, g in zip(ours, tparams, tparams2, grads_for(step)):
            p.grad, q.grad, q2.grad = tf.tensor(g), torch.tensor(g), torch.tensor(g)
        opt.step()
        topt.step()
        topt2.step()
        for p, q, q2 in zip(ours, tparams, tparams2):
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=2e-5, atol=1e-6)
            np.testing.assert_allclose(q2.detach().numpy(), q.detach().numpy(), rtol=2e-5, atol=1e-6)


def test_load_state_dict_from_another_setup_is_a_clear_error() -> None:
    params = make_params(0)
    opt = SGD(params, lr=0.1, momentum=0.9)
    apply(opt, params, 0)
    other = SGD(make_params(1)[:2], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="group 0 has 3 parameters.*has 2"):
        other.load_state_dict(opt.state_dict())
    two_groups = SGD([{"params": params[:1]}, {"params": params[1:]}], lr=0.1)
    with pytest.raises(ValueError, match="1 parameter groups.*has 2"):
        two_groups.load_state_dict(opt.state_dict())
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        opt.load_state_dict({"weight": np.ones(3)})
