"""The (values, indices) results of sort, topk, kthvalue, max/min along a dim, cummax/cummin and
median, as ``torch.return_types``: tuples that unpack (``v, i = x.sort()``), index (``[0]``) and
name their fields (``.values``, ``.indices``)."""
from __future__ import annotations

from collections import namedtuple

__all__ = ["sort", "topk", "kthvalue", "max", "min", "cummax", "cummin", "median", "mode"]

sort = namedtuple("sort", ["values", "indices"])
topk = namedtuple("topk", ["values", "indices"])
kthvalue = namedtuple("kthvalue", ["values", "indices"])
max = namedtuple("max", ["values", "indices"])  # noqa: A001 (PyTorch's name)
min = namedtuple("min", ["values", "indices"])  # noqa: A001
cummax = namedtuple("cummax", ["values", "indices"])
cummin = namedtuple("cummin", ["values", "indices"])
median = namedtuple("median", ["values", "indices"])
mode = namedtuple("mode", ["values", "indices"])
