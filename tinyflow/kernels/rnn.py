"""Fused LSTM and GRU cell kernels: one call for all gate non-linearities of one time step.

The recurrent ops (``tinyflow/ops/rnn.py``) do the GEMMs themselves (one big GEMM for the input
projection of every time step, one small GEMM per step for the recurrence) and hand the gate
pre-activations to these kernels. Gate order follows PyTorch: LSTM (i, f, g, o), GRU (r, z, n).

Layout: feature-major, (G*H, B) for gates and (H, B) for states. Each gate is then one contiguous
block (NumPy's elementwise loops run several times faster on contiguous memory than on column
slices of a (B, 4H) array), and the recurrent GEMM W_hh @ h has the shape BLAS runs fastest.

Each kernel writes its large results in place where the caller owns the buffer (the gate
pre-activations become the activated gates, which is exactly what backward needs), so the
sequence op can preallocate one buffer for all time steps, as cuDNN's "reserve space" does.

The ``*_sequence_*`` kernels run the whole recurrence of one layer in one direction: the loop
over time steps, with the recurrent GEMM and the fused cell of every step. Here they are that
loop in NumPy (one BLAS GEMM and one cell call per step); the CUDA twins run it as one
persistent kernel per call, so the number of launches does not grow with the sequence length.
State buffers are (T+1, H, B) and step t of a sequence (``reverse`` or not) reads and writes the
slots given by ``sequence_slots``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tinyflow.dtypes import is_half
from tinyflow.kernels._cpu import array_module

__all__ = [
    "lstm_cell_forward",
    "lstm_cell_backward",
    "gru_cell_forward",
    "gru_cell_backward",
    "lstm_sequence_forward",
    "lstm_sequence_backward",
    "gru_sequence_forward",
    "gru_sequence_backward",
]

Array = Any


def _sigmoid_(x: Array, xp: Any) -> Array:
    """In place: sigmoid(x) = 1 / (1 + exp(-x)), PyTorch's formula.

    Accurate to a few ulps relative to the result even where it is tiny (0.5 * tanh(x / 2) + 0.5
    is not: it cancels for x << 0), and on NumPy about 1.5x faster, exp being cheaper than tanh.
    For x < -88 (float32) exp(-x) overflows to inf and the result is the right limit, 0: callers
    run it under ``np.errstate(over="ignore")`` (once per sequence, not once per call).
    """
    xp.negative(x, out=x)
    xp.exp(x, out=x)
    x += 1.0
    xp.reciprocal(x, out=x)
    return x


def _sigmoid_grad(y: Array, out: Array, xp: Any) -> Array:
    """out = y * (1 - y): the derivative of the sigmoid at output y, written into out."""
    xp.subtract(1.0, y, out=out)
    out *= y
    return out


def _tanh_grad(y: Array, out: Array, xp: Any) -> Array:
    """out = 1 - y**2: the derivative of tanh at output y, written into out (may be y itself)."""
    xp.multiply(y, y, out=out)
    xp.subtract(1.0, out, out=out)
    return out


def lstm_cell_forward(
    gates: Array, c_prev: Array, h_out: Array | None = None, c_out: Array | None = None
) -> tuple[Array, Array, Array]:
    """One LSTM step from the gate pre-activations ``gates`` (4H, B) = W_ih x + b_ih + W_hh h + b_hh.

    Feature-major layout: rows are gate units, columns the batch, so each gate is one contiguous
    block and ``c_prev``, ``h_out``, ``c_out`` are (H, B). ``gates`` is overwritten with the
    activated gates (i, f, g, o), which backward needs. Returns (h, c, gates).
    c = f * c_prev + i * g;  h = o * tanh(c).
    """
    xp = array_module(gates)
    hidden = gates.shape[0] // 4
    if gates.ndim != 2 or gates.shape[0] != 4 * hidden or tuple(c_prev.shape) != (hidden, gates.shape[1]):
        raise ValueError(
            f"lstm_cell_forward: gates {tuple(gates.shape)} must be (4H, B) with c_prev {tuple(c_prev.shape)} = (H, B)"
        )
    if h_out is None:
        h_out = xp.empty_like(c_prev)
    if c_out is None:
        c_out = xp.empty_like(c_prev)
    with np.errstate(over="ignore"):
        _lstm_step_forward(gates, c_prev, h_out, c_out, hidden, xp)
    return h_out, c_out, gates


def _lstm_step_forward(gates: Array, c_prev: Array, h_out: Array, c_out: Array, hidden: int, xp: Any) -> None:
    """The arithmetic of ``lstm_cell_forward``, unchecked, under ``np.errstate(over="ignore")``."""
    i, f = gates[:hidden], gates[hidden : 2 * hidden]
    g, o = gates[2 * hidden : 3 * hidden], gates[3 * hidden :]
    _sigmoid_(gates[: 2 * hidden], xp)  # i and f are adjacent: one call
    _sigmoid_(o, xp)
    xp.tanh(g, out=g)
    xp.multiply(f, c_prev, out=c_out)
    xp.multiply(i, g, out=h_out)  # h_out as scratch for i * g
    c_out += h_out
    xp.tanh(c_out, out=h_out)
    h_out *= o


def lstm_cell_backward(
    dh: Array,
    dc: Array | None,
    acts: Array,
    c_prev: Array,
    c: Array,
    dgates_out: Array | None = None,
    h: Array | None = None,
) -> tuple[Array, Array]:
    """Gradients of one LSTM step: (dgates (4H, B) w.r.t. the pre-activations, dc_prev (H, B)).

    ``dh`` and ``dc`` (H, B) are the gradients arriving at h and c (``dc`` None means zero);
    ``acts`` are the activated gates saved by the forward, ``c`` the cell state it produced.
    ``dh`` is not modified. The caller forms dh_prev = W_hh^T dgates (a GEMM, not the cell's job).
    ``h`` (H, B), the step's output, is optional: given, tanh(c) is read back as h / o, as in
    ``lstm_sequence_backward``.
    """
    xp = array_module(acts)
    hidden = c.shape[0]
    if dgates_out is None:
        dgates_out = xp.empty_like(acts)
    known = None if h is None else _tanh_from_output(h, acts[3 * hidden :], xp)
    dc_prev = _lstm_step_backward(
        dh, dc, acts, c_prev, c, dgates_out, hidden, xp, xp.empty_like(c), xp.empty_like(acts[: 2 * hidden]), known
    )
    return dgates_out, dc_prev


def _tanh_from_output(h: Array, o: Array, xp: Any) -> Array:
    """tanh(c) = h / o, a new array, from the output h = o * tanh(c) and the output gate o (0
    where o is 0: then h is 0 too, and tanh(c) does not matter, both its uses being scaled by o)."""
    out = xp.maximum(o, xp.finfo(o.dtype).tiny)
    return xp.divide(h, out, out=out)


def _lstm_step_backward(dh: Array, dc: Array | None, acts: Array, c_prev: Array, c: Array, dgates_out: Array,
                        hidden: int, xp: Any, tanh_c: Array, scratch: Array,
                        known_tanh_c: Array | None = None) -> Array:  # fmt: skip
    """The arithmetic of ``lstm_cell_backward``, unchecked, in caller-owned buffers: ``tanh_c``
    (H, B) becomes dc_prev (returned), ``scratch`` is (2H, B); neither may alias an input.
    ``known_tanh_c``, if given, is tanh(c) already at hand (then ``c`` is not read)."""
    i, f = acts[:hidden], acts[hidden : 2 * hidden]
    g, o = acts[2 * hidden : 3 * hidden], acts[3 * hidden :]
    di, df = dgates_out[:hidden], dgates_out[hidden : 2 * hidden]
    dg, do = dgates_out[2 * hidden : 3 * hidden], dgates_out[3 * hidden :]

    if known_tanh_c is None:
        known_tanh_c = xp.tanh(c, out=tanh_c)
    xp.multiply(dh, known_tanh_c, out=do)  # gradient at o (after its sigmoid)
    # dc_total = dc + dh * o * (1 - tanh(c)^2)
    _tanh_grad(known_tanh_c, tanh_c, xp)
    tanh_c *= o
    tanh_c *= dh
    if dc is not None:
        tanh_c += dc
    dc_total = tanh_c
    xp.multiply(dc_total, g, out=di)
    xp.multiply(dc_total, c_prev, out=df)
    xp.multiply(dc_total, i, out=dg)
    dc_prev = xp.multiply(dc_total, f, out=dc_total)

    # Chain through the activations: sigmoid for i, f, o and tanh for g.
    dgates_out[: 2 * hidden] *= _sigmoid_grad(acts[: 2 * hidden], scratch, xp)
    do *= _sigmoid_grad(o, scratch[:hidden], xp)
    dg *= _tanh_grad(g, scratch[:hidden], xp)
    return dc_prev


def gru_cell_forward(
    gi: Array, gh: Array, h_prev: Array, h_out: Array | None = None
) -> tuple[Array, Array]:
    """One GRU step from gi = W_ih x + b_ih and gh = W_hh h + b_hh, both (3H, B), gates (r, z, n).

    Feature-major like the LSTM kernels: h_prev and h_out are (H, B).
    r = sigmoid(gi_r + gh_r); z = sigmoid(gi_z + gh_z); n = tanh(gi_n + r * gh_n);
    h = (1 - z) * n + z * h_prev. ``gi`` is overwritten with the activated gates (r, z, n); ``gh``
    is left intact (backward needs gh_n). Returns (h, gi).
    """
    xp = array_module(gi)
    hidden = gi.shape[0] // 3
    if gi.ndim != 2 or gi.shape != gh.shape or gi.shape[0] != 3 * hidden or tuple(h_prev.shape) != (hidden, gi.shape[1]):
        raise ValueError(
            f"gru_cell_forward: gi {tuple(gi.shape)} and gh {tuple(gh.shape)} must both be (3H, B) "
            f"with h_prev {tuple(h_prev.shape)} = (H, B)"
        )
    if h_out is None:
        h_out = xp.empty_like(h_prev)
    with np.errstate(over="ignore"):
        _gru_step_forward(gi, gh, h_prev, h_out, hidden, xp)
    return h_out, gi


def _gru_step_forward(gi: Array, gh: Array, h_prev: Array, h_out: Array, hidden: int, xp: Any) -> None:
    """The arithmetic of ``gru_cell_forward``, unchecked, under ``np.errstate(over="ignore")``."""
    rz = gi[: 2 * hidden]
    rz += gh[: 2 * hidden]
    _sigmoid_(rz, xp)
    r, z, n = gi[:hidden], gi[hidden : 2 * hidden], gi[2 * hidden :]
    xp.multiply(r, gh[2 * hidden :], out=h_out)  # h_out as scratch for r * gh_n
    n += h_out
    xp.tanh(n, out=n)
    # h = n + z * (h_prev - n)
    xp.subtract(h_prev, n, out=h_out)
    h_out *= z
    h_out += n


def gru_cell_backward(
    dh: Array,
    acts: Array,
    gh: Array,
    h_prev: Array,
    dgi_out: Array | None = None,
    dgh_out: Array | None = None,
) -> tuple[Array, Array, Array]:
    """Gradients of one GRU step: (dgi (3H, B), dgh (3H, B), the direct part of dh_prev (H, B)).

    ``acts`` are the activated gates (r, z, n) saved by the forward and ``gh`` the recurrent
    pre-activations. The caller adds W_hh^T dgh to the returned dh_prev (= dh * z).
    """
    xp = array_module(acts)
    hidden = h_prev.shape[0]
    if dgi_out is None:
        dgi_out = xp.empty_like(acts)
    if dgh_out is None:
        dgh_out = xp.empty_like(acts)
    _gru_step_backward(dh, acts, gh, h_prev, dgi_out, dgh_out, hidden, xp)
    dh_prev = dh * acts[hidden : 2 * hidden]  # dh * z
    return dgi_out, dgh_out, dh_prev


def _gru_step_backward(dh: Array, acts: Array, gh: Array, h_prev: Array, dgi_out: Array, dgh_out: Array,
                       hidden: int, xp: Any) -> None:  # fmt: skip
    """The gate gradients of ``gru_cell_backward``, unchecked, written into dgi_out and dgh_out."""
    r, z, n = acts[:hidden], acts[hidden : 2 * hidden], acts[2 * hidden :]
    gh_n = gh[2 * hidden :]
    dr, dz, dn = dgi_out[:hidden], dgi_out[hidden : 2 * hidden], dgi_out[2 * hidden :]

    # dn_pre = dh * (1 - z) * (1 - n^2)
    xp.multiply(dh, z, out=dn)
    xp.subtract(dh, dn, out=dn)
    dn *= _tanh_grad(n, dgh_out[2 * hidden :], xp)
    # dz_pre = dh * (h_prev - n) * z (1 - z)
    xp.subtract(h_prev, n, out=dz)
    dz *= dh
    dz *= _sigmoid_grad(z, dgh_out[hidden : 2 * hidden], xp)
    # dr_pre = dn_pre * gh_n * r (1 - r)
    xp.multiply(dn, gh_n, out=dr)
    dr *= _sigmoid_grad(r, dgh_out[:hidden], xp)
    dgh_out[: 2 * hidden] = dgi_out[: 2 * hidden]
    xp.multiply(dn, r, out=dgh_out[2 * hidden :])


# --------------------------------------------------------------------------------------------
# Whole sequences: one layer, one direction, all T steps in one call
# --------------------------------------------------------------------------------------------


def sequence_slots(steps: int, reverse: bool) -> tuple[range, int]:
    """Time steps in processing order and the state-slot offset of each step's output.

    States live in a (T+1, H, B) buffer: forward, step t reads slot t and writes slot t+1 (the
    initial state sits in slot 0); reverse, step t reads slot t+1 and writes slot t (initial state
    in slot T). Either way the outputs are one contiguous slice and so are the previous states.
    """
    if reverse:
        return range(steps - 1, -1, -1), 0
    return range(steps), 1


def _check_sequence(name: str, gates: int, proj: Array, w_hh: Array) -> tuple[int, int, int]:
    """(T, H, B) of a (G*H, T, B) projection and a (G*H, H) recurrent weight, or a ValueError."""
    if proj.ndim != 3 or w_hh.ndim != 2 or w_hh.shape[0] != gates * w_hh.shape[1] or proj.shape[0] != w_hh.shape[0]:
        raise ValueError(
            f"{name}: proj {tuple(proj.shape)} must be ({gates}H, T, B) with w_hh {tuple(w_hh.shape)} = ({gates}H, H)"
        )
    return proj.shape[1], w_hh.shape[1], proj.shape[2]


def recurrent_weight(w_hh: Array, dtype: Any, xp: Any) -> tuple[Array, Any]:
    """(W_hh as the recurrence's product uses it, the dtype its other operand is rounded to).

    Under autocast the sequence ops hand over half W_hh with float32 data (the GPU's tensor-core
    kernels take both operands of the product in half precision, and keep the states and the sums
    in float32): W_hh is widened once (exactly) and h (forward) or the gate gradients (backward)
    are rounded to its dtype before each product, whose exact products are then summed in
    float32, as the tensor cores do. Otherwise W_hh in the data's dtype and no rounding.
    """
    if is_half(w_hh.dtype) and not is_half(dtype):
        return w_hh.astype(dtype), w_hh.dtype
    return w_hh.astype(dtype, copy=False), None


def operand(x: Array, rounding: Any) -> Array:
    """``x`` rounded to ``rounding`` and back (None: ``x`` itself); see ``recurrent_weight``."""
    return x if rounding is None else x.astype(rounding).astype(x.dtype)


def lstm_sequence_forward(
    proj: Array, w_hh: Array, h0: Array | None, c0: Array | None, reverse: bool = False
) -> tuple[Array, Array, Array]:
    """All T steps of one LSTM layer: returns (acts (T, 4H, B), hs (T+1, H, B), cs (T+1, H, B)).

    ``proj`` (4H, T, B) holds W_ih x_t + b_ih + b_hh of every step (the op's one big GEMM);
    ``w_hh`` (4H, H); ``h0``, ``c0`` (H, B) or None for zeros. Step t adds W_hh h_{t-1} and runs
    the fused cell; ``acts[t]`` keeps its activated gates (cuDNN's reserve space), ``hs``/``cs``
    the states in the slots of ``sequence_slots``. Without h0 the first step skips the GEMM.
    """
    xp = array_module(proj)
    steps, hidden, batch = _check_sequence("lstm_sequence_forward", 4, proj, w_hh)
    acts = xp.empty((steps, 4 * hidden, batch), dtype=proj.dtype)  # (T, 4H, B) per-step blocks
    hs = xp.empty((steps + 1, hidden, batch), dtype=proj.dtype)  # (T+1, H, B)
    cs = xp.empty_like(hs)
    order, out_offset = sequence_slots(steps, reverse)
    first = order[0]
    init = first + 1 - out_offset
    hs[init] = 0 if h0 is None else h0
    cs[init] = 0 if c0 is None else c0
    w, rounding = recurrent_weight(w_hh, proj.dtype, xp)
    with np.errstate(over="ignore"):
        for t in order:
            prev, new = t + 1 - out_offset, t + out_offset
            gates = acts[t]
            if t != first or h0 is not None:
                xp.matmul(w, operand(hs[prev], rounding), out=gates)  # the only GEMM inside the loop
                gates += proj[:, t]
            else:
                gates[...] = proj[:, t]
            # gates become the activated gates, kept for backward.
            _lstm_step_forward(gates, cs[prev], hs[new], cs[new], hidden, xp)
    return acts, hs, cs


def lstm_sequence_backward(
    dout: Array,
    dh_n: Array | None,
    dc_n: Array | None,
    w_hh: Array,
    acts: Array,
    cs: Array,
    reverse: bool = False,
    hs: Array | None = None,
) -> tuple[Array, Array, Array]:
    """The recurrence of ``lstm_sequence_forward`` backwards: (dgates (T, 4H, B), dh0, dc0 (H, B)).

    ``dout`` (T, H, B) is the gradient of the outputs h_t, ``dh_n``/``dc_n`` (H, B) those of the
    final states (None means zero); ``acts`` and ``cs`` are what the forward returned. Step by
    step in reverse: the fused cell backward, then dh_{t-1} = W_hh^T dgates_t (one GEMM).
    The caller forms dW_ih, dW_hh and dx from ``dgates`` with three GEMMs over all steps.

    ``hs``, the forward's hidden states, is optional: given, tanh(c_t) is read back as h_t / o_t,
    one division over all steps instead of a tanh per step (on NumPy tanh costs some 30 times
    a multiplication; the result agrees to float rounding). Where o_t is 0 (a saturated gate)
    the quotient is 0, and tanh(c_t) does not matter there: both its uses are scaled by o_t.
    """
    xp = array_module(acts)
    steps = acts.shape[0]
    order, out_offset = sequence_slots(steps, reverse)
    # (T, 4H, B), stored gate-major: (4H, T, B) in memory, so that the caller's GEMMs over all
    # steps read it as the (4H, T*B) matrix they need without a copy.
    dgates = xp.empty((acts.shape[1], steps, acts.shape[2]), dtype=acts.dtype).transpose(1, 0, 2)
    # the running gradient w.r.t. the current h, (H, B)
    dh = xp.zeros_like(cs[0]) if dh_n is None else dh_n.astype(acts.dtype, order="C")
    dc = dc_n
    w, rounding = recurrent_weight(w_hh, acts.dtype, xp)
    w_hh_t = xp.ascontiguousarray(w.T)  # (H, 4H): BLAS runs this GEMM faster than on the view
    hidden = cs.shape[1]
    tanh_cs = None
    if hs is not None:  # (T, H, B): tanh(c_t) = h_t / o_t, see above
        tanh_cs = _tanh_from_output(hs[out_offset : out_offset + steps], acts[:, 3 * hidden :], xp)
    # Buffers for all steps: dc_prev alternates between two, as step t reads the one t+1 wrote.
    dc_bufs = (xp.empty_like(dh), xp.empty_like(dh))
    scratch = xp.empty_like(acts[0, : 2 * hidden])  # (2H, B)
    for k, t in enumerate(reversed(order)):
        prev, new = t + 1 - out_offset, t + out_offset
        dh += dout[t]
        known = None if tanh_cs is None else tanh_cs[t]
        dc = _lstm_step_backward(dh, dc, acts[t], cs[prev], cs[new], dgates[t], hidden, xp, dc_bufs[k % 2], scratch,
                                 known)  # fmt: skip
        xp.matmul(w_hh_t, operand(dgates[t], rounding), out=dh)  # dh_prev
    return dgates, dh, dc


def gru_sequence_forward(
    proj: Array, w_hh: Array, b_hh: Array | None, h0: Array | None, reverse: bool = False
) -> tuple[Array, Array, Array]:
    """All T steps of one GRU layer: returns (acts (T, 3H, B), gh (T, 3H, B), hs (T+1, H, B)).

    ``proj`` (3H, T, B) holds W_ih x_t + b_ih of every step; ``w_hh`` (3H, H), ``b_hh`` (3H,) or
    None, ``h0`` (H, B) or None for zeros. Step t forms gh_t = W_hh h_{t-1} + b_hh (kept: the
    backward needs gh_n) and runs the fused cell; ``acts[t]`` keeps the activated gates (r, z, n).
    """
    xp = array_module(proj)
    steps, hidden, batch = _check_sequence("gru_sequence_forward", 3, proj, w_hh)
    acts = xp.empty((steps, 3 * hidden, batch), dtype=proj.dtype)  # (T, 3H, B) per-step blocks
    gh = xp.empty_like(acts)  # recurrent pre-activations of every step
    hs = xp.empty((steps + 1, hidden, batch), dtype=proj.dtype)  # (T+1, H, B)
    order, out_offset = sequence_slots(steps, reverse)
    hs[order[0] + 1 - out_offset] = 0 if h0 is None else h0
    bias = None if b_hh is None else b_hh[:, None]  # (3H, 1)
    w, rounding = recurrent_weight(w_hh, proj.dtype, xp)
    with np.errstate(over="ignore"):
        for t in order:
            prev, new = t + 1 - out_offset, t + out_offset
            xp.matmul(w, operand(hs[prev], rounding), out=gh[t])
            if bias is not None:
                gh[t] += bias
            acts[t] = proj[:, t]
            _gru_step_forward(acts[t], gh[t], hs[prev], hs[new], hidden, xp)
    return acts, gh, hs


def gru_sequence_backward(
    dout: Array,
    dh_n: Array | None,
    w_hh: Array,
    acts: Array,
    gh: Array,
    hs: Array,
    reverse: bool = False,
) -> tuple[Array, Array, Array]:
    """The recurrence of ``gru_sequence_forward`` backwards: (dgi, dgh (T, 3H, B), dh0 (H, B)).

    ``dout`` (T, H, B) and ``dh_n`` (H, B, None means zero) are the gradients of the outputs and
    of the final state; ``acts``, ``gh``, ``hs`` what the forward returned. dgi are the gradients
    of the input pre-activations, dgh those of the recurrent ones (W_hh h + b_hh).
    """
    xp = array_module(acts)
    steps = acts.shape[0]
    order, out_offset = sequence_slots(steps, reverse)
    # (T, 3H, B) each, stored gate-major as in lstm_sequence_backward: the caller's GEMMs over all
    # steps read them as (3H, T*B) matrices without a copy.
    dgi = xp.empty((acts.shape[1], steps, acts.shape[2]), dtype=acts.dtype).transpose(1, 0, 2)
    dgh = xp.empty((acts.shape[1], steps, acts.shape[2]), dtype=acts.dtype).transpose(1, 0, 2)
    dh = xp.zeros_like(hs[0]) if dh_n is None else dh_n.astype(acts.dtype, order="C")  # (H, B)
    w, rounding = recurrent_weight(w_hh, acts.dtype, xp)
    w_hh_t = xp.ascontiguousarray(w.T)  # (H, 3H)
    hidden = hs.shape[1]
    recurrent = xp.empty_like(dh)  # W_hh^T dgh_t of each step, (H, B)
    for t in reversed(order):
        prev = t + 1 - out_offset
        dh += dout[t]
        _gru_step_backward(dh, acts[t], gh[t], hs[prev], dgi[t], dgh[t], hidden, xp)
        dh *= acts[t, hidden : 2 * hidden]  # dh_prev = dh * z + W_hh^T dgh_t
        dh += xp.matmul(w_hh_t, operand(dgh[t], rounding), out=recurrent)
    return dgi, dgh, dh
