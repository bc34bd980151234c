"""The compiled-code check of issue 33 (cuda_tools/ptx_inflight.py): 16-byte loads in flight in
the staging loops of the recurrence kernels, read from their PTX, and the serial global round
trips a time step waits through, from the planner's trip counts.

Synthetic kernels pin the counting down (eight independent loads before their first use: 8; a
load used before the next one: 1; predicated loads of a tail and phi moves do not cut the count; a
loop of scalar loads is no staging loop). Then the real csrc/rnn.cu against the issue's targets:
>= 8 loads in flight a thread in every staging loop of every sequence kernel, <= 8 round trips a
time step at hidden 512 and 1024, batch 16 and 64, forward and backward. Skipped without nvcc.
"""
from __future__ import annotations

import shutil

import pytest

from cuda_tools import ptx_inflight
from tinyflow_cuda.kernels import rnn as rnn_twin
from tinyflow_cuda.runtime import CSRC

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")

SYNTHETIC_CU = r"""
#include "mma.cuh"
extern "C" {
// eight 16-byte loads a round, then their stores: 8 in flight
__global__ void eight_in_flight(const float* src, float* dst, int rows, int cols) {
    in_flight(rows, cols, [&](int r, int c) { return load_quad_cg(src + (r * cols + c) * 4); },
              [&](int r, int c, const Quad& q) { *reinterpret_cast<Quad*>(dst + (r * cols + c) * 4) = q; });
}
// each load stored before the next is issued: 1 in flight
__global__ void one_at_a_time(const float* src, float* dst, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        *reinterpret_cast<Quad*>(dst + 4 * i) = load_quad_cg(src + 4 * i);
}
// four loads, then a use of the first, then four more: 4 before the first use
__global__ void four_then_use(const float* src, float* dst, int n) {
    for (int i = threadIdx.x; i < n; i += 8 * blockDim.x) {
        Quad q[8];
        for (int k = 0; k < 4; ++k) q[k] = load_quad_cg(src + 4 * (i + k * blockDim.x));
        dst[i] = __uint_as_float(q[0].w[0]);
        for (int k = 4; k < 8; ++k) q[k] = load_quad_cg(src + 4 * (i + k * blockDim.x));
        for (int k = 1; k < 8; ++k) dst[i + k] = __uint_as_float(q[k].w[1]);
    }
}
// scalar loads only (the old stage_columns): no staging loop
__global__ void scalar_loads(const float* src, float* dst, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = __ldcg(src + i);
}
}
"""


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> dict[str, list[ptx_inflight.StagingLoop]]:
    csrc = tmp_path_factory.mktemp("csrc")
    for name in ("common.cuh", "mma.cuh"):
        shutil.copy(CSRC / name, csrc / name)
    (csrc / "synthetic.cu").write_text(SYNTHETIC_CU)
    return ptx_inflight.staging_loops(csrc / "synthetic.cu")


@pytest.mark.parametrize("kernel, in_flight", [
    ("eight_in_flight", 8), ("one_at_a_time", 1), ("four_then_use", 4),
])
def test_loads_before_their_first_use_are_counted(synthetic, kernel, in_flight):
    loops = synthetic[kernel]
    assert len(loops) == 1, [loop.describe() for loop in loops]
    assert loops[0].in_flight == in_flight
    assert loops[0].lines and all(line.startswith("synthetic.cu:") for line in loops[0].lines)


def test_a_loop_of_scalar_loads_is_no_staging_loop(synthetic):
    assert synthetic["scalar_loads"] == []


@pytest.fixture(scope="module")
def recurrence() -> dict[str, list[ptx_inflight.StagingLoop]]:
    return ptx_inflight.staging_loops(CSRC / "rnn.cu", kernels=["lstm_sequence_*", "gru_sequence_*"])


def test_every_staging_loop_of_the_recurrence_keeps_8_loads_in_flight(recurrence):
    """Each sequence kernel (4 cells and directions x 4 dtypes) stages with 16-byte loads, eight
    in flight a thread, in every path its mode selects (scalar, tf32, 16-bit pairs, half weights):
    the forward's staging of h, the backward's reduction of the partial sums. The rounds the
    planner counts assume exactly that (kernels/rnn.py IN_FLIGHT)."""
    assert len(recurrence) == 16
    for kernel, loops in recurrence.items():
        assert loops, f"{kernel}: no loop issues 16-byte loads"
        low = [loop.describe() for loop in loops if loop.in_flight < ptx_inflight.TARGET_IN_FLIGHT]
        assert not low, low
        assert all(any(line.startswith("rnn.cu:") for line in loop.lines) for loop in loops)
    assert rnn_twin.IN_FLIGHT == ptx_inflight.TARGET_IN_FLIGHT == min(
        loop.in_flight for loops in recurrence.values() for loop in loops)
    # one staging loop per product path: f32 has four (scalar, tf32, bf16 and fp16 weights)
    assert len(recurrence["lstm_sequence_forward_f32"]) == 4
    assert len(recurrence["lstm_sequence_forward_f64"]) == 1


def test_a_time_step_waits_through_at_most_8_round_trips():
    """The H100 plans of every launch at hidden 512 and 1024, batch 16 and 64: LSTM and GRU,
    forward and backward, fp32 (scalar and TF32), bf16, and fp32 with bf16 W_hh (autocast) all run
    persistent, with at most 8 serial global round trips a thread per step."""
    rows = ptx_inflight.round_trips()
    required = {(layer, backward, hidden, batch, dtype, tc)
                for layer in ("lstm", "gru") for backward in (False, True)
                for hidden in ptx_inflight.HIDDEN for batch in ptx_inflight.BATCH
                for _, dtype, _, tc in ptx_inflight.DTYPES if dtype != "float64"}
    planned = {(r.layer, r.backward, r.hidden, r.batch, r.dtype, r.tensor_cores) for r in rows}
    assert required <= planned  # none of them falls back to the per-step path
    over = [r.describe() for r in rows if r.trips > ptx_inflight.TARGET_TRIPS]
    assert not over, over
    assert all(r.threads >= 512 for r in rows)


def test_the_cli_prints_both_tables_and_passes(capsys):
    assert ptx_inflight.main([]) == 0
    out = capsys.readouterr().out
    assert "16-byte loads in flight" in out and "serial global round trips" in out
    assert "LOW" not in out
