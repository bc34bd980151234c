"""im2col / col2im against naive loops over every pixel, and col2im as im2col's adjoint."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyflow.kernels.conv import col2im, conv_output_size, im2col


def naive_im2col(x, k, s, p, d):
    n, c, h, w = x.shape
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    col = np.zeros((c * k[0] * k[1], n * oh * ow), dtype=x.dtype)
    for ci in range(c):
        for i in range(k[0]):
            for j in range(k[1]):
                row = (ci * k[0] + i) * k[1] + j
                for b in range(n):
                    for y in range(oh):
                        for z in range(ow):
                            hy = y * s[0] - p[0] + i * d[0]
                            wz = z * s[1] - p[1] + j * d[1]
                            if 0 <= hy < h and 0 <= wz < w:
                                col[row, (b * oh + y) * ow + z] = x[b, ci, hy, wz]
    return col


def naive_col2im(col, shape, k, s, p, d):
    n, c, h, w = shape
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    out = np.zeros(shape, dtype=col.dtype)
    for ci in range(c):
        for i in range(k[0]):
            for j in range(k[1]):
                row = (ci * k[0] + i) * k[1] + j
                for b in range(n):
                    for y in range(oh):
                        for z in range(ow):
                            hy = y * s[0] - p[0] + i * d[0]
                            wz = z * s[1] - p[1] + j * d[1]
                            if 0 <= hy < h and 0 <= wz < w:
                                out[b, ci, hy, wz] += col[row, (b * oh + y) * ow + z]
    return out


@st.composite
def conv_geometry(draw):
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    p = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = draw(st.integers(max(1, d[0] * (k[0] - 1) + 1 - 2 * p[0]), 7))
    w = draw(st.integers(max(1, d[1] * (k[1] - 1) + 1 - 2 * p[1]), 7))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), h, w)
    return shape, k, s, p, d


@settings(max_examples=25, deadline=None)
@given(conv_geometry(), st.integers(0, 2**31 - 1))
def test_im2col_matches_naive_loop(geom, seed):
    shape, k, s, p, d = geom
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    got = im2col(x, k, s, p, d)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, naive_im2col(x, k, s, p, d))


@settings(max_examples=25, deadline=None)
@given(conv_geometry(), st.integers(0, 2**31 - 1))
def test_col2im_matches_naive_loop_and_is_adjoint(geom, seed):
    shape, k, s, p, d = geom
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    cols = im2col(x, k, s, p, d)
    g = rng.standard_normal(cols.shape)
    got = col2im(g, shape, k, s, p, d)
    assert got.shape == shape and got.flags.c_contiguous
    np.testing.assert_allclose(got, naive_col2im(g, shape, k, s, p, d), rtol=1e-12, atol=1e-12)
    # <im2col(x), g> == <x, col2im(g)>: col2im is the transpose of the linear map im2col
    np.testing.assert_allclose(np.sum(cols * g), np.sum(x * got), rtol=1e-10)


def test_conv_output_size_follows_pytorch_rule():
    assert conv_output_size(224, 11, 4, 2) == 55  # AlexNet conv1
    assert conv_output_size(55, 3, 2, 0) == 27  # overlapping max pool
    assert conv_output_size(5, 2, 2, 0, ceil_mode=False) == 2
    assert conv_output_size(5, 2, 2, 0, ceil_mode=True) == 3
    # ceil_mode never starts a window in the right padding
    assert conv_output_size(4, 2, 2, 1, ceil_mode=True) == 3
    assert conv_output_size(2, 3, 1, 0) == 0


def test_im2col_layout_rows_are_channel_major():
    x = np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4)
    col = im2col(x, (2, 2), (2, 2))
    assert col.shape == (3 * 2 * 2, 2 * 2 * 2)
    # row (c=1, i=0, j=1), column (n=1, oh=1, ow=0) -> x[1, 1, 2, 1]
    assert col[(1 * 2 + 0) * 2 + 1, (1 * 2 + 1) * 2 + 0] == x[1, 1, 2, 1]
