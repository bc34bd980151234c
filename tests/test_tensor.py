"""Tensor basics: creation, dtypes, conversion, devices, randomness."""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf


def test_creation_and_dtypes():
    assert tf.tensor([1.0, 2.0]).dtype == tf.float32
    assert tf.tensor([1, 2]).dtype == tf.int64
    assert tf.tensor(np.zeros(2)).dtype == tf.float64
    assert tf.tensor([1.0], dtype=tf.float64).dtype == tf.float64
    assert tf.zeros(2, 3).shape == (2, 3) and tf.zeros((2, 3)).shape == (2, 3)
    assert tf.ones(2).tolist() == [1.0, 1.0]
    assert tf.full((2,), 7.0).tolist() == [7.0, 7.0]
    assert tf.arange(4).tolist() == [0, 1, 2, 3] and tf.arange(4).dtype == tf.int64
    np.testing.assert_allclose(tf.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5))
    x = tf.randn(3, 4)
    assert tf.zeros_like(x).shape == (3, 4) and tf.ones_like(x).dtype == tf.float32
    assert tf.empty(2).shape == (2,)
    r = tf.randint(0, 5, (100,))
    assert r.dtype == tf.int64 and 0 <= r.numpy().min() and r.numpy().max() < 5


def test_tensor_copies_its_input():
    a = np.ones(3, dtype=np.float32)
    t = tf.tensor(a)
    a[0] = 5
    assert t.tolist() == [1.0, 1.0, 1.0]


def test_item_numpy_tolist_detach():
    x = tf.tensor([[1.5]], requires_grad=True)
    assert x.item() == 1.5
    assert isinstance(x.numpy(), np.ndarray)
    d = x.detach()
    assert not d.requires_grad and d.array is x.array
    with pytest.raises(ValueError, match="only one-element"):
        tf.ones(2).item()


def test_comparisons_are_not_differentiable():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    m = x > 1.5
    assert m.dtype == tf.bool_ and not m.requires_grad and m.tolist() == [False, True]


def test_to_dtype_is_differentiable():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    y = x.to(tf.float64) * 2
    assert y.dtype == tf.float64
    y.sum().backward()
    assert x.grad.dtype == tf.float32 and x.grad.tolist() == [2.0, 2.0]


def test_manual_seed_reproduces():
    tf.manual_seed(123)
    a = tf.randn(5).numpy()
    tf.manual_seed(123)
    b = tf.randn(5).numpy()
    np.testing.assert_array_equal(a, b)
    g1, g2 = tf.Generator(7), tf.Generator(7)
    np.testing.assert_array_equal(tf.rand(3, generator=g1).numpy(), tf.rand(3, generator=g2).numpy())
    state = g1.get_state()
    first = tf.rand(3, generator=g1).numpy()
    g1.set_state(state)
    np.testing.assert_array_equal(first, tf.rand(3, generator=g1).numpy())


def test_cuda_device_is_a_clear_error_without_gpu():
    import tinyflow_cuda

    if tinyflow_cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        tf.zeros(2, device="cuda:0")
    with pytest.raises(ValueError, match="unknown device"):
        tf.Device("tpu")


def test_repr_is_like_pytorch():
    assert repr(tf.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert "requires_grad=True" in repr(tf.tensor([1.0], requires_grad=True))
    assert "grad_fn=<MulBackward>" in repr(tf.tensor([1.0], requires_grad=True) * 2)


def test_transpose_and_mT_check_their_dims_as_torch():
    torch = pytest.importorskip("torch")
    for shape, dims in [((3,), (0, 5)), ((2, 3), (-3, 0)), ((), (0, 1))]:
        with pytest.raises(IndexError, match="transpose: dim -?[0-9] is out of range"):
            tf.zeros(shape).transpose(*dims)
        with pytest.raises(IndexError):
            torch.zeros(shape).transpose(*dims)
    with pytest.raises(RuntimeError, match="mT is only supported on matrices .* Got 1-D"):
        tf.zeros(3).mT
    assert tf.tensor(2.0).transpose(0, -1).item() == 2.0
    x = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(tf.tensor(x).transpose(-1, 0).numpy(), torch.tensor(x).transpose(-1, 0).numpy())
    np.testing.assert_array_equal(tf.tensor(x).mT.numpy(), torch.tensor(x).mT.numpy())


def test_size_returns_a_size_like_torch():
    x = tf.zeros(2, 3, 4)
    s = x.size()
    assert isinstance(s, tf.Size) and s == (2, 3, 4) and s.numel() == 24 and repr(s) == "tinyflow.Size([2, 3, 4])"
    assert x.size(1) == 3 and x.size(-1) == 4


def test_set_printoptions_precision_threshold_profile():
    try:
        tf.set_printoptions(precision=2)
        assert repr(tf.tensor([1.23456, 2.5])) == "tensor([1.23, 2.50])"
        tf.set_printoptions(threshold=5, edgeitems=1)
        assert repr(tf.arange(10.0)) == "tensor([0., ..., 9.])"
        tf.set_printoptions(sci_mode=True)
        assert "e+00" in repr(tf.tensor([1.5]))
        with pytest.raises(ValueError, match="unknown profile 'long'"):
            tf.set_printoptions(profile="long")
    finally:
        tf.set_printoptions(profile="default")
    assert tf.get_printoptions()["precision"] == 4 and repr(tf.tensor([1.23456])) == "tensor([1.2346])"


@pytest.mark.parametrize("spec", ["", ".2f", "+.3e", "8.1f", "04d", "g"])
def test_format_spec_of_a_0d_tensor_formats_its_value_as_torch(spec):
    torch = pytest.importorskip("torch")
    for value, dtype in [(1.5, "float32"), (-2.25, "float64"), (3, "int64")]:
        if spec == "04d" and dtype != "int64":
            continue
        ours, theirs = tf.tensor(value, dtype=getattr(tf, dtype)), torch.tensor(value, dtype=getattr(torch, dtype))
        assert format(ours, spec) == format(theirs, spec)  # f"{loss:.4f}": the value, as torch
        assert f"{ours.reshape(1)[0]:{spec}}" == f"{theirs.reshape(1)[0]:{spec}}"  # an element of a 1-d tensor


def test_format_spec_of_other_tensors_is_refused_as_torch():
    torch = pytest.importorskip("torch")
    for ours, theirs in [(tf.ones(2), torch.ones(2)), (tf.nn.Parameter(tf.tensor(1.0)), torch.nn.Parameter(torch.tensor(1.0)))]:
        with pytest.raises(TypeError) as expected:
            format(theirs, ".2f")
        with pytest.raises(TypeError, match="unsupported format string") as got:
            format(ours, ".2f")
        assert str(got.value).split(" passed to ")[1].rstrip(".") == str(expected.value).split(" passed to ")[1].rstrip(".")
        assert format(ours, "") == str(ours)  # no spec: str(), as f"{x}"
