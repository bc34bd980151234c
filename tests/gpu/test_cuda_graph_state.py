"""What changes from step to step lives in device memory (issue 23): dropout's seed, the optimizers'
lr / step count / bias corrections and GradScaler's scale and overflow flag, read by the kernels
through pointers inside a CUDA graph capture (the slots of tinyflow.capture.Capture).

On the strict CuPy stand-in (or cuda:0 on a GPU machine). No real graph: a hand-made ``Capture``
is made current while the step runs, and a runtime wrapper records the kernel launches instead of
running them (a captured step does not run); a "replay" is ``capture.refresh()`` and the recorded
launches again, with the arguments they were captured with. So a test fails when a per-step
value is baked into a kernel argument, or when a refresh draws or counts differently from the
eager step."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.capture import Capture, capturing
from tinyflow.device import Device, forbid_host_reads, kernels_of, to_host
from tinyflow.optim import SGD, Adam, AdamW, RMSprop
from tinyflow.optim.lr_scheduler import StepLR

pytestmark = [pytest.mark.gpu, pytest.mark.cupy_strict]
ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
DEVICE = "cuda:0"


# ---- a fake capture: record the launches, replay them after a refresh ---------------------------------
class Recording:
    """A runtime that records kernel launches (name, grid, block, args) and, unless ``run``,
    does not execute them (as stream capture does not)."""

    def __init__(self, inner: Any, run: bool) -> None:
        self.inner, self.run = inner, run
        self.launches: list[tuple[str, Any, Any, list[Any], dict[str, Any]]] = []

    def launch(self, name: str, grid: Any, block: Any, args: Any, **options: Any) -> None:
        self.launches.append((name, grid, block, list(args), options))
        if self.run:
            self.inner.launch(name, grid, block, args, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@contextlib.contextmanager
def fake_capture(run: bool = False) -> Iterator[tuple[Capture, Recording]]:
    from tinyflow_cuda import runtime

    capture = Capture(Device(DEVICE))
    rec = Recording(runtime.current(), run)
    with runtime.use(rec), capturing(capture):
        yield capture, rec


def replay(capture: Capture, rec: Recording) -> None:
    """A replay: refill the slots, then the captured launches with their captured arguments."""
    from tinyflow_cuda import runtime

    capture.refresh()
    for name, grid, block, args, options in rec.launches:
        runtime.current().launch(name, grid, block, args, **options)


def kernels(rec: Recording) -> list[str]:
    return [name for name, *_ in rec.launches]


def host(t: Any) -> np.ndarray:
    return np.asarray(to_host(t.array if hasattr(t, "array") else t, "test"), dtype=np.float64)


# ---- dropout ---------------------------------------------------------------------------------------
def test_captured_dropout_reads_its_seed_from_a_slot_drawn_as_the_eager_step_draws() -> None:
    x = tf.ones(4, 300, device=DEVICE)
    gen = tf.Generator(7)
    with fake_capture() as (capture, rec):
        F.dropout(x, 0.4, generator=gen)
        F.dropout(x, 0.2, generator=gen)
    assert gen.get_state() == tf.Generator(7).get_state(), "capture must not draw from the generator"
    assert kernels(rec) == ["dropout_mask_f32", "dropout_mask_f32"]
    seeds = [slot.array for slot in capture.slots]
    assert len(seeds) == 2 and all(s.dtype == np.uint64 and s.shape == (1,) for s in seeds)
    for (_, _, _, args, _), seed in zip(rec.launches, seeds):
        assert args[1] is seed and args[2] == 0  # the seed pointer; the scalar is unused

    eager = tf.Generator(7)
    for step in range(3):
        capture.refresh()  # each refresh draws once per dropout, in the order of the eager step
        for seed, p in zip(seeds, (0.4, 0.2)):
            want = F.dropout(x, p, generator=eager)
            got = x.array * kernels_of(x.array).dropout_mask(x.array, p, seed)
            np.testing.assert_array_equal(host(got), host(want), err_msg=f"step {step}")
    assert gen.get_state()["bit_generator"] == eager.get_state()["bit_generator"]


# ---- optimizers ------------------------------------------------------------------------------------
def _model(seed: int = 0) -> nn.Module:
    tf.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    model[2].to(BF16)  # a half-precision parameter: master residual in the step
    return model.to(DEVICE)


def _set_grads(model: nn.Module, step: int) -> None:
    """Gradients of step ``step`` written into the parameters' existing grad arrays (the static
    buffers a replay reads), or made on the first call."""
    rng = np.random.default_rng(100 + step)
    for p in model.parameters():
        g = rng.standard_normal(p.shape).astype(np.float32).astype(p.dtype)
        if p.grad is None:
            p.grad = tf.tensor(g, device=DEVICE)
        else:
            p.grad.array[...] = tf.tensor(g, device=DEVICE).array


OPTIMIZERS = [
    (SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2)),
    (SGD, dict(lr=0.05, momentum=0.5, dampening=0.3, maximize=True)),
    (Adam, dict(lr=1e-2, weight_decay=1e-2, amsgrad=True)),
    (AdamW, dict(lr=1e-2)),
]
IDS = [f"{cls.__name__}-{i}" for i, (cls, _) in enumerate(OPTIMIZERS)]


@pytest.mark.parametrize("cls, kwargs", OPTIMIZERS, ids=IDS)
def test_replayed_optimizer_steps_equal_eager_steps_with_a_scheduler(cls, kwargs) -> None:
    """1 eager warm-up step, a capture, 4 replays == 5 eager steps, bit for bit, while StepLR
    changes the lr between steps; Adam's state["step"] advances once per refresh."""
    eager_model, graph_model = _model(), _model()
    eager_opt, graph_opt = cls(eager_model.parameters(), **kwargs), cls(graph_model.parameters(), **kwargs)
    eager_sched = StepLR(eager_opt, step_size=2, gamma=0.5)
    graph_sched = StepLR(graph_opt, step_size=2, gamma=0.5)
    for model in (eager_model, graph_model):
        _set_grads(model, 0)
    eager_opt.step(), graph_opt.step()
    eager_sched.step(), graph_sched.step()
    before = [host(p) for p in graph_model.parameters()]

    with fake_capture() as (capture, rec), forbid_host_reads():
        graph_opt.step()
    name = "sgd" if cls is SGD else "adam"
    assert sorted(kernels(rec)) == [f"{name}_multi_tensor_update_bf16", f"{name}_multi_tensor_update_f32"]
    assert all(np.array_equal(b, host(p)) for b, p in zip(before, graph_model.parameters())), \
        "the captured step must not run"
    scalars = [s.array for s in capture.slots if s.array.dtype == np.float64]
    assert len(scalars) == 1  # one per group; the other slots are the pointer tables
    for (_, _, _, args, _) in rec.launches:  # both dtypes' launches read it: no found_inf
        assert args[-2] is scalars[0] and args[-1] is None
    if cls is not SGD:
        assert {graph_opt.state[p]["step"] for p in graph_model.parameters()} == {1}

    lrs = [eager_opt.param_groups[0]["lr"]]
    for step in range(1, 5):
        for model in (eager_model, graph_model):
            _set_grads(model, step)
        eager_opt.step()
        replay(capture, rec)
        eager_sched.step(), graph_sched.step()
        if cls is not SGD:
            assert {graph_opt.state[p]["step"] for p in graph_model.parameters()} == {step + 1}
        # the lr this replay used is the one the scheduler had set before it
        assert host(scalars[0])[0] == lrs[-1]
        lrs.append(eager_opt.param_groups[0]["lr"])
        for a, b in zip(eager_model.parameters(), graph_model.parameters()):
            np.testing.assert_array_equal(host(b), host(a), err_msg=f"replay {step}")
        for a, b in zip(eager_model.parameters(), graph_model.parameters()):
            for key, value in eager_opt.state[a].items():
                other = graph_opt.state[b][key]
                if key == "step":
                    assert other == value
                else:
                    np.testing.assert_array_equal(host(other), host(value), err_msg=key)


def test_a_scheduler_lr_reaches_the_slot_at_the_next_refresh() -> None:
    model = _model()
    opt = SGD(model.parameters(), lr=0.1, momentum=0.9)
    _set_grads(model, 0)
    opt.step()
    with fake_capture() as (capture, _):
        opt.step()
    scalars = [s.array for s in capture.slots if s.array.dtype == np.float64][0]  # f32 params
    capture.refresh()
    np.testing.assert_array_equal(host(scalars), [0.1, 0.9, 0.0, 0.0])
    opt.param_groups[0]["lr"] = 0.025
    opt.param_groups[0]["weight_decay"] = 1e-3
    capture.refresh()
    np.testing.assert_array_equal(host(scalars), [0.025, 0.9, 0.0, 1e-3])
    opt.param_groups[0]["nesterov"] = True  # fixed in the captured kernel: refused at refresh
    with pytest.raises(RuntimeError, match=r"SGD: parameter group 0's .*nesterov.* changed since "
                                           r"its step was captured"):
        capture.refresh()


def test_capture_refuses_missing_states_and_uncapturable_optimizers_in_one_line() -> None:
    model = _model()
    _set_grads(model, 0)
    with fake_capture(), pytest.raises(RuntimeError, match=r"Adam.step: parameter of shape .* has "
                                                            r"no Adam state yet inside a CUDA graph capture"):
        Adam(model.parameters()).step()
    with fake_capture(), pytest.raises(RuntimeError, match=r"RMSprop.step cannot be captured in a "
                                                            r"CUDA graph"):
        RMSprop(model.parameters()).step()


# ---- gradient clipping -----------------------------------------------------------------------------
def test_clip_grad_norm_needs_no_host_read_and_matches_the_cpu() -> None:
    rng = np.random.default_rng(3)
    grads = [rng.standard_normal(s).astype(np.float32) * 10 for s in ((5, 4), (7,))]
    gpu = [tf.zeros(*g.shape, device=DEVICE, requires_grad=True) for g in grads]
    cpu = [tf.zeros(*g.shape, requires_grad=True) for g in grads]
    for p, q, g in zip(gpu, cpu, grads):
        p.grad, q.grad = tf.tensor(g, device=DEVICE), tf.tensor(g)
    with fake_capture(run=True), forbid_host_reads():
        norm = nn.utils.clip_grad_norm_(gpu, 1.0)
    want = nn.utils.clip_grad_norm_(cpu, 1.0)
    np.testing.assert_allclose(host(norm), want.numpy(), rtol=1e-6)
    for p, q in zip(gpu, cpu):
        np.testing.assert_allclose(host(p.grad), q.grad.numpy(), rtol=1e-6)


# ---- GradScaler ------------------------------------------------------------------------------------
def _scaled_step(model: nn.Module, opt: Any, scaler: Any, x: np.ndarray, poison: bool) -> None:
    opt.zero_grad()
    out = model[0](tf.tensor(x, device=DEVICE))
    loss = out.sum()
    if poison:
        loss = loss * float("inf")
    scaler.scale(loss).backward()


def test_grad_scaler_state_is_on_the_device_and_update_is_one_kernel() -> None:
    from cuda_tools import strict_cupy

    model = _model()
    opt = SGD(model[0].parameters(), lr=0.1)
    scaler = tf.amp.GradScaler(init_scale=256.0, growth_interval=2)
    x = np.ones((2, 6), np.float32)
    scales = []
    for poison in (False, True, False, False):
        _scaled_step(model, opt, scaler, x, poison)
        scaler.step(opt)  # eager: one host read of the flag
        with strict_cupy.record_calls() as calls, forbid_host_reads():
            scaler.update()
        assert [c for c in calls if c.startswith("kernel:")] == ["kernel:amp_update_scale_f32"]
        scales.append(scaler.get_scale())
    assert scales == [256.0, 128.0, 128.0, 256.0] and scaler.skipped_steps == 1
    assert scaler.state_dict()["scale"] == 256.0 and scaler.state_dict()["_growth_tracker"] == 0


@pytest.mark.parametrize("poison", [False, True], ids=["finite", "overflow"])
def test_captured_scaler_step_skips_on_the_device_without_a_host_read(poison) -> None:
    """Inside a capture: unscale_, step and update read nothing on the host; the optimizer
    kernel takes the found_inf pointer; one replay equals one eager step (skip and backoff, or
    update and growth)."""
    x = np.ones((2, 6), np.float32)
    runs = []
    for captured in (False, True):
        model = _model()
        opt = Adam(model[0].parameters(), lr=1e-2)
        scaler = tf.amp.GradScaler(init_scale=64.0, growth_interval=2)
        _scaled_step(model, opt, scaler, x, False)  # eager warm-up: states and scale on the device
        scaler.step(opt), scaler.update()
        _scaled_step(model, opt, scaler, x, poison)
        if captured:
            with fake_capture() as (capture, rec), forbid_host_reads():
                scaler.step(opt)
                scaler.update()
            assert kernels(rec) == ["adam_multi_tensor_update_f32", "amp_update_scale_f32"]
            found = rec.launches[0][3][-1]
            assert found is not None and found is rec.launches[1][3][2]
            replay(capture, rec)
        else:
            scaler.step(opt), scaler.update()
        runs.append(([host(p) for p in model[0].parameters()], scaler.get_scale(),
                     scaler.skipped_steps, opt.state[model[0].weight]["step"]))
    (eager_params, eager_scale, eager_skipped, eager_step), (params, scale, skipped, step) = runs
    for a, b in zip(eager_params, params):
        np.testing.assert_array_equal(b, a)
    assert scale == eager_scale == (32.0 if poison else 128.0)
    assert skipped == eager_skipped == int(poison)
    # eagerly a skipped step does not count; a captured one counts on the host (documented)
    assert eager_step == 2 - int(poison) and step == 2


def test_grad_scaler_refuses_an_uncapturable_optimizer_in_one_line() -> None:
    model = _model()
    opt = RMSprop(model[0].parameters())
    scaler = tf.amp.GradScaler(init_scale=8.0)
    _scaled_step(model, opt, scaler, np.ones((2, 6), np.float32), False)
    with fake_capture(), pytest.raises(RuntimeError, match=r"GradScaler.step: RMSprop cannot skip"):
        scaler.step(opt)
