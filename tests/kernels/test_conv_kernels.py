"""im2col / col2im against naive loops over every pixel, and col2im as im2col's adjoint."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyflow.kernels.conv import col2im, im2col
from tinyflow.kernels.conv import conv_output_size


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
    from tinyflow.kernels.pool import pool_output_size

    assert conv_output_size(224, 11, 4, 2) == 55  # AlexNet conv1
    assert conv_output_size(55, 3, 2, 0) == 27 == pool_output_size(55, 3, 2, 0)  # overlapping max pool
    assert pool_output_size(5, 2, 2, 0, ceil_mode=False) == 2
    assert pool_output_size(5, 2, 2, 0, ceil_mode=True) == 3
    # ceil_mode never starts a window in the right padding
    assert pool_output_size(4, 2, 2, 1, ceil_mode=True) == 3
    assert conv_output_size(2, 3, 1, 0) == 0 == pool_output_size(2, 3, 1, 0)


def test_im2col_layout_rows_are_channel_major():
    x = np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4)
    col = im2col(x, (2, 2), (2, 2))
    assert col.shape == (3 * 2 * 2, 2 * 2 * 2)
    # row (c=1, i=0, j=1), column (n=1, oh=1, ow=0) -> x[1, 1, 2, 1]
    assert col[(1 * 2 + 0) * 2 + 1, (1 * 2 + 1) * 2 + 0] == x[1, 1, 2, 1]


def test_im2col_writes_into_out_and_rejects_a_wrong_buffer():
    import pytest

    x = np.random.default_rng(0).standard_normal((2, 3, 5, 5)).astype(np.float32)
    out = np.full((27, 2 * 9), np.nan, dtype=np.float32)
    assert im2col(x, (3, 3), out=out) is out
    np.testing.assert_array_equal(out, naive_im2col(x, (3, 3), (1, 1), (0, 0), (1, 1)))
    with pytest.raises(ValueError, match=r"im2col: out must be a C-contiguous float32 array of shape \(27, 18\)"):
        im2col(x, (3, 3), out=np.empty((18, 27), dtype=np.float32).T)


def test_workspace_is_reused_within_a_thread_and_private_to_each_thread():
    import threading

    from tinyflow.kernels._cpu import release_workspace, workspace

    a = workspace(np, "test.buf", (4, 5), np.float32)
    b = workspace(np, "test.buf", (2, 3), np.float32)
    assert np.shares_memory(a, b) and b.shape == (2, 3)
    seen = []
    t = threading.Thread(target=lambda: seen.append(workspace(np, "test.buf", (4, 5), np.float32)))
    t.start()
    t.join()
    assert not np.shares_memory(a, seen[0])
    release_workspace()
    assert not np.shares_memory(a, workspace(np, "test.buf", (4, 5), np.float32))


def test_concurrent_convolutions_in_threads_give_the_single_threaded_results():
    """Data-parallel ranks run as threads in tests: the conv workspace must not be shared."""
    import threading

    import tinyflow as tf
    import tinyflow.nn.functional as F

    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((2, 3, 9, 9)).astype(np.float32) for _ in range(4)]
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)

    def run(x):
        xt, wt = tf.tensor(x, requires_grad=True), tf.tensor(w, requires_grad=True)
        y = F.conv2d(xt, wt, padding=1)
        (y * y).sum().backward()
        return y.numpy(), xt.grad.numpy(), wt.grad.numpy()

    expected = [run(x) for x in xs]
    results = [None] * len(xs)

    def worker(i):
        for _ in range(5):
            results[i] = run(xs[i])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, exp in zip(results, expected):
        for a, b in zip(got, exp):
            np.testing.assert_array_equal(a, b)


def test_kernels_split_over_threads_give_the_same_results(monkeypatch):
    """Force the threaded path (tiny chunks, 3 threads) and compare with the naive loops."""
    from tinyflow.kernels import _cpu
    from tinyflow.kernels.pool import maxpool2d_backward, maxpool2d_forward

    monkeypatch.setattr(_cpu, "MIN_CHUNK", 1)
    monkeypatch.setenv("TINYFLOW_NUM_THREADS", "3")
    assert _cpu.num_threads() == 3
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 7, 6)).astype(np.float32)
    geom = ((3, 2), (2, 1), (1, 1), (1, 2))
    col = im2col(x, *geom)
    np.testing.assert_array_equal(col, naive_im2col(x, *geom))
    g = rng.standard_normal(col.shape).astype(np.float32)
    np.testing.assert_allclose(col2im(g, x.shape, *geom), naive_col2im(g, x.shape, *geom), rtol=1e-5, atol=1e-5)
    monkeypatch.setenv("TINYFLOW_NUM_THREADS", "1")
    out1, arg1 = maxpool2d_forward(x, (3, 3), (2, 2), (1, 1), (1, 1), True)
    gx1 = maxpool2d_backward(out1, arg1, x.shape, (3, 3), (2, 2), (1, 1), (1, 1))
    monkeypatch.setenv("TINYFLOW_NUM_THREADS", "3")
    out3, arg3 = maxpool2d_forward(x, (3, 3), (2, 2), (1, 1), (1, 1), True)
    gx3 = maxpool2d_backward(out3, arg3, x.shape, (3, 3), (2, 2), (1, 1), (1, 1))
    for a, b in ((out1, out3), (arg1, arg3), (gx1, gx3)):
        np.testing.assert_array_equal(a, b)


def test_parallel_for_covers_the_range_once_and_propagates_errors(monkeypatch):
    import pytest

    from tinyflow.kernels import _cpu

    monkeypatch.setenv("TINYFLOW_NUM_THREADS", "4")
    hits = np.zeros(10, dtype=int)

    def body(a, b):
        hits[a:b] += 1

    _cpu.parallel_for(np, 10, body, work=10 * _cpu.MIN_CHUNK)
    np.testing.assert_array_equal(hits, 1)

    def boom(a, b):
        raise RuntimeError(f"chunk {a}:{b}")

    with pytest.raises(RuntimeError, match="chunk"):
        _cpu.parallel_for(np, 10, boom, work=10 * _cpu.MIN_CHUNK)


def test_threaded_kernels_work_in_a_forked_child(monkeypatch):
    """A DataLoader or launcher may fork after the pool exists: the child must not hang."""
    import multiprocessing as mp

    import pytest

    from tinyflow.kernels import _cpu

    if "fork" not in mp.get_all_start_methods():
        pytest.skip("no fork on this platform")
    monkeypatch.setattr(_cpu, "MIN_CHUNK", 1)
    monkeypatch.setenv("TINYFLOW_NUM_THREADS", "2")
    x = np.random.default_rng(0).standard_normal((2, 4, 6, 6)).astype(np.float32)
    expected = im2col(x, (3, 3))  # creates the parent's thread pool
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(_im2col_in_child, (x,)).get(timeout=60)
    np.testing.assert_array_equal(got, expected)


def _im2col_in_child(x):
    from tinyflow.kernels import _cpu

    _cpu.MIN_CHUNK = 1
    return im2col(x, (3, 3))


# ----------------------------------------------------------------- Winograd F(2x2) and F(4x4) transforms
@pytest.mark.parametrize("tile", [2, 4])
@settings(max_examples=20, deadline=None)
@given(st.sampled_from([(3, 3), (5, 5), (6, 3), (3, 5)]), st.integers(0, 2), st.integers(0, 5),
       st.integers(0, 2**31 - 1))
def test_winograd_transforms_are_adjoint_pairs(tile, k, p, extra, seed):
    """Each backward transform is the exact transpose of its forward one: <F(a), b> == <a, F^T(b)>."""
    from tinyflow.kernels.conv import (
        winograd_input,
        winograd_input_grad,
        winograd_output,
        winograd_output_grad,
        winograd_parts,
        winograd_tiles,
        winograd_weight,
        winograd_weight_grad,
    )

    rng = np.random.default_rng(seed)
    n, c, o = 2, 3, 4
    a = (tile + 2) ** 2  # input tile positions: 16 for F(2x2), 36 for F(4x4)
    h, w = max(1, k[0] - 2 * p) + extra, max(1, k[1] - 2 * p) + (extra + tile // 2) % (tile + 1)
    oh, ow, th, tw = winograd_tiles(h, w, (p, p), k, tile)
    q = int(np.prod(winograd_parts(k)))
    t = n * th * tw
    x = rng.standard_normal((n, c, h, w))
    gv = rng.standard_normal((a, q * c, t))
    v = winograd_input(x, (p, p), np.empty((a, q * c, t)), k, tile)
    np.testing.assert_allclose(np.vdot(v, gv), np.vdot(x, winograd_input_grad(gv, x.shape, (p, p), k, tile)),
                               rtol=1e-10)
    wt = rng.standard_normal((o, c, *k))
    gu = rng.standard_normal((a, o, q * c))
    np.testing.assert_allclose(np.vdot(winograd_weight(wt, tile), gu),
                               np.vdot(wt, winograd_weight_grad(gu, wt.shape, tile)), rtol=1e-10)
    m = rng.standard_normal((a, o, t))
    gy = rng.standard_normal((n, o, oh, ow))
    gm, gfull = winograd_output_grad(gy, np.empty((a, o, t)), tile)
    np.testing.assert_allclose(np.vdot(winograd_output(m, gy.shape, tile=tile), gy), np.vdot(m, gm), rtol=1e-10)
    if tile == 4:
        np.testing.assert_allclose(gfull.reshape(o, -1).sum(axis=1), gy.sum(axis=(0, 2, 3)), rtol=1e-10)


def test_winograd4_input_tiles_are_the_padded_image():
    """With B^T's inverse applied, F(4x4)'s V gives back every 6x6 tile of the zero-padded input."""
    from tinyflow.kernels.conv import _BT4, winograd_input

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 6))
    v = winograd_input(x, (1, 1), np.empty((36, 3, 2 * 2 * 2)), tile=4)  # OH, OW = 5, 6 -> TH, TW = 2, 2
    binv = np.linalg.inv(np.array(_BT4, dtype=float))
    d = np.einsum("ka,abctun,lb->kltucn", binv, v.reshape(6, 6, 3, 2, 2, 2), binv)  # (6, 6, TH, TW, C, N)
    xpad = np.zeros((2, 3, 10, 10))
    xpad[:, :, 1:6, 1:7] = x
    for th in range(2):
        for tw in range(2):
            np.testing.assert_allclose(d[:, :, th, tw].transpose(3, 2, 0, 1),
                                       xpad[:, :, 4 * th:4 * th + 6, 4 * tw:4 * tw + 6], atol=1e-12)


def test_winograd_input_tiles_are_the_padded_image():
    """With B^T's inverse applied, V gives back every 4x4 tile of the zero-padded input."""
    from tinyflow.kernels.conv import _BT, winograd_input

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 6))
    v = winograd_input(x, (1, 1), np.empty((16, 3, 2 * 3 * 3)))  # OH, OW = 5, 6 -> TH, TW = 3, 3
    binv = np.linalg.inv(np.array(_BT, dtype=float))
    d = np.einsum("ka,abctun,lb->kltucn", binv, v.reshape(4, 4, 3, 3, 3, 2), binv)  # (4, 4, TH, TW, C, N)
    xpad = np.zeros((2, 3, 8, 8))
    xpad[:, :, 1:6, 1:7] = x
    for th in range(3):
        for tw in range(3):
            np.testing.assert_allclose(d[:, :, th, tw].transpose(3, 2, 0, 1),
                                       xpad[:, :, 2 * th:2 * th + 4, 2 * tw:2 * tw + 4], atol=1e-12)


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("k, p", [((3, 3), (1, 1)), ((5, 3), (2, 0)), ((6, 5), (1, 2))])
def test_winograd_conv2d_kernels_match_im2col_and_rebuild_what_they_did_not_keep(monkeypatch, k, p, tile):
    """The named Winograd kernels, F(2x2, 3x3) and F(4x4, 3x3) tiles, against im2col + GEMM: forward
    with and without V kept, and backward from forward's V and U or from x and w (as after a
    first backward with retain_graph)."""
    from tinyflow.kernels import conv as conv_kernels
    from tinyflow.kernels.conv import winograd_conv2d_backward, winograd_conv2d_forward

    monkeypatch.setattr(conv_kernels, "winograd_tile", lambda oh, ow, channels=None: tile)

    rng = np.random.default_rng(sum(k) + sum(p))
    n, c, o, h, w = 3, 4, 5, 7, 6
    x = rng.standard_normal((n, c, h, w))
    wt = rng.standard_normal((o, c, *k))
    b = rng.standard_normal(o)
    oh, ow = conv_output_size(h, k[0], 1, p[0]), conv_output_size(w, k[1], 1, p[1])
    col = im2col(x, k, (1, 1), p)  # (C*kh*kw, N*OH*OW)
    want = (wt.reshape(o, -1) @ col).reshape(o, n, oh, ow).transpose(1, 0, 2, 3) + b.reshape(1, -1, 1, 1)
    gy = rng.standard_normal(want.shape)
    gy2 = gy.transpose(1, 0, 2, 3).reshape(o, -1)
    want_gw = (gy2 @ col.T).reshape(wt.shape)
    want_gx = col2im(wt.reshape(o, -1).T @ gy2, x.shape, k, (1, 1), p)
    y, v, u = winograd_conv2d_forward(x, wt, b, p, keep_v=False)
    assert v is None
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-10)
    y, v, u = winograd_conv2d_forward(x, wt, b, p)
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-10)
    for saved in ((v, u), (None, None)):
        gx, gw, gb = winograd_conv2d_backward(gy, x, wt, *saved, x.shape, k, p)
        np.testing.assert_allclose(gx, want_gx, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(gw, want_gw, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(gb, gy.sum(axis=(0, 2, 3)), rtol=1e-10, atol=1e-10)
    assert winograd_conv2d_backward(gy, None, wt, None, None, x.shape, k, p, (True, False, False))[1:] == (None, None)


@pytest.mark.parametrize("blas, pool", [("1", "3"), ("2", "2"), ("1", "1")])
def test_batched_matmul_is_matmul_whether_the_pool_or_blas_splits_it(monkeypatch, blas, pool):
    """Winograd's batched GEMMs: split over the pool where BLAS is single-threaded, else one
    np.matmul; the same products either way, written into ``out``."""
    from tinyflow.kernels import _cpu

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", blas)
    monkeypatch.setenv("TINYFLOW_NUM_THREADS", pool)
    monkeypatch.setattr(_cpu, "MIN_CHUNK", 1)
    rng = np.random.default_rng(int(blas + pool))
    a = rng.standard_normal((7, 5, 6)).astype(np.float32)
    b = rng.standard_normal((7, 8, 6)).astype(np.float32).transpose(0, 2, 1)  # a transposed view, as gW's
    out = np.empty((7, 5, 8), dtype=np.float32)
    assert _cpu.batched_matmul(a, b, out) is out
    np.testing.assert_array_equal(out, np.matmul(a, b))


# ------------------------------------------------------------ the copies around the GEMM
@settings(max_examples=25, deadline=None)
@given(st.integers(0, 3), st.integers(1, 5), st.integers(1, 4), st.integers(1, 6), st.booleans(), st.booleans(),
       st.integers(0, 2**31 - 1))
def test_conv_output_and_its_gradient_against_naive_loops(n, o, oh, ow, with_bias, relu, seed):
    """y[n, o] = relu?(out[o, n] + b[o]); gy[o, n] = gout[n, o] masked where y <= 0; gb = sum of gy."""
    from tinyflow.kernels.conv import conv_output, conv_output_grad

    rng = np.random.default_rng(seed)
    out = rng.standard_normal((o, n * oh * ow))
    b = rng.standard_normal(o) if with_bias else None
    y = conv_output(out, b, (n, o, oh, ow), relu)
    want = np.empty((n, o, oh, ow))
    for i in range(n):
        for c in range(o):
            v = out[c, i * oh * ow:(i + 1) * oh * ow].reshape(oh, ow) + (b[c] if with_bias else 0.0)
            want[i, c] = np.maximum(v, 0) if relu else v
    np.testing.assert_array_equal(y, want)
    gout = rng.standard_normal(y.shape)
    gy, gb = conv_output_grad(gout, y if relu else None, with_bias)
    want_gy = np.where((y <= 0) & relu, 0.0, gout).transpose(1, 0, 2, 3).reshape(o, -1)
    np.testing.assert_array_equal(gy, want_gy)
    if with_bias:
        np.testing.assert_allclose(gb, want_gy.sum(axis=1), rtol=1e-12, atol=1e-12)
    else:
        assert gb is None


def test_conv_output_grad_sums_half_bias_gradients_in_float32():
    """4096 ones in bfloat16: a bfloat16 running sum stalls at 256; the reference says 4096."""
    import ml_dtypes

    from tinyflow.kernels.conv import conv_output_grad

    gout = np.ones((16, 2, 16, 16), dtype=ml_dtypes.bfloat16)
    gy, gb = conv_output_grad(gout, None, True)
    assert gy.dtype == gb.dtype == gout.dtype
    np.testing.assert_array_equal(gb.astype(np.float64), [4096.0, 4096.0])


def test_im2col_zeroes_the_rows_that_pad_k():
    """A GPU GEMM pads K = C*kh*kw to a multiple of 8: the extra rows of ``out`` become 0."""
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 5)).astype(np.float32)
    out = np.full((32, 2 * 9), np.nan, dtype=np.float32)
    assert im2col(x, (3, 3), out=out) is out
    np.testing.assert_array_equal(out[:27], naive_im2col(x, (3, 3), (1, 1), (0, 0), (1, 1)))
    np.testing.assert_array_equal(out[27:], 0)
