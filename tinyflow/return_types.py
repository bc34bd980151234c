"""The (values, indices) results of sort, topk, kthvalue, max/min along a dim, cummax/cummin and
median, as ``torch.return_types``: tuples that unpack (``v, i = x.sort()``), index (``[0]``) and
name their fields (``.values``, ``.indices``); and ``Size``, what ``x.size()`` returns."""
from __future__ import annotations

from collections import namedtuple
from typing import Any

__all__ = ["Size", "sort", "topk", "kthvalue", "max", "min", "cummax", "cummin", "median", "mode"]

sort = namedtuple("sort", ["values", "indices"])
topk = namedtuple("topk", ["values", "indices"])
kthvalue = namedtuple("kthvalue", ["values", "indices"])
max = namedtuple("max", ["values", "indices"])  # noqa: A001 (PyTorch's name)
min = namedtuple("min", ["values", "indices"])  # noqa: A001
cummax = namedtuple("cummax", ["values", "indices"])
cummin = namedtuple("cummin", ["values", "indices"])
median = namedtuple("median", ["values", "indices"])
mode = namedtuple("mode", ["values", "indices"])


class Size(tuple):
    """``torch.Size``: a tuple of sizes (``x.shape`` and ``x.size()`` are plain tuples, equal to
    it); ``numel()``, PyTorch's repr, and slices and sums that stay Sizes."""

    def __new__(cls, sizes: Any = ()) -> Size:
        dims = tuple(sizes)
        for d in dims:
            if isinstance(d, (float, bool)) or not hasattr(d, "__index__"):
                raise TypeError(f"Size: a dimension must be an int, got {type(d).__name__} ({d!r})")
        return super().__new__(cls, (d.__index__() for d in dims))

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= int(s)
        return n

    def __getitem__(self, index: Any) -> Any:
        got = super().__getitem__(index)
        return Size(got) if isinstance(index, slice) else got

    def __add__(self, other: Any) -> Size:
        return Size(tuple(self) + tuple(other))

    def __repr__(self) -> str:
        return f"tinyflow.Size({list(self)})"
