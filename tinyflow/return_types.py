"""The named results of the ops that return several tensors, as ``torch.return_types``: tuples
that unpack (``v, i = x.sort()``), index (``[0]``), name their fields (``.values``, ``.indices``)
and pickle; and ``Size``, what ``x.size()`` returns. Every such result type is here, under
PyTorch's name (``tinyflow.return_types.linalg_qr`` is ``torch.return_types.linalg_qr``)."""
from __future__ import annotations

from collections import namedtuple
from typing import Any

__all__ = ["Size", "sort", "topk", "kthvalue", "max", "min", "cummax", "cummin", "median", "mode", "nanmedian",
           "aminmax", "histogram", "frexp", "qr", "svd", "slogdet", "linalg_qr", "linalg_svd", "linalg_eigh",
           "linalg_slogdet", "linalg_inv_ex", "linalg_cholesky_ex", "linalg_lstsq"]

sort = namedtuple("sort", ["values", "indices"])
topk = namedtuple("topk", ["values", "indices"])
kthvalue = namedtuple("kthvalue", ["values", "indices"])
max = namedtuple("max", ["values", "indices"])  # noqa: A001 (PyTorch's name)
min = namedtuple("min", ["values", "indices"])  # noqa: A001
cummax = namedtuple("cummax", ["values", "indices"])
cummin = namedtuple("cummin", ["values", "indices"])
median = namedtuple("median", ["values", "indices"])
mode = namedtuple("mode", ["values", "indices"])
nanmedian = namedtuple("nanmedian", ["values", "indices"])
aminmax = namedtuple("aminmax", ["min", "max"])
histogram = namedtuple("histogram", ["hist", "bin_edges"])
frexp = namedtuple("frexp", ["mantissa", "exponent"])
qr = namedtuple("qr", ["Q", "R"])
svd = namedtuple("svd", ["U", "S", "V"])
slogdet = namedtuple("slogdet", ["sign", "logabsdet"])
linalg_qr = namedtuple("linalg_qr", ["Q", "R"])
linalg_svd = namedtuple("linalg_svd", ["U", "S", "Vh"])
linalg_eigh = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
linalg_slogdet = namedtuple("linalg_slogdet", ["sign", "logabsdet"])
linalg_inv_ex = namedtuple("linalg_inv_ex", ["inverse", "info"])
linalg_cholesky_ex = namedtuple("linalg_cholesky_ex", ["L", "info"])
linalg_lstsq = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


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
