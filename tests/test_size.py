"""tinyflow.Size (tinyflow/functions.py) behaves as torch.Size: a tuple with numel(), equal to plain tuples and to tensor shapes."""
from __future__ import annotations

import pytest

import tinyflow as tf


def test_size_is_a_tuple_that_equals_shapes_and_counts_elements():
    s = tf.Size([2, 3, 4])
    assert s == (2, 3, 4) and tf.zeros(2, 3, 4).shape == s and isinstance(s, tuple)
    assert s.numel() == 24 and tf.Size().numel() == 1
    assert isinstance(s[1:], tf.Size) and s[1:] == (3, 4) and s[0] == 2
    assert isinstance(s + (5,), tf.Size) and s + (5,) == (2, 3, 4, 5)
    assert repr(s) == "tinyflow.Size([2, 3, 4])"
    assert tf.zeros(tf.Size([2, 5])).shape == (2, 5)


def test_size_compares_like_torch_size():
    torch = pytest.importorskip("torch")
    assert tuple(tf.Size([3, 1])) == tuple(torch.Size([3, 1]))
    assert tf.Size([3, 1]).numel() == torch.Size([3, 1]).numel()


def test_size_refuses_non_integer_dimensions():
    with pytest.raises(TypeError, match="Size: a dimension must be an int, got float"):
        tf.Size([2.5])
