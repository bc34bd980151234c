"""Text data for language models: tokens, a vocabulary, (T, B) streams and truncated BPTT.

A corpus becomes one long array of token ids (character level or word level, unknown tokens
mapped to ``<unk>``); ``batchify`` cuts it into B parallel streams, an (N, B) array whose column
b is a contiguous piece of the text; ``TruncatedBPTT`` walks that array in segments of T steps
and carries the model's hidden state from one segment to the next, detached, so gradients flow
through at most T steps while the state still remembers the whole stream.
"""
from __future__ import annotations

import codecs
import collections
import importlib
import os
import sysconfig
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

__all__ = [
    "UNK",
    "EOS",
    "Vocab",
    "tokenize",
    "detokenize",
    "Corpus",
    "batchify",
    "TruncatedBPTT",
    "detach_state",
    "default_corpus_text",
    "read_text_file",
    "NotTextError",
]

UNK = "<unk>"
EOS = "<eos>"
Level = Literal["char", "word"]


def tokenize(text: str, level: Level) -> list[str]:
    """Characters, or whitespace-separated words with ``<eos>`` at the end of each non-empty line."""
    if level == "char":
        return list(text)
    if level == "word":
        tokens: list[str] = []
        for line in text.splitlines():
            words = line.split()
            if words:
                tokens.extend(words)
                tokens.append(EOS)
        return tokens
    raise ValueError(f"tokenize: level must be 'char' or 'word', got {level!r}")


def detokenize(tokens: Sequence[str], level: Level) -> str:
    """Tokens back into text: characters concatenated; words joined by spaces, ``<eos>`` as newlines."""
    if level == "char":
        return "".join(tokens)
    lines, line = [], []
    for token in tokens:
        if token == EOS:
            lines.append(" ".join(line) + "\n")
            line = []
        else:
            line.append(token)
    return "".join(lines) + " ".join(line)


class Vocab:
    """A bijection between tokens and ids; id 0 is ``<unk>``, which every unknown token maps to."""

    def __init__(self, tokens: Sequence[str]) -> None:
        tokens = list(tokens)
        if not tokens or tokens[0] != UNK:
            tokens = [UNK] + [t for t in tokens if t != UNK]
        if len(set(tokens)) != len(tokens):
            raise ValueError("Vocab: tokens must be unique")
        self.itos: list[str] = tokens
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(tokens)}

    @classmethod
    def build(
        cls, tokens: Iterable[str], min_freq: int = 1, max_size: int | None = None
    ) -> Vocab:
        """The vocabulary of ``tokens``: most frequent first (ties in order of first appearance)."""
        counts = collections.Counter(tokens)
        kept = [t for t, n in counts.most_common() if n >= min_freq and t != UNK]
        if max_size is not None:
            kept = kept[: max(0, max_size - 1)]
        return cls([UNK] + kept)

    @property
    def unk_index(self) -> int:
        return 0

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def encode(self, tokens: Iterable[str]) -> np.ndarray:
        """Token ids (int64), unknown tokens as ``<unk>``."""
        get = self.stoi.get
        return np.fromiter((get(t, 0) for t in tokens), dtype=np.int64)

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens of ``ids``; raises IndexError naming an id outside the vocabulary."""
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.itos):
                raise IndexError(f"Vocab.decode: id {i} is outside the vocabulary of size {len(self)}")
            out.append(self.itos[i])
        return out

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)})"


class Corpus:
    """A text as token ids, split into train / validation streams, with its vocabulary.

    The vocabulary comes from the training part only (or is given), so that validation text
    with unseen tokens exercises ``<unk>`` as it would on new text.
    """

    def __init__(
        self,
        text: str,
        level: Level = "char",
        vocab: Vocab | None = None,
        valid_fraction: float = 0.1,
        min_freq: int = 1,
        max_vocab: int | None = None,
    ) -> None:
        if not 0.0 <= valid_fraction < 1.0:
            raise ValueError(f"Corpus: valid_fraction must be in [0, 1), got {valid_fraction}")
        self.level: Level = level
        tokens = tokenize(text, level)
        if len(tokens) < 2:
            raise ValueError(f"Corpus: the text has {len(tokens)} token(s); a language model needs at least 2")
        n_valid = int(len(tokens) * valid_fraction)
        train_tokens = tokens[: len(tokens) - n_valid]
        self.vocab = vocab if vocab is not None else Vocab.build(train_tokens, min_freq, max_vocab)
        self.train = self.vocab.encode(train_tokens)  # (N,)
        self.valid = self.vocab.encode(tokens[len(tokens) - n_valid :])  # (M,)

    def join(self, tokens: Sequence[str]) -> str:
        """Tokens of this corpus back into text (see ``detokenize``)."""
        return detokenize(tokens, self.level)


def batchify(ids: Any, batch_size: int) -> np.ndarray:
    """Cut a 1-D id array into ``batch_size`` contiguous streams side by side: (N // B, B).

    Column b holds ids[b * n : (b + 1) * n]; the tail that does not fill a row is dropped.
    """
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"batchify: expected a 1-D array of token ids, got shape {ids.shape}")
    if batch_size < 1:
        raise ValueError(f"batchify: batch_size must be >= 1, got {batch_size}")
    n = len(ids) // batch_size
    if n < 2:
        raise ValueError(
            f"batchify: {len(ids)} tokens give fewer than 2 steps per stream for batch_size {batch_size}; "
            "use a longer text or a smaller batch"
        )
    return np.ascontiguousarray(ids[: n * batch_size].reshape(batch_size, n).T)  # (N // B, B)


def detach_state(state: Any) -> Any:
    """The same (nested tuple / list of) tensors, cut from the graph that produced them."""
    if state is None:
        return None
    if isinstance(state, (tuple, list)):
        return type(state)(detach_state(s) for s in state)
    return state.detach()


class TruncatedBPTT:
    """Segments (inputs, targets) of at most ``seq_len`` steps over an (N, B) stream array.

    Both are int64 tensors of shape (T, B); targets are the inputs shifted by one step. The
    hidden state is carried across segments: assign the model's final state to ``.state`` after
    a segment and read it back for the next one; it is stored detached, so the next backward
    stops at the segment boundary. A new pass (``iter``) starts again from ``state = None``.

        bptt = TruncatedBPTT(streams, seq_len=32)
        for x, y in bptt:
            logits, bptt.state = model(x, bptt.state)
    """

    def __init__(self, streams: Any, seq_len: int, device: Any = None) -> None:
        streams = np.asarray(streams)
        if streams.ndim != 2 or streams.shape[0] < 2:
            raise ValueError(
                f"TruncatedBPTT: expected (N, B) streams with N >= 2 (see batchify), got shape {streams.shape}"
            )
        if seq_len < 1:
            raise ValueError(f"TruncatedBPTT: seq_len must be >= 1, got {seq_len}")
        self.streams = streams
        self.seq_len = int(seq_len)
        self.device = device
        self._state: Any = None

    def __len__(self) -> int:
        return -(-(self.streams.shape[0] - 1) // self.seq_len)

    @property
    def state(self) -> Any:
        """The hidden state at the end of the previous segment (detached), or None."""
        return self._state

    @state.setter
    def state(self, value: Any) -> None:
        self._state = detach_state(value)

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        from tinyflow.tensor import tensor

        self._state = None
        n = self.streams.shape[0]
        for start in range(0, n - 1, self.seq_len):
            stop = min(start + self.seq_len, n - 1)
            x = tensor(self.streams[start:stop], dtype=np.int64, device=self.device)  # (T, B)
            y = tensor(self.streams[start + 1 : stop + 1], dtype=np.int64, device=self.device)  # (T, B)
            yield x, y


class NotTextError(ValueError):
    """A file given as training text that is binary, or not UTF-8, or empty."""


def read_text_file(path: str | os.PathLike, what: str = "text file") -> str:
    """The contents of a UTF-8 text file (a UTF-8 byte-order mark is dropped).

    Refuses, naming the file and where the problem is, a file that is binary (it holds NUL
    bytes), one in another encoding (UTF-16, or bytes that are not UTF-8, e.g. Latin-1), and one
    without any text: training on the decoded garbage would give a model of nothing useful.
    ``what`` names the file in messages (e.g. ``"--text"``).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} {path!r} does not exist or is not a file")
    data = Path(path).read_bytes()
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise NotTextError(f"{what} {path!r} is UTF-16 text; convert it to UTF-8 "
                           f"(e.g. iconv -f UTF-16 -t UTF-8 {path} > out.txt)")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise NotTextError(f"{what} {path!r} is not a text file (a NUL byte at offset {nul}: binary data?); "
                           "give a UTF-8 text file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise NotTextError(f"{what} {path!r} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}, "
                           f"line {line}); convert it to UTF-8 (e.g. iconv -f LATIN1 -t UTF-8 {path} > out.txt)") from None
    if not text.strip():
        raise NotTextError(f"{what} {path!r} is empty: a language model needs some text")
    return text


# Python standard library modules whose source (or, failing that, docstrings) form the default
# corpus: plain English prose and Python code, present wherever Python is.
_DEFAULT_MODULES = (
    "textwrap", "string", "heapq", "bisect", "fractions", "statistics", "shlex", "difflib",
    "queue", "calendar", "colorsys", "functools", "contextlib", "dataclasses", "argparse",
)  # fmt: skip


def default_corpus_text(max_chars: int | None = None, modules: Sequence[str] = _DEFAULT_MODULES) -> str:
    """Source text of some standard library modules, read from the running interpreter.

    Modules shipped without their .py source contribute their docstrings instead, so the corpus
    exists on every machine (its exact contents follow the Python version).
    """
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    parts: list[str] = []
    for name in modules:
        path = stdlib / f"{name}.py"
        try:
            parts.append(path.read_text(encoding="utf-8"))
        except OSError:
            module = importlib.import_module(name)
            docs = [module.__doc__ or ""]
            docs += [getattr(v, "__doc__", None) or "" for v in vars(module).values() if callable(v)]
            parts.append("\n".join(d for d in docs if d))
        if max_chars is not None and sum(map(len, parts)) >= max_chars:
            break
    text = "\n".join(parts)
    return text if max_chars is None else text[:max_chars]
