"""csrc/conv.cu (im2col, col2im, conv_output, conv_output_grad, their *_direct and *_wide variants)
against tinyflow/kernels/conv.py in float32, float64, float16 and bfloat16, on the emulator and a
GPU; and the host side of the kernels (staged or direct, the 32/64-bit choice, folded grids). The
magic divisors are tested with csrc/fastdiv.cuh's other users."""
from __future__ import annotations

import contextlib
import re
from unittest import mock

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernel_backend import SETTINGS, reference, run

import tinyflow_cuda.kernels.conv as twin
from tinyflow_cuda.kernels._launch import dtype_suffix
from tinyflow_cuda.runtime import CSRC

ALL_FLOATS = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]
DTYPES = st.sampled_from(ALL_FLOATS)


def eps(dtype) -> float:
    return float(ml_dtypes.finfo(dtype).eps)


def exact(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64)


def assert_sum_close(got: np.ndarray, want64: np.ndarray, dtype, scale: float) -> None:
    """``got`` (dtype) against the float64 result: fp32 accumulation (f64 for f64) and one rounding
    to dtype, so within a couple of dtype ulps plus the accumulation error on ``scale``."""
    acc_eps = eps(np.float64) if dtype == np.float64 else eps(np.float32)
    np.testing.assert_allclose(exact(got), want64, rtol=2 * eps(dtype), atol=8 * acc_eps * scale + 1e-300)


@st.composite
def conv_cases(draw):
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    p = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    d = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    h = draw(st.integers(max(1, d[0] * (k[0] - 1) + 1 - 2 * p[0]), 9))
    w = draw(st.integers(max(1, d[1] * (k[1] - 1) + 1 - 2 * p[1]), 9))
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 3)), h, w)
    return shape, (k, s, p, d), draw(DTYPES), draw(st.sampled_from(PATHS)), draw(st.integers(0, 2**16))


PATHS = ("packs", "staged", "direct")
"""im2col's three 32-bit kernels (packs of x: im2col; staged rows: im2col_staged; im2col_direct)
and col2im's two (staged: col2im, for the first two; col2im_direct)."""


def path(name: str):
    """Force a path: ``packs`` as the host chooses (every case here fits the staged kernels), else
    no packs for im2col, and for ``direct`` no stage either (0 bytes fit no tile)."""
    if name == "packs":
        return contextlib.nullcontext()
    no_packs = {"im2col_gathers": lambda geo, itemsize: False}
    if name == "staged":
        return mock.patch.multiple(twin, **no_packs)
    return mock.patch.multiple(twin, STAGE_BYTES=0, STAGE_BYTES_PER_THREAD=0, **no_packs)


def im2col_kernel(name: str, geom, x: np.ndarray) -> str:
    """The im2col kernel ``path(name)`` launches for x: packs only where a tap's columns lie at
    most 16 bytes apart (and x is 16-byte aligned), else staged rows."""
    packs = geom[1][1] * x.dtype.itemsize <= 16 and x.ctypes.data % 16 == 0
    kernel = {"packs": "im2col" if packs else "im2col_staged", "staged": "im2col_staged",
              "direct": "im2col_direct"}[name]
    return f"{kernel}_{dtype_suffix(x)}"


@SETTINGS
@given(case=conv_cases())
def test_im2col_and_col2im_match_reference_in_every_dtype(emu, case):
    """Strides, padding and dilation in both directions, on every path (packs, staged, direct);
    im2col exact (it moves bits), col2im to fp32 accumulation."""
    shape, geom, dtype, name, seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    want = reference("im2col")(x, *geom)
    with path(name):
        got = run(emu, "im2col", x, *geom)
    assert emu.launches == [im2col_kernel(name, geom, x)]
    assert got.shape == want.shape and got.dtype == x.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))  # bit for bit

    col = rng.standard_normal(want.shape).astype(dtype)
    with path(name):
        dx = run(emu, "col2im", col, x.shape, *geom)
    assert emu.launches == [f"col2im{'_direct' if name == 'direct' else ''}_{dtype_suffix(x)}"]
    assert dx.shape == x.shape and dx.dtype == col.dtype
    want64 = reference("col2im")(exact(col), x.shape, *geom)
    assert_sum_close(dx, want64, dtype, scale=float(np.abs(exact(col)).max(initial=0)) * geom[0][0] * geom[0][1])


@pytest.mark.parametrize("dtype", ALL_FLOATS, ids=lambda d: np.dtype(d).name)
def test_staged_kernels_across_tiles_rounds_and_leads(emu, dtype):
    """The seams of the tiled kernels. im2col (packs and staged rows): rows of N*L = 3*899
    columns (odd, so every row starts its tile at another lead) over several tiles, into an
    ``out`` shifted by one element (head != 0) with K padded by zero rows; stride 1 and a strided,
    dilated, padded kernel; and an x that starts past a 16-byte boundary (no packs: staged).
    col2im: image rows of 47 pixels over several tiles of TH rows, a stage small enough for only 3
    taps a round (rounds that end inside a row of 5 taps), stride (3, 2), dilation (2, 1)."""
    rng = np.random.default_rng(7)
    size = np.dtype(dtype).itemsize
    for shape, geom in [((3, 2, 29, 31), ((3, 3), (1, 1), (1, 1), (1, 1))),
                        ((3, 2, 61, 63), ((5, 3), (2, 3), (2, 1), (1, 2)))]:
        x = rng.standard_normal(shape).astype(dtype)
        shifted_x = np.empty(x.size + 1, dtype)[1:].reshape(shape)  # one element past x's alignment
        shifted_x[...] = x
        want = reference("im2col")(x, *geom)
        k, nl = want.shape
        buffer = np.full((k + 5) * nl + 1, np.nan, dtype=dtype)
        out = buffer[1:].reshape(k + 5, nl)  # starts one element past a 16-byte boundary or so
        assert twin.im2col_stage(twin._geometry(shape, *geom), size) is not None
        for name, source in (("packs", x), ("staged", x), ("packs", shifted_x)):
            out[...] = np.nan
            with path(name):
                assert run(emu, "im2col", source, *geom, out=out) is out
            assert emu.launches == [im2col_kernel(name, geom, source)]
            np.testing.assert_array_equal(out[:k].view(np.uint8), want.view(np.uint8))
            np.testing.assert_array_equal(exact(out[k:]), 0)

    shape, geom = (2, 3, 61, 47), ((4, 5), (3, 2), (2, 1), (2, 1))
    geo = twin._geometry(shape, *geom)
    tile = twin.col2im_tile(geo, size)
    small = 3 * (tile.pitch * size + twin.TAP_RUN_BYTES)  # room for 3 taps' runs
    tile = twin.col2im_tile(geo, size, small)
    assert tile.rows < shape[2] and tile.images == 1 and tile.taps == 3  # rounds of 3 over 4x5 taps
    col = rng.standard_normal((3 * 4 * 5, 2 * geo[12] * geo[13])).astype(dtype)
    with mock.patch.object(twin, "col2im_tile", lambda geo, itemsize: tile):
        dx = run(emu, "col2im", col, shape, *geom)
    assert emu.launches == [f"col2im_{dtype_suffix(col)}"]
    assert_sum_close(dx, reference("col2im")(exact(col), shape, *geom), dtype, scale=float(np.abs(exact(col)).max()) * 20)


@pytest.mark.parametrize("dtype", ALL_FLOATS, ids=lambda d: np.dtype(d).name)
def test_col2im_tiles_of_whole_planes_across_images_rounds_and_folded_grids(emu, monkeypatch, dtype):
    """Small planes: a block sums several whole planes of one channel (images of a group; the last
    group shorter), over rounds of 4 taps that end inside a row of 3x3 taps (stride 1, padding 1,
    where the first and last tap rows skip an output row of every image), and over 2x5 taps of a
    strided, dilated kernel; grids folded to 2 in y and z so that blocks loop over channels and
    image groups."""
    rng = np.random.default_rng(11)
    size = np.dtype(dtype).itemsize
    monkeypatch.setattr(twin, "MAX_GRID_YZ", 2)
    for shape, geom in [((11, 5, 7, 7), ((3, 3), (1, 1), (1, 1), (1, 1))),
                        ((11, 3, 6, 9), ((2, 5), (1, 2), (0, 2), (2, 1)))]:
        geo = twin._geometry(shape, *geom)
        want_tile = twin.col2im_tile(geo, size)
        assert want_tile.rows == shape[2] and want_tile.images > 1
        four = twin.col2im_tile(geo, size, max_images=4)  # groups of 4, 4 and 3 images
        tile = twin.col2im_tile(geo, size, 4 * (four.pitch * size + twin.TAP_RUN_BYTES), max_images=4)
        assert (tile.images, tile.taps) == (4, 4)
        k = shape[1] * geom[0][0] * geom[0][1]
        col = rng.standard_normal((k, shape[0] * geo[12] * geo[13])).astype(dtype)
        want = reference("col2im")(exact(col), shape, *geom)
        for chosen in (want_tile, tile):
            with mock.patch.object(twin, "col2im_tile", lambda geo, itemsize, chosen=chosen: chosen):
                dx = run(emu, "col2im", col, shape, *geom)
            assert emu.launches == [f"col2im_{dtype_suffix(col)}"]
            assert_sum_close(dx, want, dtype, scale=float(np.abs(exact(col)).max()) * k)


def test_the_staged_kernels_are_chosen_where_their_tiles_fit():
    """im2col reads packs of x where a tap's columns are at most 16 bytes apart, stages where the
    input rows of a tile fit and they are at most a sector apart; col2im stages where an image row
    fits a tile and a tap's run the stage; else the direct kernels. And the host's copy of the
    kernels' constants matches conv.cu's."""
    source = (CSRC / "conv.cu").read_text()
    for name in ("IM2COL_COLUMNS", "COL2IM_PIXELS", "COPY_BYTES"):
        assert int(re.search(rf"constexpr int {name} = (\d+);", source).group(1)) == getattr(twin, name)
    assert "struct TapRun {\n    int src, packs, at;\n};" in source and twin.TAP_RUN_BYTES == 3 * 4
    geo = lambda x_shape, k, s, p: twin._geometry(x_shape, (k, k), (s, s), (p, p), (1, 1))  # noqa: E731
    conv1 = geo((128, 3, 224, 224), 11, 4, 2)  # AlexNet conv1: OW = 55
    assert twin.im2col_gathers(conv1, 4) and not twin.im2col_gathers(conv1, 8)  # 16, 32 bytes apart
    assert twin.im2col_stage(conv1, 8) == (224, 11)  # 217 pixels a row + the sector lead, in warps
    # 4 image rows; a tap's run is one output row (55 + 7 lead, in sectors: 64); 91 of 121 taps a round
    assert twin.col2im_tile(conv1, 4) == twin.Col2imTile(4, 1, 91, 64, 256, 24400)
    for x_shape, k, s, p in [((128, 64, 27, 27), 5, 1, 2), ((128, 192, 13, 13), 3, 1, 1),
                             ((128, 16, 32, 32), 3, 2, 1), ((128, 64, 8, 8), 3, 1, 1)]:
        for size in (2, 4, 8):  # AlexNet conv2-5, ResNet-20's 3x3 / 2 and its last 8x8 maps
            assert twin.im2col_stage(geo(x_shape, k, s, p), size) is not None
            assert twin.col2im_tile(geo(x_shape, k, s, p), size) is not None
    assert twin.im2col_stage(geo((1, 3, 64, 64), 9, 9, 0), 4) is None  # taps 36 bytes apart
    assert twin.im2col_stage(geo((1, 3, 64, 64), 5, 5, 0), 8) is None  # 40 bytes apart
    assert twin.im2col_stage(geo((1, 3, 64, 64), 5, 5, 0), 4) is not None  # 20
    assert twin.im2col_stage(geo((64, 8, 6, 6), 3, 1, 0), 4) is None  # OW = 4: 257 rows a tile
    assert twin.im2col_stage(geo((1, 8, 6, 6), 3, 1, 0), 4) is not None  # but only 4 there are
    assert twin.im2col_stage(geo((1, 1, 3, 9000), 3, 1, 1), 4) is None  # rows too wide to stage
    assert twin.col2im_tile(geo((1, 1, 3, 1100), 3, 1, 1), 4) is None  # an image row over a tile
    assert twin.col2im_tile(geo((1, 1, 3, 1000), 3, 1, 1), 4) == twin.Col2imTile(1, 1, 6, 1008, 256, 24272)


@pytest.mark.parametrize("size", [2, 4, 8])
@pytest.mark.parametrize("x_shape, k, s, p", [((128, 256, 13, 13), 3, 1, 1), ((128, 512, 7, 7), 3, 1, 1),
                                              ((128, 64, 8, 8), 3, 1, 1), ((128, 64, 27, 27), 5, 1, 2),
                                              ((128, 16, 32, 32), 3, 2, 1), ((64, 3, 224, 224), 11, 4, 2)])
def test_col2im_blocks_have_128_to_256_busy_threads_and_a_stage_sized_to_the_launch(x_shape, k, s, p, size):
    """Issue 33: no 64-thread blocks on small planes (several images a block instead), no thread
    without a pixel but the last warp's tail and the lanes before the tile's first pixel (fewer
    than a sector's elements: they make the stores start on a sector boundary), and the dynamic
    shared memory the tile's taps need (not a fixed 24 KB), within what 8 blocks of 256 threads
    share on an SM."""
    geo = twin._geometry(x_shape, (k, k), (s, s), (p, p), (1, 1))
    tile = twin.col2im_tile(geo, size)
    assert 128 <= tile.threads <= 256 and tile.threads % 32 == 0
    sector = 32 // size
    pixels = tile.images * tile.rows * geo[3]
    for lead in range(sector):  # thread tid sums pixels e*threads + tid - lead, e < COL2IM_PIXELS
        slots = np.arange(twin.COL2IM_PIXELS)[:, None] * tile.threads + np.arange(tile.threads) - lead
        busy = ((slots >= 0) & (slots < pixels)).any(axis=0)
        assert ((slots >= 0) & (slots < pixels)).sum() == pixels  # every pixel has its thread
        assert not busy[lead:tile.threads - 31].size or busy[lead:tile.threads - 31].all()
    assert tile.shared_mem == -(-tile.taps * (tile.pitch * size + twin.TAP_RUN_BYTES) // 16) * 16
    assert tile.shared_mem <= twin.STAGE_BYTES_PER_THREAD * tile.threads
    run = (tile.images - 1) * geo[12] * geo[13] + min(geo[12], -(-tile.rows // s)) * geo[13]
    assert tile.pitch % sector == 0 and run + sector - 1 <= tile.pitch < run + 2 * sector - 1


@pytest.mark.parametrize("shape", [(128, 256, 13, 13), (128, 64, 7, 7), (1, 3, 5, 5), (2, 7, 1, 1)])
def test_the_copies_around_the_gemm_use_every_thread_of_a_block(shape):
    """conv_output / conv_output_grad: a channel's N*OH*OW columns a grid row, COPY_BYTES a thread,
    so 13x13 planes fill 256-thread blocks (the 3-D grid over single planes idled 87 of 256)."""
    n, o, oh, ow = shape
    for size in (2, 4, 8):
        per_thread = twin.COPY_BYTES // size
        (tiles, rows), threads = twin._copy_grid(n * oh * ow, o, size)
        assert rows == o and threads % 32 == 0 and threads <= 256
        assert tiles * threads * per_thread >= n * oh * ow > (tiles - 1) * threads * per_thread
        if tiles == 1:  # a single tile: no thread without a column beyond the last warp
            assert threads - -(-(n * oh * ow) // per_thread) < 32
        else:
            assert threads == 256


@pytest.mark.parametrize("dtype", ALL_FLOATS, ids=lambda d: np.dtype(d).name)
def test_im2col_vector_and_scalar_stores_agree_and_padding_rows_are_zero(emu, dtype):
    """N*L = 2*6*6 is a multiple of every V: an aligned out and one shifted by an element. The
    direct kernel takes the vector stores into the first, the scalar ones into the second; the
    staged kernel aligns its packs to either, the packs' kernel its sectors. All exact; rows past
    C*kh*kw (the padded K) come back zero."""
    x = np.random.default_rng(1).standard_normal((2, 3, 6, 6)).astype(dtype)
    want = reference("im2col")(x, (3, 3), (1, 1), (1, 1))  # (27, 72)
    aligned = np.full((32, 72), np.nan, dtype=dtype)
    assert aligned.ctypes.data % 16 == 0
    shifted = np.full(32 * 72 + 1, np.nan, dtype=dtype)[1:].reshape(32, 72)
    for name in PATHS:
        for out in (aligned, shifted):
            out[...] = np.nan
            with path(name):
                got = run(emu, "im2col", x, (3, 3), (1, 1), (1, 1), out=out)
            assert emu.launches == [im2col_kernel(name, ((3, 3), (1, 1)), x)]
            assert got is out
            np.testing.assert_array_equal(exact(out[:27]), exact(want))
            np.testing.assert_array_equal(exact(out[27:]), 0)


def test_im2col_rejects_a_buffer_with_fewer_rows_or_other_columns(emu):
    x = np.zeros((1, 2, 4, 4), dtype=np.float32)
    for bad in (np.empty((17, 4), np.float32), np.empty((18, 5), np.float32), np.empty((18, 4), np.float64)):
        with pytest.raises(ValueError, match=r"im2col: out must be a C-contiguous float32 array of shape \(18, 4\)"):
            run(emu, "im2col", x, (3, 3), out=bad)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_wide_variants_and_folded_grids_match_reference(emu, monkeypatch, dtype):
    """The 64-bit kernels, selected here by lowering the limit (allocating 2**31 elements is not
    a unit test), the staged and direct ones, and grids whose y and z are capped at 2 so every
    kernel loops over the rest."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 5, 7, 6)).astype(dtype)
    geom = ((3, 2), (2, 1), (1, 1), (1, 2))
    want = reference("im2col")(x, *geom)
    col = rng.standard_normal(want.shape).astype(dtype)
    want_dx = reference("col2im")(exact(col), x.shape, *geom)
    monkeypatch.setattr(twin, "MAX_GRID_YZ", 2)
    for limit, name, suffix in ((2**31, "packs", ""), (2**31, "staged", "_staged"), (2**31, "direct", "_direct"),
                                (1, "packs", "_wide")):
        monkeypatch.setattr(twin, "INDEX_LIMIT", limit)
        with path(name):
            got = run(emu, "im2col", x, *geom)
        assert emu.launches == [f"im2col{suffix}_{dtype_suffix(x)}"]
        np.testing.assert_array_equal(exact(got), exact(want))
        with path(name):
            dx = run(emu, "col2im", col, x.shape, *geom)
        assert emu.launches == [f"col2im{suffix.replace('_staged', '')}_{dtype_suffix(x)}"]
        assert_sum_close(dx, want_dx, dtype, scale=float(np.abs(exact(col)).max()) * 6)
    out = rng.standard_normal((15, 3 * 4)).astype(dtype)
    b = rng.standard_normal(15).astype(dtype)
    want = exact(reference("conv_output")(out, b, (3, 15, 2, 2), True))
    np.testing.assert_array_equal(exact(emu.call("conv_output", out, b, (3, 15, 2, 2), True, expect_kernel=False)), want)
    assert emu.launches == []  # past the limit, the copies run the reference's xp ops
    monkeypatch.setattr(twin, "INDEX_LIMIT", 2**31)
    np.testing.assert_array_equal(exact(run(emu, "conv_output", out, b, (3, 15, 2, 2), True)), want)
    gy, gb = run(emu, "conv_output_grad", out.reshape(3, 15, 2, 2), None, True)  # 15 channels over 2 grid rows
    want_gy, want_gb = reference("conv_output_grad")(out.reshape(3, 15, 2, 2), None, True)
    np.testing.assert_array_equal(exact(gy), exact(want_gy))
    assert_sum_close(gb, exact(want_gy).sum(axis=1), dtype, scale=float(np.abs(exact(out)).max()) * 12)


def test_the_wide_kernels_are_chosen_from_2_to_the_31_elements():
    assert twin.index_kernel("im2col", 2**31 - 1, 2**31 - 1) == "im2col"
    assert twin.index_kernel("im2col", 5, 2**31) == "im2col_wide"  # the column matrix
    assert twin.index_kernel("col2im", 2**31, 5) == "col2im_wide"  # or the input
    # AlexNet-224 conv1 at batch 512: col (363 -> 368, 512*55*55) has 570M elements: 32-bit
    assert twin.index_kernel("im2col", 512 * 3 * 224 * 224, 368 * 512 * 55 * 55) == "im2col"


@st.composite
def output_cases(draw):
    n, o = draw(st.integers(1, 3)), draw(st.integers(1, 5))
    oh, ow = draw(st.integers(1, 7)), draw(st.integers(1, 40))
    return (n, o, oh, ow), draw(DTYPES), draw(st.booleans()), draw(st.booleans()), draw(st.integers(0, 2**16))


@SETTINGS
@given(case=output_cases())
def test_conv_output_and_its_gradient_match_reference(emu, case):
    """The GEMM output to NCHW with bias and ReLU (exact: one fp32 add, one rounding, as NumPy's
    half arithmetic), and the way back with the ReLU's mask (exact) and the bias gradient."""
    shape, dtype, with_bias, relu, seed = case
    n, o, oh, ow = shape
    rng = np.random.default_rng(seed)
    out = rng.standard_normal((o, n * oh * ow)).astype(dtype)
    bias = rng.standard_normal(o).astype(dtype) if with_bias else None
    y = run(emu, "conv_output", out, bias, shape, relu)
    want = reference("conv_output")(out, bias, shape, relu)
    assert y.shape == shape and y.dtype == out.dtype
    np.testing.assert_array_equal(exact(y), exact(want))

    gout = rng.standard_normal(shape).astype(dtype)
    relu_out = y if relu else None
    gy, gb = run(emu, "conv_output_grad", gout, relu_out, with_bias)
    want_gy, _ = reference("conv_output_grad")(gout, relu_out, False)
    np.testing.assert_array_equal(exact(gy), exact(want_gy))
    if not with_bias:
        assert gb is None
        return
    assert gb.shape == (o,) and gb.dtype == gout.dtype
    assert_sum_close(gb, exact(want_gy).sum(axis=1), dtype, scale=float(np.abs(exact(gy)).sum(axis=1).max()))


def test_conv_output_keeps_nan_and_masks_its_gradient_where_the_relu_cut(emu):
    out = np.array([[1.0, -2.0, np.nan, 0.0]], dtype=np.float32)  # O = 1, N = 1, L = 4
    y = run(emu, "conv_output", out, np.array([0.5], np.float32), (1, 1, 2, 2), True)
    np.testing.assert_array_equal(y.reshape(-1), [1.5, 0.0, np.nan, 0.5])
    gy, gb = run(emu, "conv_output_grad", np.full((1, 1, 2, 2), 2.0, np.float32), y, True)
    np.testing.assert_array_equal(gy.reshape(-1), [2.0, 0.0, 2.0, 2.0])  # NaN passes, as torch
    np.testing.assert_array_equal(gb, [6.0])


def test_non_float_input_falls_back_and_strided_input_is_made_contiguous(emu):
    x = np.arange(2 * 3 * 6 * 6, dtype=np.float32).reshape(2, 3, 6, 6)[:, :, ::2, ::2]
    np.testing.assert_array_equal(run(emu, "im2col", x, (2, 2)), reference("im2col")(x, (2, 2)))
    ints = np.arange(2 * 3 * 4 * 4, dtype=np.int32).reshape(2, 3, 4, 4)
    out = emu.call("im2col", ints, (2, 2), expect_kernel=False)
    assert emu.launches == []  # int32 has no .cu kernel: the reference body ran
    np.testing.assert_array_equal(out, reference("im2col")(ints, (2, 2)))
