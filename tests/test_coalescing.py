"""The coalescing report (cuda_tools/coalescing.py): sectors per warp-wide access against the
fewest possible, from the emulator built with g++'s -fsanitize=thread instrumentation.

Synthetic kernels with known access patterns (compiled from a scratch csrc folder, so the real
kernels stay what the GPU runs) pin the counting down: a coalesced copy is 100%, a stride-s gather
is 1/min(s, 8) for floats, a transposed store 1/8, a misaligned window 4/5; masked tails, 2-D
blocks, loops, broadcasts, block fibers and __shared__ are handled. Then the real im2col, col2im
and pooling kernels against issue 21's 80%.
"""
from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_tools import coalescing, emulator
from tinyflow.kernels import conv as reference
from tinyflow_cuda.runtime import CSRC

pytestmark = pytest.mark.skipif(emulator.compiler() is None, reason="the emulator needs g++")

PATTERNS_CU = r"""
#include "common.cuh"
extern "C" {
__global__ void copy_f32(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
__global__ void copy_f64(const double* x, double* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
__global__ void gather_stride(const float* x, float* y, int n, int stride, int offset) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[(long long)i * stride + offset];
}
__global__ void gather_index(const float* x, const int* index, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[index[i]];
}
// (rows, cols) -> (cols, rows): the load is coalesced, the store strides by rows.
__global__ void transpose(const float* x, float* y, int rows, int cols) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) y[(i % cols) * rows + i / cols] = x[i];
}
__global__ void broadcast(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[0];
}
// A 2-D block whose x is fastest: warps are 32 consecutive linear ids, (4 x 8) patches here.
__global__ void copy_2d(const float* x, float* y, int n) {
    const int block = blockIdx.y * gridDim.x + blockIdx.x;
    const int i = (block * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;  // linear id order
    if (i < n) y[i] = x[i];
}
// Each thread sums `rounds` planes: the k-th iterations of the lanes line up.
__global__ void plane_sum(const float* x, float* y, int n, int rounds) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int k = 0; k < rounds; ++k) s += x[(long long)k * n + i];
    y[i] = s;
}
// y[i] = x[i + shift]: past x's end (shift > 0) or before its start (shift < 0) for some lanes.
__global__ void shifted_load(const float* x, float* y, int n, int shift) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i + shift];
}
// y[i + shift] = x[i]: stores past y's end.
__global__ void shifted_store(const float* x, float* y, int n, int shift) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i + shift] = x[i];
}
// One 16-byte pack of x a thread: the last one holds x's end (and what lies past it).
struct alignas(16) Quad {
    float v[4];
};
__global__ void quad_sum(const float* x, float* y, int quads) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < quads) {
        const Quad q = reinterpret_cast<const Quad*>(x)[i];  // one 16-byte load: read at run time
        float sum = 0.0f;
        for (int r = 0; r < 4; ++r) sum += q.v[(i + r) & 3];
        y[i] = sum;
    }
}
// Memory that is no argument: a local array indexed at run time, a constant table, __shared__.
__global__ void locals_and_tables(const float* x, float* y, int n) {
    static const float table[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    __shared__ float tile[256];
    volatile float local[16];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int j = 0; j < 16; ++j) local[j] = x[(i + j) % n];
    tile[threadIdx.x] = table[i & 7];
    __syncthreads();
    if (i < n) y[i] = local[(i * 7) & 15] + tile[(threadIdx.x + 1) % blockDim.x];
}
// Staged through __shared__ (block fibers): only the global loads and stores count.
__global__ void reverse_block(const float* x, float* y, int n) {
    __shared__ float tile[256];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    const int j = blockIdx.x * blockDim.x + (blockDim.x - 1 - threadIdx.x);
    if (j < n) y[j] = tile[threadIdx.x];
}
}
"""


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)  # atomic: a parallel worker never reads half a file


@pytest.fixture(scope="module")
def patterns():
    """Record launches of the synthetic kernels: patterns(name, grid, block, args) -> KernelStats."""
    # A fixed folder: the emulator's cache key holds the sources' paths, so a fresh tmp folder per
    # session would compile the instrumented library (~20 s) every time.
    csrc = Path(tempfile.gettempdir()) / "tinyflow_coalescing_patterns"
    csrc.mkdir(exist_ok=True)
    _write_if_changed(csrc / "common.cuh", (CSRC / "common.cuh").read_text())  # emu.h: cuda_tools'
    (csrc / "emu.h").unlink(missing_ok=True)  # a copy an older checkout left would go unused
    _write_if_changed(csrc / "patterns.cu", PATTERNS_CU)

    def run(name, grid, block, args):
        with coalescing.recording(csrc=csrc) as rec:
            rec.runtime.launch(name, grid, block, args)
        return rec.report()[name]

    run.csrc = csrc
    return run


def _site(stats, kind, argument):
    """The one site of ``stats`` that does ``kind`` on ``argument``."""
    found = [s for s in stats.sites if s.kind == kind and s.argument == argument]
    assert len(found) == 1, f"{kind} of {argument}: {[s.describe() for s in stats.sites]}"
    return found[0]


def test_a_coalesced_copy_is_100_percent_with_a_masked_tail(patterns):
    n = 1003  # the last warp has 11 active lanes: 44 bytes, 2 sectors
    x, y = np.arange(n, dtype=np.float32), np.zeros(n, np.float32)
    stats = patterns("copy_f32", 4, 256, [x, y, n])
    assert np.array_equal(y, x)  # the instrumented build still computes
    load, store = _site(stats, "load", "x"), _site(stats, "store", "y")
    for site in (load, store):
        assert site.requests == math.ceil(n / 32)
        assert site.lanes == n
        assert site.bytes == 4 * n
        assert site.sectors == site.minimal == 31 * 4 + 2
    assert stats.efficiency == stats.load_efficiency == stats.store_efficiency == 1.0
    assert stats.worst() == []


def test_a_coalesced_fp64_copy_moves_8_sectors_per_warp(patterns):
    n = 512
    stats = patterns("copy_f64", 2, 256, [np.ones(n), np.zeros(n), n])
    assert _site(stats, "load", "x").sectors == 8 * n // 32
    assert stats.efficiency == 1.0


def test_a_stride_32_gather_is_one_eighth(patterns):
    n, stride = 256, 32  # each lane's float in its own sector: 32 sectors for 4 sectors' bytes
    x = np.arange(n * stride, dtype=np.float32)
    y = np.zeros(n, np.float32)
    stats = patterns("gather_stride", 1, 256, [x, y, n, stride, 0])
    assert np.array_equal(y, x[::stride])
    load = _site(stats, "load", "x")
    assert (load.sectors, load.minimal) == (32 * n // 32, 4 * n // 32)
    assert stats.load_efficiency == pytest.approx(1 / 8)
    assert stats.store_efficiency == 1.0
    assert stats.efficiency == pytest.approx((4 + 4) / (32 + 4))
    assert stats.worst(1) == [load]


@settings(max_examples=25, deadline=None)
@given(stride=st.integers(1, 40), offset=st.integers(0, 7))
def test_a_strided_gather_scores_one_over_min_stride_8(patterns, stride, offset):
    n = 128
    x = np.zeros(n * stride + offset, np.float32)
    stats = patterns("gather_stride", 1, 128, [x, np.zeros(n, np.float32), n, stride, offset])
    load = _site(stats, "load", "x")
    # a warp's 32 floats, `stride` apart from float `offset` of the aligned buffer
    addr = 4 * (offset + stride * np.arange(n)).reshape(-1, 32)
    assert load.sectors == sum(len(np.unique(w // 32)) for w in addr)
    assert load.minimal == n // 32 * 4
    if offset == 0:
        assert load.efficiency == pytest.approx(1 / min(stride, 8))


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_a_gather_counts_distinct_sectors_and_bytes_per_warp(patterns, data):
    n = data.draw(st.integers(1, 200))
    size = data.draw(st.integers(1, 300))
    index = np.array(data.draw(st.lists(st.integers(0, size - 1), min_size=n, max_size=n)), np.int32)
    x = np.arange(size, dtype=np.float32)
    y = np.zeros(n, np.float32)
    stats = patterns("gather_index", 1, 256, [x, index, y, n])
    assert np.array_equal(y, x[index])
    warps = [index[w:w + 32] for w in range(0, n, 32)]
    load = _site(stats, "load", "x")
    assert load.requests == len(warps)
    assert load.sectors == sum(len(np.unique(w * 4 // 32)) for w in warps)
    assert load.minimal == sum(math.ceil(4 * len(np.unique(w)) / 32) for w in warps)  # repeats once
    assert load.bytes == sum(4 * len(np.unique(w)) for w in warps)


def test_a_transposed_store_scores_low(patterns):
    rows, cols = 64, 64
    x = np.arange(rows * cols, dtype=np.float32)
    y = np.zeros(rows * cols, np.float32)
    stats = patterns("transpose", 16, 256, [x, y, rows, cols])
    assert np.array_equal(y.reshape(cols, rows), x.reshape(rows, cols).T)
    assert stats.load_efficiency == 1.0
    assert stats.store_efficiency == pytest.approx(1 / 8)  # 32 lanes, 256 bytes apart
    assert stats.efficiency < 0.3
    assert stats.worst(1)[0].kind == "store"


def test_a_broadcast_is_one_sector_of_one(patterns):
    n = 256
    stats = patterns("broadcast", 1, 256, [np.full(4, 7, np.float32), np.zeros(n, np.float32), n])
    load = _site(stats, "load", "x")
    assert (load.requests, load.sectors, load.minimal, load.bytes) == (8, 8, 8, 32)


def test_a_misaligned_window_touches_5_sectors_for_4(patterns):
    n = 256
    x = np.arange(n + 1, dtype=np.float32)
    stats = patterns("gather_stride", 1, 256, [x, np.zeros(n, np.float32), n, 1, 1])
    assert stats.load_efficiency == pytest.approx(4 / 5)


def test_warps_are_32_consecutive_linear_ids_x_fastest(patterns):
    # blocks of (4, 32): a warp is 8 rows of 4 threads, contiguous in linear id order; were y
    # fastest, its lanes would be 16 bytes apart (25%)
    grid, block = (2, 2), (4, 32)
    n = 2 * 2 * 4 * 32
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    stats = patterns("copy_2d", grid, block, [x, y, n])
    assert np.array_equal(y, x)
    assert _site(stats, "load", "x").requests == n // 32
    assert stats.efficiency == 1.0


def test_loop_iterations_line_up_lane_by_lane(patterns):
    n, rounds = 256, 5
    x = np.ones(rounds * n, np.float32)
    y = np.zeros(n, np.float32)
    stats = patterns("plane_sum", 1, 256, [x, y, n, rounds])
    assert np.array_equal(y, np.full(n, rounds, np.float32))
    load = _site(stats, "load", "x")
    assert load.requests == rounds * n // 32
    assert load.lanes == rounds * n
    assert load.efficiency == 1.0


def test_block_fibers_and_shared_memory(patterns):
    n = 500
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    stats = patterns("reverse_block", 2, 256, [x, y, n])
    assert np.array_equal(y[:256], x[:256][::-1])
    assert {s.argument for s in stats.sites} == {"x", "y"}  # __shared__ tile is not global memory
    assert stats.efficiency == 1.0


def test_the_plain_emulator_build_is_not_instrumented(patterns):
    plain = emulator.EmulatorRuntime.build(csrc=patterns.csrc)
    traced = emulator.EmulatorRuntime.build(csrc=patterns.csrc, instrument=True)
    assert not plain.instrumented and traced.instrumented
    assert plain.library_path != traced.library_path
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    plain.trace_sink = lambda *args: pytest.fail("the plain build traced a launch")
    try:
        plain.launch("copy_f32", 1, 64, [x, y, 64])
    finally:
        plain.trace_sink = None
    assert np.array_equal(y, x)


# --- accesses outside the arguments -------------------------------------------------------------

@pytest.mark.parametrize("shift", [3, 40, 5000, -1, -33])
def test_loads_outside_an_argument_are_stray(patterns, shift):
    n = 256
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    stats = patterns("shifted_load", 1, 256, [x, y, n, shift])
    load = _site(stats, "load", "x")
    index = np.arange(n) + shift
    outside = (index < 0) | (index >= n)
    assert (load.stray, load.overhang) == (outside.sum(), 0)
    # the farthest float: past the end, to its last byte; before the start, from its first
    assert load.reach == 4 * max(index.max() + 1 - n, -index.min())
    assert load.lanes == n - outside.sum()  # requests and sectors count the accesses inside
    assert stats.stray == outside.sum() and _site(stats, "store", "y").outside == 0
    np.testing.assert_array_equal(y[~outside], x[index[~outside]])
    assert np.isnan(y[outside]).all()  # the guard reads as NaN


def test_a_view_s_neighbour_is_outside_the_view(patterns):
    # x and y are views of one buffer; x's lanes past its end read y's bytes in the real buffer,
    # which are no part of the argument x: stray all the same
    root = np.arange(512, dtype=np.float32)
    x, y = root[:256], root[256:]
    stats = patterns("shifted_load", 1, 128, [x, y, 128, 200])
    assert _site(stats, "load", "x").stray == 72
    assert np.isnan(y[56:128]).all() and (root[384:] == np.arange(384, 512)).all()


def test_stores_outside_an_argument_are_stray_and_land_in_the_guard(patterns):
    root = np.zeros(300, np.float32)
    y = root[:256]
    stats = patterns("shifted_store", 1, 256, [np.ones(256, np.float32), y, 256, 20])
    store = _site(stats, "store", "y")
    assert (store.stray, store.reach) == (20, 80)
    assert (y[20:] == 1).all() and (root[256:] == 0).all()  # the buffer beyond y is untouched


def test_a_vector_load_across_the_end_is_overhang(patterns):
    x = np.arange(4 * 8 - 2, dtype=np.float32)  # the 8th pack holds 2 floats of x
    y = np.zeros(8, np.float32)
    stats = patterns("quad_sum", 1, 32, [x, y, 8])
    load = _site(stats, "load", "x")
    assert (load.stray, load.overhang, load.reach) == (0, 1, 8)
    assert np.array_equal(y[:7], x[:28].reshape(7, 4).sum(axis=1))


def test_locals_constant_tables_and_shared_memory_are_not_stray(patterns):
    n = 300
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    stats = patterns("locals_and_tables", 2, 256, [x, y, n])
    assert stats.stray == stats.overhang == 0
    assert {s.argument for s in stats.sites} == {"x", "y"}
    i = np.arange(n)
    want = x[(i + (i * 7) % 16) % n] + np.tile(np.arange(1, 9), 64)[(i % 256 + 1) % 256 + 256 * (i // 256)]
    np.testing.assert_array_equal(y, want.astype(np.float32))


def test_arguments_that_overlap_share_one_copy(patterns):
    # x is the whole buffer, y its first half: the kernel writes y from x's second half. Copied
    # apart, x's copy (restored last) would put the old first half back over y's writes.
    root = np.arange(256, dtype=np.float32)
    index = np.arange(255, 127, -1, dtype=np.int32)
    stats = patterns("gather_index", 1, 128, [root, index, root[:128], 128])
    np.testing.assert_array_equal(root[:128], np.arange(255, 127, -1))
    np.testing.assert_array_equal(root[128:], np.arange(128, 256))
    assert stats.stray == stats.overhang == 0


# --- the real kernels against issue 21's target ------------------------------------------------

def _im2col(rng):
    from tinyflow_cuda import kernels
    kernels.im2col(rng.random((1, 8, 27, 27), dtype=np.float32), (5, 5), (1, 1), (2, 2))
    kernels.im2col(rng.random((1, 3, 63, 63), dtype=np.float32), (11, 11), (4, 4), (2, 2))


def _col2im(rng):
    from tinyflow_cuda import kernels
    kernels.col2im(rng.random((8 * 25, 27 * 27), dtype=np.float32), (1, 8, 27, 27), (5, 5),
                   (1, 1), (2, 2))
    kernels.col2im(rng.random((3 * 121, 15 * 15), dtype=np.float32), (1, 3, 63, 63), (11, 11),
                   (4, 4), (2, 2))


def _maxpool_forward(rng):
    from tinyflow_cuda import kernels
    kernels.maxpool2d_forward(rng.random((1, 16, 27, 27), dtype=np.float32), (3, 3), (2, 2))


def _maxpool_backward(rng):
    from tinyflow_cuda import kernels
    x = rng.random((1, 16, 27, 27), dtype=np.float32)
    out, argmax = kernels.maxpool2d_forward(x, (3, 3), (2, 2))
    kernels.maxpool2d_backward(rng.random(out.shape, dtype=np.float32), argmax, x.shape, (3, 3),
                               (2, 2))


def _avgpool_forward(rng):
    from tinyflow_cuda import kernels
    kernels.avgpool2d_forward(rng.random((1, 16, 27, 27), dtype=np.float32), (3, 3), (2, 2))


def _avgpool_backward(rng):
    from tinyflow_cuda import kernels
    kernels.avgpool2d_backward(rng.random((1, 16, 13, 13), dtype=np.float32), (1, 16, 27, 27),
                               (3, 3), (2, 2))


# Measured when these tests were written (f32, the shapes above): im2col 55% (loads of x 41%),
# col2im 47% (loads of col 45%), maxpool2d_forward 43%, maxpool2d_backward 78%,
# avgpool2d_forward 40% (the window loads of x at 38%), avgpool2d_backward 86%. A strict xfail
# turns into a failure once its rewrite reaches the target: then drop the mark. The pooling
# kernels' rewrite (tiles staged in shared memory, sector-aligned loops) scores 100% on each.
# The staged im2col and col2im (conv.cu: whole-warp, sector-aligned runs of x or col staged in
# shared memory) score 99% and 100% here.
REAL = [
    pytest.param("im2col", _im2col, id="im2col"),
    pytest.param("col2im", _col2im, id="col2im"),
    pytest.param("maxpool2d_forward", _maxpool_forward, id="maxpool2d_forward"),
    pytest.param("maxpool2d_backward", _maxpool_backward, id="maxpool2d_backward"),
    pytest.param("avgpool2d_forward", _avgpool_forward, id="avgpool2d_forward"),
    pytest.param("avgpool2d_backward", _avgpool_backward, id="avgpool2d_backward"),
]
FAMILIES = ["conv", "pool"]
SUFFIX = {"float32": "f32", "float64": "f64", "float16": "f16"}


@pytest.fixture(scope="module")
def conv_and_pool():
    """The instrumented build of conv.cu and pool.cu only (cached by content; ~20 s the first time)."""
    with coalescing.recording(families=FAMILIES):
        pass


@pytest.mark.parametrize("kernel, launch", REAL)
def test_real_kernels_reach_the_issue_21_target(conv_and_pool, kernel, launch):
    with coalescing.recording(families=FAMILIES) as rec:
        launch(np.random.default_rng(0))
    stats = rec.report()[f"{kernel}_f32"]
    assert stats.sectors > 0
    worst = "; ".join(s.describe() for s in stats.worst(3))
    assert stats.efficiency >= coalescing.TARGET, (
        f"{kernel}: {stats.efficiency:.0%} of sectors useful ({stats.sectors} moved, "
        f"{stats.minimal} needed); worst sites: {worst}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("offset", [0, 16, 48], ids=lambda b: f"{b}B")
def test_im2col_stores_whole_sectors_into_a_view_off_a_sector(conv_and_pool, dtype, offset):
    """im2col's tiles start a sector's worth of columns early, by col's address: into a view that
    starts 16 or 48 bytes past a sector boundary (a workspace's rows, say), each warp's stores
    still cover whole sectors (before issue 34 the host took the view's place modulo 16 bytes, so
    into a view 16 bytes off a sector a warp stored one sector more than its bytes fill)."""
    from tinyflow_cuda import kernels
    itemsize = np.dtype(dtype).itemsize
    x = np.random.default_rng(0).random((2, 3, 12, 12)).astype(dtype)
    kp, nl = 32, 2 * 12 * 12  # K = 27 padded as the op pads it
    root = np.full(kp * nl + 64 // itemsize, 7, dtype)  # an allocation: taken 256-byte aligned
    out = root[offset // itemsize:offset // itemsize + kp * nl].reshape(kp, nl)
    with coalescing.recording(families=FAMILIES) as rec:
        kernels.im2col(x, (3, 3), (1, 1), (1, 1), out=out)
    assert rec.launches == [f"im2col_{SUFFIX[np.dtype(dtype).name]}"]  # the kernel of 16-byte packs
    np.testing.assert_array_equal(out[:27], reference.im2col(x, (3, 3), (1, 1), (1, 1)))
    assert not out[27:].any()
    stores = [s for s in rec.report()[rec.launches[0]].sites if s.kind == "store"]  # pixels, zeros
    assert len(stores) == 2 and not any(s.outside for s in stores)
    # rows of whole sectors (288 columns): each warp's stores fill theirs, none is shared
    assert sum(s.sectors for s in stores) == sum(s.minimal for s in stores), [
        s.describe() for s in stores]
