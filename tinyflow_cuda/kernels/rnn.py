"""CUDA twins of ``tinyflow/kernels/rnn.py`` over csrc/rnn.cu: the fused LSTM and GRU cells, and
the whole recurrence of a layer as one persistent kernel.

Feature-major like the reference: gates (G*H, B), states (H, B). The cells take one thread per
(unit, sample); the cell ops' GEMMs stay in ops/rnn.py (cuBLAS). The ``*_sequence_*`` twins
launch ONE kernel for all T steps (forward or backward) where the reference loops in Python: its
blocks, at most one per SM so that all of them run at once, own slices of hidden units, compute
their gates from h_{t-1} and meet at a grid-wide barrier after each step. The launches per layer
are therefore a constant, whatever the sequence length.
"""
from __future__ import annotations

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
def _persistent_grid(call: KernelCall, hidden: int) -> int:
    """Blocks for a persistent kernel over ``hidden`` units: no more than run at once (they wait
    for each other at every step), none without a unit, and as even a split as that allows."""
    limit = max(1, min(hidden, call.runtime.resident_blocks(call.kernel, THREADS)))
    per = -(-hidden // limit)  # units a block
    return -(-hidden // per)


def _state(call: KernelCall, a: Array | None, dtype: Any) -> Array | None:
    """A read-only input as a C-contiguous array of the kernel's dtype (a copy only if needed)."""
    return None if a is None else call.xp.ascontiguousarray(a, dtype=dtype)


def _launch_persistent(call: KernelCall, hidden: int, args: list[Any]) -> None:
    """One launch for all T steps; the last argument is the grid barrier's counter, zeroed here."""
    barrier = call.zeros((1,), dtype=np.uint32)
    call.runtime.launch(call.kernel, _persistent_grid(call, hidden), THREADS, [*args, barrier])


def lstm_sequence_forward(proj: Array, w_hh: Array, h0: Array | None, c0: Array | None,
                          reverse: bool = False) -> tuple[Array, Array, Array]:
    """All T steps of one LSTM layer in one launch: (acts (T, 4H, B), hs, cs (T+1, H, B))."""
    call = KernelCall("lstm_sequence_forward", proj, op="lstm")
    if not call.supported:
        return reference.lstm_sequence_forward(proj, w_hh, h0, c0, reverse)
    steps, hidden, batch = reference._check_sequence("lstm_sequence_forward", 4, proj, w_hh)
    dtype = proj.dtype
    with call:
        proj, w_hh, h0, c0 = (_state(call, a, dtype) for a in (proj, w_hh, h0, c0))
        acts = call.empty((steps, 4 * hidden, batch))
        hs = call.empty((steps + 1, hidden, batch))
        cs = call.empty((steps + 1, hidden, batch))
        _launch_persistent(call, hidden, [proj, w_hh, h0, c0, acts, hs, cs, steps, hidden, batch,
                                          int(reverse)])
        return acts, hs, cs


def lstm_sequence_backward(dout: Array, dh_n: Array | None, dc_n: Array | None, w_hh: Array,
                           acts: Array, cs: Array, reverse: bool = False,
                           hs: Array | None = None) -> tuple[Array, Array, Array]:
    """The recurrence backwards in one launch: (dgates (T, 4H, B), dh0 (H, B), dc0 (H, B)).

    ``hs`` is accepted for the reference's signature and not read: the fused kernel recomputes
    tanh(c) in registers, which costs nothing next to its memory traffic."""
    call = KernelCall("lstm_sequence_backward", acts, op="lstm backward")
    if not call.supported:
        return reference.lstm_sequence_backward(dout, dh_n, dc_n, w_hh, acts, cs, reverse, hs)
    steps, hidden, batch = acts.shape[0], cs.shape[1], cs.shape[2]
    dtype = acts.dtype
    with call:
        dout, dh_n, dc_n, w_hh, acts, cs = (_state(call, a, dtype)
                                            for a in (dout, dh_n, dc_n, w_hh, acts, cs))
        dgates = call.empty(acts.shape)
        dh = call.empty((hidden, batch))
        dc = call.empty((hidden, batch))
        _launch_persistent(call, hidden, [dout, dh_n, dc_n, w_hh, acts, cs, dgates, dh, dc, steps,
                                          hidden, batch, int(reverse)])
        return dgates, dh, dc


def gru_sequence_forward(proj: Array, w_hh: Array, b_hh: Array | None, h0: Array | None,
                         reverse: bool = False) -> tuple[Array, Array, Array]:
    """All T steps of one GRU layer in one launch: (acts, gh (T, 3H, B), hs (T+1, H, B))."""
    call = KernelCall("gru_sequence_forward", proj, op="gru")
    if not call.supported:
        return reference.gru_sequence_forward(proj, w_hh, b_hh, h0, reverse)
    steps, hidden, batch = reference._check_sequence("gru_sequence_forward", 3, proj, w_hh)
    dtype = proj.dtype
    with call:
        proj, w_hh, b_hh, h0 = (_state(call, a, dtype) for a in (proj, w_hh, b_hh, h0))
        acts = call.empty((steps, 3 * hidden, batch))
        gh = call.empty((steps, 3 * hidden, batch))
        hs = call.empty((steps + 1, hidden, batch))
        _launch_persistent(call, hidden, [proj, w_hh, b_hh, h0, acts, gh, hs, steps, hidden, batch,
                                          int(reverse)])
        return acts, gh, hs


def gru_sequence_backward(dout: Array, dh_n: Array | None, w_hh: Array, acts: Array, gh: Array,
                          hs: Array, reverse: bool = False) -> tuple[Array, Array, Array]:
    """The recurrence backwards in one launch: (dgi, dgh (T, 3H, B), dh0 (H, B))."""
    call = KernelCall("gru_sequence_backward", acts, op="gru backward")
    if not call.supported:
        return reference.gru_sequence_backward(dout, dh_n, w_hh, acts, gh, hs, reverse)
    steps, hidden, batch = acts.shape[0], hs.shape[1], hs.shape[2]
    dtype = acts.dtype
    with call:
        dout, dh_n, w_hh, acts, gh, hs = (_state(call, a, dtype)
                                          for a in (dout, dh_n, w_hh, acts, gh, hs))
        dgi = call.empty(acts.shape)
        dgh = call.empty(acts.shape)
        dh = call.empty((hidden, batch))
        _launch_persistent(call, hidden, [dout, dh_n, w_hh, acts, gh, hs, dgi, dgh, dh, steps,
                                          hidden, batch, int(reverse)])
        return dgi, dgh, dh
