"""Recurrent layers with PyTorch's signatures, parameter names and layouts: LSTM, GRU and cells.

``nn.LSTM`` / ``nn.GRU`` run each layer and direction as one sequence op (``tinyflow.ops.rnn``:
one GEMM for the input projection of all steps, then the whole recurrence in one named kernel,
a single persistent kernel on a GPU). Under ``tf.amp.autocast`` their GEMMs run in half
precision and the recurrent state in float32; the parameters stay float32.
Parameters are ``weight_ih_l{k}`` (G*H, in), ``weight_hh_l{k}`` (G*H, H), ``bias_ih_l{k}``,
``bias_hh_l{k}`` (G*H,), with ``_reverse`` for the backward direction, so a PyTorch state_dict
loads as it is.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

from tinyflow.nn import functional as F
from tinyflow.nn import init
from tinyflow.nn.modules.module import Module
from tinyflow.nn.parameter import Parameter
from tinyflow.nn.utils.rnn import PackedSequence, _unpack_sorted
from tinyflow.ops.rnn import gru_cell, gru_layer, lstm_cell, lstm_layer
from tinyflow.tensor import Tensor, cat, empty, stack, zeros

__all__ = ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]


class _RNNBase(Module):
    """Parameters and the layer/direction loop shared by LSTM and GRU."""

    _gates = 0  # gate blocks per layer: 4 for the LSTM, 3 for the GRU
    _num_states = 1  # states per layer: (h, c) for the LSTM, h for the GRU

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:  # fmt: skip
        super().__init__()
        name = type(self).__name__
        if input_size < 1 or hidden_size < 1 or num_layers < 1:
            raise ValueError(
                f"{name}: input_size ({input_size}), hidden_size ({hidden_size}) and num_layers ({num_layers}) must be >= 1"
            )
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{name}: dropout must be in [0, 1], got {dropout}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                f"{name}: dropout={dropout} acts between layers, so it does nothing with num_layers=1",
                stacklevel=2,
            )
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional = bidirectional
        self.num_directions = 2 if bidirectional else 1
        rows = self._gates * hidden_size
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * self.num_directions
            for suffix in self._suffixes():
                setattr(self, f"weight_ih_l{layer}{suffix}", Parameter(empty(rows, layer_input, device=device, dtype=dtype)))
                setattr(self, f"weight_hh_l{layer}{suffix}", Parameter(empty(rows, hidden_size, device=device, dtype=dtype)))
                if bias:
                    setattr(self, f"bias_ih_l{layer}{suffix}", Parameter(empty(rows, device=device, dtype=dtype)))
                    setattr(self, f"bias_hh_l{layer}{suffix}", Parameter(empty(rows, device=device, dtype=dtype)))
        self.reset_parameters()

    def _suffixes(self) -> tuple[str, ...]:
        return ("", "_reverse")[: self.num_directions]

    def reset_parameters(self) -> None:
        """PyTorch's initialisation: every weight and bias uniform in (-1/sqrt(H), 1/sqrt(H))."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def flatten_parameters(self) -> None:
        """A no-op kept for PyTorch code that calls it: the weights are used where they are."""

    def _weights(self, layer: int, direction: int) -> tuple[Any, Any, Any, Any]:
        suffix = self._suffixes()[direction]
        get = self._parameters.get
        return (
            get(f"weight_ih_l{layer}{suffix}"),
            get(f"weight_hh_l{layer}{suffix}"),
            get(f"bias_ih_l{layer}{suffix}"),
            get(f"bias_hh_l{layer}{suffix}"),
        )

    def _run_layer(self, x: Tensor, states: tuple, weights: tuple, reverse: bool) -> tuple:
        raise NotImplementedError

    def _forward(self, input: Tensor, hx: tuple | None) -> tuple[Tensor, tuple[Tensor, ...]]:  # noqa: A002
        """Run all layers and directions; ``hx`` holds (L*D, B, H) initial states or is None."""
        name = type(self).__name__
        packed = input if isinstance(input, PackedSequence) else None
        lengths = None
        if packed is not None:  # each sequence runs to its own length (sorted longest first)
            if packed.data.ndim != 2 or packed.data.shape[-1] != self.input_size:
                raise ValueError(f"{name}: packed input data must be (sum of lengths, {self.input_size}), got "
                                 f"{tuple(packed.data.shape)}")
            x, lengths = _unpack_sorted(packed)  # (T, B, I)
            batched = True
            if hx is not None and packed.sorted_indices is not None:
                hx = tuple(h[:, packed.sorted_indices] for h in hx)
        else:
            if input.ndim not in (2, 3):
                raise ValueError(
                    f"{name}: input must be (seq_len, batch, input_size), (batch, seq_len, input_size) with "
                    f"batch_first=True, or unbatched (seq_len, input_size); got shape {input.shape}"
                )
            if input.shape[-1] != self.input_size:
                raise ValueError(f"{name}: input has {input.shape[-1]} features, the layer expects input_size={self.input_size}")
            batched = input.ndim == 3
            x = input if batched else input.unsqueeze(1)
            if self.batch_first and batched:
                x = x.transpose(0, 1)  # (T, B, I)
        batch = x.shape[1]
        expected = (self.num_layers * self.num_directions, batch, self.hidden_size)
        if hx is not None:
            hx = tuple(h if batched else h.unsqueeze(1) for h in hx)
            for h in hx:
                if h.shape != expected:
                    raise ValueError(f"{name}: initial state has shape {h.shape}, expected (num_layers * num_directions, batch, hidden_size) = {expected}")
        finals: list[list[Tensor]] = [[] for _ in range(self._num_states)]
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self.num_directions):
                index = layer * self.num_directions + direction
                states = (None,) * self._num_states if hx is None else tuple(h[index] for h in hx)
                if lengths is None:
                    out, *last = self._run_layer(x, states, self._weights(layer, direction), reverse=direction == 1)
                else:
                    out, *last = self._run_packed(x, lengths, states, self._weights(layer, direction), direction == 1)
                outputs.append(out)
                for store, state in zip(finals, last):
                    store.append(state)
            x = outputs[0] if self.num_directions == 1 else cat(outputs, dim=2)  # (T, B, D*H)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, training=True)
        finals_t = tuple(stack(store, dim=0) for store in finals)  # (L*D, B, H) each
        if packed is not None:
            sizes = packed.batch_sizes.numpy()
            data = cat([x[t, :int(n)] for t, n in enumerate(sizes)])
            if packed.unsorted_indices is not None:
                finals_t = tuple(h[:, packed.unsorted_indices] for h in finals_t)
            return PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices), finals_t
        if self.batch_first and batched:
            x = x.transpose(0, 1)  # (B, T, D*H)
        if not batched:
            x = x.squeeze(1)
            finals_t = tuple(h.squeeze(1) for h in finals_t)
        return x, finals_t

    def _run_packed(self, x: Tensor, lengths: Any, states: tuple, weights: tuple, reverse: bool) -> tuple:
        """One layer-direction over a padded batch (T, B, I) whose sequences (longest first) stop
        at ``lengths``: the steps between consecutive lengths run as one layer call on the
        sequences still going, so each one's final state is taken at its own end, and the reverse
        direction starts each sequence at its end. Outputs past a length are zero."""
        batch = x.shape[1]
        states = tuple(zeros(batch, self.hidden_size, dtype=x.dtype, device=x.device) if s is None else s
                       for s in states)
        ends = sorted({int(n) for n in lengths})
        segments = [(start, end, int((lengths >= end).sum())) for start, end in zip([0] + ends[:-1], ends)]
        pieces: list[tuple[int, Tensor]] = []

        def widen(out: Tensor, active: int) -> Tensor:  # (steps, active, H) -> (steps, B, H), zeros after
            return out if active == batch else F.pad(out, (0, 0, 0, batch - active))

        if not reverse:
            current, done = states, []
            for j, (start, end, active) in enumerate(segments):
                current = tuple(c[:active] for c in current)
                out, *current = self._run_layer(x[start:end, :active], tuple(current), weights, reverse=False)
                later = segments[j + 1][2] if j + 1 < len(segments) else 0
                done.append(tuple(c[later:active] for c in current))  # these sequences end here
                pieces.append((start, widen(out, active)))
            finals = tuple(cat([d[i] for d in reversed(done)]) for i in range(len(states)))
        else:
            current = None
            for start, end, active in reversed(segments):
                if current is None:
                    current = tuple(s[:active] for s in states)
                else:  # sequences that end here start their reverse pass with their own state
                    running = current[0].shape[0]
                    current = tuple(cat([c, s[running:active]]) for c, s in zip(current, states))
                out, *current = self._run_layer(x[start:end, :active], tuple(current), weights, reverse=True)
                pieces.append((start, widen(out, active)))
            finals = tuple(current)
        pieces.sort(key=lambda piece: piece[0])
        out = pieces[0][1] if len(pieces) == 1 else cat([p for _, p in pieces])
        return (out, *finals)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class LSTM(_RNNBase):
    """Multi-layer LSTM: ``out, (h_n, c_n) = lstm(x, (h0, c0))``, PyTorch's semantics and gate order (i, f, g, o).

    x is (T, B, input_size) ((B, T, input_size) with ``batch_first``, or unbatched (T, input_size));
    out is (T, B, D*H) with both directions concatenated; h_n and c_n are (num_layers*D, B, H).
    """

    _gates = 4
    _num_states = 2

    def _run_layer(self, x: Tensor, states: tuple, weights: tuple, reverse: bool) -> tuple:
        return lstm_layer(x, states[0], states[1], *weights, reverse=reverse)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:  # noqa: A002
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise ValueError("LSTM: hx must be a tuple (h0, c0) of (num_layers * num_directions, batch, hidden_size) tensors")
        out, (h_n, c_n) = self._forward(input, None if hx is None else tuple(hx))
        return out, (h_n, c_n)


class GRU(_RNNBase):
    """Multi-layer GRU: ``out, h_n = gru(x, h0)``, PyTorch's semantics and gate order (r, z, n)."""

    _gates = 3
    _num_states = 1

    def _run_layer(self, x: Tensor, states: tuple, weights: tuple, reverse: bool) -> tuple:
        return gru_layer(x, states[0], *weights, reverse=reverse)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:  # noqa: A002
        out, (h_n,) = self._forward(input, None if hx is None else (hx,))
        return out, h_n


class RNN(_RNNBase):
    """Multi-layer Elman RNN: ``out, h_n = rnn(x, h0)`` with h' = tanh(W_ih x + b_ih + W_hh h + b_hh)
    (or relu), PyTorch's signature and parameters. The input projection of all steps is one GEMM;
    the recurrence runs step by step with differentiable ops (no fused kernel, unlike LSTM/GRU)."""

    _gates = 1
    _num_states = 1

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:  # fmt: skip
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r}; use 'tanh' or 'relu'")
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device, dtype)
        self.nonlinearity = nonlinearity

    def _run_layer(self, x: Tensor, states: tuple, weights: tuple, reverse: bool) -> tuple:
        w_ih, w_hh, b_ih, b_hh = weights
        steps, batch = x.shape[:2]
        h = states[0] if states[0] is not None else zeros(batch, self.hidden_size, dtype=x.dtype, device=x.device)
        projected = F.linear(x, w_ih, b_ih)  # (T, B, H): every step's input term at once
        act = F.relu if self.nonlinearity == "relu" else F.tanh
        outs: list[Any] = [None] * steps
        for t in reversed(range(steps)) if reverse else range(steps):
            h = act(projected[t] + F.linear(h, w_hh, b_hh))
            outs[t] = h
        return (stack(outs, dim=0) if steps else projected), h

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:  # noqa: A002
        out, (h_n,) = self._forward(input, None if hx is None else (hx,))
        return out, h_n


class _CellBase(Module):
    _gates = 0

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:  # fmt: skip
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        rows = self._gates * hidden_size
        self.weight_ih = Parameter(empty(rows, input_size, device=device, dtype=dtype))
        self.weight_hh = Parameter(empty(rows, hidden_size, device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(rows, device=device, dtype=dtype))
            self.bias_hh = Parameter(empty(rows, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _prepare(self, input: Tensor, hx: tuple | None) -> tuple[Tensor, tuple, bool]:  # noqa: A002
        """Batch an unbatched (I,) input and default missing states to zeros."""
        name = type(self).__name__
        if input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise ValueError(f"{name}: input must be (batch, {self.input_size}) or ({self.input_size},), got {input.shape}")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            n = 2 if self._gates == 4 else 1
            hx = tuple(zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device) for _ in range(n))
        elif not batched:
            hx = tuple(h.unsqueeze(0) for h in hx)
        return x, hx, batched

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class LSTMCell(_CellBase):
    """One LSTM step: ``h1, c1 = cell(x, (h0, c0))`` with x (B, I) and states (B, H)."""

    _gates = 4

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:  # noqa: A002
        x, (h, c), batched = self._prepare(input, hx)
        h1, c1 = lstm_cell(x, h, c, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return (h1, c1) if batched else (h1.squeeze(0), c1.squeeze(0))


class GRUCell(_CellBase):
    """One GRU step: ``h1 = cell(x, h0)`` with x (B, I) and h0 (B, H)."""

    _gates = 3

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        x, (h,), batched = self._prepare(input, None if hx is None else (hx,))
        h1 = gru_cell(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return h1 if batched else h1.squeeze(0)


class RNNCell(_CellBase):
    """One Elman RNN step: ``h1 = cell(x, h0)`` = tanh (or relu) of x W_ih^T + b_ih + h0 W_hh^T + b_hh."""

    _gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device: Any = None, dtype: Any = None) -> None:  # fmt: skip
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity {nonlinearity!r}; use 'tanh' or 'relu'")
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        x, (h,), batched = self._prepare(input, None if hx is None else (hx,))
        pre = F.linear(x, self.weight_ih, self.bias_ih) + F.linear(h, self.weight_hh, self.bias_hh)
        h1 = F.relu(pre) if self.nonlinearity == "relu" else F.tanh(pre)
        return h1 if batched else h1.squeeze(0)

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s if self.nonlinearity == "tanh" else s + f", nonlinearity={self.nonlinearity}"
