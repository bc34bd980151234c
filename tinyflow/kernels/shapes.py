"""Shape helpers shared by the kernels, the ops, nn and the model zoo (not a kernel family).

``_pair`` reads PyTorch's int-or-pair arguments (kernel_size, stride, padding, dilation);
``conv_output_size`` and ``pool_output_shape`` give the output size of a window sweep with
PyTorch's rule, ceil_mode included. They live here, below every layer that needs them, so that
nothing imports them from an op or from another kernel family.
"""
from __future__ import annotations

import math
from typing import Union

Pair = tuple[int, int]
IntPair = Union[int, tuple[int, int]]


def _pair(v: IntPair, name: str, op: str = "conv2d") -> Pair:
    """An int or a 2-sequence of ints as a (height, width) pair; ``op`` names the caller in errors."""
    if isinstance(v, int):
        return (v, v)
    try:
        a, b = v
        return (int(a), int(b))
    except (TypeError, ValueError):
        raise ValueError(f"{op}: {name} must be an int or a pair of ints, got {v!r}") from None


def conv_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int = 1,
                     ceil_mode: bool = False) -> int:
    """Output length along one axis, with PyTorch's rule (also for pooling's ceil_mode).

    With ``ceil_mode`` the last window may hang over the right padding, but it must start inside
    the input or the left padding (PyTorch drops a window that would start in the right padding).
    """
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    if span < 0:
        return 0
    out = (math.ceil(span / stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def pool_output_shape(h: int, w: int, kernel_size: Pair, stride: Pair, padding: Pair,
                      dilation: Pair = (1, 1), ceil_mode: bool = False) -> Pair:
    """(OH, OW) of a pooling window sweep, PyTorch's rule including ceil_mode."""
    return (conv_output_size(h, kernel_size[0], stride[0], padding[0], dilation[0], ceil_mode),
            conv_output_size(w, kernel_size[1], stride[1], padding[1], dilation[1], ceil_mode))
