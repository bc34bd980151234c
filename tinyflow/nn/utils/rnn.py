"""``nn.utils.rnn``: padded batches of variable-length sequences (``pad_sequence``) and their
packed form (``PackedSequence``, ``pack_padded_sequence``, ``pad_packed_sequence``,
``pack_sequence``), which tinyflow's RNN, LSTM and GRU take as PyTorch's do: each sequence stops
at its own length (its final state is taken there; a reverse direction starts there).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from tinyflow.nn import functional as F
from tinyflow.tensor import Tensor, cat, stack, tensor

__all__ = ["PackedSequence", "pad_sequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
           "unpad_sequence", "unpack_sequence"]


class PackedSequence(NamedTuple):
    """Time-major packed sequences: ``data`` (sum of lengths, *) holds step t of the
    ``batch_sizes[t]`` sequences still running (sorted longest first); ``sorted_indices`` maps that
    order to the caller's batch, ``unsorted_indices`` back."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        return self._replace(data=self.data.to(*args, **kwargs))

    def cpu(self) -> PackedSequence:
        return self.to("cpu")

    def cuda(self, index: int = 0) -> PackedSequence:
        return self.to(f"cuda:{index}")

    def float(self) -> PackedSequence:
        return self._replace(data=self.data.float())

    def double(self) -> PackedSequence:
        return self._replace(data=self.data.double())

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda


def _lengths_array(lengths: Any) -> np.ndarray:
    if isinstance(lengths, Tensor):
        return lengths.numpy().astype(np.int64).reshape(-1)
    if hasattr(lengths, "detach"):  # a torch tensor
        return lengths.detach().cpu().numpy().astype(np.int64).reshape(-1)
    return np.asarray(lengths, dtype=np.int64).reshape(-1)


def _batch_sizes(lengths: np.ndarray) -> np.ndarray:
    """(max length,) int64: how many sequences still run at each step (lengths sorted, longest first)."""
    steps = int(lengths[0]) if lengths.size else 0
    return (lengths[None, :] > np.arange(steps)[:, None]).sum(1).astype(np.int64)


def pack_padded_sequence(input: Tensor, lengths: Any, batch_first: bool = False,  # noqa: A002
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (T, B, *) ((B, T, *) with ``batch_first``) of sequences of ``lengths``."""
    lens = _lengths_array(lengths)
    if input.ndim < 2:
        raise ValueError(f"pack_padded_sequence: input must be (T, B, *) or (B, T, *), got shape {tuple(input.shape)}")
    x = input.transpose(0, 1) if batch_first else input  # (T, B, *)
    if lens.size != x.shape[1]:
        raise ValueError(f"pack_padded_sequence: got {lens.size} lengths for a batch of {x.shape[1]} sequences")
    if lens.size and (lens.min() <= 0 or lens.max() > x.shape[0]):
        raise RuntimeError(f"pack_padded_sequence: lengths must be in [1, {x.shape[0]}] (the padded length), "
                           f"got {lens.tolist()}")
    sorted_indices = unsorted_indices = None
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                               "to sidestep this requirement if you do not need ONNX exportability.")
    else:
        order = np.argsort(-lens, kind="stable")
        lens = lens[order]
        x = x[:, tensor(order)]
        sorted_indices = tensor(order)
        unsorted_indices = tensor(np.argsort(order))
    sizes = _batch_sizes(lens)
    data = cat([x[t, :int(n)] for t, n in enumerate(sizes)]) if sizes.size else x.reshape(0, *x.shape[2:])
    return PackedSequence(data, tensor(sizes), sorted_indices, unsorted_indices)


def _unpack_sorted(packed: PackedSequence, padding_value: float = 0.0,
                   total_length: int | None = None) -> tuple[Tensor, np.ndarray]:
    """The padded (T, B, *) batch in sorted order and the sorted lengths."""
    sizes = packed.batch_sizes.numpy().astype(np.int64)
    batch = int(sizes[0]) if sizes.size else 0
    steps = len(sizes) if total_length is None else int(total_length)
    if total_length is not None and total_length < len(sizes):
        raise ValueError(f"pad_packed_sequence: expected total_length to be at least the length of the longest "
                         f"sequence ({len(sizes)}), got {total_length}")
    rows, offset = [], 0
    for n in sizes:
        step = packed.data[offset:offset + int(n)]
        rows.append(F.pad(step, (0, 0) * (step.ndim - 1) + (0, batch - int(n)), value=padding_value))
        offset += int(n)
    padded = stack(rows) if rows else packed.data.reshape(0, 0, *packed.data.shape[1:])
    if steps > len(sizes):
        padded = F.pad(padded, (0, 0) * (padded.ndim - 1) + (0, steps - len(sizes)), value=padding_value)
    lengths = (sizes[None, :] > np.arange(batch)[:, None]).sum(1).astype(np.int64)
    return padded, lengths


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """Unpack to a padded batch (T, B, *) ((B, T, *) with ``batch_first``) and the lengths, in
    the order the sequences were packed from."""
    padded, lengths = _unpack_sorted(sequence, padding_value, total_length)
    if sequence.unsorted_indices is not None:
        order = sequence.unsorted_indices.numpy()
        padded = padded[:, tensor(order)]
        lengths = lengths[order]
    return (padded.transpose(0, 1) if batch_first else padded), tensor(lengths)


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


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences (L_i, *), longest first unless ``enforce_sorted=False``."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths: Any, batch_first: bool = False) -> list[Tensor]:
    """The inverse of pad_sequence: the list of sequences cut to their lengths."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, :int(n)] for i, n in enumerate(_lengths_array(lengths))]


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The inverse of pack_sequence: the list of sequences."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
