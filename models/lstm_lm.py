"""An LSTM language model: embedding -> LSTM layers -> linear decoder over the vocabulary.

The default config is the LSTM of the dlbench study (Shi et al., 2016): 2 layers of 256 hidden
units trained on segments of 32 (or 64) steps. Inputs are time-major token ids (T, B), the
layout of ``tinyflow.data.text.batchify``; the hidden state comes back so that truncated BPTT
can carry it into the next segment. With ``tie_weights`` the decoder reuses the embedding matrix
(Press & Wolf, 2017), which needs ``embedding_dim == hidden_size``.
"""
from __future__ import annotations

from dataclasses import dataclass

import tinyflow.nn as nn
from tinyflow.tensor import Tensor

__all__ = ["LSTMLMConfig", "LSTMLM"]

State = tuple[Tensor, Tensor]


@dataclass
class LSTMLMConfig:
    """Sizes of the model; ``seq_len`` is the BPTT segment length it is trained with (32 or 64 in dlbench)."""

    vocab_size: int = 128
    embedding_dim: int = 128
    hidden_size: int = 256
    num_layers: int = 2
    dropout: float = 0.0
    tie_weights: bool = False
    seq_len: int = 32

    def __post_init__(self) -> None:
        for name in ("vocab_size", "embedding_dim", "hidden_size", "num_layers", "seq_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"LSTMLMConfig: {name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"LSTMLMConfig: dropout must be in [0, 1), got {self.dropout}")
        if self.tie_weights and self.embedding_dim != self.hidden_size:
            raise ValueError(
                f"LSTMLMConfig: tie_weights needs embedding_dim == hidden_size, got {self.embedding_dim} "
                f"and {self.hidden_size}"
            )


class LSTMLM(nn.Module):
    """``logits, state = model(ids, state)``: ids (T, B) int64 -> logits (T, B, vocab_size).

    ``state`` is the LSTM's (h, c), each (num_layers, B, hidden_size), or None for zeros.
    Parameter names: ``encoder.weight``, ``rnn.weight_ih_l0`` ..., ``decoder.weight/bias``.
    """

    def __init__(self, config: LSTMLMConfig | None = None) -> None:
        super().__init__()
        cfg = self.config = config or LSTMLMConfig()
        self.encoder = nn.Embedding(cfg.vocab_size, cfg.embedding_dim)
        self.rnn = nn.LSTM(cfg.embedding_dim, cfg.hidden_size, num_layers=cfg.num_layers,
                           dropout=cfg.dropout if cfg.num_layers > 1 else 0.0)  # fmt: skip
        self.drop = nn.Dropout(cfg.dropout)
        self.decoder = nn.Linear(cfg.hidden_size, cfg.vocab_size)
        if cfg.tie_weights:
            self.decoder.weight = self.encoder.weight  # one Parameter, two uses

    def forward(self, ids: Tensor, state: State | None = None) -> tuple[Tensor, State]:
        if ids.ndim != 2:
            raise ValueError(f"LSTMLM: expected token ids of shape (seq_len, batch), got {ids.shape}")
        steps, batch = ids.shape
        x = self.drop(self.encoder(ids))  # (T, B, E)
        out, state = self.rnn(x, state)  # (T, B, H)
        logits = self.decoder(self.drop(out).reshape(steps * batch, -1))  # (T*B, V)
        return logits.reshape(steps, batch, -1), state
