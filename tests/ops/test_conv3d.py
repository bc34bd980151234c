"""conv3d, conv_transpose3d and the 3-d pools (built from their 2-d forms, depth by depth) and
their layers: values and gradients against torch, float64 gradchecks, padding modes."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 4, 6, 5, 5)).astype(np.float32)


def _against_torch(ours, theirs, arrays, rtol=1e-4, atol=1e-4):
    a = [tf.tensor(x, requires_grad=True) for x in arrays]
    b = [torch.tensor(x, requires_grad=True) for x in arrays]
    out, ref = ours(*a), theirs(*b)
    outs, refs = (out, ref) if isinstance(out, tuple) else ((out,), (ref,))
    for o, r in zip(outs, refs):
        assert o.shape == tuple(r.shape)
        np.testing.assert_allclose(o.numpy(), r.detach().numpy(), rtol=rtol, atol=atol)
    g = RNG.standard_normal(refs[0].shape).astype(np.float32)
    outs[0].backward(tf.tensor(g))
    refs[0].backward(torch.tensor(g))
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(stride=(1, 2, 1), padding=(2, 0, 1),
                                                                        dilation=(2, 1, 1), groups=2),
                                dict(padding="same", dilation=(1, 2, 1)), dict(padding="valid")])
def test_conv3d_matches_torch(kw):
    w = RNG.standard_normal((6, 4 // kw.get("groups", 1), 3, 2, 3)).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note on even kernels with 'same'
        _against_torch(lambda x, u, c: F.conv3d(x, u, c, **kw), lambda x, u, c: TF.conv3d(x, u, c, **kw), [X, w, b])


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, output_padding=1),
                                dict(stride=(2, 1, 3), dilation=(1, 2, 1), padding=(1, 0, 1)),
                                dict(groups=2, stride=3, output_padding=(2, 0, 1))])
def test_conv_transpose3d_matches_torch(kw):
    w = RNG.standard_normal((4, 3, 3, 2, 2)).astype(np.float32)
    _against_torch(lambda x, u: F.conv_transpose3d(x, u, **kw), lambda x, u: TF.conv_transpose3d(x, u, **kw), [X, w])


def test_conv3d_and_transpose_gradcheck():
    x = tf.tensor(RNG.standard_normal((1, 2, 4, 3, 3)), dtype=tf.float64, requires_grad=True)
    w = tf.tensor(RNG.standard_normal((2, 2, 2, 2, 2)), dtype=tf.float64, requires_grad=True)
    gradcheck(lambda a, u: F.conv3d(a, u, stride=(2, 1, 1), padding=1), [x, w])
    gradcheck(lambda a, u: F.conv_transpose3d(a, u, stride=(2, 1, 2), padding=(1, 0, 0), output_padding=(1, 0, 1)),
              [x, w])


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(2, 3, 2), stride=1, dilation=(2, 1, 1), ceil_mode=True)])
def test_max_pool3d_with_indices_matches_torch(kw):
    _against_torch(lambda x: F.max_pool3d(x, return_indices=True, **kw),
                   lambda x: TF.max_pool3d(x, return_indices=True, **kw), [X])


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, count_include_pad=False, ceil_mode=True),
                                dict(kernel_size=2, divisor_override=3)])
def test_avg_pool3d_matches_torch(kw):
    _against_torch(lambda x: F.avg_pool3d(x, **kw), lambda x: TF.avg_pool3d(x, **kw), [X], atol=1e-5)


def test_adaptive_pools3d_match_torch():
    _against_torch(lambda x: F.adaptive_avg_pool3d(x, (4, 3, 2)), lambda x: TF.adaptive_avg_pool3d(x, (4, 3, 2)), [X])
    _against_torch(lambda x: F.adaptive_max_pool3d(x, (4, None, 2), True),
                   lambda x: TF.adaptive_max_pool3d(x, (4, None, 2), True), [X])
    _against_torch(lambda x: F.adaptive_avg_pool3d(x, 1), lambda x: TF.adaptive_avg_pool3d(x, 1), [X[0]])


@pytest.mark.parametrize("cls, args, kw", [
    ("Conv3d", (4, 6, 3), dict(stride=2, padding=1)), ("Conv3d", (4, 6, 3), dict(padding="same", padding_mode="circular")),
    ("Conv3d", (4, 2, (1, 3, 2)), dict(padding=(0, 1, 1), padding_mode="reflect", bias=False)),
    ("ConvTranspose3d", (4, 6, (3, 2, 2)), dict(stride=2)), ("MaxPool3d", (2,), {}), ("AvgPool3d", (3,), dict(stride=2)),
    ("AdaptiveAvgPool3d", ((2, 3, 4),), {}), ("AdaptiveMaxPool3d", (2,), {}),
])
def test_3d_layers_match_torch(cls, args, kw):
    ours, theirs = getattr(nn, cls)(*args, **kw), getattr(torch.nn, cls)(*args, **kw)
    assert repr(ours) == repr(theirs) and list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    np.testing.assert_allclose(ours(tf.tensor(X)).numpy(), theirs(torch.tensor(X)).detach().numpy(), rtol=1e-4,
                               atol=1e-4)
