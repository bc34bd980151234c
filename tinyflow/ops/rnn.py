"""Recurrent ops: LSTM and GRU cells, and whole-sequence layers computed the cuDNN way.

A sequence op runs one layer in one direction over all T steps as a single autograd node:
- the input projection of every step is one GEMM, W_ih (G*H, I) @ X (I, T*B), before the loop;
- the loop does only the recurrent GEMM W_hh @ h_{t-1} and one fused cell kernel per step
  (``ctx.kernels.lstm_cell_forward``: ``tinyflow.kernels.rnn`` or its CUDA twin), writing into
  buffers preallocated for the whole sequence;
- backward walks the steps in reverse with one fused cell-backward kernel and one GEMM per step,
  then forms dW_ih, dW_hh and dx as three GEMMs over all T*B columns at once.
Inside, arrays are feature-major ((G*H, B) per step) so that each gate is one contiguous block;
the (T, B, H) outputs are transposed views of those buffers. Gate orders follow PyTorch:
LSTM (i, f, g, o), GRU (r, z, n). See docs/lstm.md.
"""
from __future__ import annotations

from typing import Any

from tinyflow.autograd import Context, Function

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


def _feature_major(a: Array, xp: Any) -> Array:
    """(T, B, F) -> the (F, T*B) matrix whose column t*B + b is a[t, b].

    A view of a C-contiguous ``a``; otherwise one copy, which is a cheap block move when ``a`` is
    a transposed view of per-step (F, B) blocks (``blocks.transpose(0, 2, 1)``).
    """
    steps, batch, features = a.shape
    if a.flags.c_contiguous:
        return a.reshape(steps * batch, features).T
    return xp.ascontiguousarray(a.transpose(2, 0, 1)).reshape(features, steps * batch)


# --------------------------------------------------------------------------------------------
# Single cells (nn.LSTMCell, nn.GRUCell): one step, one node. The kernels are feature-major, so
# the (B, F) arrays go in and come out as transposed views.
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
        gates = w_ih @ x.T + w_hh @ h.T  # (4H, B)
        if b_ih is not None:
            gates += (b_ih + b_hh)[:, None]
        h1, c1, acts = ctx.kernels.lstm_cell_forward(gates, c.T)  # (H, B) each
        ctx.save_for_backward(x, h, c, w_ih, w_hh, acts, c1)
        ctx.has_bias = b_ih is not None
        return h1.T, c1.T  # (B, H) each

    @staticmethod
    def backward(ctx: Context, dh1: Array, dc1: Array) -> tuple:
        x, h, c, w_ih, w_hh, acts, c1 = ctx.saved_tensors
        need = ctx.needs_input_grad
        dgates, dc = ctx.kernels.lstm_cell_backward(dh1.T, dc1.T, acts, c.T, c1)  # (4H, B), (H, B)
        db = dgates.sum(axis=1) if ctx.has_bias else None
        return (
            dgates.T @ w_ih if need[0] else None,
            dgates.T @ w_hh if need[1] else None,
            dc.T if need[2] else None,
            dgates @ x if need[3] else None,
            dgates @ h if need[4] else None,
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
        gi = w_ih @ x.T  # (3H, B)
        gh = w_hh @ h.T  # (3H, B)
        if b_ih is not None:
            gi += b_ih[:, None]
            gh += b_hh[:, None]
        h1, acts = ctx.kernels.gru_cell_forward(gi, gh, h.T)  # (H, B)
        ctx.save_for_backward(x, h, w_ih, w_hh, acts, gh)
        ctx.has_bias = b_ih is not None
        return h1.T  # (B, H)

    @staticmethod
    def backward(ctx: Context, dh1: Array) -> tuple:
        x, h, w_ih, w_hh, acts, gh = ctx.saved_tensors
        need = ctx.needs_input_grad
        dgi, dgh, dh = ctx.kernels.gru_cell_backward(dh1.T, acts, gh, h.T)  # (3H, B), (3H, B), (H, B)
        return (
            dgi.T @ w_ih if need[0] else None,
            (dh + w_hh.T @ dgh).T if need[1] else None,
            dgi @ x if need[2] else None,
            dgh @ h if need[3] else None,
            dgi.sum(axis=1) if ctx.has_bias else None,
            dgh.sum(axis=1) if ctx.has_bias else None,
        )


# --------------------------------------------------------------------------------------------
# Whole sequences: one layer, one direction, all T steps in one node
# --------------------------------------------------------------------------------------------


def _slots(steps: int, reverse: bool) -> tuple[range, int]:
    """Time steps in processing order and the state-buffer offset of each step's output.

    States live in a (T+1, H, B) buffer: forward, step t reads slot t and writes slot t+1 (the
    initial state sits in slot 0); reverse, step t reads slot t+1 and writes slot t (initial state
    in slot T). Either way the outputs are one contiguous slice and so are the previous states.
    """
    if reverse:
        return range(steps - 1, -1, -1), 0
    return range(steps), 1


def _check_sequence(op: str, x: Array, h0: Array | None, hidden: int) -> None:
    if x.ndim != 3:
        raise ValueError(f"{op}: input must be (seq_len, batch, input_size), got {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{op}: input {tuple(x.shape)} has no time steps")
    _check_state(op, "h0", h0, x.shape[1], hidden)


class LSTMLayer(Function):
    """One LSTM layer over a whole sequence: x (T, B, I) -> (out (T, B, H), h_n (B, H), c_n (B, H)).

    ``reverse=True`` runs from the last step to the first (the backward half of a bidirectional
    layer); out[t] is still the output at time t. h0 / c0 may be None (zeros). Internally
    feature-major: the per-step blocks are (4H, B) and (H, B); the outputs are transposed views
    of those buffers, so a following layer reads them without a copy.
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
        x_fm = _feature_major(x, xp)  # (I, T*B), kept for dW_ih
        # The cuDNN trick: the input projection of all steps is one GEMM, before the recurrence.
        proj = w_ih @ x_fm  # (4H, T*B)
        if b_ih is not None:
            proj += (b_ih + b_hh)[:, None]
        acts = xp.empty((steps, 4 * hidden, batch), dtype=proj.dtype)  # (T, 4H, B) per-step blocks
        hs = xp.empty((steps + 1, hidden, batch), dtype=proj.dtype)  # (T+1, H, B)
        cs = xp.empty_like(hs)
        order, out_offset = _slots(steps, reverse)
        first = order[0]
        init = first + 1 - out_offset
        hs[init] = 0 if h0 is None else h0.T
        cs[init] = 0 if c0 is None else c0.T
        for t in order:
            prev, new = t + 1 - out_offset, t + out_offset
            step_proj = proj[:, t * batch : (t + 1) * batch]  # (4H, B)
            if t != first or h0 is not None:
                xp.matmul(w_hh, hs[prev], out=acts[t])  # the only GEMM inside the loop
                acts[t] += step_proj
            else:
                acts[t] = step_proj
            # acts[t] becomes the activated gates, kept for backward (cuDNN's reserve space).
            ctx.kernels.lstm_cell_forward(acts[t], cs[prev], h_out=hs[new], c_out=cs[new])
        ctx.save_for_backward(x_fm, w_ih, w_hh, acts, hs, cs)
        ctx.x_shape = x.shape
        ctx.reverse = reverse
        ctx.has_bias = b_ih is not None
        last = order[-1] + out_offset
        out = hs[out_offset : out_offset + steps].transpose(0, 2, 1)  # (T, B, H) view
        return out, hs[last].T, cs[last].T

    @staticmethod
    def backward(ctx: Context, dout: Array, dh_n: Array, dc_n: Array) -> tuple:
        xp = ctx.xp
        x_fm, w_ih, w_hh, acts, hs, cs = ctx.saved_tensors
        need = ctx.needs_input_grad
        steps = dout.shape[0]
        order, out_offset = _slots(steps, ctx.reverse)
        dgates = xp.empty_like(acts)  # (T, 4H, B)
        dh = dh_n.T.astype(acts.dtype, order="C")  # (H, B) running gradient w.r.t. the current h
        dc = dc_n.T
        w_hh_t = xp.ascontiguousarray(w_hh.T)  # (H, 4H): BLAS runs this GEMM faster than on the view
        for t in reversed(order):
            prev, new = t + 1 - out_offset, t + out_offset
            dh += dout[t].T
            _, dc = ctx.kernels.lstm_cell_backward(dh, dc, acts[t], cs[prev], cs[new], dgates_out=dgates[t])
            xp.matmul(w_hh_t, dgates[t], out=dh)  # dh_prev
        # Weight and input gradients of all steps at once: three GEMMs over T*B columns.
        dg = _feature_major(dgates.transpose(0, 2, 1), xp)  # (4H, T*B)
        h_prev = _feature_major(hs[1 - out_offset : 1 - out_offset + steps].transpose(0, 2, 1), xp)  # (H, T*B)
        dx = (dg.T @ w_ih).reshape(ctx.x_shape) if need[0] else None
        dw_ih = dg @ x_fm.T if need[3] else None
        dw_hh = dg @ h_prev.T if need[4] else None
        db = dg.sum(axis=1) if ctx.has_bias else None
        return dx, dh.T if need[1] else None, dc.T if need[2] else None, dw_ih, dw_hh, db, db


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
        x_fm = _feature_major(x, xp)  # (I, T*B), kept for dW_ih
        proj = w_ih @ x_fm  # (3H, T*B): the input projection of all steps, one GEMM
        if b_ih is not None:
            proj += b_ih[:, None]
        acts = xp.empty((steps, 3 * hidden, batch), dtype=proj.dtype)  # (T, 3H, B) per-step blocks
        gh = xp.empty_like(acts)  # recurrent pre-activations of every step, kept for backward
        hs = xp.empty((steps + 1, hidden, batch), dtype=proj.dtype)  # (T+1, H, B)
        order, out_offset = _slots(steps, reverse)
        hs[order[0] + 1 - out_offset] = 0 if h0 is None else h0.T
        for t in order:
            prev, new = t + 1 - out_offset, t + out_offset
            xp.matmul(w_hh, hs[prev], out=gh[t])
            if b_hh is not None:
                gh[t] += b_hh[:, None]
            acts[t] = proj[:, t * batch : (t + 1) * batch]
            ctx.kernels.gru_cell_forward(acts[t], gh[t], hs[prev], h_out=hs[new])
        ctx.save_for_backward(x_fm, w_ih, w_hh, acts, gh, hs)
        ctx.x_shape = x.shape
        ctx.reverse = reverse
        ctx.has_bias = b_ih is not None
        last = order[-1] + out_offset
        return hs[out_offset : out_offset + steps].transpose(0, 2, 1), hs[last].T

    @staticmethod
    def backward(ctx: Context, dout: Array, dh_n: Array) -> tuple:
        xp = ctx.xp
        x_fm, w_ih, w_hh, acts, gh, hs = ctx.saved_tensors
        need = ctx.needs_input_grad
        steps = dout.shape[0]
        order, out_offset = _slots(steps, ctx.reverse)
        dgi = xp.empty_like(acts)  # (T, 3H, B)
        dgh = xp.empty_like(acts)  # (T, 3H, B)
        dh = dh_n.T.astype(acts.dtype, order="C")  # (H, B)
        w_hh_t = xp.ascontiguousarray(w_hh.T)  # (H, 3H)
        for t in reversed(order):
            prev = t + 1 - out_offset
            dh += dout[t].T
            _, _, dh = ctx.kernels.gru_cell_backward(dh, acts[t], gh[t], hs[prev], dgi_out=dgi[t], dgh_out=dgh[t])
            dh += w_hh_t @ dgh[t]
        dgi2 = _feature_major(dgi.transpose(0, 2, 1), xp)  # (3H, T*B)
        dgh2 = _feature_major(dgh.transpose(0, 2, 1), xp)  # (3H, T*B)
        h_prev = _feature_major(hs[1 - out_offset : 1 - out_offset + steps].transpose(0, 2, 1), xp)  # (H, T*B)
        return (
            (dgi2.T @ w_ih).reshape(ctx.x_shape) if need[0] else None,
            dh.T if need[1] else None,
            dgi2 @ x_fm.T if need[2] else None,
            dgh2 @ h_prev.T if need[3] else None,
            dgi2.sum(axis=1) if ctx.has_bias else None,
            dgh2.sum(axis=1) if ctx.has_bias else None,
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
