"""conv2d: float64 gradchecks over every option, PyTorch comparisons, and bad-input errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.testing import gradcheck

SETTINGS = settings(max_examples=25, deadline=None)


@st.composite
def conv_case(draw):
    """A small random conv geometry: every option of F.conv2d, non-square where possible."""
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cin = groups * draw(st.integers(1, 2))
    cout = groups * draw(st.integers(1, 2))
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 2)), draw(st.integers(1, 3)))
    p = (draw(st.integers(0, 2)), draw(st.integers(0, 1)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = draw(st.integers(max(1, d[0] * (k[0] - 1) + 1 - 2 * p[0]), 5))
    w = draw(st.integers(max(1, d[1] * (k[1] - 1) + 1 - 2 * p[1]), 6))
    n = draw(st.integers(1, 2))
    bias = draw(st.booleans())
    seed = draw(st.integers(0, 2**31 - 1))
    return dict(n=n, cin=cin, cout=cout, h=h, w=w, k=k, s=s, p=p, d=d, groups=groups, bias=bias, seed=seed)


def _arrays(c, dtype=np.float64):
    rng = np.random.default_rng(c["seed"])
    x = rng.standard_normal((c["n"], c["cin"], c["h"], c["w"])).astype(dtype)
    w = rng.standard_normal((c["cout"], c["cin"] // c["groups"], *c["k"])).astype(dtype)
    b = rng.standard_normal(c["cout"]).astype(dtype) if c["bias"] else None
    return x, w, b


@SETTINGS
@given(conv_case())
def test_conv2d_gradcheck_every_option(c):
    x, w, b = _arrays(c)
    inputs = [tf.tensor(x, dtype=tf.float64, requires_grad=True),
              tf.tensor(w, dtype=tf.float64, requires_grad=True)]
    if b is not None:
        inputs.append(tf.tensor(b, dtype=tf.float64, requires_grad=True))

    def fn(x, w, b=None):
        return F.conv2d(x, w, b, stride=c["s"], padding=c["p"], dilation=c["d"], groups=c["groups"])

    gradcheck(fn, inputs)


@SETTINGS
@given(conv_case())
def test_conv2d_matches_pytorch_forward_and_backward(c):
    torch = pytest.importorskip("torch")
    x, w, b = _arrays(c, np.float32)
    tx, tw = tf.tensor(x, requires_grad=True), tf.tensor(w, requires_grad=True)
    tb = tf.tensor(b, requires_grad=True) if b is not None else None
    y = F.conv2d(tx, tw, tb, stride=c["s"], padding=c["p"], dilation=c["d"], groups=c["groups"])
    g = np.random.default_rng(1).standard_normal(y.shape).astype(np.float32)
    y.backward(tf.tensor(g))

    px, pw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    pb = torch.tensor(b, requires_grad=True) if b is not None else None
    py = torch.nn.functional.conv2d(px, pw, pb, stride=c["s"], padding=c["p"], dilation=c["d"],
                                    groups=c["groups"])
    py.backward(torch.tensor(g))
    assert y.dtype == tf.float32 and tx.grad.dtype == tf.float32
    np.testing.assert_allclose(y.numpy(), py.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tw.grad.numpy(), pw.grad.numpy(), rtol=1e-4, atol=1e-4)
    if b is not None:
        np.testing.assert_allclose(tb.grad.numpy(), pb.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_conv2d_alexnet_conv1_geometry_matches_pytorch():
    """A real layer: 11x11 stride 4 padding 2 on 3x35x35, the conv1 of AlexNet (batch 2)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 35, 35)).astype(np.float32)
    w = rng.standard_normal((8, 3, 11, 11)).astype(np.float32) * 0.1
    y = F.conv2d(tf.tensor(x), tf.tensor(w), stride=4, padding=2)
    ref = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=4, padding=2)
    assert y.shape == (2, 8, 8, 8)
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)


def test_conv2d_unbatched_and_string_padding():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 6)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    for padding in ("same", "valid"):
        y = F.conv2d(tf.tensor(x), tf.tensor(w), padding=padding)
        ref = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), padding=padding)
        assert y.shape == tuple(ref.shape)
        np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-4, atol=1e-5)


def test_conv2d_layer_matches_torch_layer_after_loading_its_weights():
    torch = pytest.importorskip("torch")
    ref = torch.nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=1, dilation=(1, 2), groups=2)
    layer = nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=1, dilation=(1, 2), groups=2)
    assert [(k, tuple(v.shape)) for k, v in layer.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in ref.state_dict().items()]
    layer.load_state_dict(ref.state_dict())
    x = np.random.default_rng(0).standard_normal((2, 4, 7, 7)).astype(np.float32)
    np.testing.assert_allclose(layer(tf.tensor(x)).numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)


def test_conv2d_default_init_has_pytorch_bounds():
    tf.manual_seed(0)
    layer = nn.Conv2d(16, 8, 3)
    bound = 1 / np.sqrt(16 * 9)
    w = layer.weight.numpy()
    assert layer.weight.dtype == tf.float32
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.abs(layer.bias.numpy()).max() <= bound


def test_conv2d_skips_input_gradient_work_for_images():
    """The first layer's input needs no gradient: backward must still give the weight's."""
    x = tf.randn(2, 3, 8, 8)
    layer = nn.Conv2d(3, 4, 3)
    layer(x).sum().backward()
    assert x.grad is None and layer.weight.grad.shape == (4, 3, 3, 3)


@pytest.mark.parametrize(
    "x_shape, w_shape, kwargs, words",
    [
        ((2, 3, 8, 8), (4, 5, 3, 3), {}, ["conv2d", "(2, 3, 8, 8)", "(4, 5, 3, 3)", "channels"]),
        ((2, 4, 8, 8), (4, 3, 3, 3), {"groups": 2}, ["conv2d", "(2, 4, 8, 8)", "(4, 3, 3, 3)", "groups=2"]),
        ((2, 4, 8, 8), (3, 2, 3, 3), {"groups": 2}, ["conv2d", "groups=2", "(3, 2, 3, 3)"]),
        ((2, 3, 2, 2), (4, 3, 5, 5), {}, ["conv2d", "(2, 3, 2, 2)", "too small"]),
        ((3, 8, 8), (4, 3, 3, 3, 1), {}, ["conv2d", "weight", "(4, 3, 3, 3, 1)"]),
        ((8, 8), (4, 1, 3, 3), {}, ["conv2d", "(8, 8)"]),
        ((2, 3, 8, 8), (4, 3, 3, 3), {"stride": 0}, ["conv2d", "stride"]),
        ((2, 3, 8, 8), (4, 3, 3, 3), {"padding": "full"}, ["conv2d", "padding"]),
        ((2, 3, 8, 8), (4, 3, 2, 2), {"padding": "same", "stride": 2}, ["conv2d", "same", "strided"]),
    ],
)
def test_conv2d_bad_input_raises_value_error_naming_op_and_shapes(x_shape, w_shape, kwargs, words):
    with pytest.raises(ValueError) as err:  # a RuntimeError too, as PyTorch raises
        F.conv2d(tf.zeros(*x_shape), tf.zeros(*w_shape), **kwargs)
    for word in words:
        assert word in str(err.value)


def test_conv2d_bias_shape_and_dtype_mismatch():
    with pytest.raises(ValueError, match=r"conv2d: bias shape \(3,\) must be \(4,\)"):
        F.conv2d(tf.zeros(1, 3, 5, 5), tf.zeros(4, 3, 3, 3), tf.zeros(3))
    with pytest.raises(ValueError, match="conv2d: input dtype float64 and weight dtype float32"):
        F.conv2d(tf.zeros(1, 3, 5, 5, dtype=tf.float64), tf.zeros(4, 3, 3, 3))


def test_conv_layer_rejects_bad_groups():
    with pytest.raises(ValueError, match="divisible by groups=2"):
        nn.Conv2d(3, 4, 3, groups=2)


def test_conv2d_empty_batch_and_non_contiguous_input():
    x = tf.zeros(0, 4, 8, 8, requires_grad=True)
    w = tf.randn(4, 2, 3, 3, requires_grad=True)
    y = F.conv2d(x, w, padding=1, groups=2)
    y.sum().backward()
    assert y.shape == (0, 4, 8, 8) and x.grad.shape == (0, 4, 8, 8)
    np.testing.assert_array_equal(w.grad.numpy(), 0)
    xt = tf.randn(2, 8, 8, 4).permute(0, 3, 1, 2)  # an NHWC array viewed as NCHW
    expected = F.conv2d(tf.tensor(np.ascontiguousarray(xt.numpy())), w, groups=2)
    np.testing.assert_allclose(F.conv2d(xt, w, groups=2).numpy(), expected.numpy(), rtol=1e-6)


def test_conv2d_threaded_path_matches_inline(monkeypatch):
    """The channel-split transposes and kernels (forced with tiny chunks) change nothing."""
    from tinyflow.kernels import _cpu

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 9, 8)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)

    def run():
        tx, tw, tb = (tf.tensor(a, requires_grad=True) for a in (x, w, b))
        y = F.conv2d(tx, tw, tb, stride=(2, 1), padding=1, groups=2)
        (y * y).sum().backward()
        return [y.numpy(), tx.grad.numpy(), tw.grad.numpy(), tb.grad.numpy()]

    monkeypatch.setenv("TINYFLOW_NUM_THREADS", "1")
    inline = run()
    monkeypatch.setattr(_cpu, "MIN_CHUNK", 1)
    monkeypatch.setenv("TINYFLOW_NUM_THREADS", "3")
    for a, b_ in zip(run(), inline):
        np.testing.assert_allclose(a, b_, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------- the Winograd F(2x2, 3x3) path
def _use_winograd(x_shape, w_shape, stride=(1, 1), dilation=(1, 1), groups=1, dtype=np.float32):
    """Whether the CPU kernels run a convolution of these shapes as Winograd F(2x2, 3x3)."""
    from tinyflow.ops import conv as conv_op

    return conv_op.use_winograd(np.empty(x_shape, dtype), np.empty(w_shape, dtype), stride, dilation, groups)


class _winograd_everywhere:
    """Lower the Winograd thresholds so that small test shapes take that path (restored after)."""

    def __enter__(self):
        from tinyflow.kernels import conv as conv_kernels
        from tinyflow.ops import conv as conv_op

        self.mod, self.saved = conv_op, (conv_op.WINOGRAD_MIN_CHANNELS, conv_op.WINOGRAD_MIN_BATCH)
        conv_op.WINOGRAD_MIN_CHANNELS, conv_op.WINOGRAD_MIN_BATCH = 1, 1
        return conv_kernels

    def __exit__(self, *exc):
        self.mod.WINOGRAD_MIN_CHANNELS, self.mod.WINOGRAD_MIN_BATCH = self.saved


@st.composite
def winograd_case(draw):
    """A stride-1 ungrouped geometry with 3x3 / 5x5 / 6x6-like kernels, odd and even outputs."""
    k = (draw(st.sampled_from([3, 5, 6])), draw(st.sampled_from([3, 5])))
    p = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    h = draw(st.integers(max(1, k[0] - 2 * p[0]), k[0] + 3))
    w = draw(st.integers(max(1, k[1] - 2 * p[1]), k[1] + 3))
    return dict(n=draw(st.integers(1, 2)), cin=draw(st.integers(1, 3)), cout=draw(st.integers(1, 3)),
                h=h, w=w, k=k, s=(1, 1), p=p, d=(1, 1), groups=1, bias=draw(st.booleans()),
                seed=draw(st.integers(0, 2**31 - 1)))


@SETTINGS
@given(winograd_case())
def test_conv2d_winograd_path_gradcheck(c):
    x, w, b = _arrays(c)
    inputs = [tf.tensor(x, dtype=tf.float64, requires_grad=True),
              tf.tensor(w, dtype=tf.float64, requires_grad=True)]
    if b is not None:
        inputs.append(tf.tensor(b, dtype=tf.float64, requires_grad=True))

    def fn(x, w, b=None):
        return F.conv2d(x, w, b, padding=c["p"])

    with _winograd_everywhere():
        assert _use_winograd(x.shape, w.shape, dtype=np.float64)
        gradcheck(fn, inputs)


@pytest.mark.parametrize("k, p, size", [(3, 1, 7), (3, 1, 8), (3, 0, 9), (5, 2, 15), (5, 2, 6)])
def test_conv2d_winograd_path_matches_pytorch_at_alexnet_like_shapes(k, p, size):
    """Default thresholds (16 channels, batch 8): the path AlexNet's conv2-5 take, vs PyTorch."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(k * 100 + size)
    x = rng.standard_normal((8, 16, size, size)).astype(np.float32)
    w = (rng.standard_normal((24, 16, k, k)) / np.sqrt(16 * k * k)).astype(np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    assert _use_winograd(x.shape, w.shape)
    tx, tw, tb = (tf.tensor(a, requires_grad=True) for a in (x, w, b))
    y = F.conv2d(tx, tw, tb, padding=p)
    g = rng.standard_normal(y.shape).astype(np.float32)
    y.backward(tf.tensor(g))
    px, pw, pb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    py = torch.nn.functional.conv2d(px, pw, pb, padding=p)
    py.backward(torch.tensor(g))
    assert y.dtype == tw.grad.dtype == tx.grad.dtype == tf.float32
    np.testing.assert_allclose(y.numpy(), py.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-4, atol=1e-5)
    # F(4x4, 3x3)'s errors are a few 1e-6 of the largest weight gradient, as PyTorch's own are
    gw_ref = pw.grad.numpy()
    np.testing.assert_allclose(tw.grad.numpy(), gw_ref, rtol=1e-4, atol=2e-5 * np.abs(gw_ref).max())
    np.testing.assert_allclose(tb.grad.numpy(), pb.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("n, c, size, o, k, p", [(8, 16, 15, 24, 5, 2), (8, 32, 7, 48, 3, 1), (8, 16, 26, 16, 3, 0)])
def test_conv2d_winograd_tiles_stay_within_float32_rounding_of_float64(monkeypatch, tile, n, c, size, o, k, p):
    """Both Winograd tiles, in float32, against the float64 convolution: errors of at most a few
    1e-6 of the largest value (F(4x4, 3x3)'s transforms scale by up to 8; F(2x2)'s by 1)."""
    from tinyflow.kernels import conv as conv_kernels

    monkeypatch.setattr(conv_kernels, "winograd_tile", lambda oh, ow, channels=None: tile)
    rng = np.random.default_rng(size + k)
    x = rng.standard_normal((n, c, size, size))
    w = rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)
    oh = size + 2 * p - k + 1
    g = rng.standard_normal((n, o, oh, oh))
    got, want = [], []
    for dtype, out in ((tf.float32, got), (tf.float64, want)):
        tx, tw = tf.tensor(x, dtype=dtype, requires_grad=True), tf.tensor(w, dtype=dtype, requires_grad=True)
        y = F.conv2d(tx, tw, padding=p)
        y.backward(tf.tensor(g, dtype=dtype))
        out += [y.numpy(), tx.grad.numpy(), tw.grad.numpy()]
    assert _use_winograd(x.shape, w.shape)
    for a, b_ in zip(got, want):
        assert np.abs(a - b_).max() <= 3e-5 * np.abs(b_).max()


def test_conv2d_winograd_tile_is_the_one_with_fewer_multiplications():
    from tinyflow.kernels.conv import winograd_tile

    assert winograd_tile(7, 7) == 4  # 36 * 2 * 2 < 16 * 4 * 4
    assert winograd_tile(15, 15) == 4
    assert winograd_tile(24, 24) == 4
    assert winograd_tile(2, 2) == 2  # one 4x4 tile would be mostly padding
    assert winograd_tile(1, 9) == 2
    assert winograd_tile(24, 24, channels=32) == 2  # MNIST's conv2: transforms outweigh the GEMMs
    assert winograd_tile(15, 15, channels=192) == 4  # AlexNet-64's conv2 (64 x 4 sub-kernels -> 192)


def test_conv2d_winograd_max_tile_2_keeps_f2x2_everywhere(monkeypatch):
    from tinyflow.kernels import conv as conv_kernels

    monkeypatch.setattr(conv_kernels, "WINOGRAD_MAX_TILE", 2)
    assert conv_kernels.winograd_tile(7, 7) == conv_kernels.winograd_tile(24, 24) == 2


def test_conv2d_winograd_path_equals_im2col_path_and_threads_change_nothing(monkeypatch):
    """Both algorithms agree to float rounding; the channel-split transforms match inline ones."""
    from tinyflow.kernels import _cpu
    from tinyflow.ops import conv as conv_op

    rng = np.random.default_rng(3)
    x = rng.standard_normal((9, 16, 9, 8)).astype(np.float32)
    w = rng.standard_normal((20, 16, 5, 3)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)

    def run():
        tx, tw, tb = (tf.tensor(a, requires_grad=True) for a in (x, w, b))
        y = F.conv2d(tx, tw, tb, padding=(2, 1))
        (y * y).sum().backward()
        return [y.numpy(), tx.grad.numpy(), tw.grad.numpy(), tb.grad.numpy()]

    assert _use_winograd(x.shape, w.shape)
    monkeypatch.setenv("TINYFLOW_NUM_THREADS", "1")
    inline = run()
    with tf.no_grad():  # inference keeps nothing for backward
        np.testing.assert_array_equal(F.conv2d(tf.tensor(x), tf.tensor(w), tf.tensor(b), padding=(2, 1)).numpy(),
                                      inline[0])
    monkeypatch.setattr(conv_op, "WINOGRAD_MIN_CHANNELS", 0)  # off: im2col + GEMM
    for a, b_ in zip(run(), inline):
        np.testing.assert_allclose(a, b_, rtol=1e-4, atol=1e-3 * np.abs(b_).max())
    monkeypatch.setattr(conv_op, "WINOGRAD_MIN_CHANNELS", 16)
    monkeypatch.setattr(_cpu, "MIN_CHUNK", 1)
    monkeypatch.setenv("TINYFLOW_NUM_THREADS", "3")
    for a, b_ in zip(run(), inline):
        np.testing.assert_allclose(a, b_, rtol=1e-6, atol=1e-6 * np.abs(b_).max())


def test_conv2d_winograd_path_only_where_it_pays():
    use = _use_winograd
    assert use((64, 192, 7, 7), (384, 192, 3, 3))
    assert not use((64, 192, 7, 7), (384, 96, 3, 3), groups=2)  # grouped
    assert not use((64, 3, 64, 64), (64, 3, 3, 3))  # too few channels
    assert not use((1, 192, 7, 7), (384, 192, 3, 3))  # batch too small
    assert not use((64, 192, 7, 7), (384, 192, 3, 3), stride=(2, 2))
    assert not use((64, 192, 7, 7), (384, 192, 3, 3), dilation=(2, 2))
    assert not use((64, 64, 35, 35), (64, 64, 11, 11))
    assert not use((64, 192, 7, 7), (384, 192, 3, 3), dtype=np.float16)  # half: keep exact GEMMs
    assert use((64, 192, 7, 7), (384, 192, 3, 3), dtype=np.float64)


def test_conv2d_takes_the_winograd_path_through_the_kernel_module(monkeypatch):
    """The op asks its device's kernels (ctx.kernels) whether and how to run Winograd."""
    import tinyflow.kernels as kernels

    calls = []
    real = kernels.winograd_conv2d_forward

    def spy(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(kernels, "winograd_conv2d_forward", spy)
    x = tf.randn(8, 16, 7, 7, requires_grad=True)
    F.conv2d(x, tf.randn(16, 16, 3, 3), padding=1).sum().backward()
    F.conv2d(x, tf.randn(16, 16, 3, 3), stride=2)  # strided: im2col + GEMM
    assert calls == [(8, 16, 7, 7)]


def test_conv2d_winograd_path_backward_twice_with_retain_graph():
    """Backward hands its saved transformed input back for reuse; a second backward rebuilds it."""
    rng = np.random.default_rng(5)
    x = tf.tensor(rng.standard_normal((8, 16, 7, 7)).astype(np.float32), requires_grad=True)
    w = tf.tensor(rng.standard_normal((16, 16, 3, 3)).astype(np.float32), requires_grad=True)
    y = F.conv2d(x, w, padding=1)
    loss = (y * y).sum()
    loss.backward(retain_graph=True)
    gx1, gw1 = x.grad.numpy().copy(), w.grad.numpy().copy()
    F.conv2d(x, w, padding=1).sum()  # another forward in between takes the recycled buffer
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * gx1, rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(w.grad.numpy(), 2 * gw1, rtol=1e-5, atol=1e-2)


# ---- the column workspace: one reusable buffer per thread and device, CPU and GPU alike ----------
def test_conv2d_writes_im2col_into_the_one_reusable_workspace(monkeypatch):
    """Every im2col of forward and backward writes into the workspace: no second column buffer."""
    import tinyflow.kernels as kernels
    from tinyflow.kernels._cpu import workspace

    outs = []
    real = kernels.im2col

    def spy(x, *geom, out=None):
        outs.append(out)
        return real(x, *geom, out=out)

    monkeypatch.setattr(kernels, "im2col", spy)
    layer = nn.Conv2d(3, 4, 3, padding=1)
    for _ in range(2):
        x = tf.randn(2, 3, 6, 6, requires_grad=True)
        layer(x).sum().backward()
    assert len(outs) == 4 and all(out is not None for out in outs)  # forward + weight gradient, twice
    col = workspace(np, "conv2d.col", (3 * 9, 2 * 36), np.float32)
    assert all(np.shares_memory(out, col) for out in outs)


class _FakeDeviceArray(np.ndarray):
    """A NumPy array that claims to live on a device (what device_of reports for a CuPy array)."""


class _FakeGpuModule:
    """An array module other than NumPy, allocating in host memory: how workspace sees CuPy."""

    def __init__(self) -> None:
        self.allocations = 0

    def empty(self, shape, dtype):
        self.allocations += 1
        return np.empty(shape, dtype)


def test_workspace_serves_other_array_modules_per_device_and_per_thread(monkeypatch):
    import threading

    from tinyflow.kernels import _cpu

    monkeypatch.setattr(_cpu, "device_key", lambda a: a.fake_device)
    on0, on1 = np.empty(1).view(_FakeDeviceArray), np.empty(1).view(_FakeDeviceArray)
    on0.fake_device, on1.fake_device = "cuda:0", "cuda:1"
    xp = _FakeGpuModule()
    a = _cpu.workspace(xp, "test.gpu", (4, 5), np.float32, like=on0)
    b = _cpu.workspace(xp, "test.gpu", (2, 3), np.float32, like=on0)
    assert np.shares_memory(a, b) and b.shape == (2, 3) and b.flags.c_contiguous and xp.allocations == 1
    other_device = _cpu.workspace(xp, "test.gpu", (2, 3), np.float32, like=on1)
    assert not np.shares_memory(a, other_device)
    seen = []
    t = threading.Thread(target=lambda: seen.append(_cpu.workspace(xp, "test.gpu", (4, 5), np.float32, like=on0)))
    t.start()
    t.join()
    assert not np.shares_memory(a, seen[0])
    grown = _cpu.workspace(xp, "test.gpu", (6, 5), np.float32, like=on0)  # larger: a new buffer, kept
    assert grown.shape == (6, 5) and np.shares_memory(grown, _cpu.workspace(xp, "test.gpu", (4, 5), np.float32, like=on0))
    before = xp.allocations
    fresh = _cpu.workspace(xp, "test.gpu", (4, 5), np.float32)  # no `like`: a fresh array each time
    assert xp.allocations == before + 1 and not np.shares_memory(fresh, grown)
    _cpu.release_workspace()


def test_conv2d_first_layer_keeps_its_col_for_the_weight_gradient_and_rebuilds_it_on_a_second_backward(monkeypatch):
    """No gradient for x (a first layer): backward reuses forward's col instead of a second im2col;
    the weight gradient is the same, and a second backward (retain_graph) rebuilds col."""
    import tinyflow.kernels as kernels

    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 3, 11, 10)).astype(np.float32)
    w = rng.standard_normal((8, 3, 5, 5)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    calls = []
    real = kernels.im2col

    def spy(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(kernels, "im2col", spy)
    tw, tb = tf.tensor(w, requires_grad=True), tf.tensor(b, requires_grad=True)
    y = F.conv2d(tf.tensor(x), tw, tb, stride=2, padding=2)
    g = rng.standard_normal(y.shape).astype(np.float32)
    y.backward(tf.tensor(g), retain_graph=True)
    assert len(calls) == 1  # forward's only
    gw1 = tw.grad.numpy().copy()
    y.backward(tf.tensor(g))
    assert len(calls) == 2  # the second backward rebuilt col
    np.testing.assert_allclose(tw.grad.numpy(), 2 * gw1, rtol=1e-5, atol=1e-4)
    torch = pytest.importorskip("torch")
    pw = torch.tensor(w, requires_grad=True)
    torch.nn.functional.conv2d(torch.tensor(x), pw, torch.tensor(b), stride=2, padding=2).backward(torch.tensor(g))
    np.testing.assert_allclose(gw1, pw.grad.numpy(), rtol=1e-4, atol=1e-4)
