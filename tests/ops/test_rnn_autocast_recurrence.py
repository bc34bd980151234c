"""Under autocast the sequence ops hand the recurrence half W_hh (cast once a call) with float32
states: on a GPU the persistent kernels then multiply half operands on tensor cores with float32
sums (csrc/rnn.cu, mode), and the NumPy reference defines the same product (h, dgates rounded to
W_hh's dtype: tinyflow/kernels/rnn.py, recurrent_weight). Checked here: what the ops pass, that
the CUDA twins on the emulator take the tensor-core mode with half weights, and that they give the
reference's results through a whole layer, forward and backward."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.kernels
from tinyflow.ops.rnn import gru_layer, lstm_layer

AMP = {"bf16": tf.bfloat16, "fp16": np.dtype(np.float16)}


def _parameters(rng: np.random.Generator, gates: int, inputs: int, hidden: int) -> list:
    shapes = ((gates * hidden, inputs), (gates * hidden, hidden), (gates * hidden,), (gates * hidden,))
    return [tf.tensor(0.5 * rng.standard_normal(s), dtype=tf.float32, requires_grad=True) for s in shapes]


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
@pytest.mark.parametrize("layer", ["lstm", "gru"])
def test_the_recurrence_gets_half_w_hh_once_a_call_and_float32_states(monkeypatch, amp, layer):
    seen: list[tuple] = []
    for name in (f"{layer}_sequence_forward", f"{layer}_sequence_backward"):
        real = getattr(tinyflow.kernels, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            if _name.endswith("forward"):  # (proj, w_hh, ...)
                data, w_hh = args[0], args[1]
            else:  # lstm (dout, dh_n, dc_n, w_hh, acts, ...), gru (dout, dh_n, w_hh, acts, ...)
                data, w_hh = (args[4], args[3]) if layer == "lstm" else (args[3], args[2])
            seen.append((_name, data.dtype, w_hh.dtype))
            return _real(*args, **kwargs)

        monkeypatch.setattr(tinyflow.kernels, name, spy)
    rng = np.random.default_rng(0)
    gates, fn = (4, lstm_layer) if layer == "lstm" else (3, gru_layer)
    x = tf.tensor(rng.standard_normal((5, 3, 2)), dtype=tf.float32)
    w = _parameters(rng, gates, 2, 4)
    with tf.amp.autocast(amp):
        outs = fn(x, *([None] * (gates // 2)), *w)
    out = outs[0]
    (out.to(tf.float32) * tf.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape),
                                    dtype=tf.float32)).sum().backward()
    half = AMP[amp]
    assert seen == [(f"{layer}_sequence_forward", np.float32, half),
                    (f"{layer}_sequence_backward", np.float32, half)]
    assert out.dtype == half and all(s.dtype == tf.float32 for s in outs[1:])
    assert all(p.grad.dtype == tf.float32 for p in w)  # the Cast takes the gradient back


@pytest.mark.skipif(importlib.util.find_spec("ml_dtypes") is None, reason="needs ml_dtypes")
@pytest.mark.parametrize("amp", ["bf16", "fp16"])
@pytest.mark.parametrize("layer", ["lstm", "gru"])
def test_on_the_emulator_the_cuda_twins_take_tensor_cores_with_half_weights(monkeypatch, amp, layer):
    """One layer under autocast through the op, the CUDA twins on the emulator: the float32
    kernels in their tensor-core mode with half weights, two launches, and the NumPy reference's
    outputs and gradients (the same half products, float32 sums) to float32 rounding."""
    import tinyflow_cuda.kernels as cuk
    import tinyflow_cuda.kernels.rnn as rnn_twin
    from cuda_tools import emulator
    from tinyflow_cuda import runtime

    if emulator.compiler() is None:
        pytest.skip("the emulator needs g++")
    device_module = importlib.import_module("tinyflow.device")
    gates, fn = (4, lstm_layer) if layer == "lstm" else (3, gru_layer)
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((4, 3, 2))
    params = [0.5 * rng.standard_normal(s) for s in ((gates * 5, 2), (gates * 5, 5), (gates * 5,), (gates * 5,))]
    h0 = [rng.standard_normal((3, 5)) for _ in range(gates // 2)]

    def once() -> list[np.ndarray]:
        x = tf.tensor(x_np, dtype=tf.float32, requires_grad=True)
        w = [tf.tensor(p, dtype=tf.float32, requires_grad=True) for p in params]
        states = [tf.tensor(h, dtype=tf.float32, requires_grad=True) for h in h0]
        with tf.amp.autocast(amp):
            outs = fn(x, *states, *w)
        sum((o.to(tf.float32) * tf.tensor(np.linspace(-1, 1, o.numel()).reshape(o.shape),
                                          dtype=tf.float32)).sum() for o in outs).backward()
        return [o.to(tf.float32).numpy() for o in outs] + [t.grad.numpy() for t in (x, *w, *states)]

    want = once()  # the NumPy references
    modes: list[tuple[str, int]] = []
    real_launch = rnn_twin._launch_persistent

    def spy(call, plan, args, *rest):
        modes.append((call.kernel, rest[-1]))
        real_launch(call, plan, args, *rest)

    monkeypatch.setattr(rnn_twin, "_launch_persistent", spy)
    with monkeypatch.context() as m, runtime.use(emulator.EmulatorRuntime.build()):
        m.setitem(device_module._kernel_modules, np, cuk)  # numpy arrays, CUDA twins
        got = once()
    kind = rnn_twin.HALF_WEIGHTS[np.dtype(AMP[amp]).name]
    assert modes == [(f"{layer}_sequence_forward_f32", rnn_twin.MODE_TENSOR_CORES | kind),
                     (f"{layer}_sequence_backward_f32", rnn_twin.MODE_TENSOR_CORES | kind)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-3 if g.ndim == 3 else 1e-4, atol=1e-4)
