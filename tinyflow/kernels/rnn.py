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
"""
from __future__ import annotations

from typing import Any

from tinyflow.device import array_module

__all__ = [
    "lstm_cell_forward",
    "lstm_cell_backward",
    "gru_cell_forward",
    "gru_cell_backward",
]

Array = Any


def _sigmoid_(x: Array, xp: Any) -> Array:
    """In place: sigmoid(x) = 0.5 * tanh(x / 2) + 0.5, stable for any x (no exp overflow)."""
    x *= 0.5
    xp.tanh(x, out=x)
    x *= 0.5
    x += 0.5
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
    i, f, g, o = (gates[k * hidden : (k + 1) * hidden] for k in range(4))
    _sigmoid_(gates[: 2 * hidden], xp)  # i and f are adjacent: one call
    _sigmoid_(o, xp)
    xp.tanh(g, out=g)
    xp.multiply(f, c_prev, out=c_out)
    xp.multiply(i, g, out=h_out)  # h_out as scratch for i * g
    c_out += h_out
    xp.tanh(c_out, out=h_out)
    h_out *= o
    return h_out, c_out, gates


def lstm_cell_backward(
    dh: Array,
    dc: Array | None,
    acts: Array,
    c_prev: Array,
    c: Array,
    dgates_out: Array | None = None,
) -> tuple[Array, Array]:
    """Gradients of one LSTM step: (dgates (4H, B) w.r.t. the pre-activations, dc_prev (H, B)).

    ``dh`` and ``dc`` (H, B) are the gradients arriving at h and c (``dc`` None means zero);
    ``acts`` are the activated gates saved by the forward, ``c`` the cell state it produced.
    ``dh`` is not modified. The caller forms dh_prev = W_hh^T dgates (a GEMM, not the cell's job).
    """
    xp = array_module(acts)
    hidden = c.shape[0]
    if dgates_out is None:
        dgates_out = xp.empty_like(acts)
    i, f, g, o = (acts[k * hidden : (k + 1) * hidden] for k in range(4))
    di, df, dg, do = (dgates_out[k * hidden : (k + 1) * hidden] for k in range(4))

    tanh_c = xp.tanh(c)
    xp.multiply(dh, tanh_c, out=do)  # gradient at o (after its sigmoid)
    # dc_total = dc + dh * o * (1 - tanh(c)^2)
    _tanh_grad(tanh_c, tanh_c, xp)
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
    scratch = xp.empty_like(acts[: 2 * hidden])
    dgates_out[: 2 * hidden] *= _sigmoid_grad(acts[: 2 * hidden], scratch, xp)
    do *= _sigmoid_grad(o, scratch[:hidden], xp)
    dg *= _tanh_grad(g, scratch[:hidden], xp)
    return dgates_out, dc_prev


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
    return h_out, gi


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
    dh_prev = dh * z
    return dgi_out, dgh_out, dh_prev
