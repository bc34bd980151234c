"""The recurrence's shared memory is conflict-free (issue 33, 4a): every shared-memory access of
the persistent LSTM and GRU kernels, forward and backward, scalar and on tensor cores, takes the
ideal number of wavefronts (cuda_tools/bank_conflicts.py, on the instrumented emulator):
the one-time copy of W_hh's slice, the staging stores of h, the fragment loads of the tile
products, the partial sums, the cell's reads, the reduction of the backward's partial sums.

Measured on one block of the plan an H100 would run (kernels/rnn.py, probe_block: the blocks of a
plan are alike), one time step. Before issue 33 the same measure gave 8-way conflicts on the
tensor cores' A fragments and 4-way on their B fragments (ratios 4-6 a kernel), and 2-5x on the
backward's staging stores. Hidden 512 and 1024, batch 16 and 64 (fp64 at hidden 1024 takes the
per-step path).
"""
from __future__ import annotations

import numpy as np
import pytest

from cuda_tools import bank_conflicts, emulator
from tinyflow_cuda.kernels import rnn

pytestmark = pytest.mark.skipif(emulator.compiler() is None, reason="the emulator needs g++")
ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)

OPERANDS = [  # (data dtype, W_hh dtype or None, tensor cores)
    pytest.param(np.dtype(np.float32), None, False, id="f32"),
    pytest.param(np.dtype(np.float32), None, True, id="tf32"),
    pytest.param(BF16, None, True, id="bf16"),
    pytest.param(np.dtype(np.float32), BF16, True, id="f32-bf16w"),
    pytest.param(np.dtype(np.float16), None, False, id="f16-scalar"),
    pytest.param(np.dtype(np.float64), None, False, id="f64"),
]
SIZES = [pytest.param(hidden, batch, id=f"{hidden}x{batch}") for hidden in (512, 1024)
         for batch in (16, 64)]


@pytest.fixture(scope="module")
def instrumented():
    """The instrumented build of rnn.cu alone (cached by content)."""
    with bank_conflicts.recording(families=["rnn"]):
        pass


@pytest.mark.parametrize("hidden, batch", SIZES)
@pytest.mark.parametrize("dtype, weights, tc", OPERANDS)
@pytest.mark.parametrize("layer", ["lstm", "gru"])
@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_every_shared_memory_access_is_conflict_free(instrumented, layer, backward, dtype, weights,
                                                     tc, hidden, batch):
    if dtype == np.float64 and hidden > 512:
        pytest.skip("fp64 at hidden 1024 takes the per-step path (W_hh's slice does not fit)")
    with bank_conflicts.recording(families=["rnn"]) as rec:
        plan = rnn.probe_block(layer, hidden, batch, dtype, backward=backward, tensor_cores=tc,
                               weight_dtype=weights)
    assert plan is not None  # the persistent path, at the H100's cut
    stats = rec.report()[f"{layer}_sequence_{'backward' if backward else 'forward'}"]
    assert stats.requests > 500  # the step's products and staging were recorded
    assert {s.kind for s in stats.sites} == {"load", "store"}
    worst = "; ".join(s.describe() for s in stats.worst(3))
    assert stats.ratio == 1.0, f"{stats.kernel}: {stats.ratio:.2f}x the ideal wavefronts; {worst}"
