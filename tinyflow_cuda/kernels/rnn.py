"""CUDA twins of ``tinyflow/kernels/rnn.py``: the fused LSTM and GRU cells over csrc/rnn.cu.

Feature-major like the reference: gates (G*H, B), states (H, B). One thread per (unit, sample)
computes every gate of that unit; the recurrent GEMMs stay in ops/rnn.py (cuBLAS).
"""
from __future__ import annotations

from typing import Any

from tinyflow.kernels import rnn as reference
from tinyflow_cuda.kernels._launch import KernelCall, all_contiguous

__all__ = ["lstm_cell_forward", "lstm_cell_backward", "gru_cell_forward", "gru_cell_backward"]

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
                       dgates_out: Array | None = None) -> tuple[Array, Array]:
    """Gradients of one LSTM step: (dgates (4H, B), dc_prev (H, B)); ``dc`` None means zero."""
    call = KernelCall("lstm_cell_backward", dh, dc, acts, c_prev, c, dgates_out,
                      op="lstm_cell backward")
    if not call.supported or not all_contiguous(dgates_out):
        return reference.lstm_cell_backward(dh, dc, acts, c_prev, c, dgates_out)
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
