"""The rest of F and its layers against torch, with float64 gradchecks: pooling with indices,
1-d and adaptive-max pooling, unpooling; layer / group / instance / batch norm (1d, 3d);
normalize, cosine_similarity, pairwise_distance; embedding's padding_idx and max_norm; one_hot;
pixel_shuffle; bilinear; the dropout variants."""
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


def _against_torch(ours, theirs, arrays, rtol=1e-5, atol=1e-6):
    """Every output (tuples too) and the gradients of the float inputs, float32 against torch."""
    a = [tf.tensor(x, requires_grad=x.dtype.kind == "f") for x in arrays]
    b = [torch.tensor(x, requires_grad=x.dtype.kind == "f") for x in arrays]
    out, ref = ours(*a), theirs(*b)
    outs, refs = (out, ref) if isinstance(out, tuple) else ((out,), (ref,))
    for o, r in zip(outs, refs):
        assert o.shape == tuple(r.shape) and o.dtype == np.dtype(str(r.dtype).split(".")[1])
        np.testing.assert_allclose(o.numpy(), r.detach().numpy(), rtol=rtol, atol=atol)
    g = np.random.default_rng(0).standard_normal(refs[0].shape).astype(np.float32)
    outs[0].backward(tf.tensor(g))
    refs[0].backward(torch.tensor(g))
    for x, y in zip(a, b):
        if y.grad is not None:
            np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=rtol, atol=atol)


X4 = np.random.default_rng(1).standard_normal((2, 3, 7, 6)).astype(np.float32)
X3 = np.random.default_rng(2).standard_normal((2, 3, 9)).astype(np.float32)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(2, 3), stride=1, dilation=2, ceil_mode=True)])
def test_max_pool2d_indices_match_torch_and_unpool_inverts_them(kw):
    _against_torch(lambda a: F.max_pool2d(a, return_indices=True, **kw),
                   lambda a: TF.max_pool2d(a, return_indices=True, **kw), [X4])
    values, indices = TF.max_pool2d(torch.tensor(X4), return_indices=True, **kw)
    if "dilation" not in kw:
        _against_torch(lambda v: F.max_unpool2d(v, tf.tensor(indices.numpy()), kw["kernel_size"], kw.get("stride"),
                                                kw.get("padding", 0), output_size=X4.shape[2:]),
                       lambda v: TF.max_unpool2d(v, indices, kw["kernel_size"], kw.get("stride"), kw.get("padding", 0),
                                                 output_size=X4.shape[2:]), [values.numpy()])


def test_one_d_and_adaptive_pools_match_torch():
    cases = [
        (lambda a: F.max_pool1d(a, 3, 2, 1, return_indices=True), lambda a: TF.max_pool1d(a, 3, 2, 1, return_indices=True), X3),
        (lambda a: F.avg_pool1d(a, 4, 2, 2, ceil_mode=True), lambda a: TF.avg_pool1d(a, 4, 2, 2, ceil_mode=True), X3),
        (lambda a: F.adaptive_avg_pool1d(a, 4), lambda a: TF.adaptive_avg_pool1d(a, 4), X3),
        (lambda a: F.adaptive_max_pool1d(a, 5, True), lambda a: TF.adaptive_max_pool1d(a, 5, True), X3),
        (lambda a: F.adaptive_max_pool2d(a, (3, 4), True), lambda a: TF.adaptive_max_pool2d(a, (3, 4), True), X4),
        (lambda a: F.adaptive_max_pool2d(a, (None, 2)), lambda a: TF.adaptive_max_pool2d(a, (None, 2)), X4),
        (lambda a: F.avg_pool2d(a, 3, 2, 1, divisor_override=5), lambda a: TF.avg_pool2d(a, 3, 2, 1, divisor_override=5), X4),
    ]
    for ours, theirs, x in cases:
        _against_torch(ours, theirs, [x])


@settings(max_examples=10)
@given(oh=st.integers(1, 5), ow=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_adaptive_max_pool2d_gradcheck(oh, ow, seed):
    x = np.random.default_rng(seed).permutation(40).reshape(1, 2, 5, 4) * 0.1  # distinct: one argmax each
    gradcheck(lambda a: F.adaptive_max_pool2d(a, (oh, ow)), [f64(x)])


POOL_LAYERS = [("MaxPool1d", dict(kernel_size=3, stride=2)), ("AvgPool1d", dict(kernel_size=2)),
               ("AdaptiveAvgPool1d", dict(output_size=3)), ("AdaptiveMaxPool1d", dict(output_size=2)),
               ("AdaptiveMaxPool2d", dict(output_size=(2, 3))), ("MaxPool2d", dict(kernel_size=2, return_indices=True)),
               ("AvgPool2d", dict(kernel_size=3, stride=1, padding=1, count_include_pad=False))]


@pytest.mark.parametrize("name, kwargs", POOL_LAYERS)
def test_pool_layers_match_torch(name, kwargs):
    x = X3 if "1d" in name else X4
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    out, ref = ours(tf.tensor(x)), theirs(torch.tensor(x))
    for o, r in zip(out if isinstance(out, tuple) else [out], ref if isinstance(ref, tuple) else [ref]):
        np.testing.assert_allclose(o.numpy(), r.numpy(), rtol=1e-6, atol=1e-7)
    assert repr(ours) == repr(theirs)


@given(seed=st.integers(0, 2**31 - 1), k=st.integers(1, 2), affine=st.booleans())
def test_layer_group_instance_norm_gradcheck(seed, k, affine):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 4, 3))
    shape = x.shape[3 - k:]
    w, b = (f64(rng.standard_normal(shape)), f64(rng.standard_normal(shape))) if affine else (None, None)
    gradcheck(lambda a, *p: F.layer_norm(a, shape, *p), [f64(x)] + ([w, b] if affine else []))
    gw, gb = (f64(rng.standard_normal(4)), f64(rng.standard_normal(4))) if affine else (None, None)
    gradcheck(lambda a, *p: F.group_norm(a, 2, *p), [f64(x)] + ([gw, gb] if affine else []))
    gradcheck(lambda a: F.instance_norm(a), [f64(x)])


def test_norms_match_torch():
    rng = np.random.default_rng(3)
    w, b = rng.standard_normal((7, 6)).astype(np.float32), rng.standard_normal((7, 6)).astype(np.float32)
    c = rng.standard_normal(3).astype(np.float32)
    _against_torch(lambda a, u, v: F.layer_norm(a, (7, 6), u, v, 1e-3), lambda a, u, v: TF.layer_norm(a, (7, 6), u, v, 1e-3),
                   [X4, w, b], atol=1e-5)
    _against_torch(lambda a, u, v: F.group_norm(a, 3, u, v), lambda a, u, v: TF.group_norm(a, 3, u, v), [X4, c, c * 2],
                   atol=1e-5)
    _against_torch(lambda a, u, v: F.instance_norm(a, weight=u, bias=v), lambda a, u, v: TF.instance_norm(a, weight=u, bias=v),
                   [X4, c, c], atol=1e-5)


@pytest.mark.parametrize("name, args, x", [
    ("LayerNorm", ((6,),), X4), ("LayerNorm", ([7, 6], 1e-3, False), X4), ("GroupNorm", (3, 3), X4),
    ("InstanceNorm2d", (3,), X4), ("InstanceNorm2d", (3, 1e-5, 0.1, True, True), X4), ("InstanceNorm1d", (3,), X3),
    ("BatchNorm1d", (3,), X3), ("BatchNorm1d", (9,), X3[0]), ("BatchNorm3d", (3,), X4[None].transpose(1, 2, 0, 3, 4)),
])
def test_norm_layers_match_torch_in_training_and_eval(name, args, x):
    x = np.ascontiguousarray(x)
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert list(ours.state_dict()) == list(theirs.state_dict()) and repr(ours) == repr(theirs)
    for mode in ("train", "eval"):
        getattr(ours, mode)()
        getattr(theirs, mode)()
        for _ in range(2):
            np.testing.assert_allclose(ours(tf.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(),
                                       rtol=1e-4, atol=1e-5)
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.numpy(), rtol=1e-5, atol=1e-6)


@given(p=st.sampled_from([1.0, 2.0, 3.0, float("inf")]), dim=st.integers(-2, 1), seed=st.integers(0, 2**31 - 1))
def test_normalize_and_distances_gradcheck(p, dim, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 4)) + 0.1
    x[np.abs(x) < 0.05] = 0.3  # p=1 and inf have kinks at 0 and at ties
    gradcheck(lambda a: F.normalize(a, p, dim), [f64(x)])
    y = rng.standard_normal((3, 4))
    gradcheck(lambda a, b: F.cosine_similarity(a, b, dim), [f64(x), f64(y)])
    gradcheck(lambda a, b: F.pairwise_distance(a, b, p), [f64(x), f64(y)])


def test_normalize_and_distances_match_torch():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((1, 4)).astype(np.float32)
    a[0] = 0  # a zero vector: gradient 0, not NaN
    for p in (1.0, 2.0, 3.5, float("inf")):
        _against_torch(lambda u, p=p: F.normalize(u, p, 1), lambda u, p=p: TF.normalize(u, p, 1), [a])
        _against_torch(lambda u, v, p=p: F.pairwise_distance(u, v, p, keepdim=True),
                       lambda u, v, p=p: TF.pairwise_distance(u, v, p, keepdim=True), [a, b])
    _against_torch(lambda u, v: F.cosine_similarity(u, v), lambda u, v: TF.cosine_similarity(u, v), [a, b])
    _against_torch(lambda u, v: F.cosine_similarity(u, v, dim=0), lambda u, v: TF.cosine_similarity(u, v, dim=0),
                   [a[:4, :1].copy(), b.T.copy()])
    np.testing.assert_allclose(nn.CosineSimilarity(0)(tf.tensor(a), tf.tensor(a)).numpy(),
                               torch.nn.CosineSimilarity(0)(torch.tensor(a), torch.tensor(a)).numpy(), rtol=1e-6)


def test_embedding_padding_idx_and_max_norm_match_torch():
    rng = np.random.default_rng(5)
    ids = np.array([[1, 2, 0], [4, 3, 1]])
    w = (rng.standard_normal((5, 3)) * 3).astype(np.float32)
    _against_torch(lambda u: F.embedding(tf.tensor(ids), u, padding_idx=-4),
                   lambda u: TF.embedding(torch.tensor(ids), u, padding_idx=-4), [w])
    ours, theirs = tf.tensor(w.copy()), torch.tensor(w.copy())
    out = F.embedding(tf.tensor(ids), ours, max_norm=1.5, norm_type=1.0)
    ref = TF.embedding(torch.tensor(ids), theirs, max_norm=1.5, norm_type=1.0)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)  # rows renormed in place
    layer, ref_layer = nn.Embedding(5, 3, max_norm=1.0), torch.nn.Embedding(5, 3, max_norm=1.0)
    layer.weight.array[...] = ref_layer.weight.detach().numpy() * 4
    with torch.no_grad():
        ref_layer.weight.mul_(4)
    np.testing.assert_allclose(layer(tf.tensor(ids)).numpy(), ref_layer(torch.tensor(ids)).detach().numpy(), rtol=1e-5)


def test_one_hot_follows_torch():
    t = np.array([[0, 3], [2, 1]])
    np.testing.assert_array_equal(F.one_hot(tf.tensor(t)).numpy(), TF.one_hot(torch.tensor(t)).numpy())
    out = F.one_hot(tf.tensor(t), 6)
    assert out.dtype == tf.int64 and out.shape == (2, 2, 6)
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        F.one_hot(tf.tensor(t), 3)
    with pytest.raises(RuntimeError, match="non-negative"):
        F.one_hot(tf.tensor([-1, 0]))
    assert F.one_hot(tf.tensor(np.zeros(0, np.int64)), 4).shape == (0, 4)


def test_pixel_shuffle_bilinear_and_glu_match_torch():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 8, 3, 2)).astype(np.float32)
    _against_torch(lambda u: F.pixel_shuffle(u, 2), lambda u: TF.pixel_shuffle(u, 2), [x])
    _against_torch(lambda u: F.pixel_unshuffle(u, 3), lambda u: TF.pixel_unshuffle(u, 3),
                   [rng.standard_normal((1, 2, 6, 3)).astype(np.float32)])
    a, b = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    w, bias = rng.standard_normal((2, 3, 5)).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    _against_torch(F.bilinear, TF.bilinear, [a, b, w, bias], atol=1e-5)
    layer = nn.Bilinear(3, 5, 2)
    assert [(k, v.shape) for k, v in layer.state_dict().items()] == [("weight", (2, 3, 5)), ("bias", (2,))]


@pytest.mark.parametrize("fn, shape, unit", [(F.dropout1d, (40, 30, 5), (40, 30, 1)),
                                             (F.dropout2d, (40, 30, 2, 3), (40, 30, 1, 1)),
                                             (F.dropout3d, (20, 30, 2, 2, 2), (20, 30, 1, 1, 1))])
def test_channel_dropout_zeroes_whole_channels(fn, shape, unit):
    y = fn(tf.ones(*shape), 0.4).numpy()
    per_channel = y.reshape(unit[:2] + (-1,))
    assert ((per_channel == 0).all(-1) | np.isclose(per_channel, 1 / 0.6).all(-1)).all()
    assert 0.25 < (per_channel[..., 0] == 0).mean() < 0.55
    assert fn(tf.ones(*shape), 0.4, training=False).numpy().min() == 1


def test_alpha_dropout_keeps_zero_mean_and_unit_variance():
    tf.manual_seed(0)
    x = tf.randn(200000)
    y = F.alpha_dropout(x, 0.2, training=True).numpy()
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1) < 0.02
    assert F.alpha_dropout(x, 0.2).numpy() is not None  # training=False by default: the identity
    np.testing.assert_array_equal(F.feature_alpha_dropout(x.reshape(1000, 200), 0.5, False).numpy(),
                                  x.reshape(1000, 200).numpy())


def test_in_place_activations_overwrite_their_input_as_torch():
    x = np.random.default_rng(8).standard_normal(6).astype(np.float32)
    for name, args in [("relu_", ()), ("elu_", (0.5,)), ("leaky_relu_", (0.2,)), ("hardtanh_", (-0.5, 0.5)),
                       ("selu_", ()), ("celu_", (2.0,)), ("threshold_", (0.1, 9.0))]:
        w, tw = tf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        a, b = w * 1, tw * 1
        out, ref = getattr(F, name)(a, *args), getattr(TF, name)(b, *args)
        assert out is a and ref is b
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
        a.sum().backward()
        b.sum().backward()
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-6)


def test_rms_norm_channel_shuffle_and_gumbel_softmax_match_torch():
    x = np.random.default_rng(9).standard_normal((2, 6, 3, 4)).astype(np.float32)
    w = np.random.default_rng(10).standard_normal((3, 4)).astype(np.float32)
    _against_torch(lambda u, v: F.rms_norm(u, (3, 4), v), lambda u, v: TF.rms_norm(u, (3, 4), v), [x, w], atol=1e-5)
    _against_torch(lambda u: F.rms_norm(u, (4,), eps=1e-3), lambda u: TF.rms_norm(u, (4,), eps=1e-3), [x])
    _against_torch(lambda u: F.channel_shuffle(u, 3), lambda u: TF.channel_shuffle(u, 3), [x])
    layer, ref = nn.RMSNorm([3, 4]), torch.nn.RMSNorm([3, 4])
    assert repr(layer) == repr(ref) and list(layer.state_dict()) == list(ref.state_dict())
    assert repr(nn.ChannelShuffle(2)) == repr(torch.nn.ChannelShuffle(2))
    logits = tf.tensor(np.log([[0.7, 0.2, 0.1]] * 4000).astype(np.float32), requires_grad=True)
    soft = F.gumbel_softmax(logits, tau=0.5)
    hard = F.gumbel_softmax(logits, hard=True)
    np.testing.assert_allclose(soft.numpy().sum(-1), 1, rtol=1e-5)
    assert set(np.unique(hard.numpy())) <= {0.0, 1.0} and (hard.numpy().sum(-1) == 1).all()
    assert abs(hard.numpy()[:, 0].mean() - 0.7) < 0.05  # samples follow the softmax of the logits
    hard.sum().backward()
    assert logits.grad is not None


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_matches_torch(mode):
    rng = np.random.default_rng(11)
    w = rng.standard_normal((10, 3)).astype(np.float32)
    ids = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0])
    offsets = np.array([0, 4, 4, 7])  # one empty bag
    cases = [dict(input=ids, offsets=offsets), dict(input=ids.reshape(3, 3)),
             dict(input=ids, offsets=np.append(offsets, 9), include_last_offset=True),
             dict(input=ids, offsets=offsets, padding_idx=4)]
    for case in cases:
        kw = {k: v for k, v in case.items() if k not in ("input", "offsets")}
        off = case.get("offsets")
        _against_torch(
            lambda u, case=case, kw=kw, off=off: F.embedding_bag(
                tf.tensor(case["input"]), u, None if off is None else tf.tensor(off), mode=mode, **kw),
            lambda u, case=case, kw=kw, off=off: TF.embedding_bag(
                torch.tensor(case["input"]), u, None if off is None else torch.tensor(off), mode=mode, **kw), [w])
    if mode == "sum":
        psw = rng.random(ids.size).astype(np.float32)
        _against_torch(lambda u, p: F.embedding_bag(tf.tensor(ids), u, tf.tensor(offsets), mode="sum",
                                                    per_sample_weights=p),
                       lambda u, p: TF.embedding_bag(torch.tensor(ids), u, torch.tensor(offsets), mode="sum",
                                                     per_sample_weights=p), [w, psw])
    ours, theirs = nn.EmbeddingBag(10, 3, mode=mode), torch.nn.EmbeddingBag(10, 3, mode=mode)
    assert repr(ours) == repr(theirs) and list(ours.state_dict()) == list(theirs.state_dict())


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_lp_pools_pdist_and_triplet_with_distance_match_torch(p):
    rng = np.random.default_rng(13)
    x = (np.abs(rng.standard_normal((2, 3, 6, 7))) + 0.1).astype(np.float32)
    _against_torch(lambda u: F.lp_pool2d(u, p, (2, 3), 2), lambda u: TF.lp_pool2d(u, p, (2, 3), 2), [x])
    _against_torch(lambda u: F.lp_pool1d(u, p, 3), lambda u: TF.lp_pool1d(u, p, 3), [x[0]])
    _against_torch(lambda u: F.lp_pool3d(u, p, 2, ceil_mode=True), lambda u: TF.lp_pool3d(u, p, 2, ceil_mode=True),
                   [x], atol=1e-5)
    _against_torch(lambda u: F.pdist(u, p), lambda u: TF.pdist(u, p), [x[0, 0]], atol=1e-5)
    a, b, c = (rng.standard_normal((5, 4)).astype(np.float32) for _ in range(3))
    _against_torch(lambda u, v, w: F.triplet_margin_with_distance_loss(u, v, w, swap=True),
                   lambda u, v, w: TF.triplet_margin_with_distance_loss(u, v, w, swap=True), [a, b, c])
    assert repr(nn.LPPool2d(p, 3)) == repr(torch.nn.LPPool2d(p, 3))
