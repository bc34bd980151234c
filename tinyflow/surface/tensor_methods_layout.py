"""Tensor methods that stack, split, rotate, scatter into and index-fill tensors (tensor_split,
hsplit, rot90, index_copy, index_fill, index_put, masked_scatter, slice_scatter, ...).

``LayoutMethods`` is a namespace, not a base class: tinyflow/surface/__init__.py attaches the methods and the
``tinyflow.*`` functions of this file that its table lists.

Most of these are compositions of differentiable ops (slicing, cat, flip, permute, where); the
scatter-style ones with their own gradients live in tinyflow/surface/ops/layout.py.
"""
from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from tinyflow.tensor import Tensor

__all__ = ["LayoutMethods"]


def _tf() -> Any:
    """tinyflow/creation.py: Tensor and the creation functions (tensor, zeros, where, cat, _draw, ...)."""
    from tinyflow import creation

    return creation


def _layout_ops() -> Any:
    import tinyflow.surface.ops.layout as layout

    return layout


def _is_tensor(x: Any) -> bool:
    return isinstance(x, _tf().Tensor)


def _wrap_dim(op: str, dim: int, ndim: int) -> int:
    from tinyflow.arg_parser import normalize_dim

    return normalize_dim(op, dim, ndim)


def _no_grad_op(fn: Callable[..., Any], *tensors: Any) -> Any:
    from tinyflow.surface.ops import index as ops

    return ops.NoGradient.apply(fn, *tensors)


def _long_index(t: Tensor, index: Any, op: str) -> Tensor:
    """``index`` (a tensor, list or number) as an integer tensor on t's device."""
    if not _is_tensor(index):
        index = _tf().tensor(index, dtype="int64", device=t.device)
    if np.dtype(index.dtype).kind not in "iu":
        raise IndexError(f"{op}: index must be an integer (int64) tensor, got dtype {index.dtype}; use .long()")
    return index


def _slice_along(t: Tensor, dim: int, start: int | None, stop: int | None, step: int = 1) -> Tensor:
    """t[..., start:stop:step, ...] along ``dim`` (a view, differentiable)."""
    return t[(slice(None),) * dim + (slice(start, stop, step),)]


# ------------------------------------------------------------------------------ splitting


def _split_points(op: str, n: int, indices_or_sections: Any) -> list[tuple[int, int]] | None:
    """(start, stop) per piece of tensor_split; None when given sections (handled by the caller)."""
    spec = indices_or_sections
    if _is_tensor(spec):
        if np.dtype(spec.dtype).kind not in "iu":
            raise RuntimeError(f"{op}: indices_or_sections must be an int64 tensor, got dtype {spec.dtype}")
        if spec.ndim > 1:
            raise RuntimeError(f"{op}: indices_or_sections must be a 0-d or 1-d tensor, got shape {spec.shape}")
        spec = int(spec.item()) if spec.ndim == 0 else [int(i) for i in spec.tolist()]
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        sections = int(spec)
        if sections <= 0:
            raise RuntimeError(f"{op}: number of sections must be larger than 0, got {sections}")
        size, extra = divmod(n, sections)
        bounds, start = [], 0
        for i in range(sections):
            stop = start + size + (1 if i < extra else 0)
            bounds.append((start, stop))
            start = stop
        return bounds
    cuts = [int(i) for i in spec]
    return list(zip([0, *cuts], [*cuts, None]))


class LayoutMethods:
    """Tensor methods (``self`` is a Tensor): a namespace that tinyflow/surface/__init__.py reads; see the module docstring."""

    # -------------------------------------------------------------------- splitting
    def tensor_split(self, indices_or_sections: Any = None, dim: int = 0, *, sections: int | None = None,
                     indices: Sequence[int] | None = None, tensor_indices_or_sections: Any = None) -> tuple[Tensor, ...]:
        """Views of self along ``dim``: ``sections`` (an int) near-equal pieces (the first
        ``n % sections`` one longer), or the pieces between the given ``indices`` (a list or a
        1-d int tensor; Python slicing rules, so pieces may be empty). As torch.tensor_split, whose
        keywords name the argument by its type (sections=, indices=, tensor_indices_or_sections=)."""
        given = (indices_or_sections, sections, indices, tensor_indices_or_sections)
        spec = next((g for g in given if g is not None), None)
        if spec is None:
            raise TypeError("tensor_split: give indices_or_sections (an int, a list of indices or a tensor)")
        if self.ndim == 0:
            raise RuntimeError("tensor_split: expected at least a 1-dimensional tensor, got a 0-d tensor")
        d = _wrap_dim("tensor_split", dim, self.ndim)
        bounds = _split_points("tensor_split", self.shape[d], spec)
        return tuple(_slice_along(self, d, start, stop) for start, stop in bounds)

    def _split_named(self, op: str, dim: int, min_dims: int, args: tuple, sections: int | None,
                     indices: Sequence[int] | None) -> tuple[Tensor, ...]:
        """hsplit / vsplit / dsplit of ``sections`` (an int), or at ``indices`` (a list, or several ints:
        ``hsplit(1, 3)``), given by position or by those names, as PyTorch."""
        if sections is not None or indices is not None:
            args = (sections if sections is not None else indices,)
        if not args:
            raise TypeError(f"{op}: give the number of sections (an int) or the indices to split at")
        indices_or_sections = args[0] if len(args) == 1 else list(args)
        if self.ndim < min_dims:
            raise RuntimeError(
                f"{op}: requires a tensor with at least {min_dims} dimension(s), but got a tensor with "
                f"{self.ndim} dimension(s) (shape {tuple(self.shape)})"
            )
        spec = indices_or_sections
        if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
            n = self.shape[dim]
            if spec == 0 or n % spec:
                raise RuntimeError(
                    f"{op}: attempted to split along dimension {dim}, but the size of the dimension {n} is not "
                    f"divisible by the split_size {spec}; give a divisor of {n} or a list of indices"
                )
        return self.tensor_split(spec, dim)

    def hsplit(self, *indices_or_sections: Any, sections: int | None = None,
               indices: Sequence[int] | None = None) -> tuple[Tensor, ...]:
        """tensor_split along dim 1 (dim 0 for a 1-d tensor); an int must divide that dim evenly."""
        return self._split_named("hsplit", 1 if self.ndim > 1 else 0, 1, indices_or_sections, sections, indices)

    def vsplit(self, *indices_or_sections: Any, sections: int | None = None,
               indices: Sequence[int] | None = None) -> tuple[Tensor, ...]:
        """tensor_split along dim 0 of a tensor of at least 2 dims; an int must divide it evenly."""
        return self._split_named("vsplit", 0, 2, indices_or_sections, sections, indices)

    def dsplit(self, *indices_or_sections: Any, sections: int | None = None,
               indices: Sequence[int] | None = None) -> tuple[Tensor, ...]:
        """tensor_split along dim 2 of a tensor of at least 3 dims; an int must divide it evenly."""
        return self._split_named("dsplit", 2, 3, indices_or_sections, sections, indices)

    def split_with_sizes(self, split_sizes: Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
        """Views of self along ``dim`` of the given sizes, which must add up to its length."""
        d = _wrap_dim("split_with_sizes", dim, self.ndim)
        sizes = [int(s) for s in split_sizes]
        if sum(sizes) != self.shape[d] or any(s < 0 for s in sizes):
            raise RuntimeError(
                f"split_with_sizes: expects split_sizes to sum exactly to {self.shape[d]} (the size of dim {dim} "
                f"of shape {tuple(self.shape)}), but got split_sizes={sizes}"
            )
        return self.split(sizes, d)

    # -------------------------------------------------------------------- rotating, diagonals
    def rot90(self, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
        """Rotate by 90 degrees ``k`` times in the plane of ``dims``, from the first dim toward the
        second (as torch.rot90 and numpy.rot90)."""
        dims = tuple(dims)
        if len(dims) != 2:
            raise RuntimeError(f"rot90: expected total rotation dims == 2, but got dims = {len(dims)}")
        if self.ndim < 2:
            raise RuntimeError(f"rot90: expected total dims >= 2, but got total dims = {self.ndim}")
        d0, d1 = (_wrap_dim("rot90", d, self.ndim) for d in dims)
        if d0 == d1:
            raise RuntimeError(f"rot90: expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
        k %= 4
        if k == 1:
            return self.flip(d1).transpose(d0, d1)
        if k == 2:
            return self.flip(d0, d1)
        if k == 3:
            return self.flip(d0).transpose(d0, d1)
        return self.clone()

    def diag_embed(self, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
        """A tensor with one more dim whose matrices in (dim1, dim2) hold self's last dim on
        diagonal ``offset`` (zeros elsewhere)."""
        return _layout_ops().DiagEmbed.apply(self, offset, dim1, dim2)

    def diagflat(self, offset: int = 0) -> Tensor:
        """The square matrix with the flattened self on diagonal ``offset``."""
        return self.reshape(-1).diag(offset)

    # -------------------------------------------------------------------- scatter-style writes
    def index_copy(self, dim: int, index: Any, source: Tensor) -> Tensor:
        """A copy of self whose slices ``index`` (a vector) along ``dim`` are source's slices (in
        order). Where an index repeats, one of the slices wins (unspecified, as PyTorch)."""
        return _layout_ops().IndexCopy.apply(self, dim, _long_index(self, index, "index_copy"), source)

    def index_copy_(self, dim: int, index: Any, source: Tensor) -> Tensor:
        """In place: ``x.index_copy_(...)`` writes ``x.index_copy(...)`` into x."""
        return self.copy_(self.index_copy(dim, index, source))

    def index_fill(self, dim: int, index: Any, value: Any) -> Tensor:
        """A copy of self with ``value`` (a number or a 0-d tensor, cast to self's dtype) in the
        slices ``index`` (a vector; negative entries count from the end) along ``dim``."""
        from tinyflow.surface.ops.layout import _check_bounds

        if _is_tensor(value) and value.ndim != 0:
            raise RuntimeError(
                f"index_fill: only supports a 0-dimensional value tensor, but got a tensor of shape {value.shape}"
            )
        index = _long_index(self, index, "index_fill")
        if index.ndim > 1:
            raise IndexError(f"index_fill: index should have dimension 1 or 0, got shape {index.shape}")
        d = _wrap_dim("index_fill", dim, self.ndim)
        size = self.shape[d] if self.ndim else 1
        xp = self.device.xp
        _check_bounds("index_fill", xp, index.array, size, d, tuple(self.shape), negative=True)
        hit = xp.zeros(size, dtype=bool)
        hit[index.array.reshape(-1)] = True
        mask = hit.reshape((size,) + (1,) * (self.ndim - d - 1)) if self.ndim else hit.reshape(())
        fill = value.to(self.dtype) if _is_tensor(value) else _tf().tensor(value, dtype=self.dtype, device=self.device)
        return _tf().where(mask, fill, self)

    def index_fill_(self, dim: int, index: Any, value: Any) -> Tensor:
        """In place: ``x.index_fill_(...)`` writes ``x.index_fill(...)`` into x."""
        return self.copy_(self.index_fill(dim, index, value))

    def index_put(self, indices: Sequence[Any], values: Any, accumulate: bool = False) -> Tensor:
        """A copy of self with ``self[indices] = values`` (``+=`` with ``accumulate``, summing
        repeated indices). ``indices`` is a tuple of integer or bool tensors, one per leading dim;
        values broadcasts to the indexed shape and must have self's dtype."""
        if _is_tensor(indices) or not isinstance(indices, (tuple, list)):
            raise TypeError(f"index_put: indices must be a tuple of tensors, got {type(indices).__name__}")
        raw = []
        for i in indices:
            i = i if _is_tensor(i) else _tf().tensor(i, device=self.device)
            kind = np.dtype(i.dtype).kind
            if kind not in "iub":
                raise IndexError(
                    f"index_put: tensors used as indices must be long, int, byte or bool tensors, got {i.dtype}"
                )
            raw.append(i.array.astype(bool) if np.dtype(i.dtype) == np.uint8 else i.array)
        if not _is_tensor(values):
            values = _tf().tensor(values, dtype=self.dtype, device=self.device)
        return _layout_ops().IndexPut.apply(self, values, tuple(raw), bool(accumulate))

    def index_put_(self, indices: Sequence[Any], values: Any, accumulate: bool = False) -> Tensor:
        """In place: ``x.index_put_(...)`` writes ``x.index_put(...)`` into x."""
        return self.copy_(self.index_put(indices, values, accumulate))

    def masked_scatter(self, mask: Tensor, source: Tensor) -> Tensor:
        """A copy of self (broadcast with mask) whose positions where ``mask`` is True take
        source's entries in row-major order; source needs at least as many entries as mask has
        True ones."""
        return _layout_ops().MaskedScatter.apply(self, mask, source)

    def masked_scatter_(self, mask: Tensor, source: Tensor) -> Tensor:
        """In place: ``x.masked_scatter_(...)`` writes ``x.masked_scatter(...)`` into x."""
        return self.copy_(self.masked_scatter(mask, source))

    def _scatter_slice(self, op: str, src: Tensor, index: Any, slice_shape: tuple[int, ...]) -> Tensor:
        """A copy of self with the basic ``index`` selection (of shape slice_shape) replaced by src."""
        if tuple(src.shape) != tuple(slice_shape):
            raise RuntimeError(
                f"{op}: expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                f"slice size = {list(slice_shape)}"
            )
        from tinyflow.surface.ops import index as ops

        return ops.SetItem.apply(self, src.to(self.dtype), (index,))

    def slice_scatter(self, src: Tensor, dim: int = 0, start: int | None = None, end: int | None = None,
                      step: int = 1) -> Tensor:
        """A copy of self with ``self[..., start:end:step, ...]`` (along ``dim``) replaced by src."""
        d = _wrap_dim("slice_scatter", dim, self.ndim)
        if step <= 0:
            raise RuntimeError(f"slice_scatter: slice step must be positive, got {step}")
        index = (slice(None),) * d + (slice(start, end, step),)
        shape = self.shape[:d] + (len(range(*slice(start, end, step).indices(self.shape[d]))),) + self.shape[d + 1:]
        return self._scatter_slice("slice_scatter", src, index, shape)

    def select_scatter(self, src: Tensor, dim: int, index: int) -> Tensor:
        """A copy of self with ``self.select(dim, index)`` replaced by src."""
        d = _wrap_dim("select_scatter", dim, self.ndim)
        n = self.shape[d]
        if not -n <= index < n:
            raise IndexError(
                f"select_scatter: index {index} out of range for tensor of size {list(self.shape)} at dimension {d}"
            )
        return self._scatter_slice("select_scatter", src, (slice(None),) * d + (index % n,),
                                   self.shape[:d] + self.shape[d + 1:])

    def diagonal_scatter(self, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        """A copy of self with ``self.diagonal(offset, dim1, dim2)`` replaced by src."""
        return _layout_ops().DiagonalScatter.apply(self, src.to(self.dtype), offset, dim1, dim2)

    def fill_diagonal_(self, fill_value: Any, wrap: bool = False) -> Tensor:
        """Fill the main diagonal (all indices equal) with ``fill_value``, in place. A tensor of
        more than 2 dims must have all dims equal; a tall matrix with ``wrap`` restarts the
        diagonal every (columns + 1) rows, as numpy.fill_diagonal."""
        if self.ndim < 2:
            raise RuntimeError(f"fill_diagonal_: dimensions must be larger than 1, got shape {tuple(self.shape)}")
        if self.ndim > 2 and len(set(self.shape)) > 1:
            raise RuntimeError(f"fill_diagonal_: all dimensions of input must be of equal length, got {tuple(self.shape)}")
        xp = self.device.xp
        total = math.prod(self.shape)
        if self.ndim == 2:
            rows, cols = self.shape
            step, end = cols + 1, total if wrap or rows <= cols else cols * cols
        else:
            step, end = sum(self.shape[0] ** k for k in range(self.ndim)), total
        mask = xp.zeros(total, dtype=bool)
        mask[0:end:step] = True
        mask = mask.reshape(self.shape)

        def fast(a: Any) -> None:
            a[mask] = fill_value

        return self._inplace("fill_diagonal_", lambda old: old.masked_fill(mask, fill_value), (), fast)

    def put(self, index: Any, source: Tensor, accumulate: bool = False) -> Tensor:
        """A copy of self with source's entries written (added with ``accumulate``) at ``index``
        of the flattened self; negative indices count from the end."""
        index = _long_index(self, index, "put")
        if index.numel() != source.numel():
            raise IndexError(
                f"put: expected source and index to have the same number of elements, but got source.numel() = "
                f"{source.numel()}, index.numel() = {index.numel()}"
            )
        if source.dtype != self.dtype:
            raise RuntimeError(
                f"put: self and source expected to have the same dtype, but got self.dtype = {self.dtype} and "
                f"source.dtype = {source.dtype}"
            )
        flat = self.reshape(-1)
        return flat.index_put((index.reshape(-1),), source.reshape(-1), accumulate).reshape(self.shape)

    def put_(self, index: Any, source: Tensor, accumulate: bool = False) -> Tensor:
        """In place: ``x.put_(...)`` writes ``x.put(...)`` into x."""
        return self.copy_(self.put(index, source, accumulate))

    # -------------------------------------------------------------------- shape changes in place
    def reshape_as(self, other: Tensor) -> Tensor:
        """self reshaped to other's shape."""
        return self.reshape(other.shape)

    def _restride_(self, op: str, make: Callable[[Tensor], Tensor]) -> Tensor:
        """Give this tensor the shape of the view ``make(self)``, in place (its data are not
        written, so its in-place counter stays). When autograd records, the view op becomes
        this tensor's history; a leaf that requires grad cannot change shape (as PyTorch)."""
        from tinyflow.autograd.grad_mode import is_grad_enabled, set_grad_enabled

        if is_grad_enabled() and self._requires_grad and self._ctx is None:
            raise RuntimeError(
                f"{op}: a leaf tensor that requires grad (shape {tuple(self.shape)}) is being used in an in-place "
                "operation; use the out-of-place form (x = x." + op.rstrip("_") + "(...)) or run it under no_grad()"
            )
        # A tensor with history records the view op even under no_grad(): its history must keep
        # describing its (new) shape.
        with set_grad_enabled(is_grad_enabled() or (self._ctx is not None and self._requires_grad)):
            new = make(self._alias())
        self.array = new.array
        if new._ctx is not None:
            self._ctx, self._out_index = new._ctx, new._out_index
        return self

    def squeeze_(self, dim: Any = None) -> Tensor:
        """In place: this tensor takes the shape of ``squeeze(dim)``."""
        return self._restride_("squeeze_", lambda t: t.squeeze(dim))

    def unsqueeze_(self, dim: int) -> Tensor:
        """In place: this tensor takes the shape of ``unsqueeze(dim)``."""
        return self._restride_("unsqueeze_", lambda t: t.unsqueeze(dim))

    def t_(self) -> Tensor:
        """In place: this (at most 2-d) tensor becomes its transpose."""
        if self.ndim > 2:
            raise RuntimeError(f"t_: expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        return self._restride_("t_", lambda t: t.t())

    def transpose_(self, dim0: int, dim1: int) -> Tensor:
        """In place: this tensor becomes ``transpose(dim0, dim1)``."""
        d0, d1 = _wrap_dim("transpose_", dim0, self.ndim), _wrap_dim("transpose_", dim1, self.ndim)
        return self._restride_("transpose_", lambda t: t.transpose(d0, d1))

    def swapaxes_(self, axis0: int, axis1: int) -> Tensor:
        """In place: ``transpose_(axis0, axis1)``."""
        return self.transpose_(axis0, axis1)

    def swapdims_(self, dim0: int, dim1: int) -> Tensor:
        """In place: ``transpose_(dim0, dim1)``."""
        return self.transpose_(dim0, dim1)

    def new_empty_strided(self, size: Sequence[int], stride: Sequence[int], *, dtype: Any = None, device: Any = None,
                          requires_grad: bool = False) -> Tensor:
        """An uninitialised tensor of ``size`` (self's dtype and device by default). tinyflow
        arrays are always contiguous: ``stride`` is checked for its length only, then ignored."""
        size, stride = tuple(size), tuple(stride)
        if len(size) != len(stride):
            raise RuntimeError(
                f"new_empty_strided: dimensionality of sizes ({len(size)}) must match dimensionality of strides "
                f"({len(stride)})"
            )
        return self.new_empty(size, dtype=dtype, device=device, requires_grad=requires_grad)

    # -------------------------------------------------------------------- unique runs
    def unique_consecutive(self, return_inverse: bool = False, return_counts: bool = False,
                           dim: int | None = None) -> Any:
        """The first entry of each run of equal consecutive entries (of the flattened tensor, or
        slices along ``dim``), with the run index of every entry (``return_inverse``) and the run
        lengths (``return_counts``) when asked; as torch.unique_consecutive, no gradient."""
        d = None if dim is None else _wrap_dim("unique_consecutive", dim, self.ndim)

        def runs(xp: Any, a: Any) -> tuple:
            moved = a.reshape(-1) if d is None else xp.moveaxis(a, d, 0)
            rows = moved.reshape(moved.shape[0], math.prod(moved.shape[1:]))
            starts = xp.ones(rows.shape[0], dtype=bool)
            if rows.shape[0] > 1:
                starts[1:] = (rows[1:] != rows[:-1]).any(axis=1) if rows.shape[1] else False
            first = xp.nonzero(starts)[0]
            values = moved[first] if d is None else xp.moveaxis(moved[first], 0, d)
            inverse = (xp.cumsum(starts) - 1).astype(np.int64)
            inverse = inverse.reshape(a.shape) if d is None else inverse
            counts = xp.diff(xp.append(first, rows.shape[0])).astype(np.int64)
            return values, inverse, counts

        values, inverse, counts = _no_grad_op(runs, self)
        extras = ([inverse] if return_inverse else []) + ([counts] if return_counts else [])
        return (values, *extras) if extras else values


# ------------------------------------------------------------------------------ functions


def _atleast(t: Tensor, ndim: int) -> Tensor:
    """numpy's atleast_1d/2d/3d: 0-d -> (1,)*, 1-d (N) -> (1, N[, 1]), 2-d (M, N) -> (M, N, 1)."""
    if t.ndim >= ndim:
        return t
    if ndim == 3 and t.ndim == 2:
        return t.unsqueeze(-1)
    if ndim == 3 and t.ndim == 1:
        return t.reshape(1, t.shape[0], 1)
    return t.reshape((1,) * (ndim - max(t.ndim, 1)) + (tuple(t.shape) or (1,)))


def _tensor_list(op: str, tensors: Any) -> list[Tensor]:
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{op}: expects a non-empty sequence of tensors")
    return tensors


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """Tensors joined horizontally: along dim 0 for 1-d tensors, dim 1 otherwise (0-d count as 1-d)."""
    ts = [_atleast(t, 1) for t in _tensor_list("hstack", tensors)]
    return _tf().cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """Tensors joined vertically (along dim 0) after making each at least 2-d (1-d (N) -> (1, N))."""
    return _tf().cat([_atleast(t, 2) for t in _tensor_list("vstack", tensors)], 0)


row_stack = vstack


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """Tensors joined depthwise (along dim 2) after making each at least 3-d."""
    return _tf().cat([_atleast(t, 3) for t in _tensor_list("dstack", tensors)], 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """Tensors joined along dim 1, 0-d and 1-d ones first made columns (N) -> (N, 1)."""
    ts = [t.reshape(t.numel(), 1) if t.ndim <= 1 else t for t in _tensor_list("column_stack", tensors)]
    return _tf().cat(ts, 1)


def block_diag(*tensors: Tensor) -> Tensor:
    """The block diagonal matrix of the given 0-, 1- or 2-d tensors (a 1-d one is a row),
    zeros elsewhere, in their common dtype."""
    tf = _tf()
    if not tensors:
        return tf.zeros(1, 0)
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(
                f"block_diag: input tensors must have 2 or fewer dimensions; input {i} has {t.ndim} dimensions"
            )
    blocks = [t.reshape(1, -1) if t.ndim < 2 else t for t in tf._same_dtype(tensors)]
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        rows.append(tf.pad(b, (left, width - left - b.shape[1], 0, 0)))
        left += b.shape[1]
    return tf.cat(rows, 0)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """The Cartesian product of 1-d tensors as an (n1 * n2 * ..., k) tensor (rows in
    itertools.product order); one tensor comes back as it is."""
    tf = _tf()
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"cartesian_prod: expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    ts = tf._same_dtype(tensors)
    shape = tuple(t.shape[0] for t in ts)
    cols = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = -1
        cols.append(t.reshape(*view).expand(*shape).reshape(-1))
    return tf.stack(cols, 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:  # noqa: A002
    """The length-r combinations of a 1-d tensor's entries as rows of an (m, r) tensor, in
    itertools.combinations order (combinations_with_replacement with ``with_replacement``)."""
    if input.ndim != 1:
        raise RuntimeError(f"combinations: expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"combinations: expect a non-negative number, but got {r}")
    if r == 0:
        return input.new_empty((0,))
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    index = np.array(list(pick(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    return input[_tf().tensor(index, device=input.device)]


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803 (PyTorch's name)
    """The Vandermonde matrix of a 1-d tensor: column j is x ** (N - 1 - j) (x ** j when
    ``increasing``); N defaults to len(x). Integer and bool inputs give int64."""
    if x.ndim != 1:
        raise RuntimeError(f"vander: x must be a one-dimensional tensor, got shape {list(x.shape)}")
    n = x.shape[0] if N is None else int(N)
    if n < 0:
        raise RuntimeError(f"vander: N must be non-negative, got {n}")
    if np.dtype(x.dtype).kind in "biu":
        x = x.long()
    if n == 0:
        return x.new_zeros((x.shape[0], 0))
    # The column of ones as where(True, 1, x): still an edge to x (a zero gradient), as in torch.
    ones = x.new_ones(x.shape)
    cols = [_tf().where(ones.bool(), ones, x)]
    for _ in range(1, n):
        cols.append(cols[-1] * x)
    if not increasing:
        cols.reverse()
    return _tf().stack(cols, 1)


def logspace(start: Any, end: Any, steps: int, base: float = 10.0, *, out: Tensor | None = None, dtype: Any = None,
             layout: Any = None, device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """``steps`` values base ** v for v evenly spaced from start to end (computed in double,
    then cast to ``dtype``, the default float dtype unless given)."""
    tf = _tf()
    lo, hi = float(start), float(end)
    if steps < 0:
        raise RuntimeError(f"logspace: number of steps must be non-negative, got {steps}")
    tf._no_bool("logspace", dtype or (out.dtype if out is not None else None), steps)

    def values(xp: Any, shape: Any, dt: Any) -> Any:
        out = np.power(float(base), np.linspace(lo, hi, int(steps), dtype=np.float64))
        return xp.asarray(out).astype(dt)

    return tf._make(values, (), dtype, device, requires_grad, op="logspace", out=out, layout=layout)


def range_(start: float = 0, end: float | None = None, step: float = 1, *, out: Tensor | None = None,
           dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: bool = False,
           requires_grad: bool = False) -> Tensor:
    """The deprecated ``torch.range``: start, start + step, ... up to and including ``end``, in
    the default float dtype unless ``dtype`` is given. Prefer ``arange`` (which excludes end)."""
    warnings.warn(
        "tinyflow.range is deprecated and will be removed, as in PyTorch; use tinyflow.arange instead "
        "(it excludes the end: range(a, b) is arange(a, b + 1) for integers)",
        UserWarning,
        stacklevel=2,
    )
    if end is None:
        raise TypeError("range(): missing 1 required positional argument: 'end'")
    _tf()._no_bool("range", dtype or (out.dtype if out is not None else None))
    if step == 0:
        raise RuntimeError("range: step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(f"range: upper bound {end} and lower bound {start} inconsistent with step sign {step}")
    count = int(math.floor((end - start) / step)) + 1

    def values(xp: Any, shape: Any, dt: Any) -> Any:
        return (start + step * xp.arange(count, dtype=np.float64)).astype(dt)

    return _tf()._make(values, (), dtype, device, requires_grad, op="range", out=out, layout=layout)


range_.__name__ = range_.__qualname__ = "range"  # exported as tinyflow.range (not named so here: builtins.range)


def _as_values(x: Any, ref: Tensor) -> Tensor:
    """A number as a 0-d tensor on ref's device (searchsorted, bucketize and isin take scalars)."""
    return x if _is_tensor(x) else _tf().tensor(x, device=ref.device)


def searchsorted(sorted_sequence: Tensor, input: Any, *, out_int32: bool = False, right: bool = False,  # noqa: A002
                 side: str | None = None, sorter: Tensor | None = None) -> Tensor:
    """For each value of ``input``, the index where it would be inserted into the innermost
    dim of ``sorted_sequence`` to keep it sorted: the first such index ('left'), or the last
    (``right=True`` or ``side='right'``). An N-d sequence pairs with input's leading dims;
    ``sorter`` holds the indices that sort an unsorted sequence. int64, or int32 with out_int32."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"searchsorted: side can only be 'left' or 'right' but got {side!r}")
        if right and side == "left":
            raise RuntimeError("searchsorted: side and right can't be set to opposites, got side of left while right was True")
        right = side == "right"
    values = _as_values(input, sorted_sequence)
    seq = sorted_sequence
    if seq.ndim == 0:
        raise RuntimeError("searchsorted: boundaries tensor should have at least 1 dimension, got a 0-d tensor")
    if seq.ndim > 1 and tuple(seq.shape[:-1]) != tuple(values.shape[:-1]):
        raise RuntimeError(
            f"searchsorted: boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
            f"tensor and input value tensor must match, but got boundaries shape {list(seq.shape)} and input "
            f"value shape {list(values.shape)}"
        )
    if sorter is not None and tuple(sorter.shape) != tuple(seq.shape):
        raise RuntimeError(
            f"searchsorted: boundaries and sorter must have the same size, got {list(seq.shape)} and {list(sorter.shape)}"
        )
    out_dtype = np.int32 if out_int32 else np.int64
    side_name = "right" if right else "left"

    def find(xp: Any, s: Any, v: Any, *order: Any) -> Any:
        if order:
            s = xp.take_along_axis(s, order[0], axis=-1)
        if s.ndim == 1:
            return xp.asarray(xp.searchsorted(s, v, side=side_name)).astype(out_dtype)
        below = s[..., None, :] <= v[..., :, None] if right else s[..., None, :] < v[..., :, None]
        return below.sum(axis=-1).astype(out_dtype)

    return _no_grad_op(find, seq, values, *([sorter] if sorter is not None else []))


def bucketize(input: Any, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:  # noqa: A002
    """The bucket of each value of input among the sorted 1-d ``boundaries``: i with
    boundaries[i-1] < x <= boundaries[i] (or boundaries[i-1] <= x < boundaries[i] with ``right``)."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"bucketize: boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """A bool tensor of elements' shape: True where the entry occurs in test_elements (False
    with ``invert``). Either argument may be a number, not both."""
    if not _is_tensor(elements) and not _is_tensor(test_elements):
        raise TypeError("isin: at least one of elements and test_elements must be a Tensor")
    ref = elements if _is_tensor(elements) else test_elements
    e, t = _as_values(elements, ref), _as_values(test_elements, ref)
    return _no_grad_op(lambda xp, a, b: xp.isin(a, b, assume_unique=assume_unique, invert=invert), e, t)
