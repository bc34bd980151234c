"""Learning-rate schedulers against torch.optim.lr_scheduler, step by step."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
from tinyflow.optim import SGD, lr_scheduler

torch = pytest.importorskip("torch")
tsched = torch.optim.lr_scheduler

STEPS = 30


def two_group_optimizers():
    """The same two parameter groups (lr 0.1 and 0.01) in tinyflow and torch."""
    ours = [nn.Parameter(tf.tensor(np.zeros(2, np.float32))) for _ in range(2)]
    theirs = [torch.nn.Parameter(torch.zeros(2)) for _ in range(2)]
    opt = SGD([{"params": ours[:1]}, {"params": ours[1:], "lr": 0.01}], lr=0.1, momentum=0.9)
    topt = torch.optim.SGD([{"params": theirs[:1]}, {"params": theirs[1:], "lr": 0.01}], lr=0.1, momentum=0.9)
    return opt, topt


def warmup_lambda(epoch: int) -> float:
    return min(1.0, (epoch + 1) / 5) * 0.95**epoch


CASES = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=4, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[3, 7, 7, 20], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=10, eta_min=1e-4),
    "LinearLR-warmup": lambda m, o: m.LinearLR(o, start_factor=0.1, total_iters=6),
    "LinearLR-decay": lambda m, o: m.LinearLR(o, start_factor=1.0, end_factor=0.2, total_iters=12),
    "LambdaLR": lambda m, o: m.LambdaLR(o, lr_lambda=warmup_lambda),
    "LambdaLR-per-group": lambda m, o: m.LambdaLR(o, lr_lambda=[warmup_lambda, lambda e: 1 / (1 + e)]),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.2, total_iters=4), m.CosineAnnealingLR(o, T_max=20)], milestones=[4]
    ),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(CASES))
def test_scheduler_matches_torch(name: str) -> None:
    opt, topt = two_group_optimizers()
    ours = CASES[name](lr_scheduler, opt)
    theirs = CASES[name](tsched, topt)
    assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12, abs=0)
    for step in range(STEPS):
        opt.step()
        topt.step()
        ours.step()
        theirs.step()
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12, abs=1e-18), f"step {step}"
        assert [g["lr"] for g in opt.param_groups] == ours.get_last_lr()
    assert ours.last_epoch == theirs.last_epoch == STEPS


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "CosineAnnealingLR", "LinearLR-warmup", "SequentialLR"])
def test_scheduler_state_dict_round_trip_through_a_file(name: str, tmp_path) -> None:
    opt, _ = two_group_optimizers()
    sched = CASES[name](lr_scheduler, opt)
    for _ in range(7):
        opt.step()
        sched.step()
    tf.save({"optim": opt.state_dict(), "sched": sched.state_dict()}, tmp_path / "ckpt")

    opt2, _ = two_group_optimizers()
    sched2 = CASES[name](lr_scheduler, opt2)
    ckpt = tf.load(tmp_path / "ckpt")
    opt2.load_state_dict(ckpt["optim"])
    sched2.load_state_dict(ckpt["sched"])
    assert sched2.get_last_lr() == sched.get_last_lr()
    for _ in range(10):
        opt.step()
        sched.step()
        opt2.step()
        sched2.step()
        assert sched2.get_last_lr() == sched.get_last_lr()


def test_step_with_epoch_uses_closed_form_like_torch() -> None:
    opt, topt = two_group_optimizers()
    ours = lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    theirs = tsched.CosineAnnealingLR(topt, T_max=10)
    with pytest.warns(UserWarning):
        ours.step(7)
    with pytest.warns(UserWarning):
        theirs.step(7)
    assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12)


def test_warmup_cosine_shape() -> None:
    opt, _ = two_group_optimizers()
    sched = lr_scheduler.warmup_cosine(opt, warmup_iters=5, total_iters=25, start_factor=0.01)
    lrs = [sched.get_last_lr()[0]]
    for _ in range(25):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    assert lrs[0] == pytest.approx(0.001)
    assert all(a < b for a, b in zip(lrs[:5], lrs[1:6]))  # warm-up rises to the base lr
    assert lrs[5] == pytest.approx(0.1)
    assert all(a > b for a, b in zip(lrs[5:25], lrs[6:26]))  # then cosine decays to 0
    assert lrs[25] == pytest.approx(0.0, abs=1e-12)
    assert lrs[15] == pytest.approx(0.1 * (1 + math.cos(math.pi * 10 / 20)) / 2)


def test_scheduler_bad_input() -> None:
    opt, _ = two_group_optimizers()
    with pytest.raises(TypeError, match="not an Optimizer"):
        lr_scheduler.StepLR(object(), step_size=2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="expected 2 lr_lambdas"):
        lr_scheduler.LambdaLR(opt, lr_lambda=[lambda e: 1.0])
    with pytest.raises(ValueError, match="start_factor"):
        lr_scheduler.LinearLR(opt, start_factor=0.0)
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.StepLR(opt, step_size=2, last_epoch=5)
