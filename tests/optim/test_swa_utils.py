"""optim.swa_utils: AveragedModel (SWA and EMA averages, buffers, state dict), SWALR's learning
rates and update_bn's BatchNorm statistics, each against torch.optim.swa_utils on the same
weights and updates; plus PyTorch's errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow.optim.swa_utils import (
    SWALR,
    AveragedModel,
    get_ema_avg_fn,
    get_ema_multi_avg_fn,
    get_swa_avg_fn,
    get_swa_multi_avg_fn,
    update_bn,
)

torch = pytest.importorskip("torch")
TS = torch.optim.swa_utils

seeds = st.integers(0, 2**31 - 1)
few = settings(max_examples=10, deadline=None)


def nets(seed=0):
    """The same small conv + BatchNorm network in tinyflow and torch."""
    def build(nn):
        return nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(),
                             nn.Linear(12, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))

    m, t = build(tf.nn), build(torch.nn)
    rng = np.random.default_rng(seed)
    state = {}
    for k, v in t.state_dict().items():
        if v.dtype == torch.int64:
            state[k] = np.array(rng.integers(0, 5), dtype=np.int64)
        elif "running_var" in k:
            state[k] = rng.uniform(0.5, 2.0, tuple(v.shape)).astype(np.float32)
        else:
            state[k] = rng.standard_normal(tuple(v.shape)).astype(np.float32)
    m.load_state_dict(state)
    t.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    return m, t


def perturb(m, t, rng):
    """The same random change to every parameter and buffer of both nets (a stand-in for training)."""
    with tf.no_grad():
        for (name, ours), (_, theirs) in zip(m.state_dict().items(), t.state_dict().items()):
            if ours.dtype == tf.int64:
                step = np.asarray(rng.integers(1, 3), dtype=np.int64)
            else:
                step = (0.1 * rng.standard_normal(tuple(ours.shape))).astype(np.float32)
                if "running_var" in name:
                    step = np.abs(step)
            own = dict(m.named_parameters()) | dict(m.named_buffers())
            own[name].add_(tf.tensor(step))
            theirs.add_(torch.tensor(step))


def assert_state_close(sd, ref, rtol=1e-6, atol=1e-7):
    assert list(sd) == list(ref)
    for k in ref:
        assert str(sd[k].dtype) == str(ref[k].dtype).replace("torch.", ""), k
        np.testing.assert_allclose(sd[k].numpy(), ref[k].numpy(), rtol=rtol, atol=atol, err_msg=k)


AVERAGERS = {
    "swa": lambda S, d: {},
    "swa_avg_fn": lambda S, d: {"avg_fn": S.get_swa_avg_fn()},
    "ema_avg_fn": lambda S, d: {"avg_fn": S.get_ema_avg_fn(d)},
    "ema_multi": lambda S, d: {"multi_avg_fn": S.get_ema_multi_avg_fn(d)},
    "swa_multi": lambda S, d: {"multi_avg_fn": S.get_swa_multi_avg_fn()},
}
OURS = type("S", (), {"get_swa_avg_fn": staticmethod(get_swa_avg_fn), "get_ema_avg_fn": staticmethod(get_ema_avg_fn),
                      "get_ema_multi_avg_fn": staticmethod(get_ema_multi_avg_fn),
                      "get_swa_multi_avg_fn": staticmethod(get_swa_multi_avg_fn)})


# ------------------------------------------------------------------------------ AveragedModel
@given(seeds, st.sampled_from(list(AVERAGERS)), st.booleans(), st.floats(0.5, 0.999))
@few
def test_averaged_model_matches_torch(seed, kind, use_buffers, decay):
    if kind == "swa_multi" and use_buffers:
        use_buffers = False  # torch's addcdiv_ refuses the int64 num_batches_tracked buffer
    m, t = nets(seed)
    ours = AveragedModel(m, use_buffers=use_buffers, **AVERAGERS[kind](OURS, decay))
    theirs = TS.AveragedModel(t, use_buffers=use_buffers, **AVERAGERS[kind](TS, decay))
    rng = np.random.default_rng(seed)
    for _ in range(4):
        perturb(m, t, rng)
        ours.update_parameters(m)
        theirs.update_parameters(t)
        assert_state_close(ours.state_dict(), theirs.state_dict())
    assert int(ours.n_averaged.item()) == 4 and ours.n_averaged.dtype == tf.int64


def test_first_update_copies_then_averages_equally():
    m = tf.nn.Linear(3, 2)
    avg = AveragedModel(m)
    values = []
    for k in range(3):
        with tf.no_grad():
            m.weight.fill_(float(k + 1))
        values.append(float(k + 1))
        avg.update_parameters(m)
        np.testing.assert_allclose(avg.module.weight.numpy(), np.mean(values), rtol=1e-6)
    assert avg.module.weight is not m.weight  # a deep copy


def test_ema_formula():
    m = tf.nn.Linear(2, 2)
    avg = AveragedModel(m, multi_avg_fn=get_ema_multi_avg_fn(0.75))
    w0 = m.weight.numpy().copy()
    avg.update_parameters(m)
    with tf.no_grad():
        m.weight.add_(1.0)
    avg.update_parameters(m)
    np.testing.assert_allclose(avg.module.weight.numpy(), 0.75 * w0 + 0.25 * (w0 + 1.0), rtol=1e-6)


def test_forward_delegates_and_buffers_copied_without_use_buffers():
    m, t = nets(3)
    avg, tavg = AveragedModel(m), TS.AveragedModel(t)
    m.eval()
    t.eval()
    avg.eval()
    tavg.eval()
    x = np.random.default_rng(0).standard_normal((2, 2, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(avg(tf.tensor(x)).numpy(), m(tf.tensor(x)).numpy(), rtol=1e-6)
    rng = np.random.default_rng(1)
    for _ in range(2):
        perturb(m, t, rng)
        avg.update_parameters(m)
        tavg.update_parameters(t)
    np.testing.assert_array_equal(avg.module[1].running_mean.numpy(), m[1].running_mean.numpy())
    np.testing.assert_allclose(avg(tf.tensor(x)).numpy(), tavg(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_state_dict_round_trip_and_torch_keys():
    m, t = nets(5)
    avg, tavg = AveragedModel(m), TS.AveragedModel(t)
    rng = np.random.default_rng(2)
    for _ in range(3):
        perturb(m, t, rng)
        avg.update_parameters(m)
        tavg.update_parameters(t)
    sd = avg.state_dict()
    assert list(sd) == list(tavg.state_dict())
    assert list(sd)[0] == "n_averaged" and all(k == "n_averaged" or k.startswith("module.") for k in sd)
    fresh = AveragedModel(nets(9)[0])
    fresh.load_state_dict(sd)
    assert_state_close(fresh.state_dict(), tavg.state_dict())
    from_torch = AveragedModel(nets(10)[0])
    from_torch.load_state_dict(tavg.state_dict())
    assert int(from_torch.n_averaged.item()) == 3
    # training continues from the loaded count
    perturb(m, t, rng)
    from_torch.update_parameters(m)
    tavg.update_parameters(t)
    assert_state_close(from_torch.state_dict(), tavg.state_dict())


def test_device_argument_and_parametrized_model():
    m = tf.nn.Linear(3, 3)
    tf.nn.utils.parametrizations.weight_norm(m)
    avg = AveragedModel(m, device="cpu")
    assert avg.n_averaged.device == tf.device("cpu")
    avg.update_parameters(m)
    np.testing.assert_allclose(avg.module.weight.numpy(), m.weight.numpy(), rtol=1e-6)


def test_averaged_model_errors():
    m = tf.nn.Linear(2, 2)
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        AveragedModel(m, avg_fn=get_swa_avg_fn(), multi_avg_fn=get_swa_multi_avg_fn())
    for fn in (get_ema_avg_fn, get_ema_multi_avg_fn):
        with pytest.raises(ValueError, match=r"Invalid decay value 1.5 provided. Please provide a value in \[0,1\]"):
            fn(1.5)
        with pytest.raises(ValueError, match=r"Invalid decay value -0.1"):
            fn(-0.1)
    with pytest.raises(ValueError, match="Invalid decay value 1.5"):
        TS.get_ema_avg_fn(1.5)


# ------------------------------------------------------------------------------ SWALR
def optimizers(lrs):
    ours = tf.optim.SGD([{"params": [tf.nn.Parameter(tf.ones(1))], "lr": lr} for lr in lrs], lr=lrs[0])
    theirs = torch.optim.SGD([{"params": [torch.nn.Parameter(torch.ones(1))], "lr": lr} for lr in lrs], lr=lrs[0])
    return ours, theirs


@given(st.sampled_from(["cos", "linear"]), st.integers(0, 6), st.lists(st.floats(1e-3, 1.0), min_size=1, max_size=3),
       st.booleans())
@few
def test_swalr_learning_rates_match_torch(strategy, anneal_epochs, lrs, per_group):
    opt, topt = optimizers(lrs)
    swa_lr = [lr / 7 for lr in lrs] if per_group else 0.05
    sched = SWALR(opt, swa_lr=swa_lr, anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    tsched = TS.SWALR(topt, swa_lr=swa_lr, anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    for _ in range(anneal_epochs + 3):
        np.testing.assert_allclose(sched.get_last_lr(), tsched.get_last_lr(), rtol=1e-12)
        np.testing.assert_allclose([g["lr"] for g in opt.param_groups], [g["lr"] for g in topt.param_groups],
                                   rtol=1e-12)
        opt.step()
        topt.step()
        sched.step()
        tsched.step()
    np.testing.assert_allclose(sched.get_last_lr(), [g["swa_lr"] for g in opt.param_groups], rtol=1e-12)


def test_swalr_after_another_scheduler_and_state_dict():
    opt, topt = optimizers([0.5])
    first, tfirst = tf.optim.lr_scheduler.StepLR(opt, 2, 0.5), torch.optim.lr_scheduler.StepLR(topt, 2, 0.5)
    opt.step()
    topt.step()
    for _ in range(3):
        first.step()
        tfirst.step()
    sched = SWALR(opt, swa_lr=0.01, anneal_epochs=4)
    tsched = TS.SWALR(topt, swa_lr=0.01, anneal_epochs=4)
    sched.step()
    tsched.step()
    state = sched.state_dict()
    assert "anneal_func" not in state and "optimizer" not in state
    opt2, _ = optimizers([0.5])
    resumed = SWALR(opt2, swa_lr=0.3, anneal_epochs=1, anneal_strategy="linear")
    opt2.load_state_dict(opt.state_dict())  # lr and swa_lr live in the param groups
    resumed.load_state_dict(state)
    assert resumed.anneal_func is SWALR._cosine_anneal
    for _ in range(5):
        for s in (sched, tsched, resumed):
            s.step()
        np.testing.assert_allclose(sched.get_last_lr(), tsched.get_last_lr(), rtol=1e-12)
        np.testing.assert_allclose(resumed.get_last_lr(), tsched.get_last_lr(), rtol=1e-12)


def test_swalr_errors():
    opt, topt = optimizers([0.1, 0.2])
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear', instead got step"):
        SWALR(opt, 0.05, anneal_strategy="step")
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear'"):
        TS.SWALR(topt, 0.05, anneal_strategy="step")
    for bad in (-1, 2.5):
        with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
            SWALR(opt, 0.05, anneal_epochs=bad)
    with pytest.raises(ValueError, match="swa_lr must have the same length as optimizer.param_groups"):
        SWALR(opt, [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="swa_lr must have the same length as optimizer.param_groups"):
        TS.SWALR(topt, [0.1, 0.2, 0.3])


# ------------------------------------------------------------------------------ update_bn
@given(seeds, st.booleans())
@few
def test_update_bn_matches_torch(seed, tuples):
    m, t = nets(seed)
    m.eval()
    t.eval()
    rng = np.random.default_rng(seed)
    batches = [rng.standard_normal((int(rng.integers(2, 5)), 2, 4, 4)).astype(np.float32) for _ in range(3)]
    ours = [(tf.tensor(b), tf.zeros(1)) if tuples else tf.tensor(b) for b in batches]
    theirs = [(torch.tensor(b), torch.zeros(1)) if tuples else torch.tensor(b) for b in batches]
    update_bn(ours, m)
    TS.update_bn(theirs, t)
    assert_state_close(m.state_dict(), t.state_dict(), rtol=1e-4, atol=1e-5)
    assert not m.training and not m[1].training  # modes restored
    assert m[1].momentum == 0.1 and m[5].momentum == 0.1


def test_update_bn_is_a_cumulative_average_and_keeps_momentum():
    bn = tf.nn.BatchNorm1d(2, momentum=0.3)
    model = tf.nn.Sequential(bn)
    batches = [tf.tensor(np.random.default_rng(i).standard_normal((4, 2))) for i in range(3)]
    update_bn(batches, model, device="cpu")
    means = [b.numpy().mean(0) for b in batches]
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean(means, 0), rtol=1e-5)
    assert bn.momentum == 0.3 and int(bn.num_batches_tracked.item()) == 3 and model.training


def test_update_bn_without_batchnorm_does_not_run_the_model():
    calls = []
    model = tf.nn.Linear(2, 2)
    model.register_forward_hook(lambda *a: calls.append(1))
    update_bn([tf.ones(1, 2)], model)
    assert calls == []


def test_swa_utils_importable_from_optim():
    import tinyflow.optim.swa_utils as S

    assert tf.optim.swa_utils is S
    assert S.AveragedModel is AveragedModel
