"""``tinyflow.Size``: PyTorch's ``torch.Size``, a tuple of dimensions.

A plain tuple compares equal to it (``t.shape == tf.Size([2, 3])``), so ``Tensor.shape`` may
stay a tuple; ``Size`` adds ``numel()`` and PyTorch's repr, and keeps its type when sliced.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


class Size(tuple):
    """The shape of a tensor: ``tf.Size([2, 3])``; ``.numel()`` is the product of the dimensions."""

    def __new__(cls, sizes: Iterable[Any] = ()) -> Size:
        dims = tuple(sizes)
        for d in dims:
            if not isinstance(d, int) and not (hasattr(d, "__index__") and not isinstance(d, float)):
                raise TypeError(f"Size: a dimension must be an int, got {type(d).__name__} ({d!r})")
        return super().__new__(cls, (int(d.__index__()) for d in dims))

    def numel(self) -> int:
        return math.prod(self)

    def __getitem__(self, index: Any) -> Any:
        got = super().__getitem__(index)
        return Size(got) if isinstance(index, slice) else got

    def __add__(self, other: Any) -> Size:
        return Size(tuple(self) + tuple(other))

    def __repr__(self) -> str:
        return f"tinyflow.Size({list(self)})"
