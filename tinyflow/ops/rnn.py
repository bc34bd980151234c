"""Recurrent ops: LSTM and GRU cells, and whole-sequence layers computed the cuDNN way.

A sequence op runs one layer in one direction over all T steps as a single autograd node:
- the input projection of every step is one GEMM, W_ih (G*H, I) @ X (I, T*B), before the loop;
- the recurrence (the GEMM W_hh @ h_{t-1} and the fused cell of every step) is one named kernel,
  ``ctx.kernels.lstm_sequence_forward``: on the CPU the NumPy loop of ``tinyflow.kernels.rnn``,
  on a GPU one persistent CUDA kernel for all T steps;
- backward runs ``lstm_sequence_backward`` (the cell backward and W_hh^T dgates of every step),
  then forms dW_ih, dW_hh and dx as three GEMMs over all T*B columns at once.
Inside, arrays are feature-major ((G*H, B) per step) so that each gate is one contiguous block;
the (T, B, H) outputs are transposed views of those buffers. Gate orders follow PyTorch:
LSTM (i, f, g, o), GRU (r, z, n).

Under ``tf.amp.autocast`` the GEMMs of inputs and weights (the input projection, the cells'
recurrent GEMM, the backward GEMMs) run in the autocast dtype; the gates, c and h stay float32
(``_state_dtype``). The sequence ops hand the fused recurrence W_hh in the autocast dtype too
(cast once a call, ``_recurrent_weight``): its product W_hh h_{t-1} then takes half operands, as
tensor cores do (h rounded to W_hh's dtype for the product, the sums in float32;
``tinyflow.kernels.rnn.recurrent_weight``), while the states stay float32. See docs/lstm.md.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.amp import autocast_mode as amp
from tinyflow.autograd.function import Context, Function
from tinyflow.device import array_module
from tinyflow.dtypes import is_half
from tinyflow.device import matmul_array

__all__ = ["LSTMCellFunction", "GRUCellFunction", "LSTMLayer", "GRULayer", "lstm_cell", "gru_cell", "lstm_layer",
           "gru_layer"]

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


def _feature_major(a: Array, xp: Any, dtype: Any = None) -> Array:
    """(T, B, F) -> the (F, T*B) matrix whose column t*B + b is a[t, b], in ``dtype`` if given.

    A view of a C-contiguous ``a`` of that dtype; otherwise one copy, made as a move of
    contiguous runs: of feature rows when the features are contiguous (a ``batch_first`` input,
    (B, T, F) in memory: the (F, T*B) result is then the transpose of a (T*B, F) copy, which a
    GEMM takes as it is), of batch rows when ``a`` is a transposed view of per-step (F, B) blocks
    (``blocks.transpose(0, 2, 1)``, the outputs of the sequence ops). An element-by-element
    transpose of a batch_first input instead costs as much as the layer's GEMMs.
    """
    steps, batch, features = a.shape
    dtype = a.dtype if dtype is None else dtype
    if a.flags.c_contiguous or a.strides[2] == a.itemsize:
        rows = a.astype(dtype, order="C", copy=False).reshape(steps * batch, features)  # (T*B, F)
        return rows.T
    # (F, T, B): a view when ``a`` already has that memory order (the sequence backward's dgates)
    return a.transpose(2, 0, 1).astype(dtype, order="C", copy=False).reshape(features, steps * batch)


def _state_dtype(gemm_dtype: Any) -> Any:
    """The dtype of gates, c and h: float32 when the GEMMs run in half precision (autocast), so
    that the cell state does not lose bits step after step; else the GEMMs' own dtype."""
    return np.dtype(np.float32) if is_half(gemm_dtype) else np.dtype(gemm_dtype)


def _recurrent_weight(w_hh: Array, state: Any) -> Array:
    """W_hh as the sequence kernels take it: in its own dtype where that is half precision and the
    states are float32 (autocast, or a half model: the recurrence's tensor-core products take half
    operands with float32 sums), else in the states' dtype."""
    return w_hh if is_half(w_hh.dtype) and not is_half(state) else w_hh.astype(state, copy=False)


def _gemm(a: Array, b: Array, dtype: Any) -> Array:
    """a @ b in the operands' dtype, the result in ``dtype`` (a copy only when they differ)."""
    return _mm(a, b).astype(dtype, copy=False)


def _mm(a: Array, b: Array) -> Array:
    """a @ b, also for half-precision operands on any device (``matmul_array``).

    A product over one term (``input_size=1``, the time-series LSTMs) is the outer product
    a * b: bit for bit the same, and NumPy's matmul would take its slow non-BLAS loop for it.
    """
    if a.ndim == 2 and b.ndim == 2 and a.shape[1] == 1 and b.shape[0] == 1 and not is_half(a.dtype):
        return a * b
    return matmul_array(array_module(a), a, b)


# --------------------------------------------------------------------------------------------
# Single cells (nn.LSTMCell, nn.GRUCell): one step, one node. The kernels are feature-major, so
# the (B, F) arrays go in and come out as transposed views.
# --------------------------------------------------------------------------------------------


def _operand(a: Array, like: Array) -> Array:
    """``a`` as a GEMM operand next to ``like``: rounded to ``like``'s dtype when that is half
    precision (autocast), else as it is (float32/float64 GEMMs keep NumPy's promotion)."""
    return a.astype(like.dtype) if is_half(like.dtype) and a.dtype != like.dtype else a


class LSTMCellFunction(Function):
    """One LSTM step: (x (B, I), h (B, H), c (B, H)) -> (h', c'), gates (i, f, g, o) in one kernel."""

    @staticmethod
    def forward(ctx: Context, x: Array, h: Array, c: Array, w_ih: Array, w_hh: Array,
                b_ih: Array | None = None, b_hh: Array | None = None) -> tuple[Array, Array]:  # fmt: skip
        hidden = _check_weights("lstm_cell", 4, x, w_ih, w_hh, b_ih, b_hh)
        if x.ndim != 2:
            raise ValueError(f"lstm_cell: input must be (batch, input_size), got {tuple(x.shape)}")
        _check_state("lstm_cell", "h", h, x.shape[0], hidden)
        _check_state("lstm_cell", "c", c, x.shape[0], hidden)
        xp = ctx.xp
        state = _state_dtype(xp.result_type(w_ih.dtype, x.dtype))
        gates = _gemm(w_ih, x.T, state)  # (4H, B)
        gates += _gemm(w_hh, _operand(h.T, w_hh), state)
        if b_ih is not None:
            gates += (b_ih + b_hh)[:, None]
        # Feature-major (H, B) and contiguous: the cell's elementwise loops run several times
        # slower on strided views (a no-op copy when c is the previous step's c' as returned).
        c = xp.ascontiguousarray(c.T, dtype=state)  # (H, B)
        h1, c1, acts = ctx.kernels.lstm_cell_forward(gates, c)  # (H, B) each
        # A private copy of h' lets backward read tanh(c') back as h' / o (a division, not a tanh)
        # while the caller stays free to edit h' in place, as with PyTorch's cell.
        ctx.save_for_backward(x, h, c, w_ih, w_hh, acts, c1, h1.copy())
        ctx.has_bias = b_ih is not None
        return h1.T, c1.T  # (B, H) each

    @staticmethod
    def backward(ctx: Context, dh1: Array, dc1: Array) -> tuple:
        x, h, c, w_ih, w_hh, acts, c1, h1 = ctx.saved_tensors
        need = ctx.needs_input_grad
        xp = ctx.xp
        dh, dc = xp.ascontiguousarray(dh1.T), xp.ascontiguousarray(dc1.T)  # (H, B), see forward
        dgates, dc = ctx.kernels.lstm_cell_backward(dh, dc, acts, c, c1, h=h1)  # (4H, B), (H, B)
        db = dgates.sum(axis=1) if ctx.has_bias else None
        d_ih, d_hh = _operand(dgates, w_ih), _operand(dgates, w_hh)
        return (
            _mm(d_ih.T, w_ih) if need[0] else None,
            _mm(d_hh.T, w_hh) if need[1] else None,
            dc.T if need[2] else None,
            _mm(d_ih, x) if need[3] else None,
            _mm(d_hh, _operand(h, w_hh)) if need[4] else None,
            db,
            db,
        )


class GRUCellFunction(Function):
    """One GRU step: (x (B, I), h (B, H)) -> h', gates (r, z, n) in one kernel."""

    @staticmethod
    def forward(ctx: Context, x: Array, h: Array, w_ih: Array, w_hh: Array,
                b_ih: Array | None = None, b_hh: Array | None = None) -> Array:  # fmt: skip
        hidden = _check_weights("gru_cell", 3, x, w_ih, w_hh, b_ih, b_hh)
        if x.ndim != 2:
            raise ValueError(f"gru_cell: input must be (batch, input_size), got {tuple(x.shape)}")
        _check_state("gru_cell", "h", h, x.shape[0], hidden)
        state = _state_dtype(ctx.xp.result_type(w_ih.dtype, x.dtype))
        gi = _gemm(w_ih, x.T, state)  # (3H, B)
        gh = _gemm(w_hh, _operand(h.T, w_hh), state)  # (3H, B)
        if b_ih is not None:
            gi += b_ih[:, None]
            gh += b_hh[:, None]
        h_state = ctx.xp.ascontiguousarray(h.T, dtype=state)  # (H, B), contiguous as in LSTMCellFunction
        h1, acts = ctx.kernels.gru_cell_forward(gi, gh, h_state)  # (H, B)
        ctx.save_for_backward(x, h_state, w_ih, w_hh, acts, gh)
        ctx.has_bias = b_ih is not None
        return h1.T  # (B, H)

    @staticmethod
    def backward(ctx: Context, dh1: Array) -> tuple:
        x, h, w_ih, w_hh, acts, gh = ctx.saved_tensors  # h (H, B)
        need = ctx.needs_input_grad
        dh1 = ctx.xp.ascontiguousarray(dh1.T)  # (H, B)
        dgi, dgh, dh = ctx.kernels.gru_cell_backward(dh1, acts, gh, h)  # (3H, B), (3H, B), (H, B)
        d_ih, d_hh = _operand(dgi, w_ih), _operand(dgh, w_hh)
        return (
            _mm(d_ih.T, w_ih) if need[0] else None,
            (dh + _mm(w_hh.T, d_hh)).T if need[1] else None,
            _mm(d_ih, x) if need[2] else None,
            _mm(d_hh, _operand(h.T, w_hh)) if need[3] else None,
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
    in slot T). The sequence kernels use the same slots (``tinyflow.kernels.rnn.sequence_slots``).
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


def _dtypes(xp: Any, x: Array, w_ih: Array) -> tuple[Any, Any]:
    """(the dtype of the GEMM operands, the dtype of the recurrence) of a sequence op.

    Outside autocast both are the inputs' dtype; under autocast x and W_ih arrive in half
    precision, the GEMMs run in it and the recurrence (gates, c, h) in float32.
    """
    common = np.dtype(xp.result_type(w_ih.dtype, x.dtype))
    state = _state_dtype(common)
    return (common if is_half(common) else state), state


class LSTMLayer(Function):
    """One LSTM layer over a whole sequence: x (T, B, I) -> (out (T, B, H), h_n (B, H), c_n (B, H)).

    ``reverse=True`` runs from the last step to the first (the backward half of a bidirectional
    layer); out[t] is still the output at time t. h0 / c0 may be None (zeros). Internally
    feature-major: the per-step blocks are (4H, B) and (H, B); the outputs are transposed views
    of those buffers, so a following layer reads them without a copy. Under autocast, out is in
    the autocast dtype and h_n, c_n in float32.
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
        gemm, state = _dtypes(xp, x, w_ih)
        x_fm = _feature_major(x, xp)  # (I, T*B), kept for dW_ih
        # The cuDNN trick: the input projection of all steps is one GEMM, before the recurrence.
        proj = _gemm(w_ih, x_fm, state)  # (4H, T*B)
        if b_ih is not None:
            proj += (b_ih + b_hh)[:, None]
        w_rec = _recurrent_weight(w_hh, state)  # (4H, H)
        # The recurrence of all T steps: acts (T, 4H, B) are the activated gates (cuDNN's reserve
        # space), hs and cs (T+1, H, B) the states, in the slots of _slots.
        acts, hs, cs = ctx.kernels.lstm_sequence_forward(
            proj.reshape(4 * hidden, steps, batch), w_rec,
            None if h0 is None else h0.T, None if c0 is None else c0.T, reverse,
        )  # fmt: skip
        ctx.save_for_backward(x_fm, w_ih, w_rec, acts, hs, cs)
        ctx.x_shape = x.shape
        ctx.reverse = reverse
        ctx.has_bias = b_ih is not None
        ctx.gemm = gemm
        order, out_offset = _slots(steps, reverse)
        last = order[-1] + out_offset
        out = hs[out_offset : out_offset + steps].transpose(0, 2, 1)  # (T, B, H) view
        return out.astype(gemm, copy=False), hs[last].T, cs[last].T

    @staticmethod
    def backward(ctx: Context, dout: Array, dh_n: Array, dc_n: Array) -> tuple:
        xp = ctx.xp
        x_fm, w_ih, w_rec, acts, hs, cs = ctx.saved_tensors
        need = ctx.needs_input_grad
        steps = dout.shape[0]
        dgates, dh0, dc0 = ctx.kernels.lstm_sequence_backward(
            dout.transpose(0, 2, 1), dh_n.T, dc_n.T, w_rec, acts, cs, ctx.reverse, hs=hs
        )  # (T, 4H, B), (H, B), (H, B)
        # Weight and input gradients of all steps at once: three GEMMs over T*B columns.
        dg = _feature_major(dgates.transpose(0, 2, 1), xp)  # (4H, T*B)
        dg_gemm = dg.astype(ctx.gemm, copy=False)
        start = 1 - _slots(steps, ctx.reverse)[1]
        dx = _mm(dg_gemm.T, w_ih).reshape(ctx.x_shape) if need[0] else None
        dw_ih = _mm(dg_gemm, x_fm.T) if need[3] else None
        dw_hh = None
        if need[4]:
            h_prev = _feature_major(hs[start : start + steps].transpose(0, 2, 1), xp, ctx.gemm)  # (H, T*B)
            dw_hh = _mm(dg_gemm, h_prev.T)
        db = dg.sum(axis=1) if ctx.has_bias else None
        return dx, dh0.T if need[1] else None, dc0.T if need[2] else None, dw_ih, dw_hh, db, db


class GRULayer(Function):
    """One GRU layer over a whole sequence: x (T, B, I) -> (out (T, B, H), h_n (B, H)).

    Same scheme as ``LSTMLayer``: one GEMM for the input projections, then the recurrence of all
    steps in one named kernel; h0 may be None (zeros); ``reverse=True`` runs from the last step.
    """

    @staticmethod
    def forward(ctx: Context, x: Array, h0: Array | None, w_ih: Array, w_hh: Array,
                b_ih: Array | None = None, b_hh: Array | None = None,
                reverse: bool = False) -> tuple[Array, Array]:  # fmt: skip
        xp = ctx.xp
        hidden = _check_weights("gru", 3, x, w_ih, w_hh, b_ih, b_hh)
        _check_sequence("gru", x, h0, hidden)
        steps, batch, _ = x.shape
        gemm, state = _dtypes(xp, x, w_ih)
        x_fm = _feature_major(x, xp)  # (I, T*B), kept for dW_ih
        proj = _gemm(w_ih, x_fm, state)  # (3H, T*B): the input projection of all steps, one GEMM
        if b_ih is not None:
            proj += b_ih[:, None]
        w_rec = _recurrent_weight(w_hh, state)  # (3H, H)
        # acts (T, 3H, B) activated gates, gh (T, 3H, B) recurrent pre-activations, hs (T+1, H, B)
        acts, gh, hs = ctx.kernels.gru_sequence_forward(
            proj.reshape(3 * hidden, steps, batch), w_rec, b_hh, None if h0 is None else h0.T, reverse
        )
        ctx.save_for_backward(x_fm, w_ih, w_rec, acts, gh, hs)
        ctx.x_shape = x.shape
        ctx.reverse = reverse
        ctx.has_bias = b_ih is not None
        ctx.gemm = gemm
        order, out_offset = _slots(steps, reverse)
        last = order[-1] + out_offset
        out = hs[out_offset : out_offset + steps].transpose(0, 2, 1)  # (T, B, H) view
        return out.astype(gemm, copy=False), hs[last].T

    @staticmethod
    def backward(ctx: Context, dout: Array, dh_n: Array) -> tuple:
        xp = ctx.xp
        x_fm, w_ih, w_rec, acts, gh, hs = ctx.saved_tensors
        need = ctx.needs_input_grad
        steps = dout.shape[0]
        dgi, dgh, dh0 = ctx.kernels.gru_sequence_backward(
            dout.transpose(0, 2, 1), dh_n.T, w_rec, acts, gh, hs, ctx.reverse
        )  # (T, 3H, B), (T, 3H, B), (H, B)
        dgi2 = _feature_major(dgi.transpose(0, 2, 1), xp)  # (3H, T*B)
        dgh2 = _feature_major(dgh.transpose(0, 2, 1), xp)  # (3H, T*B)
        dgi_gemm = dgi2.astype(ctx.gemm, copy=False)
        start = 1 - _slots(steps, ctx.reverse)[1]
        dw_hh = None
        if need[3]:
            h_prev = _feature_major(hs[start : start + steps].transpose(0, 2, 1), xp, ctx.gemm)  # (H, T*B)
            dw_hh = _mm(dgh2.astype(ctx.gemm, copy=False), h_prev.T)
        return (
            _mm(dgi_gemm.T, w_ih).reshape(ctx.x_shape) if need[0] else None,
            dh0.T if need[1] else None,
            _mm(dgi_gemm, x_fm.T) if need[2] else None,
            dw_hh,
            dgi2.sum(axis=1) if ctx.has_bias else None,
            dgh2.sum(axis=1) if ctx.has_bias else None,
        )


# The entry points on Tensors, used by nn.LSTM, nn.GRU and the cells (PyTorch's F has no
# recurrent functions, so neither has tinyflow's). Under autocast they cast the GEMM operands
# that are inputs (x and the weights, W_hh too: the sequence ops' recurrence multiplies half
# W_hh with float32 sums) with the differentiable Cast, once a call, so float32 parameters
# receive float32 gradients.
def lstm_cell(x: Any, h: Any, c: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None) -> tuple:
    """(h', c') of one LSTM step on Tensors; see ``LSTMCellFunction``."""
    x, w_ih, w_hh = amp.autocast_inputs(x, w_ih, w_hh)
    return LSTMCellFunction.apply(x, h, c, w_ih, w_hh, b_ih, b_hh)


def gru_cell(x: Any, h: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None) -> Any:
    """h' of one GRU step on Tensors; see ``GRUCellFunction``."""
    x, w_ih, w_hh = amp.autocast_inputs(x, w_ih, w_hh)
    return GRUCellFunction.apply(x, h, w_ih, w_hh, b_ih, b_hh)


def lstm_layer(x: Any, h0: Any, c0: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None,
               reverse: bool = False) -> tuple:  # fmt: skip
    """(out, h_n, c_n) of one LSTM layer over x (T, B, I) on Tensors; see ``LSTMLayer``."""
    x, w_ih, w_hh = amp.autocast_inputs(x, w_ih, w_hh)
    return LSTMLayer.apply(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse=reverse)


def gru_layer(x: Any, h0: Any, w_ih: Any, w_hh: Any, b_ih: Any = None, b_hh: Any = None,
              reverse: bool = False) -> tuple:  # fmt: skip
    """(out, h_n) of one GRU layer over x (T, B, I) on Tensors; see ``GRULayer``."""
    x, w_ih, w_hh = amp.autocast_inputs(x, w_ih, w_hh)
    return GRULayer.apply(x, h0, w_ih, w_hh, b_ih, b_hh, reverse=reverse)
