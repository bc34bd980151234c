"""affine_grid and grid_sample (bilinear / nearest, zeros / border / reflection, align_corners)
against torch, values and gradients for the input, the grid and theta; float64 gradchecks; the
spatial-transformer pattern end to end."""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn.functional as F
from tinyflow.testing import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(0)


def _against_torch(ours, theirs, arrays, rtol=1e-4, atol=1e-4):
    a = [tf.tensor(x, requires_grad=True) for x in arrays]
    b = [torch.tensor(x, requires_grad=True) for x in arrays]
    out, ref = ours(*a), theirs(*b)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    g = RNG.standard_normal(ref.shape).astype(np.float32)
    out.backward(tf.tensor(g))
    ref.backward(torch.tensor(g))
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_matches_torch(align, mode, padding_mode):
    x = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
    grid = RNG.uniform(-1.4, 1.4, (2, 4, 7, 2)).astype(np.float32)
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align)
    _against_torch(lambda a, g: F.grid_sample(a, g, **kw), lambda a, g: TF.grid_sample(a, g, **kw), [x, grid])


@pytest.mark.parametrize("align", [False, True])
def test_affine_grid_matches_torch_and_composes_with_grid_sample(align):
    theta = (np.eye(2, 3)[None] + RNG.standard_normal((2, 2, 3)) * 0.3).astype(np.float32)
    x = RNG.standard_normal((2, 3, 6, 5)).astype(np.float32)
    _against_torch(lambda t: F.affine_grid(t, (2, 3, 4, 7), align_corners=align),
                   lambda t: TF.affine_grid(t, (2, 3, 4, 7), align_corners=align), [theta])
    _against_torch(lambda t, a: F.grid_sample(a, F.affine_grid(t, a.shape, align_corners=align), align_corners=align),
                   lambda t, a: TF.grid_sample(a, TF.affine_grid(t, a.shape, align_corners=align),
                                               align_corners=align), [theta, x])
    with pytest.warns(UserWarning, match="align_corners"):
        F.affine_grid(tf.tensor(theta), (2, 3, 4, 7))


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_gradcheck(padding_mode):
    x = tf.tensor(RNG.standard_normal((1, 2, 4, 3)), dtype=tf.float64, requires_grad=True)
    # points away from pixel centres and from the border folds, where the gradient is one-sided
    grid = tf.tensor(RNG.uniform(-0.8, 0.8, (1, 3, 2, 2)) + 0.013, dtype=tf.float64, requires_grad=True)
    gradcheck(lambda a, g: F.grid_sample(a, g, padding_mode=padding_mode, align_corners=False), [x, grid])
