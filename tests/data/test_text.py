"""Text data: tokens, vocabulary with <unk>, (N, B) streams and truncated BPTT."""
from __future__ import annotations

import numpy as np
import pytest

from tinyflow.data.text import (
    EOS,
    UNK,
    Corpus,
    TruncatedBPTT,
    Vocab,
    batchify,
    default_corpus_text,
    detach_state,
    tokenize,
)


def test_tokenize_char_and_word_levels():
    assert tokenize("ab c", "char") == ["a", "b", " ", "c"]
    assert tokenize("the cat\n\n sat down \n", "word") == ["the", "cat", EOS, "sat", "down", EOS]
    with pytest.raises(ValueError, match="'char' or 'word'"):
        tokenize("x", "byte")


def test_vocab_orders_by_frequency_and_maps_unknown_tokens_to_unk():
    vocab = Vocab.build(["b", "a", "b", "c", "b", "a"])
    assert vocab.itos == [UNK, "b", "a", "c"]
    ids = vocab.encode(["a", "zebra", "c"])
    assert ids.dtype == np.int64
    assert ids.tolist() == [2, 0, 3]
    assert vocab.decode(ids) == ["a", UNK, "c"]
    assert len(Vocab.build("aaabbc", min_freq=2)) == 3  # <unk>, a, b
    assert len(Vocab.build("aaabbc", max_size=2)) == 2  # <unk>, a
    with pytest.raises(IndexError, match="id 9 is outside the vocabulary of size 4"):
        vocab.decode([9])


def test_corpus_builds_the_vocabulary_from_the_training_part_only():
    text = "aaaa bbbb aaaa bbbb aaaa bbbb aaaa bbbb aaaa q"
    corpus = Corpus(text, level="char", valid_fraction=0.1)
    assert "q" not in corpus.vocab  # only in the validation tail
    assert corpus.vocab.decode(corpus.valid[-1:]) == [UNK]
    assert len(corpus.train) + len(corpus.valid) == len(text)
    assert corpus.join(corpus.vocab.decode(corpus.train)) == text[: len(corpus.train)]

    words = Corpus("the cat sat\nthe dog sat\n", level="word", valid_fraction=0.0)
    assert words.join(words.vocab.decode(words.train)) == "the cat sat\nthe dog sat\n"


def test_batchify_makes_contiguous_streams_side_by_side():
    streams = batchify(np.arange(10), batch_size=3)  # 3 streams of 3 steps, the tail dropped
    assert streams.shape == (3, 3)
    np.testing.assert_array_equal(streams[:, 0], [0, 1, 2])
    np.testing.assert_array_equal(streams[:, 2], [6, 7, 8])
    with pytest.raises(ValueError, match="fewer than 2 steps"):
        batchify(np.arange(5), batch_size=4)


def test_bptt_segments_cover_the_stream_with_shifted_targets():
    streams = batchify(np.arange(40), batch_size=2)  # (20, 2)
    bptt = TruncatedBPTT(streams, seq_len=6)
    segments = list(bptt)
    assert len(segments) == len(bptt) == 4  # 19 input steps: 6 + 6 + 6 + 1
    assert [x.shape for x, _ in segments] == [(6, 2), (6, 2), (6, 2), (1, 2)]
    inputs = np.concatenate([x.numpy() for x, _ in segments])
    targets = np.concatenate([y.numpy() for _, y in segments])
    np.testing.assert_array_equal(inputs, streams[:-1])
    np.testing.assert_array_equal(targets, streams[1:])
    assert segments[0][0].dtype == np.int64


def test_bptt_state_is_stored_detached_and_reset_each_pass():
    import tinyflow as tf

    bptt = TruncatedBPTT(batchify(np.arange(20), 2), seq_len=3)
    w = tf.tensor(np.ones(3), requires_grad=True)
    for _ in bptt:
        h = w * 2.0
        bptt.state = (h, [h * 3.0])
        assert bptt.state[0].requires_grad is False
        assert isinstance(bptt.state[1], list) and bptt.state[1][0].requires_grad is False
        np.testing.assert_array_equal(bptt.state[1][0].numpy(), 6.0 * np.ones(3))
        break
    assert next(iter(bptt)) is not None and bptt.state is None
    assert detach_state(None) is None


def test_default_corpus_is_python_stdlib_text():
    text = default_corpus_text(max_chars=50_000)
    assert len(text) == 50_000
    assert "def " in text and "return" in text


def test_read_text_file_reads_utf8_and_drops_a_bom(tmp_path):
    from tinyflow.data.text import read_text_file

    path = tmp_path / "t.txt"
    path.write_bytes("\ufeffhéllo wörld\n".encode())
    assert read_text_file(path) == "héllo wörld\n"


@pytest.mark.parametrize(
    "data, what",
    [
        (bytes(range(256)) * 4, r"not a text file \(a NUL byte at offset 0"),  # binary data
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", r"not a text file \(a NUL byte at offset 8"),
        (b"some text\n" * 3 + "caf\xe9\n".encode("latin-1"), r"not UTF-8 text \(byte 0xe9 at offset 33, line 4\)"),
        ("text".encode("utf-16"), "is UTF-16 text; convert it to UTF-8"),
        (b"", "is empty"),
        (b" \n\t\n", "is empty"),
    ],
)
def test_read_text_file_refuses_what_is_not_text_naming_the_file(tmp_path, data, what):
    from tinyflow.data.text import NotTextError, read_text_file

    path = tmp_path / "corpus.bin"
    path.write_bytes(data)
    with pytest.raises(NotTextError, match=what) as info:
        read_text_file(path, what="--text")
    message = str(info.value)
    assert message.startswith(f"--text {str(path)!r}") and "\n" not in message
    assert isinstance(info.value, ValueError)  # the CLI's one-line handlers catch ValueError
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_text_file(tmp_path / "missing.txt", what="--text")
