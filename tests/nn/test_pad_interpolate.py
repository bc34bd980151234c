"""F.pad in every mode (negative constant widths included) and F.interpolate in every mode:
float64 gradchecks (hypothesis) and values and gradients against torch; the padding and
upsampling layers; PyTorch's argument errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
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


PAD_MODES = ["constant", "reflect", "replicate", "circular"]


@st.composite
def pad_case(draw):
    """A mode, a shape and widths that may crop either side of a dim, pad it, or both, reaching
    past what PyTorch accepts (so refusals are drawn too); torch's dims: k padded dims of a (k+1)-
    or (k+2)-D input in the copying modes (k <= 3), any number in constant mode."""
    mode = draw(st.sampled_from(PAD_MODES))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=2, max_size=5)))
    choices = [d for d in (len(shape) - 2, len(shape) - 1) if 1 <= d <= 3] if mode != "constant" else \
        list(range(1, len(shape) + 1))
    assume(choices)
    dims = draw(st.sampled_from(choices))
    pad = []
    for d in range(dims):
        n = shape[-1 - d]
        pad += [draw(st.integers(-n - 2, n + 1)), draw(st.integers(-n - 2, n + 1))]
    return mode, shape, tuple(pad), draw(st.integers(0, 2**31 - 1))


def _torch_undefined(mode, shape, pad):
    """torch's circular pad crops, then copies its border out of the output's own core: where the
    crops take more than the input holds, or a width is larger than what they leave, that copy
    overlaps itself or reads past the core, and torch raises on some layouts and returns a
    repeated copy, an empty tensor or uninitialised memory on others. tinyflow refuses these."""
    if mode != "circular":
        return False
    for i in range(len(pad) // 2):
        lo, hi, n = pad[2 * i], pad[2 * i + 1], shape[-1 - i]
        kept = n + min(lo, 0) + min(hi, 0)
        refused = n + lo + hi < 0 or lo > n or hi > n  # torch's own checks, before the copies
        if not refused and (kept < 0 or max(lo, hi) > kept):
            return True
    return False


@settings(max_examples=200)
@given(pad_case())
def test_pad_matches_torch_values_gradients_and_refusals(case):
    """Every mode with crops and pads mixed on one dim: torch's values and gradients (float64,
    exact), or a refusal where torch refuses (an error ``except RuntimeError`` catches)."""
    mode, shape, pad, seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    a, b = tf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    if _torch_undefined(mode, shape, pad):
        with pytest.raises(RuntimeError, match="circular padding"):
            F.pad(a, pad, mode)
        return
    try:
        ref = TF.pad(b, pad, mode=mode)
    except RuntimeError as e:
        with pytest.raises(type(e)):
            F.pad(a, pad, mode)
        return
    out = F.pad(a, pad, mode)
    assert out.shape == tuple(ref.shape)
    np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
    g = rng.standard_normal(ref.shape)
    out.backward(tf.tensor(g))
    if ref.numel() == 0:  # torch's gradient of an empty result is uninitialised memory
        assert not a.grad.numpy().any()
        return
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-12)


@settings(max_examples=40)
@given(pad_case())
def test_pad_gradcheck(case):
    """Central differences in float64 on the CPU, every mode, crops and pads mixed."""
    mode, shape, pad, seed = case
    x = np.random.default_rng(seed).standard_normal(shape)
    value = 1.5 if mode == "constant" else None
    try:
        F.pad(tf.tensor(x), pad, mode, value)
    except RuntimeError:
        assume(False)  # a refused size (the test above checks which)
    gradcheck(lambda a: F.pad(a, pad, mode, value), [f64(x)])


@pytest.mark.parametrize("mode, pad, expected", [
    ("reflect", (-1, 2), [2, 3, 4, 5, 4, 3]),  # the border mirrors the whole input, then the crop
    ("reflect", (2, -1), [3, 2, 1, 2, 3, 4]),
    ("reflect", (-4, 4), [5, 4, 3, 2, 1]),  # the crop reaches into the border
    ("reflect", (-6, 3), [3, 2]),
    ("replicate", (-1, 2), [2, 3, 4, 5, 5, 5]),
    ("replicate", (5, -1), [1, 1, 1, 1, 1, 1, 2, 3, 4]),
    ("replicate", (-6, 3), [5, 5]),
    ("circular", (-1, 2), [2, 3, 4, 5, 2, 3]),  # crop first, then wrap around what is left
    ("circular", (2, -1), [3, 4, 1, 2, 3, 4]),
    ("circular", (-3, -2), []),
    ("constant", (-2, 1), [3, 4, 5, 0]),
    ("constant", (-5, 1), [0]),
])
def test_pad_crops_one_side_and_pads_the_other_as_torch(mode, pad, expected):
    x = np.arange(1.0, 6.0).reshape(1, 1, 5)
    assert F.pad(tf.tensor(x), pad, mode).numpy().ravel().tolist() == expected
    assert TF.pad(torch.tensor(x), pad, mode).numpy().ravel().tolist() == expected


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
    with pytest.raises(RuntimeError, match="negative output size"):
        F.pad(x, (-4, 3))  # torch's narrow() refuses a crop past the input, whatever the other side adds
    with pytest.raises(NotImplementedError):
        F.pad(x, (1, 1), mode="symmetric")
    with pytest.raises(RuntimeError, match="leaves no entry"):
        F.pad(x, (-2, -1), mode="replicate")  # one padded dim, emptied
    assert F.pad(x, (0, 0, -2, -1), mode="replicate").shape == (1, 2, 0, 3)  # two, one of them kept
    with pytest.raises(RuntimeError, match="wraps around more than once"):
        F.pad(x, (-2, 2), mode="circular")  # one entry left, two to add
    with pytest.raises(NotImplementedError, match="bool"):
        F.pad(tf.ones(1, 2, 3, dtype=tf.bool), (1, 1), mode="reflect")
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


def _torch_uint8_reference(x, **kw):
    """torch's uint8 resize, one channel at a time: its vectorised kernel (C <= 4) is the
    reference. torch 2.x's generic kernel for C > 4 returns wrong pixels when one axis keeps its
    size (off by up to 255), and its vectorised one trips an internal assert for some 1-pixel
    outputs with C = 3; per channel neither happens."""
    return torch.cat([TF.interpolate(torch.tensor(x[:, c:c + 1]), **kw) for c in range(x.shape[1])], 1)


@settings(max_examples=60)
@given(mode=st.sampled_from(["bilinear", "bicubic", "nearest", "nearest-exact"]), align=st.booleans(),
       channels=st.integers(1, 6), h=st.integers(1, 9), w=st.integers(1, 9),
       size=st.one_of(st.tuples(st.integers(1, 12), st.integers(1, 12)), st.floats(0.3, 3.5)),
       seed=st.integers(0, 2**31 - 1))
def test_interpolate_uint8_images_match_torch_exactly(mode, align, channels, h, w, size, seed):
    """uint8 images as torch resizes them: nearest copies, bilinear and bicubic compute in fixed
    point per axis (W, then H) and round and clamp each pass to 0..255: the same bytes."""
    x = np.random.default_rng(seed).integers(0, 256, (2, channels, h, w)).astype(np.uint8)
    kw = dict(mode=mode, align_corners=align if "bi" in mode else None)
    kw.update(size=size) if isinstance(size, tuple) else kw.update(scale_factor=size)
    if isinstance(size, float) and min(int(h * size), int(w * size)) < 1:  # no pixel left: refused
        with pytest.raises(RuntimeError):
            F.interpolate(tf.tensor(x), **kw)
        return
    out = F.interpolate(tf.tensor(x), **kw)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out.numpy(), _torch_uint8_reference(x, **kw).numpy())


@pytest.mark.parametrize("shape, scale", [((1, 1, 1, 2), 2.25), ((1, 1, 2, 60), 2.1), ((1, 1, 3), 2.25),
                                           ((1, 1, 2, 2, 2), 2.4), ((1, 1, 5, 4), 1.1)])
def test_interpolate_nearest_picks_pixels_as_torch_where_the_size_doubles_or_stays(shape, scale):
    """torch's kernel for small 2-d outputs copies pixel o // 2 where the size doubles (o where it
    stays), whatever the scale factor; its kernel for 1-d, 3-d and large 2-d outputs uses the scale."""
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    out = F.interpolate(tf.tensor(x), scale_factor=scale, mode="nearest").numpy()
    np.testing.assert_array_equal(out, TF.interpolate(torch.tensor(x), scale_factor=scale, mode="nearest").numpy())


def test_interpolate_uint8_bilinear_is_not_truncated():
    """The issue's report: a uint8 image upsampled bilinearly came back zeros after the first pixel."""
    x = np.array([[[[0, 100], [200, 50]]]], dtype=np.uint8)
    out = F.interpolate(tf.tensor(x), scale_factor=2, mode="bilinear").numpy()
    np.testing.assert_array_equal(out, TF.interpolate(torch.tensor(x), scale_factor=2, mode="bilinear").numpy())
    assert out[0, 0, 0].tolist() == [0, 25, 75, 100]


@pytest.mark.parametrize("mode", ["linear", "trilinear", "area", "nearest"])
def test_interpolate_refuses_the_integer_inputs_torch_refuses(mode):
    dims = {"linear": 1, "trilinear": 3}.get(mode, 2)
    x = tf.zeros(*(1, 1, 2, 2, 2)[: dims + 2], dtype=tf.uint8 if mode != "nearest" else tf.int64)
    with pytest.raises(NotImplementedError, match="not implemented for"):
        F.interpolate(x, scale_factor=2, mode=mode)


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
