"""``nn.utils.rnn.pad_sequence``: a list of variable-length sequences as one padded batch.

(PackedSequence and pack_padded_sequence are not in tinyflow: its RNNs take padded batches.)
"""
from __future__ import annotations

from collections.abc import Sequence

from tinyflow.nn import functional as F
from tinyflow.tensor import Tensor, stack

__all__ = ["pad_sequence"]


def pad_sequence(sequences: Sequence[Tensor], batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack sequences (L_i, *) padded to the longest: (L, B, *), or (B, L, *) if batch_first."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    seqs = list(sequences)
    if not seqs:
        raise ValueError("pad_sequence: received an empty list of sequences")
    longest = max(s.shape[0] for s in seqs)
    padded = []
    for s in seqs:
        extra = longest - s.shape[0]
        widths = [0, 0] * (s.ndim - 1) + ([0, extra] if padding_side == "right" else [extra, 0])
        padded.append(F.pad(s, tuple(widths), value=padding_value) if extra else s)
    out = stack(padded, 0)  # (B, L, *)
    return out if batch_first else out.transpose(0, 1)
