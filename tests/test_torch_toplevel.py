"""Top-level torch.* helpers: tinyflow.Size (functions.py) as torch.Size, compile, deterministic flags."""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf


def test_size_is_a_tuple_that_equals_shapes_and_counts_elements():
    s = tf.Size([2, 3, 4])
    assert s == (2, 3, 4) and tf.zeros(2, 3, 4).shape == s and isinstance(s, tuple)
    assert s.numel() == 24 and tf.Size().numel() == 1
    assert isinstance(s[1:], tf.Size) and s[1:] == (3, 4) and s[0] == 2
    assert isinstance(s + (5,), tf.Size) and s + (5,) == (2, 3, 4, 5)
    assert repr(s) == "tinyflow.Size([2, 3, 4])"
    assert tf.zeros(tf.Size([2, 5])).shape == (2, 5)


def test_size_compares_like_torch_size():
    torch = pytest.importorskip("torch")
    assert tuple(tf.Size([3, 1])) == tuple(torch.Size([3, 1]))
    assert tf.Size([3, 1]).numel() == torch.Size([3, 1]).numel()


def test_size_refuses_non_integer_dimensions():
    with pytest.raises(TypeError, match="Size: a dimension must be an int, got float"):
        tf.Size([2.5])


def test_compile_returns_the_module_or_function_itself():
    import tinyflow.nn as nn

    model = nn.Linear(2, 2)
    assert tf.compile(model) is model and tf.compile(model, mode="max-autotune") is model

    @tf.compile
    def f(x):
        return x * 2

    @tf.compile(fullgraph=True)
    def g(x):
        return x + 1

    assert f(tf.ones(1)).item() == 2.0 and g(tf.ones(1)).item() == 2.0
    with pytest.raises(TypeError, match="compile: expected a Module or a function, got int"):
        tf.compile(3)


def test_deterministic_algorithms_flag_round_trips():
    before = tf.are_deterministic_algorithms_enabled()
    try:
        tf.use_deterministic_algorithms(True, warn_only=True)
        assert tf.are_deterministic_algorithms_enabled() and tf.is_deterministic_algorithms_warn_only_enabled()
    finally:
        tf.use_deterministic_algorithms(before)


def test_set_num_threads_reaches_tinyflows_pool_and_openblas():
    import sys

    from tinyflow.kernels import _cpu

    before = (_cpu._set_threads, _cpu._set_blas_threads, _cpu.blas_threads())
    try:
        tf.set_num_threads(1)
        assert tf.get_num_threads() == 1 and _cpu.num_threads() == 1
        if _cpu.openblas_threads() is None:
            pytest.skip("NumPy's BLAS is not an OpenBLAS this process can find")
        assert _cpu.blas_threads() == 1
        assert _cpu.openblas_threads() == 1  # OpenBLAS itself now runs one thread
        tf.set_num_threads(2)
        assert _cpu.openblas_threads() == 2 and tf.get_num_threads() == 2
    finally:
        _cpu._set_threads, _cpu._set_blas_threads = before[0], before[1]
        if _cpu._openblas_setter() is not None:
            _cpu._openblas_setter()(before[2])
    with pytest.raises(ValueError, match="set_num_threads: expected a positive integer, got 0"):
        tf.set_num_threads(0)
    assert sys.modules["tinyflow"].get_num_interop_threads() == 1


# ---- out= -------------------------------------------------------------------------------------------
def test_out_keyword_writes_into_the_given_tensor_as_torch():
    torch = pytest.importorskip("torch")
    a, b = np.array([[1.0, -2.0], [3.0, 0.5]], np.float32), np.array([0.5, 2.0], np.float32)
    for name, args in [("add", (b,)), ("mul", (b,)), ("sin", ()), ("matmul", (a,)), ("clamp", (0.0, 1.0)),
                       ("cumsum", (1,)), ("sum", (0,))]:
        tf_args = [tf.tensor(x) if isinstance(x, np.ndarray) else x for x in args]
        th_args = [torch.tensor(x) if isinstance(x, np.ndarray) else x for x in args]
        out, ref = tf.empty(0), torch.empty(0)
        got = getattr(tf, name)(tf.tensor(a), *tf_args, out=out)
        getattr(torch, name)(torch.tensor(a), *th_args, out=ref)
        assert got is out and out.shape == tuple(ref.shape)
        np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6)
    # a float result into a float64 out is cast; an integer result into a float out too
    out64 = tf.empty(2, dtype=tf.float64)
    tf.add(tf.tensor([1, 2]), 1, out=out64)
    assert out64.dtype == tf.float64 and out64.tolist() == [2.0, 3.0]
    # tuple results: (values, indices), returned as the same named tuple
    values, indices = tf.empty(3), tf.empty(3, dtype=tf.int64)
    got = tf.sort(tf.tensor([3.0, 1.0, 2.0]), out=(values, indices))
    assert got.values is values and got.indices is indices and indices.tolist() == [1, 2, 0]


def test_out_keyword_errors_and_resize_warning():
    a = tf.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="add\\(\\): result type float32 can't be cast to the desired output type int64"):
        tf.add(a, a, out=tf.zeros(2, dtype=tf.int64))
    with pytest.raises(RuntimeError, match="sin\\(\\): functions with out=.* don't support automatic differentiation"):
        tf.sin(tf.tensor([1.0], requires_grad=True), out=tf.empty(1))
    with tf.no_grad():  # allowed without grad, as in PyTorch
        assert tf.sin(tf.tensor([0.0], requires_grad=True), out=tf.empty(1)).tolist() == [0.0]
    with pytest.raises(TypeError, match="argument 'out' must be a Tensor"):
        tf.add(a, a, out=[1, 2])
    with pytest.raises(TypeError, match="must be a tuple of 2 Tensors"):
        tf.sort(a, out=tf.empty(2))
    out = tf.zeros(5)
    with pytest.warns(UserWarning, match="was resized since it had shape \\[5\\]"):
        tf.mul(a, a, out=out)
    assert out.tolist() == [1.0, 4.0]


def test_memory_formats_pin_memory_anomaly_and_distance_functions():
    torch = pytest.importorskip("torch")
    x = tf.randn(1, 2, 4, 4)
    assert x.to(memory_format=tf.channels_last) is x and x.contiguous(memory_format=tf.contiguous_format) is x
    y = x.to(copy=True)
    assert y is not x and np.array_equal(y.numpy(), x.numpy())
    conv = tf.nn.Conv2d(2, 2, 3).to(memory_format=tf.channels_last)
    assert tuple(conv(x).shape) == (1, 2, 2, 2) and repr(tf.channels_last) == "tinyflow.channels_last"
    assert x.pin_memory() is x and not x.is_pinned() and x.share_memory_() is x
    a, b = np.random.default_rng(0).standard_normal((2, 3, 4))
    np.testing.assert_allclose(tf.cosine_similarity(tf.tensor(a), tf.tensor(b)).numpy(),
                               torch.cosine_similarity(torch.tensor(a), torch.tensor(b)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(tf.pairwise_distance(tf.tensor(a), tf.tensor(b)).numpy(),
                               torch.pairwise_distance(torch.tensor(a), torch.tensor(b)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(tf.pdist(tf.tensor(a)).numpy(), torch.pdist(torch.tensor(a)).numpy(), rtol=1e-6)
    assert not tf.autograd.is_anomaly_enabled()
    with tf.autograd.set_detect_anomaly(True):
        assert tf.autograd.is_anomaly_enabled()
        with pytest.raises(RuntimeError, match="NaN or Inf"):
            (tf.tensor([-1.0], requires_grad=True).log() * 0).sum().backward()
    assert not tf.autograd.is_anomaly_enabled()
    tf.autograd.set_detect_anomaly(True)  # a plain call switches it on until switched off
    assert tf.autograd.is_anomaly_enabled()
    tf.autograd.set_detect_anomaly(False)
    assert not tf.autograd.is_anomaly_enabled()


def test_onnx_imports_and_export_says_there_is_no_exporter(tmp_path) -> None:
    """pytorch/examples' word_language_model imports torch.onnx at the top and exports on request."""
    import importlib

    import tinyflow as tf

    onnx = importlib.import_module("tinyflow.onnx")
    assert tf.onnx is onnx and onnx.is_in_onnx_export() is False
    model = tf.nn.Linear(2, 2)
    with pytest.raises(NotImplementedError, match=r"no ONNX exporter \(asked to export Linear to '.*m.onnx'\).*state_dict"):
        tf.onnx.export(model, tf.zeros(1, 2), str(tmp_path / "m.onnx"))
    assert not (tmp_path / "m.onnx").exists()


def test_float32_matmul_precision_is_recorded_and_a_bad_value_warns_as_torch():
    torch = pytest.importorskip("torch")
    before = tf.get_float32_matmul_precision()
    assert before == torch.get_float32_matmul_precision() == "highest"
    try:
        tf.set_float32_matmul_precision("high")  # what nanoGPT-style programs call first
        assert tf.get_float32_matmul_precision() == "high"
        with pytest.warns(UserWarning, match="not one of 'highest', 'high', or 'medium'"):
            tf.set_float32_matmul_precision("fast")
        assert tf.get_float32_matmul_precision() == "high"  # no effect, as torch's
    finally:
        tf.set_float32_matmul_precision(before)
