"""Recurrent ops: LSTM and GRU cells, and whole-sequence layers computed the cuDNN way.

A sequence op runs one layer in one direction over all T steps as a single autograd node:
- the input projection of every step is one GEMM, (T*B, I) @ (I, G*H), before the loop;
- the loop does only the recurrent GEMM h_{t-1} @ W_hh^T and one fused cell kernel per step
  (``tinyflow.kernels.rnn``), writing into buffers preallocated for the whole sequence;
- backward walks the steps in reverse with one fused cell-backward kernel and one GEMM per step,
  then forms dW_ih, dW_hh and dx as three GEMMs over all steps at once.
Gate orders follow PyTorch: LSTM (i, f, g, o), GRU (r, z, n). See docs/lstm.md.
"""
from __future__ import annotations

from typing import Any

from tinyflow.autograd import Context, Function
from tinyflow.kernels.rnn import (
    gru_cell_backward,
    gru_cell_forward,
    lstm_cell_backward,
    lstm_cell_forward,
)

__all__ = ["LSTMCell", "GRUCell", "LSTMLayer", "GRULayer", "lstm_cell", "gru_cell", "lstm_layer", "gru_layer"]

Array = Any


def _check_weights(op: str, gates: int, x: Array, w_ih: Array, w_hh: Array, b_ih: Array, b_hh: Array) -> int:
    """Validate (G*H, I) / (G*H, H) weights and (G*H,) biases against x (..., I); returns H."""
    hidden = w_hh.shape[-1] if w_hh.ndim == 2 else -1
    ok = (
        w_ih.ndim == 2
        and w_hh.ndim == 2
        and w_hh.shape == (gates * hidden, hidden)
        and w_ih.shape == (gates * hidden, x.shape[-1])
        and (b_ih is None) == (b_hh is None)
        and (b_ih is None or (b_ih.shape == (gates * hidden,) and b_hh.shape == (gates * hidden,)))
    )
    if not ok:
        raise ValueError(
            f"{op}: input {tuple(x.shape)} with weight_ih {tuple(w_ih.shape)}, weight_hh {tuple(w_hh.shape)}, "
            f"bias_ih {None if b_ih is None else tuple(b_ih.shape)}, bias_hh {None if b_hh is None else tuple(b_hh.shape)}: "
            f"expected weight_ih ({gates}*H, input_size), weight_hh ({gates}*H, H) and both biases ({gates}*H,) or both None"
        )
    return hidden


def _check_state(op: str, name: str, state: Array | None, batch: int, hidden: int) -> None:
    if state is not None and tuple(state.shape) != (batch, hidden):
        raise ValueError(f"{op}: {name} has shape {tuple(state.shape)}, expected (batch, hidden) = ({batch}, {hidden})")


def _projection(x2: Array, w: Array, b: Array | None) -> Array:
    """x2 @ w^T + b: the input (or recurrent) projection of a (rows, I) block, as one GEMM."""
    out = x2 @ w.T  # (rows, G*H)
    if b is not None:
        out += b
    return out


# --------------------------------------------------------------------------------------------
# Single cells (nn.LSTMCell, nn.GRUCell): one step, one node
# --------------------------------------------------------------------------------------------


class LSTMCell(Function):
    """One LSTM step: (x (B, I), h (B, H), c (B, H)) -> (h', c'), gates (i, f, g, o) in one kernel."""

    @staticmethod
    def forward(ctx: Context, x: Array, h: Array, c: Array, w_ih: Array, w_hh: Array,
                b_ih: Array | None = None, b_hh: Array | None = None) -> tuple[Array, Array]:  # fmt: skip
        hidden = _check_weights("lstm_cell", 4, x, w_ih, w_hh, b_ih, b_hh)
        if x.ndim != 2:
            raise ValueError(f"lstm_cell: input must be (batch, input_size), got {tuple(x.shape)}")
        _check_state("lstm_cell", "h", h, x.shape[0], hidden)
        _check_state("lstm_cell", "c", c, x.shape[0], hidden)
        gates = x @ w_ih.T + h @ w_hh.T  # (B, 4H)
        if b_ih is not None:
            gates += b_ih + b_hh
        h1, c1, acts = lstm_cell_forward(gates, c)
        ctx.save_for_backward(x, h, c, w_ih, w_hh, acts, c1)
        ctx.has_bias = b_ih is not None
        return h1, c1

    @staticmethod
    def backward(ctx: Context, dh1: Array, dc1: Array) -> tuple:
        x, h, c, w_ih, w_hh, acts, c1 = ctx.saved_tensors
        need = ctx.needs_input_grad
        dgates, dc = lstm_cell_backward(dh1, dc1, acts, c, c1)  # (B, 4H), (B, H)
        db = dgates.sum(axis=0) if ctx.has_bias else None
        return (
            dgates @ w_ih if need[0] else None,
            dgates @ w_hh if need[1] else None,
            dc if need[2] else None,
            dgates.T @ x if need[3] else None,
            dgates.T @ h if need[4] else None,
            db,
            db,
        )


class GRUCell(Function):
    """One GRU step: (x (B, I), h (B, H)) -> h', gates (r, z, n) in one kernel."""

    @staticmethod
    def forward(ctx: Context, x: Array, h: Array, w_ih: Array, w_hh: Array,
                b_ih: Array | None = None, b_hh: Array | None = None) -> Array:  # fmt: skip
        hidden = _check_weights("gru_cell", 3, x, w_ih, w_hh, b_ih, b_hh)
        if x.ndim != 2:
            raise ValueError(f"gru_cell: input must be (batch, input_size), got {tuple(x.shape)}")
        _check_state("gru_cell", "h", h, x.shape[0], hidden)
        gi = _projection(x, w_ih, b_ih)  # (B, 3H)
        gh = _projection(h, w_hh, b_hh)  # (B, 3H)
        h1, acts = gru_cell_forward(gi, gh, h)
        ctx.save_for_backward(x, h, w_ih, w_hh, acts, gh)
        ctx.has_bias = b_ih is not None
        return h1

    @staticmethod
    def backward(ctx: Context, dh1: Array) -> tuple:
        x, h, w_ih, w_hh, acts, gh = ctx.saved_tensors
        need = ctx.needs_input_grad
        dgi, dgh, dh = gru_cell_backward(dh1, acts, gh, h)  # (B, 3H), (B, 3H), (B, H)
        if need[1]:
            dh += dgh @ w_hh
        return (
            dgi @ w_ih if need[0] else None,
            dh if need[1] else None,
            dgi.T @ x if need[2] else None,
            dgh.T @ h if need[3] else None,
            dgi.sum(axis=0) if ctx.has_bias else None,
            dgh.sum(axis=0) if ctx.has_bias else None,
        )


# --------------------------------------------------------------------------------------------
# Whole sequences: one layer, one direction, all T steps in one node
# --------------------------------------------------------------------------------------------


def _slots(steps: int, reverse: bool) -> tuple[range, int]:
    """Time steps in processing order and the state-buffer offset of each step's output.

    States live in a (T+1, B, H) buffer: forward, step t reads slot t and writes slot t+1 (the
    initial state sits in slot 0); reverse, step t reads slot t+1 and writes slot t (initial state
    in slot T). Either way the outputs are one contiguous slice and so are the previous states.
    """
    if reverse:
        return range(steps - 1, -1, -1), 0
    return range(steps), 1


def _check_sequence(op: str, x: Array, h0: Array | None, hidden: int) -> None:
    if x.ndim != 3:
        raise ValueError(f"{op}: input must be (seq_len, batch, input_size), got {tuple(x.shape)}")
    _check_state(op, "h0", h0, x.shape[1], hidden)


class LSTMLayer(Function):
    """One LSTM layer over a whole sequence: x (T, B, I) -> (out (T, B, H), h_n (B, H), c_n (B, H)).

    ``reverse=True`` runs from the last step to the first (the backward half of a bidirectional
    layer); out[t] is still the output at time t. h0 / c0 may be None (zeros).
    """

    @staticmethod
    def forward(ctx: Context, x: Array, h0: Array | None, c0: Array | None, w_ih: Array, w_hh: Array,
                b_ih: Array | None = None, b_hh: Array | None = None,
                reverse: bool = False) -> tuple[Array, Array, Array]:  # fmt: skip
        xp = ctx.xp
        hidden = _check_weights("lstm", 4, x, w_ih, w_hh, b_ih, b_hh)
        _check_sequence("lstm", x, h0, hidden)
        _check_state("lstm", "c0", c0, x.shape[1], hidden)
        steps, batch, _ = x.shape
        x = xp.ascontiguousarray(x)
        # The cuDNN trick: the input projection of all steps is one GEMM.
        gates = (x.reshape(steps * batch, -1) @ w_ih.T).reshape(steps, batch, 4 * hidden)  # (T, B, 4H)
        if b_ih is not None:
            gates += b_ih + b_hh
        hs = xp.empty((steps + 1, batch, hidden), dtype=gates.dtype)  # (T+1, B, H)
        cs = xp.empty_like(hs)
        order, out_offset = _slots(steps, reverse)
        first = steps if reverse else 0
        hs[first] = 0 if h0 is None else h0
        cs[first] = 0 if c0 is None else c0
        w_hh_t = w_hh.T
        rec = xp.empty((batch, 4 * hidden), dtype=gates.dtype)  # (B, 4H)
        for t in order:
            prev, new = t + 1 - out_offset, t + out_offset
            if t != first or h0 is not None:
                xp.matmul(hs[prev], w_hh_t, out=rec)
                gates[t] += rec
            # gates[t] becomes the activated gates, kept for backward (cuDNN's reserve space).
            lstm_cell_forward(gates[t], cs[prev], h_out=hs[new], c_out=cs[new])
        ctx.save_for_backward(x, w_ih, w_hh, gates, hs, cs)
        ctx.reverse = reverse
        ctx.has_bias = b_ih is not None
        last = order[-1] + out_offset
        out = hs[out_offset : out_offset + steps]  # (T, B, H)
        return out, hs[last], cs[last]

    @staticmethod
    def backward(ctx: Context, dout: Array, dh_n: Array, dc_n: Array) -> tuple:
        xp = ctx.xp
        x, w_ih, w_hh, acts, hs, cs = ctx.saved_tensors
        need = ctx.needs_input_grad
        steps, batch, hidden = dout.shape
        order, out_offset = _slots(steps, ctx.reverse)
        dgates = xp.empty_like(acts)  # (T, B, 4H)
        dh = dh_n.astype(acts.dtype, copy=True)  # running gradient w.r.t. the current h
        dc = dc_n
        for t in reversed(order):
            prev, new = t + 1 - out_offset, t + out_offset
            dh += dout[t]
            _, dc = lstm_cell_backward(dh, dc, acts[t], cs[prev], cs[new], dgates_out=dgates[t])
            xp.matmul(dgates[t], w_hh, out=dh)  # dh_prev
        # Weight gradients of all steps at once: three GEMMs over (T*B) rows.
        dg2 = dgates.reshape(steps * batch, 4 * hidden)  # (T*B, 4H)
        h_prev = hs[1 - out_offset : 1 - out_offset + steps].reshape(steps * batch, hidden)  # (T*B, H)
        dx = (dg2 @ w_ih).reshape(x.shape) if need[0] else None
        dw_ih = dg2.T @ x.reshape(steps * batch, -1) if need[3] else None
        dw_hh = dg2.T @ h_prev if need[4] else None
        db = dg2.sum(axis=0) if ctx.has_bias else None
        return dx, dh if need[1] else None, dc if need[2] else None, dw_ih, dw_hh, db, db


class GRULayer(Function):
    """One GRU layer over a whole sequence: x (T, B, I) -> (out (T, B, H), h_n (B, H)).

    Same scheme as ``LSTMLayer``: one GEMM for the input projections, the recurrent GEMM and one
    fused kernel per step; h0 may be None (zeros); ``reverse=True`` runs from the last step.
    """

    @staticmethod
    def forward(ctx: Context, x: Array, h0: Array | None, w_ih: Array, w_hh: Array,
                b_ih: Array | None = None, b_hh: Array | None = None,
                reverse: bool = False) -> tuple[Array, Array]:  # fmt: skip
        xp = ctx.xp
        hidden = _check_weights("gru", 3, x, w_ih, w_hh, b_ih, b_hh)
        _check_sequence("gru", x, h0, hidden)
        steps, batch, _ = x.shape
        x = xp.ascontiguousarray(x)
        gi = _projection(x.reshape(steps * batch, -1), w_ih, b_ih).reshape(steps, batch, 3 * hidden)  # (T, B, 3H)
        gh = xp.empty_like(gi)  # recurrent pre-activations of every step, kept for backward
        hs = xp.empty((steps + 1, batch, hidden), dtype=gi.dtype)  # (T+1, B, H)
        order, out_offset = _slots(steps, reverse)
        hs[steps if reverse else 0] = 0 if h0 is None else h0
        w_hh_t = w_hh.T
        for t in order:
            prev, new = t + 1 - out_offset, t + out_offset
            xp.matmul(hs[prev], w_hh_t, out=gh[t])
            if b_hh is not None:
                gh[t] += b_hh
            gru_cell_forward(gi[t], gh[t], hs[prev], h_out=hs[new])
        ctx.save_for_backward(x, w_ih, w_hh, gi, gh, hs)
        ctx.reverse = reverse
        ctx.has_bias = b_ih is not None
        last = order[-1] + out_offset
        return hs[out_offset : out_offset + steps], hs[last]

    @staticmethod
    def backward(ctx: Context, dout: Array, dh_n: Array) -> tuple:
        xp = ctx.xp
        x, w_ih, w_hh, acts, gh, hs = ctx.saved_tensors
        need = ctx.needs_input_grad
        steps, batch, hidden = dout.shape
        order, out_offset = _slots(steps, ctx.reverse)
        dgi = xp.empty_like(acts)  # (T, B, 3H)
        dgh = xp.empty_like(acts)  # (T, B, 3H)
        dh = dh_n.astype(acts.dtype, copy=True)
        for t in reversed(order):
            prev = t + 1 - out_offset
            dh += dout[t]
            _, _, dh = gru_cell_backward(dh, acts[t], gh[t], hs[prev], dgi_out=dgi[t], dgh_out=dgh[t])
            dh += dgh[t] @ w_hh
        dgi2 = dgi.reshape(steps * batch, 3 * hidden)  # (T*B, 3H)
        dgh2 = dgh.reshape(steps * batch, 3 * hidden)  # (T*B, 3H)
        h_prev = hs[1 - out_offset : 1 - out_offset + steps].reshape(steps * batch, hidden)  # (T*B, H)
        return (
            (dgi2 @ w_ih).reshape(x.shape) if need[0] else None,
            dh if need[1] else None,
            dgi2.T @ x.reshape(steps * batch, -1) if need[2] else None,
            dgh2.T @ h_prev if need[3] else None,
            dgi2.sum(axis=0) if ctx.has_bias else None,
            dgh2.sum(axis=0) if ctx.has_bias else None,
        )


# Functional spellings used by tinyflow.nn.
def lstm_cell(x: Any, h: Any, c: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None) -> tuple:
    """(h', c') of one LSTM step on Tensors; see ``LSTMCell``."""
    return LSTMCell.apply(x, h, c, w_ih, w_hh, b_ih, b_hh)


def gru_cell(x: Any, h: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None) -> Any:
    """h' of one GRU step on Tensors; see ``GRUCell``."""
    return GRUCell.apply(x, h, w_ih, w_hh, b_ih, b_hh)


def lstm_layer(x: Any, h0: Any, c0: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None,
               reverse: bool = False) -> tuple:  # fmt: skip
    """(out, h_n, c_n) of one LSTM layer over x (T, B, I) on Tensors; see ``LSTMLayer``."""
    return LSTMLayer.apply(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse=reverse)


def gru_layer(x: Any, h0: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None,
              reverse: bool = False) -> tuple:  # fmt: skip
    """(out, h_n) of one GRU layer over x (T, B, I) on Tensors; see ``GRULayer``."""
    return GRULayer.apply(x, h0, w_ih, w_hh, b_ih, b_hh, reverse=reverse)
