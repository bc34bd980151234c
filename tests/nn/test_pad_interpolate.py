"""F.pad in every mode (negative constant widths included) and F.interpolate in every mode:
float64 gradchecks (hypothesis) and values and gradients against torch; the padding and
upsampling layers; PyTorch's argument errors."""
from __future__ import annotations

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


def _against_torch(ours, theirs, x, rtol=1e-5, atol=1e-6):
    a, b = tf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = ours(a), theirs(b)
    assert out.shape == tuple(ref.shape) and out.dtype == np.dtype(str(ref.dtype).split(".")[1])
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    g = np.random.default_rng(0).standard_normal(ref.shape).astype(x.dtype)
    out.backward(tf.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol)


@st.composite
def pad_case(draw):
    mode = draw(st.sampled_from(["constant", "reflect", "replicate", "circular"]))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=3, max_size=4)))
    # torch pads k dims of a (k+1)-D or (k+2)-D input in the non-constant modes (tinyflow: any)
    dims = draw(st.integers(1, len(shape)) if mode == "constant" else
                st.sampled_from([d for d in (len(shape) - 2, len(shape) - 1) if 1 <= d <= 3]))
    pad = []
    for d in range(dims):
        n = shape[-1 - d]
        # negative widths crop (every mode), but never below one entry; the rest pads what is left
        lo = draw(st.integers(-(n - 1), 3))
        hi = draw(st.integers(-(n - 1 - max(-lo, 0)), 3))
        left = n + min(lo, 0) + min(hi, 0)
        if mode == "reflect":
            lo, hi = min(lo, left - 1), min(hi, left - 1)
        elif mode == "circular":
            lo, hi = min(lo, left), min(hi, left)
        pad += [lo, hi]
    return mode, shape, tuple(pad), draw(st.integers(0, 2**31 - 1))


@given(pad_case())
def test_pad_gradcheck_and_torch(case):
    mode, shape, pad, seed = case
    x = np.random.default_rng(seed).standard_normal(shape)
    value = 1.5 if mode == "constant" else None
    gradcheck(lambda a: F.pad(a, pad, mode=mode, value=value), [f64(x)])
    kw = {"value": value} if value is not None else {}
    _against_torch(lambda a: F.pad(a, pad, mode=mode, **kw), lambda a: TF.pad(a, pad, mode=mode, **kw), x,
                   rtol=1e-12, atol=1e-12)


def test_pad_takes_more_dims_than_torch_in_the_copying_modes():
    x = np.random.default_rng(5).standard_normal((2, 3, 4))
    out = F.pad(tf.tensor(x), (1, 1, 2, 1, 1, 0), mode="replicate")  # all three dims of a 3-D input
    np.testing.assert_array_equal(out.numpy(), np.pad(x, [(1, 0), (2, 1), (1, 1)], mode="edge"))


def test_pad_errors_follow_torch():
    x = tf.zeros(1, 2, 3, 3)
    with pytest.raises(RuntimeError, match="smaller than the input size 3"):
        F.pad(x, (3, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="divisible by 2"):
        F.pad(x, (1, 2, 3))
    with pytest.raises(RuntimeError, match="doesn't take in value"):
        F.pad(x, (1, 1), mode="replicate", value=2.0)
    with pytest.raises(RuntimeError, match="negative output size"):
        F.pad(x, (-2, -2))
    with pytest.raises(NotImplementedError):
        F.pad(x, (1, 1), mode="symmetric")
    with pytest.raises(RuntimeError, match="smaller than the input size 2"):
        F.pad(x, (-1, 2), mode="reflect")  # the crop comes first
    assert F.pad(tf.tensor([1, 2, 3]), (1, 1), value=7).tolist() == [7, 1, 2, 3, 7]


PAD_LAYERS = [("ConstantPad1d", (2, 1.5)), ("ConstantPad2d", ((1, 0, 2, 1), -1.0)), ("ConstantPad3d", (1, 0.5)),
              ("ZeroPad1d", ((1, 2),)), ("ZeroPad2d", (2,)), ("ZeroPad3d", ((1, 0, 0, 1, 1, 0),)),
              ("ReflectionPad1d", (2,)), ("ReflectionPad2d", ((1, 2, 0, 1),)), ("ReflectionPad3d", (1,)),
              ("ReplicationPad1d", (3,)), ("ReplicationPad2d", (2,)), ("ReplicationPad3d", ((0, 1, 2, 0, 1, 1),)),
              ("CircularPad1d", (2,)), ("CircularPad2d", (1,)), ("CircularPad3d", (1,))]


@pytest.mark.parametrize("name, args", PAD_LAYERS)
def test_padding_layers_match_torch(name, args):
    dims = int(name[-2])
    x = np.random.default_rng(1).standard_normal((1, 2, 3, 4, 5)[: dims + 2]).astype(np.float32)
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    np.testing.assert_array_equal(ours(tf.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy())
    assert repr(ours) == repr(theirs)


INTERPOLATE = [
    ("nearest", None, 1), ("nearest", None, 2), ("nearest", None, 3), ("nearest-exact", None, 2),
    ("linear", False, 1), ("linear", True, 1), ("bilinear", False, 2), ("bilinear", True, 2),
    ("bicubic", False, 2), ("bicubic", True, 2), ("trilinear", False, 3), ("trilinear", True, 3),
    ("area", None, 1), ("area", None, 2),
]
SIZES = [dict(scale_factor=2), dict(scale_factor=0.5), dict(scale_factor=1.7), dict(size=5), dict(size=1),
         dict(scale_factor=3, recompute_scale_factor=True), dict(scale_factor=0.3)]


@pytest.mark.parametrize("mode, align_corners, dims", INTERPOLATE)
@pytest.mark.parametrize("size", SIZES, ids=lambda d: "-".join(f"{k}={v}" for k, v in d.items()))
def test_interpolate_matches_torch(mode, align_corners, dims, size):
    shape = (2, 3, 7, 6, 5)[: 2 + dims]
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    if "recompute_scale_factor" in size and mode == "area":
        return
    kw = dict(mode=mode, align_corners=align_corners, **size)
    _against_torch(lambda a: F.interpolate(a, **kw), lambda a: TF.interpolate(a, **kw), x, rtol=1e-5, atol=1e-5)


def test_interpolate_with_per_dim_sizes_and_factors():
    x = np.random.default_rng(3).standard_normal((1, 2, 5, 8)).astype(np.float32)
    for kw in [dict(size=(3, 11), mode="bilinear"), dict(scale_factor=(2.0, 0.75), mode="nearest"),
               dict(scale_factor=(1.5, 2.5), mode="bicubic", align_corners=True)]:
        _against_torch(lambda a, kw=kw: F.interpolate(a, **kw), lambda a, kw=kw: TF.interpolate(a, **kw), x)


@settings(max_examples=15)
@given(mode=st.sampled_from(["nearest", "bilinear", "bicubic", "nearest-exact", "area"]),
       align=st.booleans(), oh=st.integers(1, 6), ow=st.integers(1, 6), seed=st.integers(0, 2**31 - 1))
def test_interpolate_gradcheck(mode, align, oh, ow, seed):
    x = np.random.default_rng(seed).standard_normal((1, 2, 4, 3))
    ac = align if mode in ("bilinear", "bicubic") else None
    gradcheck(lambda a: F.interpolate(a, size=(oh, ow), mode=mode, align_corners=ac), [f64(x)])


def test_interpolate_errors_follow_torch():
    x = tf.zeros(1, 1, 4, 4)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(NotImplementedError, match="needs 3D input"):
        F.interpolate(x, scale_factor=2, mode="linear")
    with pytest.raises(NotImplementedError):
        F.interpolate(tf.zeros(4, 4), scale_factor=2)
    with pytest.raises(ValueError, match="spatial"):
        F.interpolate(x, size=(2, 2, 2))


@pytest.mark.parametrize("cls, kwargs", [
    ("Upsample", dict(scale_factor=2, mode="nearest")), ("Upsample", dict(size=(5, 3), mode="bilinear")),
    ("Upsample", dict(scale_factor=1.5, mode="bicubic", align_corners=True)),
    ("UpsamplingNearest2d", dict(scale_factor=2)), ("UpsamplingBilinear2d", dict(size=7)),
])
def test_upsampling_layers_match_torch(cls, kwargs):
    x = np.random.default_rng(4).standard_normal((1, 2, 4, 5)).astype(np.float32)
    ours, theirs = getattr(nn, cls)(**kwargs), getattr(torch.nn, cls)(**kwargs)
    np.testing.assert_allclose(ours(tf.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)
    assert repr(ours) == repr(theirs)
