"""tinyflow.dtypes and bfloat16/float16 as floating dtypes everywhere: predicates, names,
autograd through bf16 leaves and casts, module casts, and detect_anomaly."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow import dtypes

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)


# ---- predicates and names -------------------------------------------------------------------
@given(hnp.scalar_dtypes())
def test_predicates_agree_with_numpy_kinds_on_every_numpy_dtype(dtype):
    assert dtypes.is_floating(dtype) == (dtype.kind == "f")
    assert dtypes.is_complex(dtype) == (dtype.kind == "c")
    assert dtypes.is_floating_or_complex(dtype) == (dtype.kind in "fc")
    assert dtypes.is_half(dtype) == (dtype.kind == "f" and dtype.itemsize == 2)
    assert not dtypes.is_bfloat16(dtype)


@pytest.mark.parametrize("dtype", [np.dtype(c) for c in np.typecodes["All"]] + [np.dtype("V2")])
def test_predicates_on_all_numpy_typecodes_and_plain_void(dtype):
    assert dtypes.is_floating(dtype) == (dtype.kind == "f")
    assert not dtypes.is_bfloat16(dtype)


def test_bfloat16_is_a_half_precision_floating_dtype():
    assert BF16.kind == "V"  # why the predicates exist: NumPy does not call it a float
    assert dtypes.bfloat16() == BF16
    for spelling in (BF16, ml_dtypes.bfloat16, "bfloat16", "bf16"):
        assert dtypes.is_floating(spelling)
        assert dtypes.is_floating_or_complex(spelling)
        assert dtypes.is_half(spelling)
        assert dtypes.is_bfloat16(spelling)
        assert not dtypes.is_complex(spelling)
    assert not dtypes.is_half(np.float32)


@pytest.mark.parametrize(
    "name, expected",
    [("bf16", BF16), ("bfloat16", BF16), ("half", np.float16), ("fp16", np.float16),
     ("float", np.float32), ("double", np.float64), ("int", np.int32), ("long", np.int64),
     ("bool", np.bool_), ("float32", np.float32)],
)
def test_dtype_names_follow_pytorch(name, expected):
    assert dtypes.is_dtype_name(name)
    assert dtypes.as_dtype(name) == expected
    assert tf.zeros(2, dtype=name).dtype == expected
    assert tf.ones(2).to(name).dtype == expected


def test_tf_bfloat16_and_friends():
    assert tf.bfloat16 == BF16 and tf.float16 == np.float16
    assert tf.amp.bfloat16() == BF16
    assert tf.tensor([1.0]).bfloat16().dtype == BF16
    assert tf.tensor([1.0], dtype=tf.bfloat16).is_floating_point()
    assert not tf.tensor([1]).is_floating_point()


def test_tinyflow_imports_and_runs_without_ml_dtypes():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["ml_dtypes"] = None  # import ml_dtypes now raises ImportError
        import numpy as np
        import tinyflow as tf
        from tinyflow import dtypes
        from tinyflow.tensor import *  # noqa: F403 (bfloat16 must not be in __all__)
        x = tf.randn(3, requires_grad=True)
        x.half().float().sum().backward()
        assert x.grad.dtype == np.float32 and dtypes.is_floating(np.float16)
        for get in (lambda: tf.bfloat16, lambda: x.to("bf16"), lambda: tf.amp.bfloat16()):
            try:
                get()
            except TypeError as e:
                assert "ml_dtypes" in str(e), e
            else:
                raise AssertionError("bfloat16 without ml_dtypes must raise")
        assert "ml_dtypes" not in [m for m in sys.modules if sys.modules[m] is not None]
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# ---- tensors and autograd -------------------------------------------------------------------
def test_bf16_leaf_can_require_grad_and_gets_a_bf16_grad():
    x = tf.tensor([1.0, -2.0, 3.0], dtype="bf16", requires_grad=True)
    y = tf.tensor(np.array([0.5, 2.0, 4.0], dtype=BF16))  # a bf16 ndarray keeps its dtype
    assert x.requires_grad and y.dtype == BF16
    y.requires_grad_()
    (x * y * 2.0).sum().backward()  # a Python float keeps the tensor's dtype (no fp32 upcast)
    assert x.grad.dtype == BF16 and y.grad.dtype == BF16
    np.testing.assert_array_equal(x.grad.numpy().astype(np.float32), [1.0, 4.0, 8.0])
    np.testing.assert_array_equal(y.grad.numpy().astype(np.float32), [2.0, -4.0, 6.0])


@given(
    hnp.arrays(np.float32, hnp.array_shapes(max_dims=3, max_side=5),
               elements=st.floats(-100, 100, width=32)),
    st.sampled_from(["bf16", "fp16"]),
)
def test_cast_to_half_keeps_the_graph_both_ways(values, half):
    x = tf.tensor(values, requires_grad=True)  # fp32 leaf
    h = x.to(half)
    assert h.requires_grad and h.grad_fn is not None and h.is_floating_point()
    y = (h * h).float() * 3.0  # back to fp32, still in the graph
    assert y.dtype == np.float32 and y.requires_grad
    y.sum().backward()
    assert x.grad.dtype == np.float32
    # d/dx 3 * half(x)**2 = 6 * half(x) * (the grad of h*h is computed in the half dtype)
    hx = h.numpy().astype(np.float32)
    expected = (6 * hx).astype(dtypes.as_dtype(half)).astype(np.float32)
    tol = 2.0**-7 if half == "bf16" else 2.0**-10
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=tol, atol=1e-30)


def test_bf16_leaf_through_float_cast_gets_a_bf16_grad():
    w = tf.tensor([0.25, 0.5], dtype=tf.bfloat16, requires_grad=True)
    (w.float() * tf.tensor([3.0, 5.0])).sum().backward()
    assert w.grad.dtype == BF16
    np.testing.assert_array_equal(w.grad.numpy().astype(np.float32), [3.0, 5.0])


def test_bf16_module_parameters_get_bf16_grads_and_integer_buffers_stay():
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(),
                          nn.Linear(3 * 4 * 4, 2))
    model.bfloat16()
    for name, p in model.named_parameters():
        assert p.dtype == BF16, name
    buffers = dict(model.named_buffers())
    assert all(b.dtype == BF16 or b.dtype.kind in "iu" for b in buffers.values())
    loss = F.cross_entropy(model(tf.randn(4, 2, 4, 4).bfloat16()), tf.tensor([0, 1, 1, 0]))
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.dtype == BF16, name
    model.half()
    assert all(p.dtype == np.float16 for p in model.parameters())
    model.float()
    assert all(p.dtype == np.float32 for p in model.parameters())


def test_soft_targets_in_bf16_take_the_probability_path():
    logits = tf.tensor([[2.0, 0.0], [0.0, 1.0]], dtype="bf16", requires_grad=True)
    target = tf.tensor([[1.0, 0.0], [0.0, 1.0]], dtype="bf16")
    loss = F.cross_entropy(logits, target)
    expected = F.cross_entropy(logits.detach().float(), tf.tensor([0, 1])).item()
    assert abs(float(loss.item()) - expected) < 2e-2


def test_detect_anomaly_checks_bf16_outputs_and_gradients():
    x = tf.tensor([1.0, 0.0], dtype="bf16", requires_grad=True)
    with tf.detect_anomaly():
        (x * 2.0).sum().backward()  # clean: passes
        with pytest.raises(RuntimeError, match="detect_anomaly: Log.forward"), np.errstate(divide="ignore"):
            x.log()
        y = x.sqrt()  # finite forward, infinite gradient at 0
        with pytest.raises(RuntimeError, match="detect_anomaly: Sqrt.backward"), np.errstate(divide="ignore"):
            y.sum().backward()


def test_set_default_dtype_accepts_bfloat16_and_rejects_integers():
    before = tf.get_default_dtype()
    try:
        tf.set_default_dtype("bf16")
        assert tf.tensor([1.5]).dtype == BF16 and tf.zeros(2).dtype == BF16
        with pytest.raises(TypeError, match="floating"):
            tf.set_default_dtype(np.int32)
    finally:
        tf.set_default_dtype(before)


@pytest.mark.parametrize("name", ["bfloat16", "float16", "float32", "float64"])
def test_finfo_knows_every_floating_dtype_as_torch(name: str) -> None:
    """tf.finfo(bfloat16) works (NumPy's finfo does not know ml_dtypes' bfloat16); figures as torch's."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    ours, theirs = tf.finfo(getattr(tf, name)), torch.finfo(getattr(torch, name))
    for field in ("eps", "tiny", "max", "min"):
        assert float(getattr(ours, field)) == getattr(theirs, field), field
    assert ours.bits == theirs.bits
