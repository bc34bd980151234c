"""Pooling kernels against naive per-window loops (PyTorch's rules for padding and ceil_mode)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyflow.kernels.pool import (
    avgpool2d_backward,
    avgpool2d_forward,
    maxpool2d_backward,
    maxpool2d_forward,
)
from tinyflow.kernels.pool import pool_output_shape


def _windows(h, w, k, s, p, d, ceil_mode):
    """Yield (oh, ow, [(hy, wz) valid input pixels], (h0, h1, w0, w1) bounds incl. padding)."""
    oh, ow = pool_output_shape(h, w, k, s, p, d, ceil_mode)
    for y in range(oh):
        for z in range(ow):
            pix = []
            for i in range(k[0]):
                for j in range(k[1]):
                    hy, wz = y * s[0] - p[0] + i * d[0], z * s[1] - p[1] + j * d[1]
                    if 0 <= hy < h and 0 <= wz < w:
                        pix.append((hy, wz))
            yield y, z, pix


def naive_maxpool(x, k, s, p, d, ceil_mode):
    n, c, h, w = x.shape
    oh, ow = pool_output_shape(h, w, k, s, p, d, ceil_mode)
    out = np.full((n, c, oh, ow), -np.inf, dtype=x.dtype)
    gx_map = {}
    for y, z, pix in _windows(h, w, k, s, p, d, ceil_mode):
        for b in range(n):
            for ci in range(c):
                best = None
                for hy, wz in pix:  # row-major order, first maximum wins (PyTorch)
                    if best is None or x[b, ci, hy, wz] > x[b, ci, best[0], best[1]]:
                        best = (hy, wz)
                if best is not None:  # a dilated window may see only padding: -inf, no grad
                    out[b, ci, y, z] = x[b, ci, best[0], best[1]]
                    gx_map[b, ci, y, z] = best
    return out, gx_map


def naive_avgpool(x, k, s, p, ceil_mode, count_include_pad):
    n, c, h, w = x.shape
    oh, ow = pool_output_shape(h, w, k, s, p, (1, 1), ceil_mode)
    out = np.zeros((n, c, oh, ow), dtype=x.dtype)
    div = np.zeros((oh, ow))
    for y, z, pix in _windows(h, w, k, s, p, (1, 1), ceil_mode):
        if count_include_pad:  # padding counts, the ceil_mode overhang past it does not
            h0, w0 = y * s[0] - p[0], z * s[1] - p[1]
            div[y, z] = (min(h0 + k[0], h + p[0]) - h0) * (min(w0 + k[1], w + p[1]) - w0)
        else:
            div[y, z] = len(pix)
        for hy, wz in pix:
            out[:, :, y, z] += x[:, :, hy, wz]
    return out / div, div


@st.composite
def pool_geometry(draw, dilation=True):
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    p = (draw(st.integers(0, k[0] // 2)), draw(st.integers(0, k[1] // 2)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if dilation else (1, 1)
    h = draw(st.integers(max(1, d[0] * (k[0] - 1) + 1 - 2 * p[0]), 7))
    w = draw(st.integers(max(1, d[1] * (k[1] - 1) + 1 - 2 * p[1]), 7))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), h, w)
    return shape, k, s, p, d, draw(st.booleans())


@settings(max_examples=25, deadline=None)
@given(pool_geometry(), st.integers(0, 2**31 - 1))
def test_maxpool_forward_backward_match_naive(geom, seed):
    shape, k, s, p, d, ceil_mode = geom
    rng = np.random.default_rng(seed)
    # a coarse grid of values makes ties frequent, so tie-breaking is checked too
    x = rng.integers(-3, 4, size=shape).astype(np.float32)
    out, argmax = maxpool2d_forward(x, k, s, p, d, ceil_mode)
    ref, winners = naive_maxpool(x, k, s, p, d, ceil_mode)
    np.testing.assert_array_equal(out, ref)
    assert out.dtype == np.float32 and argmax.shape == out.shape
    g = rng.standard_normal(out.shape).astype(np.float32)
    gx = maxpool2d_backward(g, argmax, shape, k, s, p, d)
    ref_gx = np.zeros(shape, dtype=np.float32)
    for (b, ci, y, z), (hy, wz) in winners.items():
        ref_gx[b, ci, hy, wz] += g[b, ci, y, z]
    np.testing.assert_allclose(gx, ref_gx, rtol=1e-6, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(pool_geometry(dilation=False), st.booleans(), st.integers(0, 2**31 - 1))
def test_avgpool_forward_backward_match_naive(geom, include_pad, seed):
    shape, k, s, p, _, ceil_mode = geom
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    out = avgpool2d_forward(x, k, s, p, ceil_mode, include_pad)
    ref, div = naive_avgpool(x, k, s, p, ceil_mode, include_pad)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(out.shape)
    gx = avgpool2d_backward(g, shape, k, s, p, ceil_mode, include_pad)
    # adjoint identity: <avgpool(x), g> == <x, avgpool_backward(g)>
    np.testing.assert_allclose(np.sum(out * g), np.sum(x * gx), rtol=1e-10)


def test_maxpool_with_more_than_256_window_offsets_uses_wide_indices():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 20, 19)).astype(np.float32)
    x[0, 0, 16, 15] = 100.0  # the winner of window (0, 0) at offset 16*16 + 15 = 271
    k, s = (17, 16), (3, 3)
    out, argmax = maxpool2d_forward(x, k, s)
    ref, winners = naive_maxpool(x, k, s, (0, 0), (1, 1), False)
    np.testing.assert_array_equal(out, ref)
    assert argmax.dtype == np.int32 and argmax.max() > 255
    g = np.ones(out.shape, dtype=np.float32)
    gx = maxpool2d_backward(g, argmax, x.shape, k, s)
    ref_gx = np.zeros(x.shape, dtype=np.float32)
    for (b, ci, _, _), (hy, wz) in winners.items():
        ref_gx[b, ci, hy, wz] += 1
    np.testing.assert_array_equal(gx, ref_gx)


@settings(max_examples=25, deadline=None)
@given(pool_geometry(), st.integers(0, 2**31 - 1))
def test_maxpool_backward_scatter_and_slab_paths_agree(geom, seed):
    """NumPy's add.at path and the per-offset slab path (CuPy's fallback) route the same gradient."""
    from tinyflow.kernels import pool

    shape, k, s, p, d, ceil_mode = geom
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    _, argmax = maxpool2d_forward(x, k, s, p, d, ceil_mode)
    g = rng.standard_normal(argmax.shape)
    scatter = maxpool2d_backward(g, argmax, shape, k, s, p, d)
    pool.SCATTER_ON_CPU = False
    try:
        slabs = maxpool2d_backward(g, argmax, shape, k, s, p, d)
    finally:
        pool.SCATTER_ON_CPU = True
    np.testing.assert_allclose(scatter, slabs, rtol=1e-12, atol=1e-12)


def test_half_precision_pool_sums_are_float32_rounded_once():
    """fp16 / bf16 average pooling and max pooling's backward (overlapping windows add) sum in
    float32 and round once, as the CUDA kernels; the max itself is exact in the half dtype."""
    import pytest

    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(7)
    k, s, p = (3, 3), (2, 2), (1, 1)
    for dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        x = rng.standard_normal((2, 3, 9, 8)).astype(dtype)
        x32 = x.astype(np.float32)
        out, argmax = maxpool2d_forward(x, k, s, p)
        out32, argmax32 = maxpool2d_forward(x32, k, s, p)
        assert out.dtype == dtype
        np.testing.assert_array_equal(out.astype(np.float32), out32)
        np.testing.assert_array_equal(argmax, argmax32)
        g = rng.standard_normal(out.shape).astype(dtype)
        got = {
            "maxpool backward": maxpool2d_backward(g, argmax, x.shape, k, s, p),
            "avgpool forward": avgpool2d_forward(x, k, s, p, True, False),
            "avgpool backward": avgpool2d_backward(g, x.shape, k, s, p, False, True),
        }
        want = {
            "maxpool backward": maxpool2d_backward(g.astype(np.float32), argmax, x.shape, k, s, p),
            "avgpool forward": avgpool2d_forward(x32, k, s, p, True, False),
            "avgpool backward": avgpool2d_backward(g.astype(np.float32), x.shape, k, s, p, False, True),
        }
        for name in got:
            assert got[name].dtype == dtype, name
            np.testing.assert_array_equal(got[name].astype(np.float64),
                                          want[name].astype(dtype).astype(np.float64), err_msg=name)
