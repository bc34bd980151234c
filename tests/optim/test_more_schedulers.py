"""MultiplicativeLR, ConstantLR, PolynomialLR, CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR,
ReduceLROnPlateau and ChainedScheduler against torch.optim.lr_scheduler, epoch by epoch, with
the momenta they cycle and a state-dict round trip."""

from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
from tinyflow.optim import SGD, Adam, lr_scheduler

torch = pytest.importorskip("torch")
tsched = torch.optim.lr_scheduler
STEPS = 40


def optimizers(kind="sgd"):
    ours = [nn.Parameter(tf.tensor(np.zeros(2, np.float32))) for _ in range(2)]
    theirs = [torch.nn.Parameter(torch.zeros(2)) for _ in range(2)]
    if kind == "adam":
        return (Adam([{"params": ours[:1]}, {"params": ours[1:], "lr": 0.01}], lr=0.1),
                torch.optim.Adam([{"params": theirs[:1]}, {"params": theirs[1:], "lr": 0.01}], lr=0.1))
    return (SGD([{"params": ours[:1]}, {"params": ours[1:], "lr": 0.01}], lr=0.1, momentum=0.9),
            torch.optim.SGD([{"params": theirs[:1]}, {"params": theirs[1:], "lr": 0.01}], lr=0.1, momentum=0.9))


CASES = {
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lambda e: 0.95),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.25, total_iters=7),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=25, power=2.0),
    "WarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2, eta_min=1e-3),
    "WarmRestarts-1": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=7),
    "CyclicLR": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4, step_size_down=6),
    "CyclicLR-triangular2": lambda m, o: m.CyclicLR(o, 0.001, [0.1, 0.05], step_size_up=3, mode="triangular2"),
    "CyclicLR-exp_range": lambda m, o: m.CyclicLR(o, 0.001, 0.1, step_size_up=5, mode="exp_range", gamma=0.97),
    "OneCycleLR": lambda m, o: m.OneCycleLR(o, max_lr=0.5, total_steps=STEPS + 1),
    "OneCycleLR-linear-3phase": lambda m, o: m.OneCycleLR(o, max_lr=[0.5, 0.2], epochs=4, steps_per_epoch=11,
                                                          anneal_strategy="linear", three_phase=True),
    "Chained": lambda m, o: m.ChainedScheduler([m.ConstantLR(o, factor=0.5, total_iters=3),
                                                m.ExponentialLR(o, gamma=0.9)]),
}


def _momenta(opt):
    return [g.get("momentum", g.get("betas", (None,))[0]) for g in opt.param_groups]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("name", list(CASES))
def test_scheduler_matches_torch(name, kind):
    opt, topt = optimizers(kind)
    ours, theirs = CASES[name](lr_scheduler, opt), CASES[name](tsched, topt)
    assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12)
    for epoch in range(STEPS):
        opt.step()
        topt.step()
        ours.step()
        theirs.step()
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12, abs=1e-18), f"epoch {epoch}"
        assert [g["lr"] for g in opt.param_groups] == pytest.approx([g["lr"] for g in topt.param_groups], rel=1e-12)
        assert _momenta(opt) == pytest.approx(_momenta(topt), rel=1e-12), f"momentum at epoch {epoch}"


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_warm_restarts_with_fractional_epochs_match_torch():
    opt, topt = optimizers()
    ours = lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2)
    theirs = tsched.CosineAnnealingWarmRestarts(topt, T_0=3, T_mult=2)
    for epoch in np.arange(0, 12, 0.35):
        ours.step(float(epoch))
        theirs.step(float(epoch))
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12)


@pytest.mark.parametrize("kwargs", [dict(), dict(mode="max", factor=0.5, patience=2, cooldown=1),
                                    dict(threshold_mode="abs", threshold=0.1, patience=0, min_lr=[0.02, 0.005]),
                                    dict(mode="max", threshold_mode="abs", patience=1, eps=0.05)])
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    opt, topt = optimizers()
    ours, theirs = lr_scheduler.ReduceLROnPlateau(opt, **kwargs), tsched.ReduceLROnPlateau(topt, **kwargs)
    metrics = np.concatenate([np.linspace(1, 0.5, 6), np.full(15, 0.5), np.linspace(0.5, 0.49, 5), np.full(15, 0.7)])
    for m in metrics:
        ours.step(m)
        theirs.step(torch.tensor(m))
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12)
        assert (ours.num_bad_epochs, ours.cooldown_counter, ours.best) == \
            (theirs.num_bad_epochs, theirs.cooldown_counter, pytest.approx(theirs.best))


def test_reduce_lr_on_plateau_state_dict_round_trip():
    opt, _ = optimizers()
    sched = lr_scheduler.ReduceLROnPlateau(opt, patience=1)
    for m in (1.0, 1.0, 1.0):
        sched.step(m)
    again = lr_scheduler.ReduceLROnPlateau(opt, patience=5)
    again.load_state_dict(sched.state_dict())
    assert again.patience == 1 and again.best == 1.0 and again.num_bad_epochs == sched.num_bad_epochs
    with pytest.raises(ValueError, match="Factor|factor"):
        lr_scheduler.ReduceLROnPlateau(opt, factor=1.0)


def test_one_cycle_refuses_to_step_past_its_total():
    opt, _ = optimizers()
    sched = lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=3)
    for _ in range(3):
        sched.step()
    with pytest.raises(ValueError, match="total steps"):
        sched.step()
    with pytest.raises(ValueError, match="total_steps OR"):
        lr_scheduler.OneCycleLR(opt, max_lr=0.1)


def test_a_custom_scheduler_on_the_old_base_class_works_as_in_torch():
    class Warmup(lr_scheduler._LRScheduler):
        def __init__(self, optimizer, warmup, last_epoch=-1):
            self.warmup = warmup
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            return [base * min(1.0, (self.last_epoch + 1) / self.warmup) for base in self.base_lrs]

    class TorchWarmup(tsched._LRScheduler):
        def __init__(self, optimizer, warmup, last_epoch=-1):
            self.warmup = warmup
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            return [base * min(1.0, (self.last_epoch + 1) / self.warmup) for base in self.base_lrs]

    opt, topt = optimizers()
    ours, theirs = Warmup(opt, 4), TorchWarmup(topt, 4)
    for _ in range(6):
        opt.step()
        topt.step()
        ours.step()
        theirs.step()
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr())
