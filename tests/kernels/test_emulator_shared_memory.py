"""The emulator's per-block shared memory and grid barrier (cuda_tools/emu.h), on small test kernels.

Persistent kernels (TF_COOPERATIVE) run with every block alive at once, so block-shared memory
must be one arena per block and grid_sync() must wait for every thread of the grid. Each kernel
below writes block-private data to shared memory, lets every other block run (grid_sync), and
reads it back: with one array for all blocks, each block would read the last writer's data.
The kernels live in a private source folder (csrc/'s headers copied next to them; emu.h is
cuda_tools'), built like csrc/ (cached by content).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from cuda_tools import emulator
from tinyflow_cuda.runtime import CSRC

pytestmark = pytest.mark.skipif(emulator.compiler() is None, reason="the emulator needs g++")

KERNELS = r"""
#include "common.cuh"

extern "C" {

// out[b] = sum of block b's slice of x, through a TF_SHARED tile that every block fills before
// any block reads it back (the grid barrier in between).
TF_COOPERATIVE __global__ void tile_sums(const int* x, int* out, int rounds) {
    TF_SHARED(int, tile, 64);
    for (int r = 0; r < rounds; ++r) {
        tile[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x] * (r + 1);
        __syncthreads();
        grid_sync();
        if (threadIdx.x == 0) {
            int sum = 0;
            for (unsigned i = 0; i < blockDim.x; ++i) sum += tile[i];
            out[r * gridDim.x + blockIdx.x] = sum;
        }
        grid_sync();
    }
}

// The same with a plain __shared__ (`static` in the emulator: one array for all blocks).
TF_COOPERATIVE __global__ void static_tile_sums(const int* x, int* out, int rounds) {
    __shared__ int tile[64];
    for (int r = 0; r < rounds; ++r) {
        tile[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x] * (r + 1);
        __syncthreads();
        grid_sync();
        if (threadIdx.x == 0) {
            int sum = 0;
            for (unsigned i = 0; i < blockDim.x; ++i) sum += tile[i];
            out[r * gridDim.x + blockIdx.x] = sum;
        }
        grid_sync();
    }
}

// Dynamic shared memory: `width` floats a block (the launch's shared_mem), filled in reverse,
// read back after every block has written its own.
TF_COOPERATIVE __global__ void dynamic_reverse(const float* x, float* out, int width) {
    TF_DYNAMIC_SHARED(float, row);
    const float* src = x + (long long)blockIdx.x * width;
    for (int i = threadIdx.x; i < width; i += blockDim.x) row[width - 1 - i] = src[i];
    grid_sync();
    for (int i = threadIdx.x; i < width; i += blockDim.x) out[(long long)blockIdx.x * width + i] = row[i];
}

// Reads dynamic shared memory nobody wrote: the emulator poisons it (NaN in every float type).
TF_COOPERATIVE __global__ void read_unwritten(float* out, int width) {
    TF_DYNAMIC_SHARED(float, row);
    for (int i = threadIdx.x; i < width; i += blockDim.x) out[(long long)blockIdx.x * width + i] = row[i];
}

// A ring: at round r block b adds its right neighbour's value of round r - 1 (two buffers). Only
// correct if no block starts round r before all have finished round r - 1.
TF_COOPERATIVE __global__ void ring_rounds(int* buffers, int rounds) {
    const int n = gridDim.x;
    for (int r = 0; r < rounds; ++r) {
        const int* cur = buffers + (r % 2) * n;
        int* nxt = buffers + ((r + 1) % 2) * n;
        if (threadIdx.x == 0) nxt[blockIdx.x] = cur[(blockIdx.x + 1) % n] + (int)blockIdx.x;
        grid_sync();
    }
}

// Writes one float past its shared_mem: the canary after the arena stops the process.
TF_COOPERATIVE __global__ void overrun(float* out, int width) {
    TF_DYNAMIC_SHARED(float, row);
    if (threadIdx.x == 0) row[width] = 1.0f;
    out[0] = 0.0f;
}

// Block 0 skips the grid barrier that the others wait at: a deadlock the emulator reports.
TF_COOPERATIVE __global__ void skipped_barrier(float* out) {
    if (blockIdx.x != 0) grid_sync();
    out[blockIdx.x] = 1.0f;
}
}
"""


def _build(folder: Path) -> emulator.EmulatorRuntime:
    folder.mkdir(parents=True, exist_ok=True)
    for header in (*CSRC.glob("*.h"), *CSRC.glob("*.cuh")):
        shutil.copy(header, folder / header.name)
    (folder / "shared_test.cu").write_text(KERNELS)
    return emulator.EmulatorRuntime.build(folder)


@pytest.fixture(scope="module")
def rt(tmp_path_factory) -> emulator.EmulatorRuntime:
    return _build(tmp_path_factory.mktemp("emu_shared") / "csrc")


@pytest.mark.parametrize("blocks", [2, 5])
def test_tf_shared_is_per_block_with_all_blocks_alive(rt, blocks):
    threads, rounds = 64, 3
    x = np.arange(blocks * threads, dtype=np.int32)
    out = np.zeros(rounds * blocks, np.int32)
    rt.launch("tile_sums", blocks, threads, [x, out, rounds])
    want = np.concatenate([(r + 1) * x.reshape(blocks, threads).sum(axis=1) for r in range(rounds)])
    np.testing.assert_array_equal(out, want)


def test_a_plain_shared_array_is_one_for_all_blocks_there(rt):
    """The same kernel with __shared__ reads the last block's tile everywhere: the test above
    can fail, and TF_SHARED is what persistent kernels need."""
    blocks, threads = 3, 64
    x = np.arange(blocks * threads, dtype=np.int32)
    out = np.zeros(blocks, np.int32)
    rt.launch("static_tile_sums", blocks, threads, [x, out, 1])
    sums = x.reshape(blocks, threads).sum(axis=1)
    assert not np.array_equal(out, sums)
    np.testing.assert_array_equal(out, np.full(blocks, sums[-1]))


@pytest.mark.parametrize("width", [1, 33, 300])
def test_dynamic_shared_memory_is_per_block_and_sized_by_the_launch(rt, width):
    blocks = 4
    x = np.random.default_rng(width).standard_normal((blocks, width)).astype(np.float32)
    out = np.zeros_like(x)
    rt.launch("dynamic_reverse", blocks, 32, [x, out, width], shared_mem=4 * width)
    np.testing.assert_array_equal(out, x[:, ::-1])


def test_unwritten_dynamic_shared_memory_reads_as_nan(rt):
    out = np.zeros((2, 16), np.float32)
    rt.launch("read_unwritten", 2, 16, [out, 16], shared_mem=64)
    assert np.isnan(out).all()


@pytest.mark.parametrize("blocks", [1, 3, 7])
def test_grid_sync_orders_rounds_across_blocks(rt, blocks):
    rounds = 5
    buffers = np.zeros(2 * blocks, np.int32)
    buffers[:blocks] = np.arange(blocks) * 10
    rt.launch("ring_rounds", blocks, 32, [buffers, rounds])
    cur = np.arange(blocks) * 10
    for _ in range(rounds):
        cur = np.roll(cur, -1) + np.arange(blocks)
    np.testing.assert_array_equal(buffers[(rounds % 2) * blocks:][:blocks], cur)


def test_shared_mem_beyond_a_block_is_refused(rt):
    out = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="shared_mem"):
        rt.launch("read_unwritten", 1, 4, [out, 1], shared_mem=rt.shared_memory_per_block() + 1)


def _run_in_child(folder: Path, kernel: str, args: str, shared_mem: int) -> subprocess.CompletedProcess:
    """Launch a kernel that must stop the process, in a child process (same cached library)."""
    code = textwrap.dedent(f"""
        import numpy as np
        from pathlib import Path
        from cuda_tools import emulator
        rt = emulator.EmulatorRuntime.build(Path({str(folder)!r}))
        out = np.zeros(8, np.float32)
        rt.launch({kernel!r}, 3, 4, {args}, shared_mem={shared_mem})
        print("returned")
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_a_write_past_the_dynamic_shared_memory_stops_the_launch(rt):
    folder = Path(rt.kernels["overrun"].source).parent
    done = _run_in_child(folder, "overrun", "[out, 4]", 16)
    assert done.returncode != 0 and "returned" not in done.stdout
    assert "wrote past its dynamic shared memory" in done.stderr


def test_a_block_that_skips_grid_sync_is_a_reported_deadlock(rt):
    folder = Path(rt.kernels["skipped_barrier"].source).parent
    done = _run_in_child(folder, "skipped_barrier", "[out]", 0)
    assert done.returncode != 0 and "returned" not in done.stdout
    assert "deadlock" in done.stderr


def test_discover_reads_the_cooperative_mark():
    """TF_COOPERATIVE kernels (plain or TF_FLOAT_TYPES macros) are cooperative; others are not."""
    from tinyflow_cuda.runtime import discover

    kernels = discover()
    for sfx in ("f32", "f64", "f16", "bf16"):
        for name in ("lstm_sequence_forward", "lstm_sequence_backward", "gru_sequence_forward",
                     "gru_sequence_backward"):
            assert kernels[f"{name}_{sfx}"].cooperative, f"{name}_{sfx}"
        assert not kernels[f"lstm_cell_forward_{sfx}"].cooperative
        assert not kernels[f"gru_cell_backward_{sfx}"].cooperative
