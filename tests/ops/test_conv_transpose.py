"""conv1d, conv_transpose1d/2d, unfold/fold and the Conv1d / ConvTranspose layers: float64
gradchecks (hypothesis over strides, paddings, dilations, groups, output_padding) and parity
with torch; padding modes of the conv layers; 'same' padding with an even kernel."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def f64(a):
    return tf.tensor(a, dtype=tf.float64, requires_grad=True)


@st.composite
def transpose_case(draw):
    groups = draw(st.sampled_from([1, 2]))
    cin, cog = groups * draw(st.integers(1, 2)), draw(st.integers(1, 2))
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 1)))
    output_padding = tuple(draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation))
    shape = (draw(st.integers(1, 2)), cin, draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    return dict(shape=shape, w=(cin, cog, *k), stride=stride, padding=padding, output_padding=output_padding,
                groups=groups, dilation=dilation, bias=draw(st.booleans()), seed=draw(st.integers(0, 2**31 - 1)))


def _out_size(case):
    return [(n - 1) * s - 2 * p + d * (k - 1) + op + 1 for n, s, p, d, k, op in zip(
        case["shape"][2:], case["stride"], case["padding"], case["dilation"], case["w"][2:], case["output_padding"])]


@given(transpose_case())
def test_conv_transpose2d_gradcheck(case):
    if min(_out_size(case)) < 1:
        return
    rng = np.random.default_rng(case["seed"])
    x, w = f64(rng.standard_normal(case["shape"])), f64(rng.standard_normal(case["w"]))
    b = f64(rng.standard_normal(case["w"][1] * case["groups"])) if case["bias"] else None
    kw = {k: case[k] for k in ("stride", "padding", "output_padding", "groups", "dilation")}
    gradcheck(lambda a, u, *rest: F.conv_transpose2d(a, u, *rest, **kw), [x, w] + ([b] if b is not None else []))


@given(transpose_case())
def test_conv_transpose2d_matches_torch(case):
    if min(_out_size(case)) < 1:
        return
    rng = np.random.default_rng(case["seed"])
    arrays = [rng.standard_normal(case["shape"]), rng.standard_normal(case["w"]),
              rng.standard_normal(case["w"][1] * case["groups"])]
    arrays = [a.astype(np.float32) for a in arrays[: 3 if case["bias"] else 2]]
    kw = {k: case[k] for k in ("stride", "padding", "output_padding", "groups", "dilation")}
    ours = [tf.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = F.conv_transpose2d(*ours, **kw), TF.conv_transpose2d(*theirs, **kw)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-5)
    g = rng.standard_normal(ref.shape).astype(np.float32)
    out.backward(tf.tensor(g))
    ref.backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4)


@settings(max_examples=10)
@given(stride=st.integers(1, 3), padding=st.integers(0, 2), dilation=st.integers(1, 2), groups=st.sampled_from([1, 2]),
       length=st.integers(5, 9), seed=st.integers(0, 2**31 - 1))
def test_conv1d_and_conv_transpose1d_gradcheck_and_torch(stride, padding, dilation, groups, length, seed):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal((2, 4, length)), rng.standard_normal((6, 4 // groups, 3))
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    gradcheck(lambda a, u: F.conv1d(a, u, **kw), [f64(x), f64(w)])
    out = F.conv1d(tf.tensor(x), tf.tensor(w), **kw)
    np.testing.assert_allclose(out.numpy(), TF.conv1d(torch.tensor(x), torch.tensor(w), **kw).numpy(), rtol=1e-10)
    wt = rng.standard_normal((4, 6 // groups, 3))
    gradcheck(lambda a, u: F.conv_transpose1d(a, u, **kw), [f64(x), f64(wt)])
    out = F.conv_transpose1d(tf.tensor(x), tf.tensor(wt), **kw)
    ref = TF.conv_transpose1d(torch.tensor(x), torch.tensor(wt), **kw)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kernel, dilation", [((2, 2), 1), ((4, 3), 1), ((2, 3), 2)])
def test_same_padding_with_an_even_kernel_matches_torch(kernel, dilation):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 2, 6, 7)), rng.standard_normal((3, 2, *kernel))
    out = F.conv2d(tf.tensor(x), tf.tensor(w), padding="same", dilation=dilation)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note that it pads a copy (so does tinyflow)
        ref = TF.conv2d(torch.tensor(x), torch.tensor(w), padding="same", dilation=dilation)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-10)
    gradcheck(lambda a: F.conv2d(a, tf.tensor(w, dtype=tf.float64), padding="same", dilation=dilation), [f64(x)])


@settings(max_examples=10)
@given(k=st.tuples(st.integers(1, 3), st.integers(1, 3)), stride=st.integers(1, 2), padding=st.integers(0, 1),
       dilation=st.integers(1, 2), seed=st.integers(0, 2**31 - 1))
def test_unfold_and_fold_match_torch_and_gradcheck(k, stride, padding, dilation, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 2, 6, 5))
    kw = dict(kernel_size=k, dilation=dilation, padding=padding, stride=stride)
    cols = F.unfold(tf.tensor(x), **kw)
    ref = TF.unfold(torch.tensor(x), **kw)
    np.testing.assert_allclose(cols.numpy(), ref.numpy(), rtol=1e-12)
    gradcheck(lambda a: F.unfold(a, **kw), [f64(x)])
    back = F.fold(tf.tensor(ref.numpy()), (6, 5), **kw)
    np.testing.assert_allclose(back.numpy(), TF.fold(ref, (6, 5), **kw).numpy(), rtol=1e-12)
    gradcheck(lambda a: F.fold(a, (6, 5), **kw), [f64(ref.numpy())])


def _copy_params(ours, theirs):
    for name, p in theirs.named_parameters():
        getattr(ours, name).array[...] = p.detach().numpy()


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [1, "same", (2,)])
def test_conv1d_layer_padding_modes_match_torch(mode, padding):
    ours, theirs = nn.Conv1d(3, 4, 3, padding=padding, padding_mode=mode), torch.nn.Conv1d(3, 4, 3, padding=padding,
                                                                                             padding_mode=mode)
    _copy_params(ours, theirs)
    x = np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float32)
    np.testing.assert_allclose(ours(tf.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv2d_layer_padding_modes_match_torch(mode):
    ours = nn.Conv2d(2, 3, (3, 2), padding=(1, 2), padding_mode=mode, bias=False)
    theirs = torch.nn.Conv2d(2, 3, (3, 2), padding=(1, 2), padding_mode=mode, bias=False)
    _copy_params(ours, theirs)
    x = np.random.default_rng(2).standard_normal((1, 2, 5, 6)).astype(np.float32)
    np.testing.assert_allclose(ours(tf.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("cls, args, kwargs", [
    ("Conv1d", (4, 6, 3), dict(stride=2, groups=2)),
    ("ConvTranspose1d", (4, 6, 3), dict(stride=2, output_padding=1, groups=2)),
    ("ConvTranspose2d", (4, 6, (3, 2)), dict(stride=2, padding=1, dilation=2, bias=False)),
    ("Conv2d", (4, 6, 3), dict(padding="same", dilation=2)),
])
def test_conv_layers_have_torch_names_shapes_init_and_repr(cls, args, kwargs):
    tf.manual_seed(0)
    ours, theirs = getattr(nn, cls)(*args, **kwargs), getattr(torch.nn, cls)(*args, **kwargs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    assert repr(ours) == repr(theirs)
    fan_in = theirs.weight[0].numel()  # PyTorch's fan_in is dim 1 times the kernel, transposed or not
    bound = 1 / np.sqrt(fan_in)  # kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    assert np.abs(ours.weight.numpy()).max() <= bound + 1e-6
    _copy_params(ours, theirs)
    x = np.random.default_rng(3).standard_normal((2, 4, 7, 5)[: 3 if "1d" in cls else 4]).astype(np.float32)
    np.testing.assert_allclose(ours(tf.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_conv_transpose2d_output_size_picks_the_output_padding():
    ours, theirs = nn.ConvTranspose2d(3, 2, 3, stride=2), torch.nn.ConvTranspose2d(3, 2, 3, stride=2)
    _copy_params(ours, theirs)
    x = np.random.default_rng(4).standard_normal((1, 3, 4, 4)).astype(np.float32)
    for size in [(9, 9), (10, 9), (1, 2, 10, 10)]:
        out, ref = ours(tf.tensor(x), output_size=size), theirs(torch.tensor(x), output_size=size)
        np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="valid sizes"):
        ours(tf.tensor(x), output_size=(12, 12))


def test_conv_transpose_errors_name_the_op_and_shapes():
    with pytest.raises(RuntimeError, match=r"conv_transpose2d: input \(1, 3, 4, 4\) has 3 channels but weight "
                                           r"\(2, 3, 3, 3\) expects 2"):
        F.conv_transpose2d(tf.zeros(1, 3, 4, 4), tf.zeros(2, 3, 3, 3))
    with pytest.raises(ValueError, match="output_padding"):
        F.conv_transpose2d(tf.zeros(1, 2, 4, 4), tf.zeros(2, 3, 3, 3), stride=2, output_padding=2)
    with pytest.raises(RuntimeError, match="conv1d: input must be"):
        F.conv1d(tf.zeros(2, 3, 4, 5), tf.zeros(2, 3, 3))
