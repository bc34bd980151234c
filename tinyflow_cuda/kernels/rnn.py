"""CUDA twins of ``tinyflow/kernels/rnn.py`` over csrc/rnn.cu: the fused LSTM and GRU cells, and
the whole recurrence of a layer as one persistent kernel.

Feature-major like the reference: gates (G*H, B), states (H, B). The cells take one thread per
(unit, sample); the cell ops' GEMMs stay in ops/rnn.py (cuBLAS). The ``*_sequence_*`` twins
launch ONE cooperative kernel for all T steps (forward or backward) where the reference loops in
Python: its blocks, at most one per SM, each keep their slice of W_hh in shared memory for the
whole sequence, stage h_{t-1} (or the step's gate gradients) once per block and step, and meet at
one grid barrier a step (csrc/rnn.cu, docs/lstm.md). The launches per layer are therefore a
constant, whatever the sequence length. ``plan_sequence`` sizes that launch; where W_hh's slice
does not fit in a block's shared memory (large hidden sizes) it says so, and the twins run the
per-step path instead: one cuBLAS GEMM and one fused cell kernel a step.

The per-step products of the persistent kernels run on tensor cores (``*_tc_*`` kernels, mma.sync
through csrc/mma.cuh) for 16-bit data always and for float32 data where TF32 is allowed
(``tensor_cores``); the scalar-FMA kernels stay the reference path and the fallback.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyflow.kernels import rnn as reference
from tinyflow_cuda.kernels._launch import KernelCall, all_contiguous
from tinyflow_cuda.runtime import THREADS

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
"""Force the tensor-core kernels on (True) or off (False) for every dtype; None (default) lets
``tensor_cores`` decide by dtype. Tests set it; f64 data then runs the ``_tc`` kernels' scalar
fallback."""


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


def _sequence_call(name: str, tc_name: str, anchor: Array, op: str) -> KernelCall:
    """The launch of ``name``, or of its tensor-core variant ``tc_name`` where ``tensor_cores``
    says so, for ``anchor``'s dtype."""
    return KernelCall(tc_name if tensor_cores(anchor.dtype) else name, anchor, op=op)


SPLIT_MAX = 32
"""The most threads that share one dot product (a warp)."""

DEFAULT_SHARED_MEMORY = 227 * 1024
"""A block's shared memory where the runtime does not say (an H100's sharedMemPerBlockOptin)."""


def _align16(n: int) -> int:
    return (n + 15) // 16 * 16


@dataclass(frozen=True)
class SequencePlan:
    """How one persistent launch over a layer is cut: ``blocks`` blocks of ``threads`` threads,
    ``per`` hidden units a block (its slice of W_hh in shared memory), the batch staged ``chunk``
    columns at a time, ``split`` threads a dot product, ``shared_mem`` bytes of shared memory a
    block (csrc/rnn.cu's layout, byte for byte)."""

    blocks: int
    per: int
    chunk: int
    split: int
    threads: int
    shared_mem: int


def sequence_shared_bytes(gates: int, hidden: int, per: int, chunk: int, batch: int, threads: int,
                          itemsize: int, acc_size: int, backward: bool, lstm: bool,
                          tensor_cores: bool = False) -> int:
    """The dynamic shared memory of a block (csrc/rnn.cu's Carve, in the same order): its slice
    of W_hh (in the weights' dtype), ``chunk`` staged columns of h_{t-1} (H + 1 words each; the
    backward's of dgates_t, G*H + 1), the reduction buffer (G partial sums a thread forward, one
    backward), the running states of its units (c forward; dh and dc backward for the LSTM,
    dh for the GRU), in the accumulate type, and with tensor cores the products of one chunk
    (G*per x chunk forward, per x chunk backward)."""
    rows = gates * hidden if backward else hidden
    states = (2 if lstm else 1) if backward else (1 if lstm else 0)
    parts = [gates * per * hidden * itemsize, chunk * (rows + 1) * acc_size,
             (1 if backward else gates) * threads * acc_size] + [per * batch * acc_size] * states
    if tensor_cores:
        parts.append((per if backward else gates * per) * chunk * acc_size)
    return sum(_align16(p) for p in parts)


def plan_sequence(gates: int, hidden: int, batch: int, itemsize: int, *, backward: bool, lstm: bool,
                  blocks_available: int, shared_limit: int, threads: int = THREADS,
                  tensor_cores: bool = False) -> SequencePlan | None:
    """The persistent launch for a layer, or None where a block's slice of W_hh and one staged
    column do not fit in ``shared_limit`` bytes: then the caller runs a GEMM and a cell kernel a
    step. Hidden units go to at most ``blocks_available`` blocks (the resident ones), as evenly as
    that allows; the batch is staged in as few equal chunks as fit; ``split`` (a power of two up
    to a warp) spreads each dot product over threads when the block has fewer (unit, column)
    pairs than threads. With ``tensor_cores`` the warps compute a chunk's products as tiles into
    shared memory (one more buffer a chunk) and each thread then runs the cell of one pair: no
    split.

    Where the switch is, on an H100 (132 SMs, 227 KB a block), batch 64 (tested): fp32 LSTM
    layers keep W_hh on chip up to H = 1285 (the backward's limit; the forward's is 1320: at
    H = 1285, 10 units a block, W_hh's slice is 4 x 10 x 1285 x 4 bytes = 201 KB), fp32 GRU
    layers up to H = 1463; with 16-bit weights up to 1751 (LSTM) and 2104 (GRU)."""
    acc_size = 8 if itemsize == 8 else 4
    blocks = max(1, min(blocks_available, hidden))
    per = -(-hidden // blocks)
    blocks = -(-hidden // per)  # none without a unit

    def shared(chunk: int) -> int:
        return sequence_shared_bytes(gates, hidden, per, chunk, batch, threads, itemsize, acc_size,
                                     backward, lstm, tensor_cores)

    if shared(1) > shared_limit:
        return None
    rows = gates * hidden if backward else hidden
    out_rows = (per if backward else gates * per) if tensor_cores else 0
    fit = 1 + (shared_limit - shared(1)) // (_align16((rows + 1) * acc_size) + out_rows * acc_size)
    chunk = min(batch, max(1, fit))
    while chunk > 1 and shared(chunk) > shared_limit:  # the alignment's last few bytes
        chunk -= 1
    chunk = -(-batch // -(-batch // chunk))  # equal chunks: as many as needed, as wide as fits
    split = 1  # tensor cores: the warps share the products, one thread a pair runs the cell
    while (not tensor_cores and split * 2 <= SPLIT_MAX and per * chunk * split * 2 <= threads
           and split * 2 <= rows):
        split *= 2
    return SequencePlan(blocks, per, chunk, split, threads, shared(chunk))


def _shared_limit(runtime: Any) -> int:
    limit = getattr(runtime, "shared_memory_per_block", None)
    return int(limit()) if limit is not None else DEFAULT_SHARED_MEMORY


@dataclass(frozen=True)
class _Probe:
    """Plan for this machine's figures, and launch only the plan's first block (``probe_block``)."""

    blocks_available: int
    shared_limit: int


_PROBE: _Probe | None = None


def _plan(call: KernelCall, gates: int, hidden: int, batch: int, backward: bool,
          lstm: bool) -> SequencePlan | None:
    """``plan_sequence`` for this launch's runtime (its resident blocks and shared memory)."""
    if _PROBE is not None:
        blocks, limit = _PROBE.blocks_available, _PROBE.shared_limit
    else:
        blocks, limit = call.runtime.resident_blocks(call.kernel, THREADS), _shared_limit(call.runtime)
    return plan_sequence(gates, hidden, batch, np.dtype(call.anchor.dtype).itemsize, backward=backward,
                         lstm=lstm, blocks_available=blocks, shared_limit=limit,
                         tensor_cores=call.name.endswith("_tc"))


H100_SMS = 132
"""An H100's SMs: the resident blocks of a persistent launch there (one a SM)."""


def probe_block(layer: str, hidden: int, batch: int, dtype: Any, *, backward: bool,
                tensor_cores: bool, rng: np.random.Generator | None = None,
                blocks_available: int = H100_SMS,
                shared_limit: int = DEFAULT_SHARED_MEMORY) -> SequencePlan | None:
    """Launch the first block of the plan a machine with ``blocks_available`` SMs and
    ``shared_limit`` bytes a block would run, for one time step of ``layer`` ("lstm" or "gru"),
    forward or backward, on random inputs; returns the plan (None: the per-step path, no launch).

    For the emulator's reports (tinyflow_cuda/bank_conflicts.py): the blocks of a plan are alike,
    so one shows the shared-memory layout and the access pattern of all, at the H100's cut, where
    running all 128 blocks of 1024 threads would take the emulator far too long. Its results are
    the first block's units only (the others are not computed) and are not returned."""
    global _PROBE, TENSOR_CORES
    rng = np.random.default_rng(0) if rng is None else rng
    gates = 4 if layer == "lstm" else 3
    steps = 1

    def rand(*shape: int) -> Array:
        return (0.5 * rng.standard_normal(shape)).astype(dtype)

    w_hh = rand(gates * hidden, hidden)
    saved = _PROBE, TENSOR_CORES
    _PROBE, TENSOR_CORES = _Probe(blocks_available, shared_limit), tensor_cores
    try:
        kernel = _sequence_call(f"{layer}_sequence_{'backward' if backward else 'forward'}",
                                f"{layer}_sequence_{'backward' if backward else 'forward'}_tc",
                                w_hh, op=layer)
        plan = _plan(kernel, gates, hidden, batch, backward=backward, lstm=layer == "lstm")
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


def _launch_persistent(call: KernelCall, plan: SequencePlan, args: list[Any]) -> None:
    """One cooperative launch for all T steps, cut as ``plan`` says."""
    blocks = 1 if _PROBE is not None else plan.blocks  # probe_block: the first block only
    call.runtime.launch(call.kernel, blocks, plan.threads,
                        [*args, plan.per, plan.chunk, plan.split], shared_mem=plan.shared_mem)


def lstm_sequence_forward(proj: Array, w_hh: Array, h0: Array | None, c0: Array | None,
                          reverse: bool = False) -> tuple[Array, Array, Array]:
    """All T steps of one LSTM layer in one launch: (acts (T, 4H, B), hs, cs (T+1, H, B))."""
    call = _sequence_call("lstm_sequence_forward", "lstm_sequence_forward_tc", proj, op="lstm")
    if not call.supported:
        return reference.lstm_sequence_forward(proj, w_hh, h0, c0, reverse)
    steps, hidden, batch = reference._check_sequence("lstm_sequence_forward", 4, proj, w_hh)
    if batch == 0:  # nothing to recur over: the reference's empty results (no kernel, no plan)
        return reference.lstm_sequence_forward(proj, w_hh, h0, c0, reverse)
    dtype = proj.dtype
    with call:
        proj, w_hh, h0, c0 = (_state(call, a, dtype) for a in (proj, w_hh, h0, c0))
        plan = _plan(call, 4, hidden, batch, backward=False, lstm=True)
        if plan is None:
            return _lstm_forward_per_step(call, proj, w_hh, h0, c0, reverse)
        acts = call.empty((steps, 4 * hidden, batch))
        hs = call.empty((steps + 1, hidden, batch))
        cs = call.empty((steps + 1, hidden, batch))
        _launch_persistent(call, plan, [proj, w_hh, h0, c0, acts, hs, cs, steps, hidden, batch,
                                        int(reverse)])
        return acts, hs, cs


def lstm_sequence_backward(dout: Array, dh_n: Array | None, dc_n: Array | None, w_hh: Array,
                           acts: Array, cs: Array, reverse: bool = False,
                           hs: Array | None = None) -> tuple[Array, Array, Array]:
    """The recurrence backwards in one launch: (dgates (T, 4H, B), dh0 (H, B), dc0 (H, B)).

    dgates is a view of a gate-major (4H, T, B) buffer, as the reference's: the op's GEMMs over
    all steps read it without a copy. ``hs`` is accepted for the reference's signature and not
    read: the fused kernel recomputes tanh(c) in registers."""
    call = _sequence_call("lstm_sequence_backward", "lstm_sequence_backward_tc", acts, op="lstm backward")
    if not call.supported:
        return reference.lstm_sequence_backward(dout, dh_n, dc_n, w_hh, acts, cs, reverse, hs)
    steps, hidden, batch = acts.shape[0], cs.shape[1], cs.shape[2]
    if batch == 0:
        return reference.lstm_sequence_backward(dout, dh_n, dc_n, w_hh, acts, cs, reverse, hs)
    dtype = acts.dtype
    with call:
        dout, dh_n, dc_n, w_hh, acts, cs = (_state(call, a, dtype)
                                            for a in (dout, dh_n, dc_n, w_hh, acts, cs))
        plan = _plan(call, 4, hidden, batch, backward=True, lstm=True)
        if plan is None:
            return _lstm_backward_per_step(call, dout, dh_n, dc_n, w_hh, acts, cs, reverse)
        dgates = call.empty((4 * hidden, steps, batch))  # gate-major
        dh = call.empty((hidden, batch))
        dc = call.empty((hidden, batch))
        _launch_persistent(call, plan, [dout, dh_n, dc_n, w_hh, acts, cs, dgates, dh, dc, steps,
                                        hidden, batch, int(reverse)])
        return dgates.transpose(1, 0, 2), dh, dc


def gru_sequence_forward(proj: Array, w_hh: Array, b_hh: Array | None, h0: Array | None,
                         reverse: bool = False) -> tuple[Array, Array, Array]:
    """All T steps of one GRU layer in one launch: (acts, gh (T, 3H, B), hs (T+1, H, B))."""
    call = _sequence_call("gru_sequence_forward", "gru_sequence_forward_tc", proj, op="gru")
    if not call.supported:
        return reference.gru_sequence_forward(proj, w_hh, b_hh, h0, reverse)
    steps, hidden, batch = reference._check_sequence("gru_sequence_forward", 3, proj, w_hh)
    if batch == 0:
        return reference.gru_sequence_forward(proj, w_hh, b_hh, h0, reverse)
    dtype = proj.dtype
    with call:
        proj, w_hh, b_hh, h0 = (_state(call, a, dtype) for a in (proj, w_hh, b_hh, h0))
        plan = _plan(call, 3, hidden, batch, backward=False, lstm=False)
        if plan is None:
            return _gru_forward_per_step(call, proj, w_hh, b_hh, h0, reverse)
        acts = call.empty((steps, 3 * hidden, batch))
        gh = call.empty((steps, 3 * hidden, batch))
        hs = call.empty((steps + 1, hidden, batch))
        _launch_persistent(call, plan, [proj, w_hh, b_hh, h0, acts, gh, hs, steps, hidden, batch,
                                        int(reverse)])
        return acts, gh, hs


def gru_sequence_backward(dout: Array, dh_n: Array | None, w_hh: Array, acts: Array, gh: Array,
                          hs: Array, reverse: bool = False) -> tuple[Array, Array, Array]:
    """The recurrence backwards in one launch: (dgi, dgh (T, 3H, B) views of gate-major buffers,
    dh0 (H, B))."""
    call = _sequence_call("gru_sequence_backward", "gru_sequence_backward_tc", acts, op="gru backward")
    if not call.supported:
        return reference.gru_sequence_backward(dout, dh_n, w_hh, acts, gh, hs, reverse)
    steps, hidden, batch = acts.shape[0], hs.shape[1], hs.shape[2]
    if batch == 0:
        return reference.gru_sequence_backward(dout, dh_n, w_hh, acts, gh, hs, reverse)
    dtype = acts.dtype
    with call:
        dout, dh_n, w_hh, acts, gh, hs = (_state(call, a, dtype)
                                          for a in (dout, dh_n, w_hh, acts, gh, hs))
        plan = _plan(call, 3, hidden, batch, backward=True, lstm=False)
        if plan is None:
            return _gru_backward_per_step(call, dout, dh_n, w_hh, acts, gh, hs, reverse)
        dgi = call.empty((3 * hidden, steps, batch))  # gate-major
        dgh = call.empty((3 * hidden, steps, batch))
        dh = call.empty((hidden, batch))
        _launch_persistent(call, plan, [dout, dh_n, w_hh, acts, gh, hs, dgi, dgh, dh, steps,
                                        hidden, batch, int(reverse)])
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
    for t in order:
        prev, new = t + 1 - out_offset, t + out_offset
        gates = acts[t]  # (4H, B)
        if t != first or h0 is not None:
            xp.matmul(w_hh, hs[prev], out=gates)
            gates += proj[:, t]
        else:
            gates[...] = proj[:, t]
        lstm_cell_forward(gates, cs[prev], hs[new], cs[new])
    return acts, hs, cs


def _lstm_backward_per_step(call: KernelCall, dout: Array, dh_n: Array | None, dc_n: Array | None,
                            w_hh: Array, acts: Array, cs: Array,
                            reverse: bool) -> tuple[Array, Array, Array]:
    xp = call.xp
    steps, hidden = acts.shape[0], cs.shape[1]
    order, out_offset = reference.sequence_slots(steps, reverse)
    dgates = call.empty(acts.shape)  # (T, 4H, B)
    dh = xp.zeros_like(cs[0]) if dh_n is None else dh_n.copy()
    dc = dc_n
    w_hh_t = xp.ascontiguousarray(w_hh.T)  # (H, 4H)
    for t in reversed(order):
        prev, new = t + 1 - out_offset, t + out_offset
        dh += dout[t]
        _, dc = lstm_cell_backward(dh, dc, acts[t], cs[prev], cs[new], dgates[t])
        xp.matmul(w_hh_t, dgates[t], out=dh)
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
    for t in order:
        prev, new = t + 1 - out_offset, t + out_offset
        xp.matmul(w_hh, hs[prev], out=gh[t])
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
    w_hh_t = xp.ascontiguousarray(w_hh.T)  # (H, 3H)
    for t in reversed(order):
        prev = t + 1 - out_offset
        dh += dout[t]
        _, _, direct = gru_cell_backward(dh, acts[t], gh[t], hs[prev], dgi[t], dgh[t])
        dh = direct + xp.matmul(w_hh_t, dgh[t])
    return dgi, dgh, dh
