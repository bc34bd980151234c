"""CUDA twins of ``tinyflow/kernels/rnn.py`` over csrc/rnn.cu: the fused LSTM and GRU cells, and
the whole recurrence of a layer as one persistent kernel.

Feature-major like the reference: gates (G*H, B), states (H, B). The cells take one thread per
(unit, sample); the cell ops' GEMMs stay in ops/rnn.py (cuBLAS). The ``*_sequence_*`` twins
launch ONE cooperative kernel for all T steps (forward or backward) where the reference loops in
Python: its blocks, at most one per SM, each keep their units' rows of W_hh in shared memory for
the whole sequence; a step's forward stages h_{t-1} once per block, its backward exchanges
partial sums of dh_{t-1}; one grid barrier a step (csrc/rnn.cu, docs/lstm.md). The launches per
layer are therefore a constant, whatever the sequence length. ``plan_sequence`` cuts that launch
(units and batch columns a block, threads, K slices and chunks) for the fewest serial global round
trips a step; where W_hh's slice does not fit in a block's shared memory (large hidden sizes) it
says so, and the twins run the per-step path instead: one cuBLAS GEMM and one fused cell a step.

The per-step products of the persistent kernels run on tensor cores (mma.sync through
csrc/mma.cuh; the kernel's ``mode``, ``sequence_mode``) for 16-bit data always, for float32 data
where TF32 is allowed (``tensor_cores``), and for float32 data with half W_hh (autocast:
``weight_kind``); scalar FMAs stay the reference path and the fallback.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyflow.kernels import rnn as reference
from tinyflow_cuda.kernels._launch import KernelCall, all_contiguous

__all__ = ["lstm_cell_forward", "lstm_cell_backward", "gru_cell_forward", "gru_cell_backward",
           "lstm_sequence_forward", "lstm_sequence_backward", "gru_sequence_forward",
           "gru_sequence_backward"]

Array = Any


def lstm_cell_forward(gates: Array, c_prev: Array, h_out: Array | None = None,
                      c_out: Array | None = None) -> tuple[Array, Array, Array]:
    """One fused LSTM step; ``gates`` (4H, B) becomes the activated gates. Returns (h, c, gates)."""
    call = KernelCall("lstm_cell_forward", gates, c_prev, h_out, c_out, op="lstm_cell")
    if not call.supported or not all_contiguous(gates, h_out, c_out):
        return reference.lstm_cell_forward(gates, c_prev, h_out, c_out)
    hidden = gates.shape[0] // 4
    if gates.ndim != 2 or gates.shape[0] != 4 * hidden or tuple(c_prev.shape) != (hidden, gates.shape[1]):
        raise ValueError(f"lstm_cell_forward: gates {tuple(gates.shape)} must be (4H, B) with "
                         f"c_prev {tuple(c_prev.shape)} = (H, B)")
    batch = gates.shape[1]
    with call:
        c_prev = call.contiguous(c_prev)
        h_out = call.empty((hidden, batch)) if h_out is None else h_out
        c_out = call.empty((hidden, batch)) if c_out is None else c_out
        call.launch(hidden * batch, [gates, c_prev, h_out, c_out, hidden, batch])
        return h_out, c_out, gates


def lstm_cell_backward(dh: Array, dc: Array | None, acts: Array, c_prev: Array, c: Array,
                       dgates_out: Array | None = None, h: Array | None = None) -> tuple[Array, Array]:
    """Gradients of one LSTM step: (dgates (4H, B), dc_prev (H, B)); ``dc`` None means zero.
    ``h`` is accepted for the reference's signature and not read (tanh(c) is free here)."""
    call = KernelCall("lstm_cell_backward", dh, dc, acts, c_prev, c, dgates_out,
                      op="lstm_cell backward")
    if not call.supported or not all_contiguous(dgates_out):
        return reference.lstm_cell_backward(dh, dc, acts, c_prev, c, dgates_out, h)
    with call:
        dh, dc, acts, c_prev, c = call.contiguous(dh, dc, acts, c_prev, c)
        hidden, batch = c.shape
        dgates_out = call.empty(acts.shape) if dgates_out is None else dgates_out
        dc_prev = call.empty(c.shape)
        call.launch(hidden * batch, [dh, dc, int(dc is not None), acts, c_prev, c, dgates_out,
                                     dc_prev, hidden, batch])
        return dgates_out, dc_prev


def gru_cell_forward(gi: Array, gh: Array, h_prev: Array,
                     h_out: Array | None = None) -> tuple[Array, Array]:
    """One fused GRU step; ``gi`` (3H, B) becomes the activated gates (r, z, n). Returns (h, gi)."""
    call = KernelCall("gru_cell_forward", gi, gh, h_prev, h_out, op="gru_cell")
    if not call.supported or not all_contiguous(gi, h_out):
        return reference.gru_cell_forward(gi, gh, h_prev, h_out)
    hidden = gi.shape[0] // 3
    if gi.ndim != 2 or gi.shape != gh.shape or gi.shape[0] != 3 * hidden \
            or tuple(h_prev.shape) != (hidden, gi.shape[1]):
        raise ValueError(f"gru_cell_forward: gi {tuple(gi.shape)} and gh {tuple(gh.shape)} must "
                         f"both be (3H, B) with h_prev {tuple(h_prev.shape)} = (H, B)")
    batch = gi.shape[1]
    with call:
        gh, h_prev = call.contiguous(gh, h_prev)
        h_out = call.empty((hidden, batch)) if h_out is None else h_out
        call.launch(hidden * batch, [gi, gh, h_prev, h_out, hidden, batch])
        return h_out, gi


def gru_cell_backward(dh: Array, acts: Array, gh: Array, h_prev: Array,
                      dgi_out: Array | None = None,
                      dgh_out: Array | None = None) -> tuple[Array, Array, Array]:
    """Gradients of one GRU step: (dgi (3H, B), dgh (3H, B), the direct part of dh_prev (H, B))."""
    call = KernelCall("gru_cell_backward", dh, acts, gh, h_prev, dgi_out, dgh_out,
                      op="gru_cell backward")
    if not call.supported or not all_contiguous(dgi_out, dgh_out):
        return reference.gru_cell_backward(dh, acts, gh, h_prev, dgi_out, dgh_out)
    with call:
        dh, acts, gh, h_prev = call.contiguous(dh, acts, gh, h_prev)
        hidden, batch = h_prev.shape
        dgi_out = call.empty(acts.shape) if dgi_out is None else dgi_out
        dgh_out = call.empty(acts.shape) if dgh_out is None else dgh_out
        dh_prev = call.empty(h_prev.shape)
        call.launch(hidden * batch, [dh, acts, gh, h_prev, dgi_out, dgh_out, dh_prev, hidden,
                                     batch])
        return dgi_out, dgh_out, dh_prev


# ---- whole sequences: one persistent kernel per call --------------------------------------------
TENSOR_CORES: bool | None = None
"""Force the tensor cores on (True) or off (False) for every dtype; None (default) lets
``tensor_cores`` decide by dtype. Tests set it; f64 data then runs the scalar FMAs anyway. A
float32 recurrence with half W_hh (autocast) runs on tensor cores either way."""


def tf32_allowed() -> bool:
    """Whether float32 products may round their inputs to TF32: the switch tinyflow's float32
    GEMMs follow today, CuPy's ``CUPY_TF32=1`` (read from the environment; bench/gpu sets it for
    its tf32 precision). Off by default. ``tinyflow.backends.cuda.matmul.allow_tf32`` stays the
    documented no-op it is (a flag PyTorch programs set), so it does not switch the recurrence
    either."""
    return os.environ.get("CUPY_TF32", "0") == "1"


def tensor_cores(dtype: Any) -> bool:
    """Whether a recurrence of this dtype runs its per-step products on tensor cores: bf16 and
    fp16 always (exact 16-bit products, fp32 sums: no worse than the scalar path), float32 where
    TF32 is allowed, float64 never (no fp64 mma in csrc/mma.cuh)."""
    if TENSOR_CORES is not None:
        return TENSOR_CORES
    name = np.dtype(dtype).name
    return name in ("float16", "bfloat16") or (name == "float32" and tf32_allowed())


HALF_WEIGHTS = {"bfloat16": 1, "float16": 2}
"""The weight kind of a float32 recurrence with half W_hh (the autocast path)."""
MODE_TENSOR_CORES = 4


def weight_kind(data: Any, w_hh: Any) -> int:
    """0 where W_hh runs in the data's dtype; 1 (bf16) or 2 (fp16) for a float32 recurrence given
    half W_hh under autocast: tensor cores on half operands, float32 states and sums."""
    if np.dtype(data).name != "float32":
        return 0
    return HALF_WEIGHTS.get(np.dtype(w_hh).name, 0)


def sequence_mode(data: Any, w_hh: Any) -> int:
    """The ``mode`` a sequence kernel takes (csrc/rnn.cu, with_path): MODE_TENSOR_CORES where the
    products run on tensor cores (``tensor_cores``, and always with half weights under float32
    data), plus the weight kind."""
    kind = weight_kind(data, w_hh)
    return (MODE_TENSOR_CORES if tensor_cores(data) or kind else 0) | kind


def _sequence_call(name: str, anchor: Array, w_hh: Array, op: str) -> tuple[KernelCall, int]:
    """The launch of ``name`` for ``anchor``'s dtype, and its mode."""
    return KernelCall(name, anchor, op=op), sequence_mode(anchor.dtype, w_hh.dtype)


DEFAULT_SHARED_MEMORY = 227 * 1024
"""A block's shared memory where the runtime does not say (an H100's sharedMemPerBlockOptin)."""

IN_FLIGHT = 8
"""16-byte loads a thread issues before it waits for the first (csrc/mma.cuh, kInFlight)."""
CELL_TRIPS = 1
"""Global round trips of a step's cell: its loads (proj, or acts, cs, dout...) are independent."""
BARRIER_TRIPS = 2
"""Global round trips of a grid barrier: the arrival (an atomic at L2), then the wait (a read)."""
THREAD_CHOICES = (64, 128, 256, 512)
GPU_THREAD_CHOICES = (512,)
"""Block sizes on a GPU (one block an SM: fewer threads would leave most of its warp slots empty,
with nothing else to hide the latencies; more than 512 would leave a thread fewer than the 128
registers the kernels need: csrc/rnn.cu, RNN_BOUNDS); the emulator's few-block plans take any of
THREAD_CHOICES (fewer fibers for small tests)."""
MANY_BLOCKS = 16  # from this many resident blocks on, a plan is for a GPU


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _align16(n: int) -> int:
    return (n + 15) // 16 * 16


def _round16(n: int) -> int:
    return (n + 15) // 16 * 16


def lead_words(words: int) -> int:
    """The row length (4-byte words) of an A operand holding ``words`` a row: the next that is 4
    more than a multiple of 8 (csrc/mma.cuh, lead_words: conflict-free fragment loads)."""
    return words + (12 - words % 8) % 8


def weight_lead(count: int, size: int) -> int:
    """The row length (words) of a W_hh slice of ``count`` elements of ``size`` bytes a row
    (csrc/rnn.cu, weight_lead): lead_words, or an odd number of 8-byte elements."""
    return 2 * (count | 1) if size == 8 else lead_words(count * size // 4)


def _width(cols: int) -> int:
    """The tiles' columns for ``cols`` batch columns a block: a power of two, at least 32."""
    n = 32
    while n < cols:
        n *= 2
    return n


@dataclass(frozen=True)
class Operands:
    """What the products of a recurrence work on: the data's element size (``item``), the
    accumulate type's (``acc``), a W_hh element's in shared memory (``weight``), a staged value's
    (``staged``: h, dg), and whether 16-bit operands are stored as pairs along K (``pairs``)."""

    item: int
    acc: int
    weight: int
    staged: int
    pairs: bool
    mma: bool


def operands(itemsize: int, tensor_cores: bool, weight_itemsize: int | None = None) -> Operands:
    """The operands of the kernel csrc/rnn.cu's with_path picks: scalar FMAs (W_hh in the data's
    dtype, staged values in the accumulate type), or tensor cores (TF32 words, or 16-bit pairs
    for bf16 / fp16 data and for half W_hh under float32 data); fp64 is scalar either way."""
    acc = 8 if itemsize == 8 else 4
    weight = weight_itemsize or itemsize
    if not tensor_cores or itemsize == 8:
        return Operands(itemsize, acc, itemsize, acc, False, False)
    return Operands(itemsize, acc, weight, 4, weight == 2, True)


@dataclass(frozen=True)
class SequencePlan:
    """How one persistent launch over a layer is cut (csrc/rnn.cu, Geometry): ``blocks`` =
    ``groups`` unit groups x ``batch_groups`` batch groups of ``threads`` threads; a block owns
    ``units`` hidden units and ``cols`` batch columns (tiles ``width`` wide); the forward's products
    are split over K in ``split`` slices and h is staged ``kchunk`` rows at a time; ``shared_mem``
    bytes of shared memory a block (the kernel's layout, byte for byte). ``trips``: the serial
    global round trips a thread waits through per time step (``round_trips``); ``l2_bytes``: what
    the blocks exchange through L2 a step; ``partials``: the backward's workspace (values)."""

    blocks: int
    groups: int
    batch_groups: int
    units: int
    cols: int
    width: int
    split: int
    kchunk: int
    threads: int
    shared_mem: int
    trips: int
    stage_rounds: int
    l2_bytes: int
    partials: int


def sequence_shared_bytes(hidden: int, units: int, width: int, cols: int, split: int, kchunk: int,
                          threads: int, ops: Operands, *, backward: bool, lstm: bool) -> int:
    """The dynamic shared memory of a block (csrc/rnn.cu's Carve, in the same order).

    Forward: the block's rows of W_hh (4 a unit, to a multiple of 16 for the tensor cores;
    weight_lead a row), ``kchunk`` staged rows of h (half as many pair rows for 16-bit
    operands), ``split`` partial products (as many rows as W_hh's, width accumulators each), the
    running c (units x width; the GRU's unused). Backward: W_hh^T's slice (round16(H) rows; its
    gate rows to a multiple of 8, or of 16 for 16-bit pairs: gate_rows), the gate gradients (as
    many rows), the reduction buffer (max(threads, units x cp / quad) quads), dh carried and dc
    (units x width each)."""
    quad = 16 // ops.acc
    rows = _gate_rows(units, ops, backward)
    if backward:
        cp = -(-cols // quad) * quad
        parts = [_round16(hidden) * weight_lead(rows, ops.weight) * 4,
                 (rows // 2 if ops.pairs else rows) * width * ops.staged,
                 max(threads, units * cp // quad) * 16, units * width * ops.acc, units * width * ops.acc]
    else:
        parts = [rows * weight_lead(_round16(hidden), ops.weight) * 4,
                 (kchunk // 2 if ops.pairs else kchunk) * width * ops.staged,
                 split * rows * width * ops.acc, units * width * ops.acc]
    return sum(_align16(p) for p in parts)


def _gate_rows(units: int, ops: Operands, backward: bool) -> int:
    """A block's gate rows, 4 a unit: the forward's rows of W_hh (padded to whole 16-row tiles
    for the tensor cores), the backward's K (csrc/rnn.cu, gate_rows: a multiple of 16 for 16-bit
    pairs, else of 8)."""
    if backward:
        return _round16(4 * units) if ops.pairs else (4 * units + 7) // 8 * 8
    return _round16(4 * units) if ops.mma else 4 * units


def _pow2_at_most(n: int, cap: int) -> int:
    p = 1
    while p * 2 <= min(n, cap):
        p *= 2
    return p


def round_trips(plan_rounds: int) -> int:
    """Serial global round trips a thread waits through per step: the staging (forward) or
    reduction (backward) rounds of kInFlight independent loads, the cell's loads, the grid
    barrier."""
    return plan_rounds + CELL_TRIPS + BARRIER_TRIPS


def _staging_rounds(kp: int, kchunk: int, per_row: int, threads: int) -> int:
    """Rounds of IN_FLIGHT 16-byte loads a thread to stage kp rows of h, ``kchunk`` at a time,
    ``per_row`` loads a row (csrc/rnn.cu, stage_rows; pair rows load two rows an item, the same
    loads in half the items)."""
    return sum(-(-min(kchunk, kp - first) * per_row // (threads * IN_FLIGHT))
               for first in range(0, kp, kchunk))


def _kchunk(kp: int, most: int, per_row: int, threads: int) -> tuple[int, int]:
    """(rows a K-chunk, staging rounds a step): the fewest rounds among chunks of at most
    ``most`` rows (multiples of 16), as equal as that allows or whole rounds each."""
    per_round = max(16, threads * IN_FLIGHT // per_row // 16 * 16)  # rows one round stages
    options = {_round16(-(-kp // -(-kp // most))), min(most, kp)}
    if per_round <= most:
        options.add(most // per_round * per_round)
    rounds, _, kchunk = min((_staging_rounds(kp, k, per_row, threads), -(-kp // k), k)
                            for k in options)
    return kchunk, rounds


def _cut(hidden: int, batch: int, units: int, cols: int, threads: int, ops: Operands, *,
         backward: bool, lstm: bool, shared_limit: int) -> SequencePlan | None:
    """The plan for this cut with ``threads`` threads a block, or None where it cannot run."""
    groups = -(-hidden // units)
    batch_groups = -(-batch // cols)
    width = _width(cols)
    rows4, kp = _gate_rows(units, ops, backward), _round16(hidden)
    warps = threads // 32
    quad = 16 // ops.acc
    if backward:
        split, kchunk = 1, 16
        shared = sequence_shared_bytes(hidden, units, width, cols, 1, kchunk, threads, ops,
                                       backward=True, lstm=lstm)
        if shared > shared_limit:
            return None
        cp = _ceil_div(cols, quad) * quad
        quads = units * cp // quad  # a block's share of one group's partial sums (csrc/rnn.cu, Reduce)
        if quads <= threads:  # threads // quads threads a quad, each summing every so-many groups
            rounds = _ceil_div(_ceil_div(groups, threads // quads), IN_FLIGHT)
        else:  # several quads a thread, every group for each
            rounds = _ceil_div(quads, threads) * _ceil_div(groups, IN_FLIGHT)
        l2 = 2 * groups * batch_groups * hidden * cp * ops.acc  # partial sums out, and back in
        partials = 2 * batch_groups * groups * hidden * cp
    else:
        # split over K where the products are fewer than the warps (tiles) or threads (scalar)
        if ops.mma:
            tiles = rows4 // 16 * width // 8
            split = 1
            while tiles * split * 2 <= warps and (kp // 16) % (split * 2) == 0:
                split *= 2
        else:
            pairs = units * width  # a thread's item: the 4 gates of a (unit, column) pair
            split = _pow2_at_most(max(1, threads // pairs), 32) if pairs < threads else 1
        fixed = sequence_shared_bytes(hidden, units, width, cols, split, 0, threads, ops,
                                      backward=False, lstm=lstm)
        row_bytes = width * ops.staged // (2 if ops.pairs else 1)
        most = (shared_limit - fixed) // row_bytes // 16 * 16 if shared_limit > fixed else 0
        if most < 16:
            return None
        kchunk, rounds = _kchunk(kp, most, width // (16 // ops.item), threads)
        shared = sequence_shared_bytes(hidden, units, width, cols, split, kchunk, threads, ops,
                                       backward=False, lstm=lstm)
        if shared > shared_limit:
            return None
        l2 = groups * batch_groups * hidden * min(cols, batch) * ops.item
        partials = 0
    return SequencePlan(groups * batch_groups, groups, batch_groups, units, cols, width, split,
                        kchunk, threads, shared, round_trips(rounds), rounds, l2, partials)


def plan_sequence(gates: int, hidden: int, batch: int, itemsize: int, *, backward: bool, lstm: bool,
                  blocks_available: int, shared_limit: int, tensor_cores: bool = False,
                  weight_itemsize: int | None = None,
                  threads: tuple[int, ...] | None = None) -> SequencePlan | None:
    """The persistent launch for a layer, or None where a block's rows of W_hh and one staged
    K-chunk (forward) or its slice of W_hh^T (backward) do not fit in ``shared_limit`` bytes: then
    the caller runs a GEMM and a cell kernel a step.

    The blocks, at most ``blocks_available`` (the resident ones), split the hidden units into
    groups and the batch into groups of at least 32 columns (csrc/rnn.cu); each cut is tried with
    each block size in ``threads``, and the plan kept is the one with the fewest serial global round
    trips a step, then the least L2 traffic, then the fewest threads (``SequencePlan``). More batch
    groups mean more units a block (W_hh's slice grows) and less of h (forward) or of the partial
    sums (backward) to move a step; they are taken where the slice still fits. ``threads`` by
    default: GPU_THREAD_CHOICES from MANY_BLOCKS resident blocks on, else THREAD_CHOICES."""
    ops = operands(itemsize, tensor_cores, weight_itemsize)
    if threads is None:
        threads = GPU_THREAD_CHOICES if blocks_available >= MANY_BLOCKS else THREAD_CHOICES
    best: SequencePlan | None = None
    cols = batch
    while True:
        batch_groups = -(-batch // cols)
        slots = blocks_available // batch_groups
        if slots >= 1:
            units = -(-hidden // min(slots, hidden))
            for count in threads:
                plan = _cut(hidden, batch, units, cols, count, ops, backward=backward, lstm=lstm,
                            shared_limit=shared_limit)
                key = None if plan is None else (plan.trips, plan.l2_bytes, plan.threads)
                if key is not None and (best is None or key < (best.trips, best.l2_bytes, best.threads)):
                    best = plan
        if cols <= 32 or batch_groups >= blocks_available:
            return best
        cols = max(32, -(-cols // 2))


def _shared_limit(runtime: Any) -> int:
    limit = getattr(runtime, "shared_memory_per_block", None)
    return int(limit()) if limit is not None else DEFAULT_SHARED_MEMORY


@dataclass(frozen=True)
class _Probe:
    """Plan for this machine's figures, and launch only the plan's first block (``probe_block``)."""

    blocks_available: int
    shared_limit: int


_PROBE: _Probe | None = None


def _plan(call: KernelCall, mode: int, w_hh: Array, gates: int, hidden: int, batch: int,
          backward: bool, lstm: bool) -> SequencePlan | None:
    """``plan_sequence`` for this launch's runtime (its resident blocks and shared memory)."""
    if _PROBE is not None:
        blocks, limit = _PROBE.blocks_available, _PROBE.shared_limit
    else:
        blocks = call.runtime.resident_blocks(call.kernel, THREAD_CHOICES[-1])
        limit = _shared_limit(call.runtime)
    return plan_sequence(gates, hidden, batch, np.dtype(call.anchor.dtype).itemsize, backward=backward,
                         lstm=lstm, blocks_available=blocks, shared_limit=limit,
                         tensor_cores=bool(mode & MODE_TENSOR_CORES),
                         weight_itemsize=np.dtype(w_hh.dtype).itemsize)


H100_SMS = 132
"""An H100's SMs: the resident blocks of a persistent launch there (one a SM)."""


def probe_block(layer: str, hidden: int, batch: int, dtype: Any, *, backward: bool,
                tensor_cores: bool, rng: np.random.Generator | None = None,
                blocks_available: int = H100_SMS, shared_limit: int = DEFAULT_SHARED_MEMORY,
                weight_dtype: Any = None) -> SequencePlan | None:
    """Launch the first block of the plan a machine with ``blocks_available`` SMs and
    ``shared_limit`` bytes a block would run, for one time step of ``layer`` ("lstm" or "gru"),
    forward or backward, on random inputs; returns the plan (None: the per-step path, no launch).
    ``weight_dtype`` (bf16 / fp16 under float32 data) takes the autocast path.

    For the emulator's reports (cuda_tools/bank_conflicts.py): the blocks of a plan are alike,
    so one shows the shared-memory layout and the access pattern of all, at the H100's cut, where
    running all its blocks of up to 1024 threads would take the emulator far too long. Its results
    are the first block's units only (the others are not computed) and are not returned."""
    global _PROBE, TENSOR_CORES
    rng = np.random.default_rng(0) if rng is None else rng
    gates = 4 if layer == "lstm" else 3
    steps = 1

    def rand(*shape: int, of: Any = dtype) -> Array:
        return (0.5 * rng.standard_normal(shape)).astype(of)

    w_hh = rand(gates * hidden, hidden, of=weight_dtype or dtype)
    saved = _PROBE, TENSOR_CORES
    _PROBE, TENSOR_CORES = _Probe(blocks_available, shared_limit), tensor_cores
    try:
        name = f"{layer}_sequence_{'backward' if backward else 'forward'}"
        plan = _plan(*_sequence_call(name, rand(1), w_hh, op=layer), w_hh, gates, hidden, batch,
                     backward=backward, lstm=layer == "lstm")
        if plan is None:
            return None
        if not backward:
            proj, h0 = rand(gates * hidden, steps, batch), rand(hidden, batch)
            if layer == "lstm":
                lstm_sequence_forward(proj, w_hh, h0, rand(hidden, batch))
            else:
                gru_sequence_forward(proj, w_hh, rand(gates * hidden), h0)
        else:
            dout, dh_n = rand(steps, hidden, batch), rand(hidden, batch)
            acts, states = rand(steps, gates * hidden, batch), rand(steps + 1, hidden, batch)
            if layer == "lstm":
                lstm_sequence_backward(dout, dh_n, rand(hidden, batch), w_hh, acts, states)
            else:
                gru_sequence_backward(dout, dh_n, w_hh, acts, rand(steps, gates * hidden, batch),
                                      states)
        return plan
    finally:
        _PROBE, TENSOR_CORES = saved


def _state(call: KernelCall, a: Array | None, dtype: Any) -> Array | None:
    """A read-only input as a C-contiguous array of the kernel's dtype (a copy only if needed)."""
    return None if a is None else call.xp.ascontiguousarray(a, dtype=dtype)


def _weights(call: KernelCall, w_hh: Array, mode: int, dtype: Any) -> Array:
    """W_hh as the kernel takes it: half as given for a float32 recurrence under autocast (tensor
    cores on half operands), else in the data's dtype."""
    return _state(call, w_hh, w_hh.dtype if mode & 3 else dtype)


def _launch_persistent(call: KernelCall, plan: SequencePlan, args: list[Any], hidden: int,
                       batch: int, steps: int, reverse: bool, mode: int) -> None:
    """One cooperative launch for all T steps, cut as ``plan`` says."""
    blocks = 1 if _PROBE is not None else plan.blocks  # probe_block: the first block only
    call.runtime.launch(call.kernel, blocks, plan.threads,
                        [*args, steps, hidden, batch, int(reverse), mode, plan.units, plan.cols,
                         plan.split, plan.kchunk], shared_mem=plan.shared_mem)


def _partials(call: KernelCall, plan: SequencePlan) -> Array:
    """The backward's workspace: two steps' partial sums of every block, in the accumulate type."""
    acc = np.float64 if np.dtype(call.anchor.dtype).itemsize == 8 else np.float32
    return call.empty((plan.partials,), dtype=acc)


def lstm_sequence_forward(proj: Array, w_hh: Array, h0: Array | None, c0: Array | None,
                          reverse: bool = False) -> tuple[Array, Array, Array]:
    """All T steps of one LSTM layer in one launch: (acts (T, 4H, B), hs, cs (T+1, H, B))."""
    call, mode = _sequence_call("lstm_sequence_forward", proj, w_hh, op="lstm")
    if not call.supported:
        return reference.lstm_sequence_forward(proj, w_hh, h0, c0, reverse)
    steps, hidden, batch = reference._check_sequence("lstm_sequence_forward", 4, proj, w_hh)
    if batch == 0:  # nothing to recur over: the reference's empty results (no kernel, no plan)
        return reference.lstm_sequence_forward(proj, w_hh, h0, c0, reverse)
    dtype = proj.dtype
    with call:
        w_hh = _weights(call, w_hh, mode, dtype)
        proj, h0, c0 = (_state(call, a, dtype) for a in (proj, h0, c0))
        plan = _plan(call, mode, w_hh, 4, hidden, batch, backward=False, lstm=True)
        if plan is None:
            return _lstm_forward_per_step(call, proj, w_hh, h0, c0, reverse)
        acts = call.empty((steps, 4 * hidden, batch))
        hs = call.empty((steps + 1, hidden, batch))
        cs = call.empty((steps + 1, hidden, batch))
        _launch_persistent(call, plan, [proj, w_hh, h0, c0, acts, hs, cs], hidden, batch, steps,
                           reverse, mode)
        return acts, hs, cs


def lstm_sequence_backward(dout: Array, dh_n: Array | None, dc_n: Array | None, w_hh: Array,
                           acts: Array, cs: Array, reverse: bool = False,
                           hs: Array | None = None) -> tuple[Array, Array, Array]:
    """The recurrence backwards in one launch: (dgates (T, 4H, B), dh0 (H, B), dc0 (H, B)).

    dgates is a view of a gate-major (4H, T, B) buffer, as the reference's: the op's GEMMs over
    all steps read it without a copy. ``hs`` is accepted for the reference's signature and not
    read: the fused kernel recomputes tanh(c) in registers."""
    call, mode = _sequence_call("lstm_sequence_backward", acts, w_hh, op="lstm backward")
    if not call.supported:
        return reference.lstm_sequence_backward(dout, dh_n, dc_n, w_hh, acts, cs, reverse, hs)
    steps, hidden, batch = acts.shape[0], cs.shape[1], cs.shape[2]
    if batch == 0:
        return reference.lstm_sequence_backward(dout, dh_n, dc_n, w_hh, acts, cs, reverse, hs)
    dtype = acts.dtype
    with call:
        w_hh = _weights(call, w_hh, mode, dtype)
        dout, dh_n, dc_n, acts, cs = (_state(call, a, dtype) for a in (dout, dh_n, dc_n, acts, cs))
        plan = _plan(call, mode, w_hh, 4, hidden, batch, backward=True, lstm=True)
        if plan is None:
            return _lstm_backward_per_step(call, dout, dh_n, dc_n, w_hh, acts, cs, reverse)
        dgates = call.empty((4 * hidden, steps, batch))  # gate-major
        dh = call.empty((hidden, batch))
        dc = call.empty((hidden, batch))
        _launch_persistent(call, plan, [dout, dh_n, dc_n, w_hh, acts, cs, dgates, dh, dc,
                                        _partials(call, plan)], hidden, batch, steps, reverse, mode)
        return dgates.transpose(1, 0, 2), dh, dc


def gru_sequence_forward(proj: Array, w_hh: Array, b_hh: Array | None, h0: Array | None,
                         reverse: bool = False) -> tuple[Array, Array, Array]:
    """All T steps of one GRU layer in one launch: (acts, gh (T, 3H, B), hs (T+1, H, B))."""
    call, mode = _sequence_call("gru_sequence_forward", proj, w_hh, op="gru")
    if not call.supported:
        return reference.gru_sequence_forward(proj, w_hh, b_hh, h0, reverse)
    steps, hidden, batch = reference._check_sequence("gru_sequence_forward", 3, proj, w_hh)
    if batch == 0:
        return reference.gru_sequence_forward(proj, w_hh, b_hh, h0, reverse)
    dtype = proj.dtype
    with call:
        w_hh = _weights(call, w_hh, mode, dtype)
        proj, b_hh, h0 = (_state(call, a, dtype) for a in (proj, b_hh, h0))
        plan = _plan(call, mode, w_hh, 3, hidden, batch, backward=False, lstm=False)
        if plan is None:
            return _gru_forward_per_step(call, proj, w_hh, b_hh, h0, reverse)
        acts = call.empty((steps, 3 * hidden, batch))
        gh = call.empty((steps, 3 * hidden, batch))
        hs = call.empty((steps + 1, hidden, batch))
        _launch_persistent(call, plan, [proj, w_hh, b_hh, h0, acts, gh, hs], hidden, batch, steps,
                           reverse, mode)
        return acts, gh, hs


def gru_sequence_backward(dout: Array, dh_n: Array | None, w_hh: Array, acts: Array, gh: Array,
                          hs: Array, reverse: bool = False) -> tuple[Array, Array, Array]:
    """The recurrence backwards in one launch: (dgi, dgh (T, 3H, B) views of gate-major buffers,
    dh0 (H, B))."""
    call, mode = _sequence_call("gru_sequence_backward", acts, w_hh, op="gru backward")
    if not call.supported:
        return reference.gru_sequence_backward(dout, dh_n, w_hh, acts, gh, hs, reverse)
    steps, hidden, batch = acts.shape[0], hs.shape[1], hs.shape[2]
    if batch == 0:
        return reference.gru_sequence_backward(dout, dh_n, w_hh, acts, gh, hs, reverse)
    dtype = acts.dtype
    with call:
        w_hh = _weights(call, w_hh, mode, dtype)
        dout, dh_n, acts, gh, hs = (_state(call, a, dtype) for a in (dout, dh_n, acts, gh, hs))
        plan = _plan(call, mode, w_hh, 3, hidden, batch, backward=True, lstm=False)
        if plan is None:
            return _gru_backward_per_step(call, dout, dh_n, w_hh, acts, gh, hs, reverse)
        dgi = call.empty((3 * hidden, steps, batch))  # gate-major
        dgh = call.empty((3 * hidden, steps, batch))
        dh = call.empty((hidden, batch))
        _launch_persistent(call, plan, [dout, dh_n, w_hh, acts, gh, hs, dgi, dgh, dh,
                                        _partials(call, plan)], hidden, batch, steps, reverse, mode)
        return dgi.transpose(1, 0, 2), dgh.transpose(1, 0, 2), dh


# ---- the per-step path, where W_hh does not fit on chip: a GEMM (cuBLAS) and a fused cell a step --
def _lstm_forward_per_step(call: KernelCall, proj: Array, w_hh: Array, h0: Array | None,
                           c0: Array | None, reverse: bool) -> tuple[Array, Array, Array]:
    xp = call.xp
    steps, hidden, batch = proj.shape[1], w_hh.shape[1], proj.shape[2]
    acts = call.empty((steps, 4 * hidden, batch))
    hs = call.empty((steps + 1, hidden, batch))
    cs = call.empty((steps + 1, hidden, batch))
    order, out_offset = reference.sequence_slots(steps, reverse)
    first = order[0]
    init = first + 1 - out_offset
    hs[init] = 0 if h0 is None else h0
    cs[init] = 0 if c0 is None else c0
    w, rounding = reference.recurrent_weight(w_hh, proj.dtype, xp)  # once a call
    for t in order:
        prev, new = t + 1 - out_offset, t + out_offset
        gates = acts[t]  # (4H, B)
        if t != first or h0 is not None:
            xp.matmul(w, reference.operand(hs[prev], rounding), out=gates)
            gates += proj[:, t]
        else:
            gates[...] = proj[:, t]
        lstm_cell_forward(gates, cs[prev], hs[new], cs[new])
    return acts, hs, cs


def _lstm_backward_per_step(call: KernelCall, dout: Array, dh_n: Array | None, dc_n: Array | None,
                            w_hh: Array, acts: Array, cs: Array,
                            reverse: bool) -> tuple[Array, Array, Array]:
    xp = call.xp
    steps = acts.shape[0]
    order, out_offset = reference.sequence_slots(steps, reverse)
    dgates = call.empty(acts.shape)  # (T, 4H, B)
    dh = xp.zeros_like(cs[0]) if dh_n is None else dh_n.copy()
    dc = dc_n
    w, rounding = reference.recurrent_weight(w_hh, acts.dtype, xp)
    w_hh_t = xp.ascontiguousarray(w.T)  # (H, 4H)
    for t in reversed(order):
        prev, new = t + 1 - out_offset, t + out_offset
        dh += dout[t]
        _, dc = lstm_cell_backward(dh, dc, acts[t], cs[prev], cs[new], dgates[t])
        xp.matmul(w_hh_t, reference.operand(dgates[t], rounding), out=dh)
    return dgates, dh, dc if dc is not None else xp.zeros_like(dh)


def _gru_forward_per_step(call: KernelCall, proj: Array, w_hh: Array, b_hh: Array | None,
                          h0: Array | None, reverse: bool) -> tuple[Array, Array, Array]:
    xp = call.xp
    steps, hidden, batch = proj.shape[1], w_hh.shape[1], proj.shape[2]
    acts = call.empty((steps, 3 * hidden, batch))
    gh = call.empty((steps, 3 * hidden, batch))
    hs = call.empty((steps + 1, hidden, batch))
    order, out_offset = reference.sequence_slots(steps, reverse)
    hs[order[0] + 1 - out_offset] = 0 if h0 is None else h0
    w, rounding = reference.recurrent_weight(w_hh, proj.dtype, xp)
    for t in order:
        prev, new = t + 1 - out_offset, t + out_offset
        xp.matmul(w, reference.operand(hs[prev], rounding), out=gh[t])
        if b_hh is not None:
            gh[t] += b_hh[:, None]
        acts[t] = proj[:, t]
        gru_cell_forward(acts[t], gh[t], hs[prev], hs[new])
    return acts, gh, hs


def _gru_backward_per_step(call: KernelCall, dout: Array, dh_n: Array | None, w_hh: Array,
                           acts: Array, gh: Array, hs: Array,
                           reverse: bool) -> tuple[Array, Array, Array]:
    xp = call.xp
    steps = acts.shape[0]
    order, out_offset = reference.sequence_slots(steps, reverse)
    dgi = call.empty(acts.shape)  # (T, 3H, B)
    dgh = call.empty(acts.shape)
    dh = xp.zeros_like(hs[0]) if dh_n is None else dh_n.copy()
    w, rounding = reference.recurrent_weight(w_hh, acts.dtype, xp)
    w_hh_t = xp.ascontiguousarray(w.T)  # (H, 3H)
    for t in reversed(order):
        prev = t + 1 - out_offset
        dh += dout[t]
        _, _, direct = gru_cell_backward(dh, acts[t], gh[t], hs[prev], dgi[t], dgh[t])
        dh = direct + xp.matmul(w_hh_t, reference.operand(dgh[t], rounding))
    return dgi, dgh, dh
