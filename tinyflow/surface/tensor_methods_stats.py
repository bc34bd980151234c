"""Tensor methods for NaN-aware and statistical reductions, products, PyTorch's aliases and a few
Tensor properties.

- reductions: nansum, nanmean, nanmedian, quantile, nanquantile, mode, aminmax, histc, histogram, cov,
  corrcoef, dist, renorm;
- products: kron, vdot, baddbmm, addbmm, addmv, addr and the in-place addmm_, baddbmm_, addbmm_, addmv_,
  addr_; the functions tensordot, cdist, trapezoid / trapz and cumulative_trapezoid;
- aliases: multiply, subtract, greater, less, not_equal, absolute, positive, ... and the in-place
  comparisons (eq_, lt_, ...), which keep self's dtype as PyTorch's do;
- properties and queries: is_cpu, is_signed, is_nonzero, is_same_size, itemsize, nbytes, stride,
  storage_offset, retains_grad; the random fills exponential_, geometric_, log_normal_, cauchy_;
  the function initial_seed.

Everything differentiable is a composition of differentiable Tensor ops (gather along a sort order
for the order statistics, matmul for the products, VectorNormFunction for the distances), so the
gradients are those of the pieces. The order statistics compute their data-dependent positions on
the raw arrays (no gradient), then gather the values, so the gradient goes to the chosen entries.

``StatsMethods`` is a namespace, not a base class: tinyflow/surface/__init__.py attaches the methods and the
``tinyflow.*`` functions of this file that its table lists.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tinyflow import return_types
from tinyflow.dtypes import as_dtype, is_floating

if TYPE_CHECKING:
    from tinyflow.tensor import Tensor

__all__ = ["StatsMethods"]

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


# ------------------------------------------------------------------------------ helpers
def _ops() -> Any:
    """Every op (tinyflow.surface.ops), imported on first use."""
    from tinyflow.surface.ops import index as ops

    return ops


def _tf() -> Any:
    """tinyflow/creation.py: Tensor and the creation functions (tensor, zeros, where, cat, _draw, ...)."""
    from tinyflow import creation

    return creation


def _is_tensor(x: Any) -> bool:
    return isinstance(x, _tf().Tensor)


def _dim(op: str, dim: int, ndim: int) -> int:
    from tinyflow.arg_parser import normalize_dim

    return normalize_dim(op, int(dim), ndim)


def _xp(t: Tensor) -> Any:
    return t.device.xp


def _wrap(arr: Any, like: Tensor) -> Tensor:
    """A raw array (no history) as a Tensor on ``like``'s device."""
    return _tf().Tensor._from_array(arr, device=like.device)


def _host(t: Tensor) -> np.ndarray:
    """The values of ``t`` on the host (a device sync for a GPU tensor)."""
    return np.asarray(t.detach().cpu().numpy())


def _require_float(op: str, t: Tensor, error: type[Exception] = RuntimeError) -> None:
    if not is_floating(t.dtype):
        raise error(f"{op}: expected a floating point input, got dtype {t.dtype}; convert with .float() first")


def _check_broadcast(op: str, input: Tensor, shape: tuple[int, ...]) -> None:  # noqa: A002 (PyTorch's name)
    """``input`` (the added term of addmm & co.) must broadcast to the product's ``shape``."""
    try:
        ok = np.broadcast_shapes(tuple(input.shape), shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(f"{op}: input of shape {tuple(input.shape)} does not broadcast to the product's shape {shape}")


def _scaled_sum(op: str, input: Tensor, prod: Tensor, beta: Any, alpha: Any) -> Tensor:  # noqa: A002
    """beta * input + alpha * prod; with beta == 0 the input is ignored (its NaN and inf too), as PyTorch."""
    _check_broadcast(op, input, tuple(prod.shape))
    scaled = prod if alpha == 1 else prod * alpha
    if beta == 0:
        return scaled
    return (input if beta == 1 else input * beta) + scaled


def _own(old: Tensor, beta: Any) -> Tensor:
    """The old value of an in-place add-product's tensor: a copy when ``beta * old`` saves it for
    backward, since the in-place write then overwrites that memory (PyTorch saves a clone too)."""
    return old if beta in (0, 1) else old.clone()


def _sorted_last(t: Tensor, dim: int | None) -> tuple[Tensor, tuple[int, ...]]:
    """``t`` with ``dim`` moved last (flattened when dim is None; a 0-d tensor as one entry) and
    the shape of the other dims."""
    if dim is None or t.ndim == 0:
        return t.reshape(-1), ()
    x = t.movedim(dim, -1)
    return x, tuple(x.shape[:-1])


# ------------------------------------------------------------------------------ quantiles
def _quantile_q(op: str, q: Any, x: Tensor) -> tuple[np.ndarray, bool]:
    """q as a 1-d float64 host array and whether it was a scalar; checks q's rank, dtype and range."""
    if _is_tensor(q):
        if q.ndim > 1:
            raise RuntimeError(f"{op}() q must be a scalar or 1D tensor, got shape {tuple(q.shape)}")
        if q.dtype != x.dtype:
            raise RuntimeError(f"{op}() q tensor must be same dtype as the input tensor, got {q.dtype} and {x.dtype}")
        values, scalar = _host(q).astype(np.float64).reshape(-1), q.ndim == 0
    else:
        values, scalar = np.asarray([float(q)], dtype=np.float64), True
    if not ((values >= 0) & (values <= 1)).all():
        raise RuntimeError(f"{op}() q must be in the range [0, 1] but got {values.tolist()}")
    return values, scalar


def _quantile_ranks(xp: Any, sorted_arr: Any, q: np.ndarray, ignore_nan: bool) -> Any:
    """The fractional positions (*batch, m) of the q-quantiles in each sorted row (NaN last): a row
    with NaN (quantile) or only NaN (nanquantile) points at its last entry, which is NaN."""
    n = sorted_arr.shape[-1]
    valid = (~xp.isnan(sorted_arr)).sum(axis=-1, keepdims=True)  # (*batch, 1)
    qs = xp.asarray(q)
    if ignore_nan:
        ranks = qs * (valid - 1)
        return xp.where(ranks < 0, n - 1, ranks)
    return xp.where(valid < n, n - 1, qs * (n - 1))


def _quantile(x: Tensor, q: Any, dim: int | None, keepdim: bool, interpolation: str, op: str,
              ignore_nan: bool) -> Tensor:
    """quantile / nanquantile: the q-quantiles along ``dim`` (of all entries when None), by
    ``interpolation`` between the two nearest sorted entries, as torch.quantile."""
    if not is_floating(x.dtype):
        raise RuntimeError(f"{op}() input tensor must be either float or double dtype, got {x.dtype}")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{op}() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    qs, scalar = _quantile_q(op, q, x)
    if x.numel() == 0:
        raise RuntimeError(f"{op}() input tensor must be non-empty, got shape {tuple(x.shape)}")
    d = None if dim is None else _dim(op, dim, x.ndim)
    if x.ndim == 0:
        d = None  # one entry: the result keeps no dim
    rows, batch = _sorted_last(x, d)
    s = rows.sort(-1).values  # (*batch, n), NaN last
    xp = _xp(x)
    ranks = _quantile_ranks(xp, s.array, qs, ignore_nan)  # (*batch, m)
    if interpolation in ("lower", "higher", "nearest"):
        pick = {"lower": xp.floor, "higher": xp.ceil, "nearest": xp.round}[interpolation](ranks)
        out = s.gather(-1, _wrap(pick.astype("int64"), x))
    else:
        below = xp.floor(ranks)
        weight = xp.full(ranks.shape, 0.5) if interpolation == "midpoint" else ranks - below
        lo = s.gather(-1, _wrap(below.astype("int64"), x))
        hi = s.gather(-1, _wrap(xp.ceil(ranks).astype("int64"), x))
        out = lo + _wrap(weight.astype(x.dtype), x) * (hi - lo)
    out = out.movedim(-1, 0) if batch else out  # (m, *batch)
    if keepdim:
        out = out.reshape(out.shape[0], *([1] * x.ndim)) if d is None else out.unsqueeze(d + 1)
    return out.reshape(*out.shape[1:]) if scalar else out


def _nanmedian_all(x: Tensor) -> Tensor:
    """nanmedian of all entries (0-d); as PyTorch, the gradient is shared evenly among the entries
    equal to the median (the NaN entries when all are NaN)."""
    if x.numel() == 0:
        return _tf().full((), float("nan"), dtype=x.dtype, device=x.device)
    v = x.reshape(-1).nanmedian(0).values.detach()
    if not is_floating(x.dtype):
        return v
    ties = (x == v) | (x.isnan() & v.isnan())
    return v + (x - v).masked_fill(ties.logical_not(), 0).sum() / ties.sum().to(x.dtype)


# ------------------------------------------------------------------------------ mode
def _mode_index(xp: Any, a: Any) -> Any:
    """For each row of ``a`` (B, n): the index of the last occurrence of its most frequent value
    (the smallest such value on ties), as torch.mode on the CPU."""
    rows, n = a.shape
    order = xp.argsort(a, axis=1, kind="stable")
    s = xp.take_along_axis(a, order, axis=1)
    starts = xp.concatenate([xp.ones((rows, 1), dtype=bool), s[:, 1:] != s[:, :-1]], axis=1)
    run = xp.cumsum(starts, axis=1) - 1  # the run (of equal values) each sorted entry is in
    flat = (run + xp.arange(rows)[:, None] * n).reshape(-1)
    lengths = xp.bincount(flat, minlength=rows * n).reshape(rows, n)
    count = xp.take_along_axis(lengths, run, axis=1)  # the length of each entry's run
    first = xp.argmax(count, axis=1)  # the first entry of the longest (and smallest) run
    last = first + xp.take_along_axis(count, first[:, None], axis=1)[:, 0] - 1
    return xp.take_along_axis(order, last[:, None], axis=1)[:, 0].astype("int64")


# ------------------------------------------------------------------------------ histograms
def _bin_counts(xp: Any, a: Any, edges: Any, weight: Any = None) -> Any:
    """Counts (or summed weights) of ``a``'s entries in the bins [e_i, e_i+1), the last closed;
    entries outside [e_0, e_-1] (and NaN) are left out."""
    a = a.reshape(-1)
    bins = edges.shape[0] - 1
    keep = (a >= edges[0]) & (a <= edges[-1])
    index = xp.minimum(xp.searchsorted(edges, a[keep], side="right") - 1, bins - 1)
    w = None if weight is None else weight.reshape(-1)[keep].astype(np.float64)
    return xp.bincount(index, weights=w, minlength=bins)[:bins]


def _data_range(op: str, t: Tensor, low: float, high: float, pad: float, from_data: bool) -> tuple[float, float]:
    """[low, high], or the data's range when ``from_data``; widened by ``pad`` when empty (low == high)."""
    if from_data and t.numel():
        values = _host(t)
        low, high = float(values.min()), float(values.max())
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(f"{op}: range of [{low}, {high}] is not finite")
    if low == high:
        low, high = low - pad, high + pad
    return low, high


def _linear_edges(xp: Any, low: float, high: float, bins: int, dtype: Any) -> Any:
    return xp.linspace(low, high, bins + 1).astype(dtype)


# ------------------------------------------------------------------------------ random fills
def _continuous(op: str, t: Tensor, error: type[Exception] = RuntimeError) -> None:
    if not is_floating(t.dtype):
        raise error(f"{op}: a continuous distribution needs a floating point tensor, got dtype {t.dtype}")


def _draw(t: Tensor, sampler: str, generator: Any) -> np.ndarray:
    """Samples of the NumPy Generator method ``sampler`` (standard_normal, ...) in t's shape and
    dtype (float32/float64 drawn directly), from ``generator``'s stream (the default one when None)."""
    from tinyflow.random import rng

    return _tf()._draw(getattr(rng(generator), sampler), tuple(t.shape), as_dtype(t.dtype))


class StatsMethods:
    """Tensor methods (``self`` is a Tensor): a namespace that tinyflow/surface/__init__.py reads; see the module docstring."""

    # ------------------------------------------------------------ NaN-aware reductions
    def nansum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        """The sum over ``dim`` (all dims when None) treating NaN as zero; integers sum to int64."""
        x = self if dtype is None else self.to(dtype)
        if is_floating(x.dtype):
            x = x.masked_fill(x.isnan(), 0)
        return x.sum(dim, keepdim)

    def nanmean(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        """The mean over ``dim`` of the entries that are not NaN (NaN where every entry is NaN)."""
        x = self if dtype is None else self.to(dtype)
        if not is_floating(x.dtype):
            raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got {x.dtype}; "
                               "use mean() or convert with .float()")
        count = x.isnan().logical_not().sum(dim, keepdim)
        with np.errstate(divide="ignore", invalid="ignore"):  # an all-NaN slice: 0 / 0 = NaN, silently as PyTorch
            return x.nansum(dim, keepdim) / count.to(x.dtype)

    def nanmedian(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """The lower median of the entries that are not NaN: of all entries (a 0-d tensor) or along
        ``dim`` as (values, indices); NaN where all are NaN (its index is then unspecified)."""
        if dim is None:
            return _nanmedian_all(self)
        d = _dim("nanmedian", dim, self.ndim)
        if self.ndim == 0:
            return return_types.nanmedian(self.clone(), _tf().zeros((), dtype="int64", device=self.device))
        if self.shape[d] == 0:
            raise IndexError(f"nanmedian(): Expected reduction dim {dim} to have non-zero size "
                             f"(shape {tuple(self.shape)})")
        order = self.argsort(d)  # NaN last
        valid = self.isnan().logical_not().sum(d, keepdim=True)
        k = ((valid - 1) // 2).clamp(min=0)
        index = order.gather(d, k)
        values = self.gather(d, index)
        if not keepdim:
            values, index = values.squeeze(d), index.squeeze(d)
        return return_types.nanmedian(values, index)

    def quantile(self, q: Any, dim: int | None = None, keepdim: bool = False, *,
                 interpolation: str = "linear") -> Tensor:
        """The q-th quantiles along ``dim`` (of all entries when None); q a number in [0, 1] or a 1-d
        tensor (its dim comes first in the result). NaN in a row makes that row's quantiles NaN."""
        return _quantile(self, q, dim, keepdim, interpolation, "quantile", ignore_nan=False)

    def nanquantile(self, q: Any, dim: int | None = None, keepdim: bool = False, *,
                    interpolation: str = "linear") -> Tensor:
        """Like quantile, ignoring NaN: the quantiles of each row's other entries (NaN if all are NaN)."""
        return _quantile(self, q, dim, keepdim, interpolation, "nanquantile", ignore_nan=True)

    def mode(self, dim: int = -1, keepdim: bool = False) -> Any:
        """The most frequent value along ``dim`` (the smallest on ties) and the index of its last
        occurrence, as (values, indices); the gradient goes to that entry."""
        d = _dim("mode", dim, self.ndim)
        if self.ndim == 0:
            return return_types.mode(self.clone(), _tf().zeros((), dtype="int64", device=self.device))
        if self.shape[d] == 0:
            raise IndexError(f"mode(): Expected reduction dim {dim} to have non-zero size (shape {tuple(self.shape)})")
        rows, batch = _sorted_last(self.detach(), d)
        index = _mode_index(_xp(self), rows.array.reshape(-1, rows.shape[-1]))
        index = _wrap(index.reshape(batch), self).unsqueeze(d)
        values = self.gather(d, index)
        if not keepdim:
            values, index = values.squeeze(d), index.squeeze(d)
        return return_types.mode(values, index)

    def aminmax(self, *, dim: int | None = None, keepdim: bool = False) -> Any:
        """(min, max) over ``dim`` (all entries when None), a named tuple; tied extremes share the gradient."""
        if self.numel() == 0 or (dim is not None and self.ndim and self.shape[_dim("aminmax", dim, self.ndim)] == 0):
            raise RuntimeError(f"aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                               f"identity (shape {tuple(self.shape)}, dim {dim})")
        return return_types.aminmax(self.amin(dim, keepdim), self.amax(dim, keepdim))

    # ------------------------------------------------------------ histograms (no gradient)
    def histc(self, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002 (PyTorch's names)
        """Counts of the entries in ``bins`` equal-width bins over [min, max] (the data's range when
        min == max), in self's dtype; entries outside the range are ignored."""
        _require_float("histc", self, NotImplementedError)
        if int(bins) <= 0:
            raise RuntimeError(f"histc: bins must be > 0, but got {bins}")
        if min > max:
            raise RuntimeError(f"histc: max must be larger than min, got min {min} and max {max}")
        low, high = _data_range("histc", self, float(min), float(max), 1.0, from_data=min == max)
        xp = _xp(self)
        edges = _linear_edges(xp, low, high, int(bins), self.dtype)
        return _wrap(_bin_counts(xp, self.array, edges).astype(self.dtype), self)

    def histogram(self, bins: Any = 100, *, range: Sequence[float] | None = None,  # noqa: A002 (PyTorch's name)
                  weight: Tensor | None = None, density: bool = False) -> Any:
        """(hist, bin_edges): counts (or summed ``weight``) of the entries in ``bins`` equal bins over
        ``range`` (the data's range by default), or in the bins whose edges the 1-d tensor ``bins``
        gives; with ``density`` the counts become a density (integral 1)."""
        _require_float("histogram", self, NotImplementedError)
        xp = _xp(self)
        if _is_tensor(bins):
            if bins.ndim != 1 or bins.numel() < 1:
                raise RuntimeError(f"histogram: the bins tensor must have one dimension and at least one edge, got "
                                   f"shape {tuple(bins.shape)}")
            if bins.dtype != self.dtype:
                raise RuntimeError(f"histogram: input and bins must have the same dtype, got {self.dtype} and {bins.dtype}")
            edges = bins.detach().array
        else:
            if int(bins) <= 0:
                raise RuntimeError(f"histogram: bins must be > 0, but got {bins}")
            low, high = (0.0, 0.0) if range is None else (float(range[0]), float(range[1]))
            if low > high:
                raise RuntimeError(f"histogram: min should not exceed max, but got min {low} max {high}")
            low, high = _data_range("histogram", self, low, high, 0.5, from_data=range is None)
            edges = _linear_edges(xp, low, high, int(bins), self.dtype)
        if weight is not None:
            if tuple(weight.shape) != tuple(self.shape) or weight.dtype != self.dtype:
                raise RuntimeError(f"histogram: weight must have the input's shape {tuple(self.shape)} and dtype "
                                   f"{self.dtype}, got {tuple(weight.shape)} and {weight.dtype}")
        w = None if weight is None else weight.detach().array
        hist = _bin_counts(xp, self.array, edges, w).astype(np.float64) if edges.shape[0] > 1 else xp.zeros(0)
        if density:
            with np.errstate(divide="ignore", invalid="ignore"):  # no entry in range: NaN, as PyTorch
                hist = hist / (hist.sum() * xp.diff(edges.astype(np.float64)))
        return return_types.histogram(_wrap(hist.astype(self.dtype), self), _wrap(edges.copy(), self))

    # ------------------------------------------------------------ covariance and distances
    def cov(self, *, correction: int = 1, fweights: Tensor | None = None, aweights: Tensor | None = None) -> Tensor:
        """The covariance matrix of the variables in the rows of a (vars, observations) matrix (a
        vector is one variable), with ``correction`` (1: Bessel's) and frequency / observation weights."""
        if self.ndim > 2:
            raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                               f"{self.ndim} dimensions (shape {tuple(self.shape)})")
        x = self.reshape(1, -1) if self.ndim < 2 else self
        if not is_floating(x.dtype):
            x = x.to(_tf().get_default_dtype())
        observations = x.shape[1]
        w = None
        for name, weights, integral in (("fweights", fweights, True), ("aweights", aweights, False)):
            if weights is None:
                continue
            _check_cov_weights(name, weights, integral, observations)
            w = weights if w is None else w * weights
        if w is None:
            w_sum: Any = observations
            avg = x.mean(1)
            norm = float(max(observations - correction, 0))
        else:
            w = w.to(x.dtype)
            w_sum = w.sum()
            avg = (x * w).sum(1) / w_sum
            if correction == 0:
                norm = w_sum
            elif aweights is None:
                norm = w_sum - correction
            else:
                norm = w_sum - correction * (w * aweights.to(x.dtype)).sum() / w_sum
            norm = norm.clamp(min=0)
        centered = x - avg.unsqueeze(1)
        c = centered.mm((centered if w is None else centered * w).t())
        return (c / norm).squeeze()

    def corrcoef(self) -> Tensor:
        """Pearson's correlation coefficients of the rows (variables) of a matrix, clipped to [-1, 1]."""
        c = self.cov()
        if c.ndim == 0:
            return c / c
        std = c.diagonal().sqrt()
        c = c / std.unsqueeze(1)
        c = c / std.unsqueeze(0)
        return c.clamp(-1, 1)

    def dist(self, other: Tensor, p: float = 2) -> Tensor:
        """The p-norm of self - other (broadcast) over all entries."""
        diff = self - other
        _require_float("dist", diff)
        return _ops().VectorNormFunction.apply(diff, float(p), None, False)

    def renorm(self, p: float, dim: int, maxnorm: float) -> Tensor:
        """Each slice along ``dim`` whose p-norm exceeds ``maxnorm`` scaled down to norm ``maxnorm``."""
        if self.ndim < 2:
            raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {self.ndim} dimensions")
        _require_float("renorm", self)
        if p <= 0:
            raise RuntimeError(f"renorm: non-positive norm not supported, got p={p}")
        if maxnorm < 0:
            raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
        d = _dim("renorm", dim, self.ndim)
        others = tuple(i for i in range(self.ndim) if i != d)
        norm = _ops().VectorNormFunction.apply(self, float(p), others, True)
        factor = _tf().where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)
        return self * factor.to(self.dtype)

    # ------------------------------------------------------------ products
    def kron(self, other: Tensor) -> Tensor:
        """The Kronecker product: blocks self[i] * other, for any ranks (the smaller padded with 1s)."""
        nd = max(self.ndim, other.ndim)
        a = self.reshape(*((1,) * (nd - self.ndim) + tuple(self.shape)))
        b = other.reshape(*((1,) * (nd - other.ndim) + tuple(other.shape)))
        a_split = [s for n in a.shape for s in (n, 1)]  # (a0, 1, a1, 1, ...)
        b_split = [s for n in b.shape for s in (1, n)]  # (1, b0, 1, b1, ...)
        out = a.reshape(*a_split) * b.reshape(*b_split)
        return out.reshape(*(m * n for m, n in zip(a.shape, b.shape)))

    def vdot(self, other: Tensor) -> Tensor:
        """The dot product of two 1-d tensors (complex conjugation does not apply to tinyflow's real dtypes)."""
        if self.ndim != 1 or other.ndim != 1:
            raise RuntimeError(f"vdot: expects two 1-d tensors, got shapes {tuple(self.shape)} and {tuple(other.shape)}")
        if self.shape[0] != other.shape[0]:
            raise RuntimeError(f"vdot: inconsistent tensor size: {self.shape[0]} and {other.shape[0]} elements")
        if self.dtype != other.dtype:
            raise RuntimeError(f"vdot: expected both vectors to have the same dtype, got {self.dtype} and {other.dtype}")
        return self @ other

    def baddbmm(self, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        """beta * self + alpha * (batch1 @ batch2), batched (b, n, m) @ (b, m, p)."""
        return _scaled_sum("baddbmm", self, batch1.bmm(batch2), beta, alpha)

    def addbmm(self, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        """beta * self + alpha * sum_b(batch1[b] @ batch2[b]), as one (n, b*m) @ (b*m, p) product."""
        if batch1.ndim != 3 or batch2.ndim != 3 or batch1.shape[0] != batch2.shape[0] or batch1.shape[2] != batch2.shape[1]:
            raise RuntimeError(f"addbmm: expects batches of matrices (b, n, m) and (b, m, p), got shapes "
                               f"{tuple(batch1.shape)} and {tuple(batch2.shape)}")
        b, n, m = batch1.shape
        prod = batch1.permute(1, 0, 2).reshape(n, b * m).mm(batch2.reshape(b * m, batch2.shape[2]))
        return _scaled_sum("addbmm", self, prod, beta, alpha)

    def addmv(self, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        """beta * self + alpha * (mat @ vec)."""
        return _scaled_sum("addmv", self, mat.mv(vec), beta, alpha)

    def addr(self, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        """beta * self + alpha * outer(vec1, vec2)."""
        return _scaled_sum("addr", self, vec1.outer(vec2), beta, alpha)

    def addmm_(self, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        return self._inplace("addmm_", lambda old: _own(old, beta).addmm(mat1, mat2, beta=beta, alpha=alpha),
                             (mat1, mat2))

    def baddbmm_(self, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        return self._inplace("baddbmm_", lambda old: _own(old, beta).baddbmm(batch1, batch2, beta=beta, alpha=alpha),
                             (batch1, batch2))

    def addbmm_(self, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        return self._inplace("addbmm_", lambda old: _own(old, beta).addbmm(batch1, batch2, beta=beta, alpha=alpha),
                             (batch1, batch2))

    def addmv_(self, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        return self._inplace("addmv_", lambda old: _own(old, beta).addmv(mat, vec, beta=beta, alpha=alpha), (mat, vec))

    def addr_(self, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        return self._inplace("addr_", lambda old: _own(old, beta).addr(vec1, vec2, beta=beta, alpha=alpha),
                             (vec1, vec2))

    # ------------------------------------------------------------ aliases
    def multiply(self, other: Any) -> Tensor:
        return self.mul(other)

    def multiply_(self, other: Any) -> Tensor:
        return self.mul_(other)

    def subtract(self, other: Any, alpha: Any = 1) -> Tensor:  # subtract(number, alpha): PyTorch's second form
        return self.sub(other, alpha=alpha)

    def subtract_(self, other: Any, alpha: Any = 1) -> Tensor:
        return self.sub_(other, alpha=alpha)

    def greater(self, other: Any) -> Tensor:
        return self.gt(other)

    def greater_equal(self, other: Any) -> Tensor:
        return self.ge(other)

    def less(self, other: Any) -> Tensor:
        return self.lt(other)

    def less_equal(self, other: Any) -> Tensor:
        return self.le(other)

    def not_equal(self, other: Any) -> Tensor:
        return self.ne(other)

    def absolute(self) -> Tensor:
        return self.abs()

    def absolute_(self) -> Tensor:
        return self.abs_()

    def positive(self) -> Tensor:
        """self itself (PyTorch refuses bool tensors)."""
        if as_dtype(self.dtype).kind == "b":
            raise RuntimeError("positive: the `+` operator on a bool tensor is not supported; use .int() first")
        return self

    def divide_(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        return self.div_(other, rounding_mode=rounding_mode)

    def true_divide_(self, other: Any) -> Tensor:
        return self.div_(other)

    def floor_divide_(self, other: Any) -> Tensor:
        return self._inplace("floor_divide_", lambda old: old.floor_divide(other), (other,))

    # the in-place comparisons and logical ops write 0 / 1 in self's dtype, as PyTorch
    def eq_(self, other: Any) -> Tensor:
        return self.copy_(self.eq(other))

    def ne_(self, other: Any) -> Tensor:
        return self.copy_(self.ne(other))

    def lt_(self, other: Any) -> Tensor:
        return self.copy_(self.lt(other))

    def le_(self, other: Any) -> Tensor:
        return self.copy_(self.le(other))

    def gt_(self, other: Any) -> Tensor:
        return self.copy_(self.gt(other))

    def ge_(self, other: Any) -> Tensor:
        return self.copy_(self.ge(other))

    greater_, greater_equal_, less_, less_equal_, not_equal_ = gt_, ge_, lt_, le_, ne_

    def logical_and_(self, other: Any) -> Tensor:
        return self.copy_(self.logical_and(other))

    def logical_or_(self, other: Any) -> Tensor:
        return self.copy_(self.logical_or(other))

    def logical_xor_(self, other: Any) -> Tensor:
        return self.copy_(self.logical_xor(other))

    # ------------------------------------------------------------ properties and queries
    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    def is_signed(self) -> bool:
        """True for floating and signed integer dtypes (False for bool and uint8)."""
        return is_floating(self.dtype) or as_dtype(self.dtype).kind == "i"

    def is_nonzero(self) -> bool:
        """Whether the single entry of a one-element tensor is non-zero (a host read)."""
        if self.numel() != 1:
            what = "no values" if self.numel() == 0 else "more than one value"
            raise RuntimeError(f"is_nonzero: Boolean value of Tensor with {what} is ambiguous (shape {tuple(self.shape)})")
        return bool(self.item() != 0)

    def is_same_size(self, other: Tensor) -> bool:
        return tuple(self.shape) == tuple(other.shape)

    @property
    def itemsize(self) -> int:
        """Bytes per entry."""
        return as_dtype(self.dtype).itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the entries (numel * itemsize)."""
        return self.numel() * self.itemsize

    def stride(self, dim: int | None = None) -> Any:
        """The step in entries between neighbours along each dim, read from the underlying array.
        tinyflow's views are NumPy/CuPy views: a flipped view can have a negative stride, which
        PyTorch's tensors never do."""
        strides = tuple(int(s) // self.itemsize for s in self.array.strides)
        return strides if dim is None else strides[_dim("stride", dim, self.ndim)]

    def storage_offset(self) -> int:
        """Always 0: tinyflow does not track where a view starts in its base's memory."""
        return 0

    @property
    def retains_grad(self) -> bool:
        """True for a non-leaf tensor on which retain_grad() was called."""
        return bool(self._retains_grad) and self.grad_fn is not None

    # ------------------------------------------------------------ random fills
    def exponential_(self, lambd: float = 1.0, *, generator: Any = None) -> Tensor:
        """Fill with Exponential(rate ``lambd``) samples."""
        _continuous("exponential_", self)
        if not lambd > 0:
            raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
        vals = _draw(self, "standard_exponential", generator)
        vals /= lambd
        return self._fill_values("exponential_", vals)

    def geometric_(self, p: float, *, generator: Any = None) -> Tensor:
        """Fill with Geometric(p) samples: the number of Bernoulli(p) trials up to the first success (>= 1)."""
        from tinyflow.random import rng

        if not 0 < p < 1:
            raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
        vals = rng(generator).geometric(p, size=tuple(self.shape)).astype(as_dtype(self.dtype))
        return self._fill_values("geometric_", vals)

    def log_normal_(self, mean: float = 1.0, std: float = 2.0, *, generator: Any = None) -> Tensor:
        """Fill with exp(N(mean, std^2)) samples."""
        _continuous("log_normal_", self, NotImplementedError)
        if not std > 0:
            raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
        vals = _draw(self, "standard_normal", generator)
        return self._fill_values("log_normal_", np.exp(vals * std + mean).astype(vals.dtype))

    def cauchy_(self, median: float = 0.0, sigma: float = 1.0, *, generator: Any = None) -> Tensor:
        """Fill with Cauchy(median, sigma) samples."""
        from tinyflow.random import rng

        _continuous("cauchy_", self)
        if not sigma > 0:
            raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
        vals = rng(generator).standard_cauchy(tuple(self.shape)) * sigma + median
        return self._fill_values("cauchy_", vals.astype(as_dtype(self.dtype)))


def _check_cov_weights(name: str, w: Tensor, integral: bool, observations: int) -> None:
    """cov's fweights (integers) and aweights (floats): 1-d, one per observation, non-negative."""
    if w.ndim > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with {w.ndim} dimensions")
    kind_ok = as_dtype(w.dtype).kind in "iu" if integral else is_floating(w.dtype)
    if not kind_ok:
        want = "integral" if integral else "floating point"
        raise RuntimeError(f"cov(): expected {name} to have {want} dtype but got {name} with {w.dtype} dtype")
    if w.numel() != observations:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the input "
                           f"but got {w.numel()} != {observations}")
    if (_host(w) < 0).any():
        raise RuntimeError(f"cov(): {name} cannot be negative")


# ------------------------------------------------------------------------------ functions
def tensordot(a: Tensor, b: Tensor, dims: Any = 2, out: Any = None) -> Tensor:
    """Sum the products of a's and b's entries over the dims ``dims`` pairs: an int n (a's last n
    with b's first n), a pair of dim lists, or a (2, k) tensor of them; computed as one matmul."""
    if out is not None:
        raise NotImplementedError("tensordot: out= is not supported in tinyflow; use the returned tensor")
    if a.dtype != b.dtype:
        raise RuntimeError(f"tensordot: both inputs should have the same dtype, got {a.dtype} and {b.dtype}")
    dims_a, dims_b = _tensordot_dims(a, b, dims)
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise RuntimeError(f"tensordot: contracted dimensions need to match, but first has size {a.shape[da]} "
                               f"in dim {da} and second has size {b.shape[db]} in dim {db}")
    free_a = [i for i in range(a.ndim) if i not in dims_a]
    free_b = [i for i in range(b.ndim) if i not in dims_b]
    k = int(np.prod([a.shape[i] for i in dims_a], dtype=np.int64))
    left = (a.permute(*free_a, *dims_a) if a.ndim else a).reshape(-1, k)  # (M, K)
    right = (b.permute(*dims_b, *free_b) if b.ndim else b).reshape(k, -1)  # (K, N)
    return left.mm(right).reshape(*[a.shape[i] for i in free_a], *[b.shape[i] for i in free_b])


def _tensordot_dims(a: Tensor, b: Tensor, dims: Any) -> tuple[list[int], list[int]]:
    if _is_tensor(dims):
        dims = int(dims.item()) if dims.numel() == 1 else _host(dims).tolist()
    if isinstance(dims, (int, np.integer)):
        n = int(dims)
        if n < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={n}")
        if n > a.ndim or n > b.ndim:
            raise RuntimeError(f"tensordot: dims={n} exceeds the ranks of shapes {tuple(a.shape)} and {tuple(b.shape)}")
        return list(range(a.ndim - n, a.ndim)), list(range(n))
    if len(dims) != 2:
        raise RuntimeError(f"tensordot: dims must be an int or a pair of dim lists, got {dims!r}")
    da = [dims[0]] if isinstance(dims[0], int) else list(dims[0])
    db = [dims[1]] if isinstance(dims[1], int) else list(dims[1])
    if len(da) != len(db):
        raise RuntimeError(f"tensordot: both dimension lists should have the same length, got {da} and {db}")
    return [_dim("tensordot", d, a.ndim) for d in da], [_dim("tensordot", d, b.ndim) for d in db]


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The p-norm distances between the rows of x1 (B, P, M) and x2 (B, R, M): (B, P, R); batch dims
    broadcast. Computed exactly from the (B, P, R, M) differences (compute_mode is ignored), so a zero
    distance has gradient 0 as in PyTorch."""
    for name, x in (("X1", x1), ("X2", x2)):
        if x.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.ndim}D")
        if not is_floating(x.dtype):
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {x.dtype}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got p={p}")
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)  # (B, P, R, M)
    return _ops().VectorNormFunction.apply(diff, float(p), -1, False)


def _dim_of_samples(op: str, y: Tensor, dim: int) -> int:
    if y.ndim == 0:
        raise IndexError(f"{op}: y must have at least one dimension (the samples), got a 0-d tensor")
    return _dim(op, dim, y.ndim)


def _trapezoid_widths(y: Tensor, x: Tensor, d: int) -> Tensor:
    """The widths x[i+1] - x[i] along dim d, shaped to broadcast against y's intervals."""
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise RuntimeError(f"trapezoid: There must be one `x` value for each sample point, got {x.shape[0]} "
                               f"x values and {y.shape[d]} samples along dim {d}")
        shape = [1] * y.ndim
        shape[d] = -1
        return x.diff().reshape(*shape)
    if x.ndim != y.ndim:
        raise RuntimeError(f"trapezoid: x of shape {tuple(x.shape)} must be 1-d or have y's rank {y.ndim}")
    return x.diff(dim=d)


def _intervals(y: Tensor, d: int) -> Tensor:
    """y[i] + y[i+1] along dim d (n - 1 entries)."""
    n = y.shape[d]
    return y.narrow(d, 1, max(n - 1, 0)) + y.narrow(d, 0, max(n - 1, 0))


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``: sample points ``x`` (1-d, or broadcasting with y) or a
    constant spacing ``dx`` (default 1)."""
    if x is not None and dx is not None:
        raise TypeError("trapezoid: give the sample points x or the spacing dx, not both")
    d = _dim_of_samples("trapezoid", y, dim)
    if y.shape[d] == 0:
        return y.sum(d)  # zeros (in y.sum's dtype, as PyTorch)
    if x is None:
        spacing = 1 if dx is None else dx
        return (y.sum(d) - (y.select(d, 0) + y.select(d, -1)) * 0.5) * spacing
    return (_trapezoid_widths(y, x, d) * _intervals(y, d)).sum(d) / 2


def trapz(y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """An alias of trapezoid (PyTorch's older name)."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """The running trapezoidal integral along ``dim`` (one entry fewer than y there)."""
    if x is not None and dx is not None:
        raise TypeError("cumulative_trapezoid: give the sample points x or the spacing dx, not both")
    d = _dim_of_samples("cumulative_trapezoid", y, dim)
    if x is None:
        areas = _intervals(y, d) * ((1 if dx is None else dx) / 2.0)
    else:
        areas = _trapezoid_widths(y, x, d) * _intervals(y, d) / 2
    return areas.cumsum(d)


def initial_seed() -> int:
    """The seed of the default generator (torch.initial_seed)."""
    from tinyflow.random import default_generator

    return default_generator.initial_seed()
