"""Mixed precision on the CPU: autocast state, the casts it inserts, and GradScaler's dynamic
loss scaling with float16 on NumPy (the GPU runs the same code on CuPy arrays)."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
from tinyflow import amp
from tinyflow.optim import SGD


# ---- autocast state -------------------------------------------------------------------------
def test_autocast_sets_nests_and_restores_the_dtype():
    assert amp.autocast_dtype() is None and not amp.is_autocast_enabled()
    with amp.autocast("fp16") as dtype:
        assert dtype == np.float16 and amp.autocast_dtype() == np.float16
        with amp.autocast(enabled=False):
            assert amp.autocast_dtype() is None  # a float32 island
        assert amp.autocast_dtype() == np.float16
        with amp.autocast(np.float16):
            assert amp.autocast_dtype() == np.float16
    assert amp.autocast_dtype() is None


def test_autocast_restores_after_an_exception():
    with pytest.raises(KeyError):
        with amp.autocast("float16"):
            raise KeyError("boom")
    assert amp.autocast_dtype() is None


def test_autocast_is_per_thread():
    seen = []
    with amp.autocast("fp16"):
        t = threading.Thread(target=lambda: seen.append(amp.autocast_dtype()))
        t.start()
        t.join()
    assert seen == [None]


@pytest.mark.parametrize("bad", ["fp8", np.float32, np.int64, "float64"])
def test_autocast_rejects_dtypes_other_than_half_precision(bad):
    with pytest.raises(ValueError, match="autocast"):
        with amp.autocast(bad):
            pass


def test_bfloat16_names_its_requirement_when_ml_dtypes_is_missing():
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        with pytest.raises(TypeError, match="ml_dtypes"):
            amp.bfloat16()
        with pytest.raises(TypeError, match="ml_dtypes"):
            with amp.autocast("bf16"):
                pass
    else:
        assert amp.bfloat16().name == "bfloat16"


# ---- autocast_inputs ------------------------------------------------------------------------
def test_autocast_inputs_casts_only_floating_tensors_and_only_inside_autocast():
    x = tf.tensor(np.ones((2, 3), np.float32))
    idx = tf.tensor(np.arange(3), dtype=tf.int64)
    assert amp.autocast_inputs(x, idx, None) == (x, idx, None)  # outside: untouched
    with amp.autocast("fp16"):
        xa, ia, na, sa = amp.autocast_inputs(x, idx, None, 2.0)
    assert xa.dtype == np.float16 and ia is idx and na is None and sa == 2.0
    np.testing.assert_array_equal(xa.numpy(), np.ones((2, 3), np.float16))


def test_float64_passes_through_autocast_as_in_pytorch():
    x64 = tf.tensor(np.ones(3), dtype=tf.float64)
    with amp.autocast("fp16"):
        assert amp.autocast_inputs(x64) == (x64,)
        assert amp.float32_inputs(x64) == (x64,)


def test_float32_inputs_casts_half_tensors_up_and_only_inside_autocast():
    h = tf.tensor(np.full(3, 1.5, np.float16), requires_grad=True)
    x = tf.tensor(np.ones(3, np.float32))
    idx = tf.tensor(np.arange(3), dtype=tf.int64)
    assert amp.float32_inputs(h, x, idx, None) == (h, x, idx, None)  # outside: untouched
    with amp.autocast("bf16" if _has_ml_dtypes() else "fp16"):
        hf, xf, ia, na = amp.float32_inputs(h, x, idx, None)
    assert hf.dtype == np.float32 and xf is x and ia is idx and na is None
    (hf * 2.0).sum().backward()  # the cast is differentiable; the gradient arrives in float16
    assert h.grad.dtype == np.float16
    np.testing.assert_array_equal(h.grad.numpy(), np.full(3, 2.0, np.float16))


def _has_ml_dtypes() -> bool:
    try:
        import ml_dtypes  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def test_gradients_reach_float32_master_weights_in_float32():
    rng = np.random.default_rng(0)
    w = tf.tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    x = tf.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    with amp.autocast("fp16"):
        xa, wa = amp.autocast_inputs(x, w)
        y = xa @ wa  # (5, 3) computed in float16
    assert y.dtype == np.float16
    y.to(tf.float32).sum().backward()
    assert w.grad.dtype == np.float32
    expected = x.numpy().T @ np.ones((5, 3), np.float32)  # d sum(x @ w) / dw
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=2e-3, atol=2e-3)


# ---- GradScaler -------------------------------------------------------------------------------
def _param(values) -> tf.Tensor:
    return tf.tensor(np.asarray(values, np.float32), requires_grad=True)


def test_scaled_step_equals_the_unscaled_step():
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal(6).astype(np.float32)
    c = rng.standard_normal(6).astype(np.float32)

    def loss_of(w):
        return (w * tf.tensor(c)).sum()

    plain = _param(w0)
    opt = SGD([plain], lr=0.1, momentum=0.9)
    loss_of(plain).backward()
    opt.step()

    scaled = _param(w0)
    opt2 = SGD([scaled], lr=0.1, momentum=0.9)
    scaler = amp.GradScaler(init_scale=1024.0)
    scaler.scale(loss_of(scaled)).backward()
    np.testing.assert_allclose(scaled.grad.numpy(), 1024.0 * c, rtol=1e-6)
    scaler.step(opt2)
    scaler.update()
    np.testing.assert_allclose(scaled.numpy(), plain.numpy(), rtol=1e-6)
    np.testing.assert_allclose(scaled.grad.numpy(), c, rtol=1e-6)  # unscaled in place
    assert scaler.get_scale() == 1024.0 and scaler.skipped_steps == 0


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_overflow_skips_the_step_and_backs_off(bad):
    p = _param([1.0, 2.0])
    opt = SGD([p], lr=0.5)
    scaler = amp.GradScaler(init_scale=256.0, backoff_factor=0.25)
    p.grad = tf.tensor(np.array([1.0, bad], np.float32))
    assert scaler.unscale_(opt) is True
    assert scaler.step(opt) is None
    scaler.update()
    np.testing.assert_array_equal(p.numpy(), [1.0, 2.0])  # untouched
    assert scaler.get_scale() == 64.0 and scaler.skipped_steps == 1
    # the next clean step goes through
    p.grad = tf.tensor(np.array([64.0, 64.0], np.float32))
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(p.numpy(), [0.5, 1.5])


def test_scale_grows_after_growth_interval_clean_steps():
    p = _param([0.0])
    opt = SGD([p], lr=0.0)
    scaler = amp.GradScaler(init_scale=2.0, growth_interval=3)
    scales = []
    for step in range(7):
        p.grad = tf.tensor(np.array([np.inf if step == 4 else 1.0], np.float32))
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    # grows after 3 clean steps, halves on the overflow at step 4, tracker restarts
    assert scales == [2.0, 2.0, 4.0, 4.0, 2.0, 2.0, 2.0]


def test_unscale_twice_in_one_step_is_an_error():
    p = _param([1.0])
    p.grad = tf.tensor(np.array([1.0], np.float32))
    opt = SGD([p], lr=0.1)
    scaler = amp.GradScaler()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="once per step"):
        scaler.unscale_(opt)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the 2**16 case, on purpose
def test_float16_gradient_that_underflows_survives_with_loss_scaling():
    """The reason the scaler exists: d(loss)/dw = 2e-8 is 0 in float16 but not after scaling."""
    def grad_of(scale: float) -> np.ndarray:
        w = _param(np.full(4, 1e-5))
        k = tf.tensor(np.full(4, 1e-3, np.float16))
        with amp.autocast("fp16"):
            (wa,) = amp.autocast_inputs(w)
            loss = (wa * wa * k).sum()  # gradient 2 * w * k = 2e-8 per element
        opt = SGD([w], lr=1.0)
        scaler = amp.GradScaler(init_scale=scale, enabled=scale != 1.0)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        return w.grad.numpy()

    assert np.all(grad_of(1.0) == 0)  # underflow without scaling
    # 2**16 overflows float16 on the way back: inf, which step() would skip and back off from
    assert not np.isfinite(grad_of(2.0**16)).any()
    np.testing.assert_allclose(grad_of(2.0**14), 2e-8, rtol=0.05)


def test_disabled_scaler_is_a_pass_through():
    p = _param([1.0])
    p.grad = tf.tensor(np.array([np.inf], np.float32))
    opt = SGD([p], lr=0.1)
    scaler = amp.GradScaler(enabled=False)
    loss = p.sum()
    assert scaler.scale(loss) is loss and scaler.get_scale() == 1.0
    scaler.step(opt)  # runs even with inf: disabled means plain training
    assert not np.isfinite(p.numpy()).all()


def test_state_dict_round_trip():
    scaler = amp.GradScaler(init_scale=8.0, growth_interval=5)
    scaler._growth_tracker = 3
    other = amp.GradScaler()
    other.load_state_dict(scaler.state_dict())
    assert other.state_dict() == scaler.state_dict()


@pytest.mark.parametrize("kwargs", [dict(growth_factor=1.0), dict(backoff_factor=1.0),
                                    dict(growth_interval=0), dict(init_scale=0.0)])
def test_bad_scaler_arguments_are_rejected(kwargs):
    with pytest.raises(ValueError, match="GradScaler"):
        amp.GradScaler(**kwargs)


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(st.booleans(), min_size=1, max_size=30), interval=st.integers(1, 4))
def test_scale_follows_the_rule_for_any_overflow_pattern(steps, interval):
    """Model check: scale halves on each overflow, doubles after `interval` clean steps."""
    p = _param([0.0])
    opt = SGD([p], lr=0.0)
    scaler = amp.GradScaler(init_scale=1024.0, growth_interval=interval)
    scale, clean = 1024.0, 0
    for overflow in steps:
        p.grad = tf.tensor(np.array([np.nan if overflow else 1.0], np.float32))
        scaler.step(opt)
        scaler.update()
        if overflow:
            scale, clean = scale * 0.5, 0
        else:
            clean += 1
            if clean == interval:
                scale, clean = scale * 2.0, 0
        assert scaler.get_scale() == scale


# ---- PyTorch's spellings ------------------------------------------------------------------------
def test_torch_autocast_signature_device_type_then_dtype():
    import tinyflow as tf

    with tf.autocast("cpu") as dtype:  # torch.autocast(device_type="cpu"): bfloat16
        assert dtype.name == "bfloat16" and amp.autocast_dtype().name == "bfloat16"
    with tf.autocast(device_type="cpu", dtype=tf.float16):
        assert amp.autocast_dtype() == np.float16
    with tf.amp.autocast("cpu", enabled=False):
        assert amp.autocast_dtype() is None
    with tf.cpu.amp.autocast():
        assert amp.autocast_dtype().name == "bfloat16"
    assert amp.autocast_dtype() is None
    with pytest.raises(ValueError, match="unknown device_type 'mps'"):
        tf.autocast("mps", dtype=tf.float16)


def test_autocast_is_a_decorator_too():
    @amp.autocast("cpu", dtype="fp16")
    def inside():
        return amp.autocast_dtype()

    assert inside() == np.float16 and inside() == np.float16 and amp.autocast_dtype() is None


def test_cuda_autocast_and_scaler_without_cuda_warn_and_run_in_full_precision(monkeypatch):
    from tinyflow.amp import autocast_mode, grad_scaler

    monkeypatch.setattr(autocast_mode, "_cuda_available", lambda: False)
    monkeypatch.setattr(grad_scaler, "_cuda_available", lambda: False)
    with pytest.warns(UserWarning, match="CUDA is not available. Disabling"):
        ctx = amp.autocast("cuda")
    with ctx:
        assert amp.autocast_dtype() is None
    with pytest.warns(UserWarning, match="GradScaler is enabled, but CUDA is not available"):
        scaler = amp.GradScaler("cuda", init_scale=1024.0)
    assert not scaler.enabled and scaler.get_scale() == 1.0
    assert amp.GradScaler(512.0).get_scale() == 512.0  # tinyflow's positional init_scale still works
