"""The bank-conflict report (cuda_tools/bank_conflicts.py): shared-memory wavefronts per warp
request against the ideal, from the emulator built with g++'s -fsanitize=thread instrumentation.

Synthetic kernels with known access patterns (compiled from a scratch csrc folder, so the real
kernels stay what the GPU runs) pin the measure down: 32 lanes 32 words apart are a 32-way
conflict, consecutive words and a broadcast are conflict-free, a stride of 33 words (one word of
padding a row) is conflict-free again; 8-byte accesses take two half-warp phases and 16-byte ones
four quarter-warp phases, each ideal at one wavefront; 2-byte accesses share words; masked tails,
plain __shared__, TF_SHARED and the dynamic shared memory of a persistent kernel all count, and
global memory does not. A hypothesis test checks random per-lane words against the rule computed
here in NumPy.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_tools import bank_conflicts, coalescing, emulator
from tinyflow_cuda.runtime import CSRC

pytestmark = pytest.mark.skipif(emulator.compiler() is None, reason="the emulator needs g++")

PATTERNS_CU = r"""
#include "common.cuh"
template <typename T> struct alignas(16) Pack16 { T v[16 / sizeof(T)]; };
#define WORDS 4096
extern "C" {
// Each thread writes word threadIdx.x * stride + offset of a plain __shared__ tile, then reads it.
__global__ void strided_words(float* out, int stride, int offset) {
    __shared__ float tile[WORDS];
    const int i = threadIdx.x * stride + offset;
    tile[i] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = tile[i];
}
// The tile filled by a stride-1 loop (conflict-free stores), then each thread reads word index[t].
__global__ void gather_words(const int* index, float* out) {
    __shared__ float tile[WORDS];
    for (int k = threadIdx.x; k < WORDS; k += blockDim.x) tile[k] = (float)k;
    __syncthreads();
    out[threadIdx.x] = tile[index[threadIdx.x]];
}
// 8-byte elements: the fill, then a read of element threadIdx.x * stride.
__global__ void strided_doubles(double* out, int stride) {
    __shared__ double tile[WORDS / 2];
    for (int k = threadIdx.x; k < WORDS / 2; k += blockDim.x) tile[k] = (double)k;
    __syncthreads();
    out[threadIdx.x] = tile[threadIdx.x * stride];
}
// 16-byte packs of floats: the fill, then a read of pack threadIdx.x * stride.
__global__ void strided_packs(float* out, int stride) {
    __shared__ Pack16<float> tile[WORDS / 4];
    for (int k = threadIdx.x; k < WORDS / 4; k += blockDim.x) {
        Pack16<float> p;
        for (int j = 0; j < 4; ++j) p.v[j] = (float)(4 * k + j);
        tile[k] = p;
    }
    __syncthreads();
    reinterpret_cast<Pack16<float>*>(out)[threadIdx.x] = tile[threadIdx.x * stride];  // one copy
}
// 2-byte elements: a read of element threadIdx.x * stride after the fill.
__global__ void strided_halves(float* out, int stride) {
    __shared__ unsigned short tile[2 * WORDS];
    for (int k = threadIdx.x; k < 2 * WORDS; k += blockDim.x) tile[k] = (unsigned short)k;
    __syncthreads();
    out[threadIdx.x] = (float)tile[threadIdx.x * stride];
}
// TF_SHARED (an arena per block): the strided pattern again.
__global__ void arena_words(float* out, int stride) {
    TF_SHARED(float, tile, WORDS);
    const int i = threadIdx.x * stride;
    tile[i] = (float)threadIdx.x;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = tile[i];
}
// A persistent kernel: dynamic shared memory, all blocks alive, a grid barrier between the store
// and the load.
TF_COOPERATIVE __global__ void persistent_words(float* out, int stride) {
    TF_DYNAMIC_SHARED(float, tile);
    const int i = threadIdx.x * stride;
    tile[i] = (float)(blockIdx.x * 1000 + threadIdx.x);
    __syncthreads();
    grid_sync();
    out[blockIdx.x * blockDim.x + threadIdx.x] = tile[i];
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
    """Record launches of the synthetic kernels: patterns(name, grid, block, args, shared_mem=0)
    -> KernelBanks. A fixed folder keeps the instrumented build cached between sessions."""
    csrc = Path(tempfile.gettempdir()) / "tinyflow_bank_patterns"
    csrc.mkdir(exist_ok=True)
    _write_if_changed(csrc / "common.cuh", (CSRC / "common.cuh").read_text())  # emu.h: cuda_tools'
    (csrc / "emu.h").unlink(missing_ok=True)  # a copy an older checkout left would go unused
    _write_if_changed(csrc / "patterns.cu", PATTERNS_CU)

    def run(name, grid, block, args, shared_mem=0):
        with bank_conflicts.recording(csrc=csrc) as rec:
            rec.runtime.launch(name, grid, block, args, shared_mem=shared_mem)
        return rec.report()[name]

    run.csrc = csrc
    return run


def _one(stats, kind):
    """The one site of ``stats`` doing ``kind`` (load or store)."""
    found = [s for s in stats.sites if s.kind == kind]
    assert len(found) == 1, f"{kind}: {[s.describe() for s in stats.sites]}"
    return found[0]


@pytest.mark.parametrize("stride, offset, ratio", [
    (32, 0, 32.0),  # every lane in bank `offset`: 32 distinct words, 32 wavefronts
    (32, 5, 32.0),
    (1, 0, 1.0),  # consecutive words: one wavefront
    (33, 0, 1.0),  # a row of 32 words and one of padding: lane i in bank i
    (2, 0, 2.0),  # two words in each of 16 banks
    (16, 0, 16.0),
    (0, 7, 1.0),  # every lane on the same word: a broadcast
])
def test_strided_words_take_the_wavefronts_of_the_busiest_bank(patterns, stride, offset, ratio):
    out = np.zeros(64, np.float32)
    stats = patterns("strided_words", 1, 64, [out, stride, offset])
    if stride:
        np.testing.assert_array_equal(out, np.arange(64))  # the instrumented build still computes
    for kind in ("load", "store"):
        site = _one(stats, kind)
        assert site.requests == 2 and site.lanes == 64  # two warps, one request each
        assert site.ideal == 2
        assert site.wavefronts == 2 * ratio
        assert site.ratio == ratio
    assert stats.ratio == ratio
    if ratio == 1.0:
        assert stats.worst() == []
    else:
        assert stats.worst(1)[0].ratio == ratio


def test_a_broadcast_load_is_free_also_within_a_wider_pattern(patterns):
    index = np.zeros(32, np.int32)
    index[::2] = 5  # half the lanes on word 5, the others on words 0, 32, 64... (bank 0)
    index[1::2] = 32 * np.arange(16)
    stats = patterns("gather_words", 1, 32, [index, np.zeros(32, np.float32)])
    load = _one(stats, "load")
    assert (load.requests, load.wavefronts, load.ideal) == (1, 16, 1)  # 16 words in bank 0
    store = _one(stats, "store")  # the fill: 4096 consecutive words, 128 requests of one wavefront
    assert (store.requests, store.wavefronts, store.ideal) == (128, 128, 128)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_random_words_per_lane_against_the_rule(patterns, data):
    lanes = data.draw(st.integers(1, 64))
    index = np.array(data.draw(st.lists(st.integers(0, 4095), min_size=lanes, max_size=lanes)),
                     np.int32)
    out = np.zeros(lanes, np.float32)
    stats = patterns("gather_words", 1, lanes, [index, out])
    np.testing.assert_array_equal(out, index)
    want = 0
    for warp in range(0, lanes, 32):
        words = np.unique(index[warp:warp + 32])
        want += np.bincount(words % 32).max()
    load = _one(stats, "load")
    assert load.requests == load.ideal == -(-lanes // 32)
    assert load.wavefronts == want


@pytest.mark.parametrize("stride, ratio", [(1, 1.0), (2, 2.0), (16, 16.0), (0, 1.0)])
def test_8_byte_accesses_take_two_half_warp_phases(patterns, stride, ratio):
    out = np.zeros(32, np.float64)
    stats = patterns("strided_doubles", 1, 32, [out, stride])
    np.testing.assert_array_equal(out, np.arange(32) * stride)
    load = _one(stats, "load")
    assert (load.requests, load.ideal) == (1, 2)
    assert load.wavefronts == 2 * ratio
    fill = _one(stats, "store")  # 2048 consecutive doubles: 64 requests of two phases
    assert (fill.requests, fill.ideal, fill.ratio) == (64, 128, 1.0)


@pytest.mark.parametrize("stride, ratio", [(1, 1.0), (2, 2.0), (8, 8.0), (0, 1.0)])
def test_16_byte_accesses_take_four_quarter_warp_phases(patterns, stride, ratio):
    out = np.zeros((32, 4), np.float32)
    stats = patterns("strided_packs", 1, 32, [out, stride])
    np.testing.assert_array_equal(out, 4 * stride * np.arange(32)[:, None] + np.arange(4))
    load = _one(stats, "load")
    assert (load.requests, load.ideal) == (1, 4)
    assert load.wavefronts == 4 * ratio
    fill = _one(stats, "store")
    assert (fill.requests, fill.ideal, fill.ratio) == (32, 128, 1.0)


def test_a_half_warp_of_8_byte_accesses_is_one_phase(patterns):
    out = np.zeros(16, np.float64)
    load = _one(patterns("strided_doubles", 1, 16, [out, 1]), "load")
    assert (load.requests, load.wavefronts, load.ideal) == (1, 1, 1)


@pytest.mark.parametrize("stride, ratio", [(1, 1.0), (2, 1.0), (64, 32.0)])
def test_2_byte_accesses_share_their_words(patterns, stride, ratio):
    out = np.zeros(32, np.float32)
    load = _one(patterns("strided_halves", 1, 32, [out, stride]), "load")
    np.testing.assert_array_equal(out, np.arange(32) * stride)
    assert (load.requests, load.ideal, load.ratio) == (1, 1, ratio)


def test_a_masked_tail_counts_its_lanes_only(patterns):
    out = np.zeros(43, np.float32)
    site = _one(patterns("strided_words", 1, 43, [out, 32, 0]), "load")  # warps of 32 and 11 lanes
    assert (site.requests, site.lanes, site.ideal, site.wavefronts) == (2, 43, 2, 32 + 11)


@pytest.mark.parametrize("stride, ratio", [(32, 32.0), (33, 1.0)])
def test_tf_shared_arenas_count_block_by_block(patterns, stride, ratio):
    out = np.zeros(3 * 64, np.float32)
    stats = patterns("arena_words", 3, 64, [out, stride])
    np.testing.assert_array_equal(out, np.tile(np.arange(64), 3))
    for kind in ("load", "store"):
        site = _one(stats, kind)
        assert (site.requests, site.ideal, site.ratio) == (6, 6, ratio)


@pytest.mark.parametrize("stride, ratio", [(32, 32.0), (1, 1.0)])
def test_the_dynamic_shared_memory_of_a_persistent_kernel(patterns, stride, ratio):
    blocks, threads = 2, 64
    out = np.zeros(blocks * threads, np.float32)
    stats = patterns("persistent_words", blocks, threads, [out, stride],
                     shared_mem=4 * (stride * (threads - 1) + 1))
    want = (1000 * np.arange(blocks)[:, None] + np.arange(threads)).ravel()
    np.testing.assert_array_equal(out, want)  # each block its own arena
    for kind in ("load", "store"):
        site = _one(stats, kind)
        assert (site.requests, site.ideal, site.ratio) == (4, 4, ratio)


def test_global_memory_is_not_shared_and_both_reports_run_at_once(patterns):
    out = np.zeros(32, np.float32)
    with coalescing.recording(csrc=patterns.csrc) as coal, \
            bank_conflicts.recording(csrc=patterns.csrc) as banks:
        assert coal.runtime is banks.runtime
        banks.runtime.launch("strided_words", 1, 32, [out, 33, 0])
    shared = banks.report()["strided_words"]
    assert {s.kind for s in shared.sites} == {"load", "store"} and shared.ratio == 1.0
    glob = coal.report()["strided_words"]
    assert [(s.kind, s.argument) for s in glob.sites] == [("store", "out")]
    assert all(s.site.startswith("patterns.cu:") for s in shared.sites)  # addr2line names them


def test_recordings_do_not_nest(patterns):
    with bank_conflicts.recording(csrc=patterns.csrc):
        with pytest.raises(RuntimeError, match="do not nest"):
            with bank_conflicts.recording(csrc=patterns.csrc):
                pass


def test_the_table_lists_kernels_and_their_worst_sites(patterns):
    out = np.zeros(32, np.float32)
    with bank_conflicts.recording(csrc=patterns.csrc) as rec:
        rec.runtime.launch("strided_words", 1, 32, [out, 32, 0])
        rec.runtime.launch("strided_words", 1, 32, [out, 1, 0])
    report = rec.report()
    stats = report["strided_words"]
    assert stats.launches == 2
    assert stats.ratio == pytest.approx((32 + 1) / 2)  # one request of each per site
    table = report.table(sites=1, label="demo")
    assert "strided_words_" not in table and "strided_words" in table  # no dtype suffix here
    assert "16.50" in table  # the kernel's ratio
    assert "patterns.cu:10 store: 16.50x (33/2 wavefronts, 2 requests" in table  # its worst site


def test_the_cli_prints_one_row_a_kernel_for_the_cases_asked(capsys):
    """``python -m cuda_tools.bank_conflicts --only ...``: the recurrence's forward at the
    H100's cut (one block of the plan), its kernel row at the ideal."""
    assert bank_conflicts.main(["--only", "lstm 512x16 fwd tc"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.startswith("lstm 512x16 fwd tc")]
    assert len(rows) == 1 and "lstm_sequence_forward_f32" in rows[0]
    assert rows[0].split()[-5:-1] == ["1.00", "1.00", "1.00", "1.00"]  # ratio, loads, stores, worst
