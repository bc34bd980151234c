"""The wider PyTorch surface of Tensor: maths, rounding, predicates, logical and bitwise ops,
gather/scatter and friends, sorting, scans, shape ops, products, conversions and ``new_*``.

``TensorMethods`` is a namespace, not a base class: Tensor (tinyflow/tensor.py, the core) does not
inherit it; tinyflow/surface/__init__.py attaches each method its table lists (with the in-place forms and the
``tinyflow.*`` functions). Each method here calls an op of
tinyflow/ops/ (mostly math.py, indexing.py, sort.py, scan.py, shape.py) or composes methods; the
``tinyflow.*`` functions of the same names (tinyflow/surface/functions.py) call these methods.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tinyflow import promotion, return_types
from tinyflow.dtypes import as_dtype, finfo, is_floating
from tinyflow.dtypes import LEGACY_TYPES

if TYPE_CHECKING:
    from tinyflow.tensor import Tensor

__all__ = ["TensorMethods", "legacy_type_name"]


def legacy_type_name(dtype: Any, cuda: bool = False) -> str:
    """'torch.FloatTensor' for float32 (and 'torch.cuda.FloatTensor' on a GPU), as ``x.type()``."""
    name = as_dtype(dtype).name
    for legacy, dt in LEGACY_TYPES.items():
        if dt == name:
            return ("torch.cuda." if cuda else "torch.") + legacy
    raise TypeError(f"type(): no legacy tensor type for dtype {name}")


_OPS: Any = None


def _ops() -> Any:
    """Every op (tinyflow.surface.ops: the core families and the surface's), imported on first use."""
    global _OPS
    if _OPS is None:
        from tinyflow.surface.ops import index as ops

        _OPS = ops
    return _OPS


def _tf() -> Any:
    """tinyflow/creation.py: Tensor and the creation functions (tensor, zeros, where, cat, _draw, ...)."""
    from tinyflow import creation

    return creation


def _floating(t: Tensor) -> Tensor:
    """``t`` itself when floating, else ``t`` in the default float dtype (torch.sin(int) is float)."""
    return promotion.float_operand(t)


def _pair(a: Tensor, other: Any) -> tuple[Tensor, Tensor]:
    """``a`` and ``other`` as two tensors of their result dtype (PyTorch's promotion)."""
    return a._pair(other)


def _float_pair(a: Tensor, other: Any) -> tuple[Tensor, Tensor]:
    """Like _pair, in the default float dtype when both are integers (atan2, lerp, ...)."""
    return a._pair(other, floating=True)


def _dims(dims: Any) -> tuple[int, ...]:
    """A dims argument given as ints (``flip(0, 1)``), one tuple/list, or a single int."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    return tuple(int(d) for d in dims)


def _dim(op: str, dim: int, ndim: int) -> int:
    from tinyflow.arg_parser import normalize_dim

    return normalize_dim(op, dim, ndim)


def _index_tensor(t: Tensor, index: Any) -> Tensor:
    """An index given as a Tensor, list or number, as an int64 tensor on t's device."""
    if not hasattr(index, "dtype") or not hasattr(index, "device"):
        return _tf().tensor(index, dtype="int64", device=t.device)
    return index


def _bitwise(op: str, fn: Callable[..., Any], *tensors: Any) -> Tensor:
    for x in tensors:
        dt = getattr(x, "dtype", None)
        if dt is not None and as_dtype(dt).kind not in "iub":
            raise NotImplementedError(
                f"{op}: bitwise ops need integer or bool tensors, got dtype {dt}; use logical_* for truth "
                "values or convert with .long() / .bool()"
            )
    return _ops().NoGradient.apply(fn, *tensors)


def _shift_pair(a: Tensor, other: Any) -> tuple[Tensor, Tensor]:
    """The operands of a shift: integers only (PyTorch has no bool shift)."""
    pair = _pair(a, other)
    if pair[0].dtype == np.bool_:
        raise NotImplementedError('"shift" not implemented for bool tensors; convert with .long() first')
    return pair


def _no_grad(fn: Callable[..., Any], *args: Any) -> Tensor:
    return _ops().NoGradient.apply(fn, *args)


class NarrowRangeError(RuntimeError, IndexError):
    """narrow's start + length past the end of its dim: PyTorch's RuntimeError, and an IndexError
    as tinyflow raised before (for its own callers)."""


def _no_bool(op: str, t: Tensor) -> None:
    """PyTorch's NotImplementedError for ops without a bool kernel (median, kthvalue, trace)."""
    if as_dtype(t.dtype) == np.bool_:
        raise NotImplementedError(f"{op}: not implemented for bool tensors; convert with .int() first")


def _same_dtype_source(op: str, t: Tensor, src: Any) -> None:
    """The scatters and index_add write ``src`` into ``t``: PyTorch wants the same dtype."""
    if hasattr(src, "dtype") and as_dtype(src.dtype) != as_dtype(t.dtype):
        raise RuntimeError(
            f"{op}: self ({t.dtype}) and src ({src.dtype}) must have the same dtype; convert src with .to(self.dtype)"
        )


def _as_vector(t: Tensor, fn: Callable[..., Tensor], index: Tensor, *more: Any) -> Tensor:
    """``fn(t, index, *more)``, with a 0-d ``t`` (and its 0-d index and src) as 1-element vectors."""
    if t.ndim:
        return fn(t, index, *more)
    return fn(t.reshape(1), index.reshape(-1), *(m.reshape(-1) for m in more)).reshape(())


def _lower_median(t: Tensor, d: int, keepdim: bool) -> tuple[Tensor, Tensor]:
    """(values, indices) of the lower median along dim ``d`` (non-empty), NaN first if any."""
    n = t.shape[d]
    order = t.argsort(d)  # stable, NaN last: the first NaN of a slice sorts to n - (its NaN count)
    if is_floating(t.dtype):
        nans = t.isnan().sum(d, keepdim=True)
        pos = _tf().where(nans > 0, n - nans, (n - 1) // 2)
        index = order.gather(d, pos)
    else:
        index = order.narrow(d, (n - 1) // 2, 1)
    values = t.gather(d, index)
    if not keepdim:
        values, index = values.squeeze(d), index.squeeze(d)
    return values, index


class TensorMethods:
    """Tensor methods of the PyTorch surface (``self`` is a Tensor), grouped as the sections below;
    a namespace that tinyflow/surface/__init__.py reads, not a base class. The linalg, special, layout and
    statistics methods are in tinyflow/tensor_methods_*.py."""

    # ------------------------------------------------------------ trigonometric, hyperbolic
    def sin(self) -> Tensor:
        return _ops().Sin.apply(_floating(self))

    def cos(self) -> Tensor:
        return _ops().Cos.apply(_floating(self))

    def tan(self) -> Tensor:
        return _ops().Tan.apply(_floating(self))

    def asin(self) -> Tensor:
        return _ops().Asin.apply(_floating(self))

    def acos(self) -> Tensor:
        return _ops().Acos.apply(_floating(self))

    def atan(self) -> Tensor:
        return _ops().Atan.apply(_floating(self))

    def sinh(self) -> Tensor:
        return _ops().Sinh.apply(_floating(self))

    def cosh(self) -> Tensor:
        return _ops().Cosh.apply(_floating(self))

    def asinh(self) -> Tensor:
        return _ops().Asinh.apply(_floating(self))

    def acosh(self) -> Tensor:
        return _ops().Acosh.apply(_floating(self))

    def atanh(self) -> Tensor:
        return _ops().Atanh.apply(_floating(self))

    arcsin, arccos, arctan = asin, acos, atan
    arcsinh, arccosh, arctanh = asinh, acosh, atanh

    def atan2(self, other: Any) -> Tensor:
        return _ops().Atan2.apply(*_float_pair(self, other))

    arctan2 = atan2

    # ------------------------------------------------------------ powers, logs, exponentials
    def rsqrt(self) -> Tensor:
        return _ops().Rsqrt.apply(_floating(self))

    def log2(self) -> Tensor:
        return _ops().Log2.apply(_floating(self))

    def log10(self) -> Tensor:
        return _ops().Log10.apply(_floating(self))

    def log1p(self) -> Tensor:
        return _ops().Log1p.apply(_floating(self))

    def expm1(self) -> Tensor:
        return _ops().Expm1.apply(_floating(self))

    def exp2(self) -> Tensor:
        return _ops().Exp2.apply(_floating(self))

    def erf(self) -> Tensor:
        return _ops().Erf.apply(_floating(self))

    def erfinv(self) -> Tensor:
        return _ops().Erfinv.apply(_floating(self))

    def reciprocal(self) -> Tensor:
        return _ops().Reciprocal.apply(_floating(self))

    def square(self) -> Tensor:
        return _ops().Square.apply(self)

    def neg(self) -> Tensor:
        return -self

    negative = neg

    def logaddexp(self, other: Any) -> Tensor:
        a, b = _pair(self, other)
        if not is_floating(a.dtype):  # PyTorch has no integer kernel (as hypot, logaddexp2)
            raise NotImplementedError(f'"logaddexp" not implemented for {a.dtype} tensors; convert with .float() first')
        return _ops().LogAddExp.apply(a, b)

    def lerp(self, end: Any, weight: Any) -> Tensor:
        """self + weight * (end - self); weight a number or a tensor."""
        for name, t in (("end", end), ("weight", weight)):
            if hasattr(t, "dtype") and hasattr(t, "device") and t.dtype != self.dtype:
                raise RuntimeError(f"lerp: expected dtype {self.dtype} for `{name}` but got dtype {t.dtype}")
        if not is_floating(self.dtype):
            raise NotImplementedError(f'"lerp" not implemented for {self.dtype} tensors; convert with .float() first')
        a, b = _float_pair(self, end)
        w = weight if hasattr(weight, "dtype") and hasattr(weight, "device") else float(weight)
        return _ops().Lerp.apply(a, b, w)

    def copysign(self, other: Any) -> Tensor:
        return _ops().CopySign.apply(*_float_pair(self, other))

    def clamp_min(self, min: Any) -> Tensor:  # noqa: A002 (PyTorch's name)
        return self.clamp(min=min)

    def clamp_max(self, max: Any) -> Tensor:  # noqa: A002
        return self.clamp(max=max)

    def nan_to_num(self, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
        """NaN, +inf and -inf replaced by finite numbers (the dtype's extremes by default)."""
        if not is_floating(self.dtype):
            return self.clone()
        info = finfo(self.dtype)  # bfloat16's own extremes (float32's would round to inf)
        hi = float(info.max) if posinf is None else posinf
        lo = float(info.min) if neginf is None else neginf
        out = self.masked_fill(self.isnan(), nan)
        return out.masked_fill(self.isposinf(), hi).masked_fill(self.isneginf(), lo)

    def diff(self, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Tensor:
        """The n-th forward difference along ``dim`` (after joining prepend and append)."""
        d = _dim("diff", dim, self.ndim)
        x = self
        if prepend is not None or append is not None:
            x = _tf().cat([t for t in (prepend, self, append) if t is not None], d)
        for _ in range(n):
            m = x.shape[d]
            x = x.narrow(d, 1, max(m - 1, 0)) - x.narrow(d, 0, max(m - 1, 0))
        return x

    # ------------------------------------------------------------ rounding (zero gradients)
    def _rounded(self, name: str, *args: Any) -> Tensor:
        if as_dtype(self.dtype) == np.bool_ or (name == "Round" and args and args[0] and not is_floating(self.dtype)):
            raise NotImplementedError(f'"{name.lower()}" not implemented for {self.dtype} tensors (as PyTorch); '
                                      "convert with .float() first")
        if not is_floating(self.dtype):
            return self.clone()  # integers are already whole
        return getattr(_ops(), name).apply(self, *args)

    def floor(self) -> Tensor:
        return self._rounded("Floor")

    def ceil(self) -> Tensor:
        return self._rounded("Ceil")

    def trunc(self) -> Tensor:
        return self._rounded("Trunc")

    fix = trunc

    def round(self, *, decimals: int = 0) -> Tensor:
        """Round half to even (at ``decimals`` places), as PyTorch."""
        return self._rounded("Round", int(decimals))

    def sign(self) -> Tensor:
        return _ops().Sign.apply(self)

    def frac(self) -> Tensor:
        """self - trunc(self), for floating tensors (as PyTorch, integers have no fractional part)."""
        if not is_floating(self.dtype):
            raise NotImplementedError(f"frac: not implemented for dtype {self.dtype}; convert with .float() first")
        return _ops().Frac.apply(self)

    # ------------------------------------------------------------ division and remainders
    def div(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """True division, or rounded: ``rounding_mode='trunc'`` (toward zero) or ``'floor'``."""
        if rounding_mode is None:
            return self / other
        if rounding_mode not in ("trunc", "floor"):
            raise RuntimeError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
        return _ops().DivRounded.apply(*_pair(self, other), rounding_mode)

    divide = div

    def true_divide(self, other: Any) -> Tensor:
        return self / other

    def floor_divide(self, other: Any) -> Tensor:
        return _ops().FloorDivide.apply(*_pair(self, other))

    def fmod(self, other: Any) -> Tensor:
        """The remainder of division truncated toward zero (the sign of self), as C's fmod."""
        return _ops().Fmod.apply(*_pair(self, other))

    def remainder(self, other: Any) -> Tensor:
        """The remainder of floored division (the sign of other), as Python's %."""
        return _ops().Remainder.apply(*_pair(self, other))

    def __floordiv__(self, other: Any) -> Tensor:
        return self.floor_divide(other)

    def __format__(self, format_spec: str) -> str:
        """``f"{loss:.4f}"`` formats a 0-d tensor's value, as PyTorch; other tensors (and 0-d
        Parameters, as PyTorch) take no format spec: ``f"{x}"`` is ``str(x)``."""
        if self.ndim == 0 and type(self) is _tf().Tensor:
            return self.detach().item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __rfloordiv__(self, other: Any) -> Tensor:
        a, b = _pair(self, other)
        return _ops().FloorDivide.apply(b, a)

    def __mod__(self, other: Any) -> Tensor:
        return self.remainder(other)

    def __rmod__(self, other: Any) -> Tensor:
        a, b = _pair(self, other)
        return _ops().Remainder.apply(b, a)

    # ------------------------------------------------------------ predicates (no gradient)
    def isinf(self) -> Tensor:
        return _no_grad(lambda xp, a: xp.isinf(a), self)

    def isposinf(self) -> Tensor:
        return _no_grad(lambda xp, a: xp.isposinf(a), self)

    def isneginf(self) -> Tensor:
        return _no_grad(lambda xp, a: xp.isneginf(a), self)

    def signbit(self) -> Tensor:
        return _no_grad(lambda xp, a: xp.signbit(a), self)

    def isclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
        """|self - other| <= atol + rtol * |other| elementwise (infinities equal to themselves)."""
        return _no_grad(lambda xp, a, b: xp.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan), *_pair(self, other))

    def allclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
        """True when every entry isclose (a Python bool: a host read)."""
        return bool(self.isclose(other, rtol, atol, equal_nan).all())

    def equal(self, other: Tensor) -> bool:
        """True when both have the same shape and the same values (a Python bool: a host read)."""
        return tuple(self.shape) == tuple(other.shape) and bool((self == other).all())

    # ------------------------------------------------------------ logical and bitwise ops
    def logical_not(self) -> Tensor:
        return _no_grad(lambda xp, a: xp.logical_not(a), self)

    def logical_and(self, other: Any) -> Tensor:
        return _no_grad(lambda xp, a, b: xp.logical_and(a, b), *_pair(self, other))

    def logical_or(self, other: Any) -> Tensor:
        return _no_grad(lambda xp, a, b: xp.logical_or(a, b), *_pair(self, other))

    def logical_xor(self, other: Any) -> Tensor:
        return _no_grad(lambda xp, a, b: xp.logical_xor(a, b), *_pair(self, other))

    def bitwise_not(self) -> Tensor:
        return _bitwise("bitwise_not", lambda xp, a: xp.invert(a), self)

    def bitwise_and(self, other: Any) -> Tensor:
        return _bitwise("bitwise_and", lambda xp, a, b: xp.bitwise_and(a, b), *_pair(self, other))

    def bitwise_or(self, other: Any) -> Tensor:
        return _bitwise("bitwise_or", lambda xp, a, b: xp.bitwise_or(a, b), *_pair(self, other))

    def bitwise_xor(self, other: Any) -> Tensor:
        return _bitwise("bitwise_xor", lambda xp, a, b: xp.bitwise_xor(a, b), *_pair(self, other))

    def bitwise_left_shift(self, other: Any) -> Tensor:
        return _bitwise("bitwise_left_shift", lambda xp, a, b: xp.left_shift(a, b), *_shift_pair(self, other))

    def bitwise_right_shift(self, other: Any) -> Tensor:
        return _bitwise("bitwise_right_shift", lambda xp, a, b: xp.right_shift(a, b), *_shift_pair(self, other))

    def __invert__(self) -> Tensor:
        if as_dtype(self.dtype).kind not in "iub":  # the operator's error is a TypeError in PyTorch
            raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
        return self.bitwise_not()

    __and__ = bitwise_and
    __or__ = bitwise_or
    __xor__ = bitwise_xor
    __lshift__ = bitwise_left_shift
    __rshift__ = bitwise_right_shift

    def __rand__(self, other: Any) -> Tensor:
        return self._wrap(other).bitwise_and(self)

    def __ror__(self, other: Any) -> Tensor:
        return self._wrap(other).bitwise_or(self)

    def __rxor__(self, other: Any) -> Tensor:
        return self._wrap(other).bitwise_xor(self)

    def __rlshift__(self, other: Any) -> Tensor:
        return self._wrap(other).bitwise_left_shift(self)

    def __rrshift__(self, other: Any) -> Tensor:
        return self._wrap(other).bitwise_right_shift(self)

    def __iand__(self, other: Any) -> Tensor:
        return self.copy_(self & other)

    def __ior__(self, other: Any) -> Tensor:
        return self.copy_(self | other)

    def __ixor__(self, other: Any) -> Tensor:
        return self.copy_(self ^ other)

    # ------------------------------------------------------------ gather, scatter, select
    def gather(self, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
        """out[i][j] = self[index[i][j]][j] for dim 0 (likewise for any dim)."""
        return _ops().Gather.apply(self, dim, index)

    def scatter(self, dim: int, index: Tensor, src: Any = None, *, value: Any = None, reduce: str | None = None) -> Tensor:
        """A copy with ``src`` (a tensor, or a number as ``value``) written at the indexed positions;
        ``reduce='add' | 'multiply'`` combines instead of writing (as scatter_reduce)."""
        if src is None:
            src = value
        if src is None:
            raise TypeError("scatter: give src (a tensor) or value (a number)")
        if reduce is not None:
            kind = {"add": "sum", "multiply": "prod"}.get(reduce)
            if kind is None:
                raise ValueError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}")
            if not hasattr(src, "shape"):
                src = self.new_full(index.shape, src)
            return self.scatter_reduce(dim, index, src, kind)
        if hasattr(src, "shape") and hasattr(src, "device"):
            _same_dtype_source("scatter", self, src)
            return _as_vector(self, lambda x, i, s: _ops().Scatter.apply(x, dim, i, s), index, src)
        return _as_vector(self, lambda x, i: _ops().Scatter.apply(x, dim, i, src), index)

    def scatter_add(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        _same_dtype_source("scatter_add", self, src)
        return _as_vector(self, lambda x, i, s: _ops().ScatterAdd.apply(x, dim, i, s), index, src)

    def scatter_reduce(self, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True) -> Tensor:
        """src reduced into self at the indexed positions: 'sum', 'prod', 'mean', 'amax' or 'amin'."""
        _same_dtype_source("scatter_reduce", self, src)
        return _as_vector(self, lambda x, i, s: _ops().ScatterReduce.apply(x, dim, i, s, reduce, include_self), index,
                          src)

    def index_select(self, dim: int, index: Any) -> Tensor:
        """The slices ``index`` (a vector of int64) of ``dim``, in index order."""
        index = _index_tensor(self, index)
        if self.ndim == 0 and index.numel() != 1:
            raise RuntimeError(f"index_select: the index into a 0-d tensor can have only 1 value, got {index.numel()}")
        return _ops().IndexSelect.apply(self, dim, index)

    def index_add(self, dim: int, index: Tensor, source: Tensor, *, alpha: float = 1) -> Tensor:
        """A copy with ``alpha * source`` added to the slices ``index`` of ``dim``."""
        _same_dtype_source("index_add", self, source)
        return _ops().IndexAdd.apply(self, dim, _index_tensor(self, index), source, alpha)

    def where(self, condition: Any, other: Any) -> Tensor:
        """``x.where(condition, other)`` is ``tinyflow.where(condition, x, other)``."""
        return _tf().where(condition, self, other)

    def masked_select(self, mask: Tensor) -> Tensor:
        """The entries where mask is True (self and mask broadcast), as a 1-d tensor."""
        return _ops().MaskedSelect.apply(self, mask)

    def masked_fill(self, mask: Any, value: Any) -> Tensor:
        """A copy with ``value`` (a number or a 0-d tensor, cast to self's dtype) where mask is True."""
        if as_dtype(getattr(mask, "dtype", np.bool_)) != np.bool_:
            raise RuntimeError(f"masked_fill: only supports bool masks, got a mask of dtype {mask.dtype}; use mask.bool()")
        if hasattr(value, "dtype") and hasattr(value, "device"):
            if value.ndim != 0:
                raise RuntimeError(
                    f"masked_fill: value must be a number or a 0-d tensor, got a tensor of shape {tuple(value.shape)}"
                )
            fill = value.to(self.dtype)
        else:
            value = promotion.checked_scalar("masked_fill", value, self.dtype)
            fill = _tf().tensor(value, dtype=self.dtype, device=self.device)
        return _tf().where(mask, fill, self)

    def nonzero(self, *, as_tuple: bool = False) -> Any:
        """The indices of the non-zero entries: an (n, ndim) int64 tensor, or one vector per dim."""
        out = _ops().Nonzero.apply(self, as_tuple)
        return tuple(out) if as_tuple else out

    def argwhere(self) -> Tensor:
        return self.nonzero()

    def take(self, index: Any) -> Tensor:
        """Entries of the flattened tensor at ``index`` (the result has index's shape)."""
        return self.reshape(-1)[_index_tensor(self, index)]

    def take_along_dim(self, indices: Tensor, dim: int | None = None) -> Tensor:
        """The entries at ``indices`` along ``dim`` (input and indices broadcast in the other dims);
        without dim, of the flattened input at the flattened indices."""
        if dim is None:
            return self.reshape(-1).gather(0, indices.reshape(-1))
        if indices.ndim != self.ndim:
            raise RuntimeError(
                f"take_along_dim: input and indices must have the same number of dims, got shapes "
                f"{tuple(self.shape)} and {tuple(indices.shape)}"
            )
        if self.ndim == 0:
            raise IndexError(f"take_along_dim: dim {dim} given but the input has no dimensions (shape ())")
        d = _dim("take_along_dim", dim, self.ndim)
        try:
            rest = [1 if i == d else np.broadcast_shapes((n,), (m,))[0]
                    for i, (n, m) in enumerate(zip(self.shape, indices.shape))]
        except ValueError:
            raise RuntimeError(
                f"take_along_dim: input of shape {tuple(self.shape)} and indices of shape {tuple(indices.shape)} "
                f"do not broadcast in the dims other than {dim}"
            ) from None
        shape = rest[:d] + [self.shape[d]] + rest[d + 1:]
        ishape = rest[:d] + [indices.shape[d]] + rest[d + 1:]
        return self.expand(*shape).gather(d, indices.expand(*ishape))

    # the in-place forms write the result into self (its history moves onto the op, as PyTorch)
    def masked_fill_(self, mask: Any, value: Any) -> Tensor:
        return self.copy_(self.masked_fill(mask, value))

    def scatter_(self, dim: int, index: Tensor, src: Any = None, *, value: Any = None, reduce: str | None = None) -> Tensor:
        return self.copy_(self.scatter(dim, index, src, value=value, reduce=reduce))

    def scatter_add_(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        return self.copy_(self.scatter_add(dim, index, src))

    def scatter_reduce_(self, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True) -> Tensor:
        return self.copy_(self.scatter_reduce(dim, index, src, reduce, include_self=include_self))

    def index_add_(self, dim: int, index: Tensor, source: Tensor, *, alpha: float = 1) -> Tensor:
        return self.copy_(self.index_add(dim, index, source, alpha=alpha))

    # ------------------------------------------------------------ sorting
    def argsort(self, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Tensor:
        """Indices that sort along ``dim``; always stable (equal values keep their order)."""
        return _ops().Argsort.apply(self, dim, descending)

    def sort(self, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Any:
        """(values, indices) sorted along ``dim``: a return_types.sort; stable, NaN largest."""
        if isinstance(dim, bool):  # sort(stable, dim=..., descending=...) is PyTorch's other overload
            dim = -1
        index = self.argsort(dim, descending)
        return return_types.sort(self.gather(dim, index), index)

    def msort(self) -> Tensor:
        return self.sort(0).values

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:  # noqa: A002
        """The k largest (or smallest) entries along ``dim`` and their indices, largest first."""
        d = _dim("topk", dim, self.ndim)
        n = self.shape[d] if self.ndim else 1
        if as_dtype(self.dtype) == np.bool_:
            raise RuntimeError("topk: does not support bool tensors; convert with .int() first")
        if not 0 <= k <= n:
            raise RuntimeError(f"topk: k ({k}) is out of range for dimension {dim} of size {n} (shape {tuple(self.shape)})")
        index = self.argsort(d, descending=largest)
        if self.ndim:
            index = index.narrow(d, 0, k)
        return return_types.topk(self.gather(d, index), index)

    def kthvalue(self, k: int, dim: int = -1, keepdim: bool = False) -> Any:
        """The k-th smallest entry (k from 1) along ``dim`` and its index."""
        d = _dim("kthvalue", dim, self.ndim)
        n = self.shape[d] if self.ndim else 1
        _no_bool("kthvalue", self)
        if n == 0:
            raise IndexError(f"kthvalue: expected reduction dim {dim} to have non-zero size (shape {tuple(self.shape)})")
        if not 1 <= k <= n:
            raise RuntimeError(f"kthvalue: k ({k}) is out of range for dimension {dim} of size {n} (shape {tuple(self.shape)})")
        if self.ndim == 0:
            return return_types.kthvalue(self.clone(), _tf().zeros((), dtype="int64", device=self.device))
        index = self.argsort(d).narrow(d, k - 1, 1)
        values = self.gather(d, index)
        if not keepdim:
            values, index = values.squeeze(d), index.squeeze(d)
        return return_types.kthvalue(values, index)

    def median(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """The lower median: of all entries (a 0-d tensor) or along ``dim`` (values, indices). NaN
        propagates: a slice holding NaN has median NaN, at the index of its first NaN, as PyTorch.
        The median of an empty floating tensor is NaN."""
        _no_bool("median", self)
        if dim is None:
            flat = self.reshape(-1)
            if flat.shape[0] == 0:
                if not is_floating(self.dtype):
                    raise RuntimeError(f"median: an empty {self.dtype} tensor has no median")
                return _tf().full((), float("nan"), dtype=self.dtype, device=self.device)
            return _lower_median(flat, 0, False)[0]
        d = _dim("median", dim, self.ndim)
        if self.ndim == 0:
            values, index = self.kthvalue(1, dim, keepdim)
            return return_types.median(values, index)
        if self.shape[d] == 0:
            raise IndexError(f"median: expected reduction dim {dim} to have non-zero size (shape {tuple(self.shape)})")
        return return_types.median(*_lower_median(self, d, keepdim))

    def unique(self, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,  # noqa: A002
               dim: int | None = None) -> Any:
        """The distinct values, sorted (with the inverse indices and counts when asked)."""
        return _ops().Unique.apply(self, return_inverse, return_counts, dim)

    def bincount(self, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
        """How often each value of a 1-d non-negative int tensor occurs (or the sum of its weights)."""
        if self.ndim != 1 or as_dtype(self.dtype).kind not in "iu":
            raise RuntimeError(f"bincount: expects a 1-d integer tensor, got shape {tuple(self.shape)} of {self.dtype}")
        if weights is None:
            return _no_grad(lambda xp, a: xp.bincount(a, minlength=minlength).astype("int64"), self)
        return _no_grad(lambda xp, a, w: xp.bincount(a, weights=w, minlength=minlength).astype(w.dtype), self, weights)

    # ------------------------------------------------------------ scans and products
    def cumsum(self, dim: int, *, dtype: Any = None) -> Tensor:
        x = self if dtype is None else self.to(dtype)
        return _ops().CumSum.apply(x, dim)

    def cumprod(self, dim: int, *, dtype: Any = None) -> Tensor:
        x = self if dtype is None else self.to(dtype)
        return _ops().CumProd.apply(x, dim)

    def cummax(self, dim: int) -> Any:
        return return_types.cummax(*_ops().CumExtreme.apply(self, dim, True))

    def cummin(self, dim: int) -> Any:
        return return_types.cummin(*_ops().CumExtreme.apply(self, dim, False))

    def logcumsumexp(self, dim: int) -> Tensor:
        return _ops().LogCumSumExp.apply(_floating(self), dim)

    def prod(self, dim: int | None = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        x = self if dtype is None else self.to(dtype)
        return _ops().Prod.apply(x, dim, keepdim)

    # ------------------------------------------------------------ more reductions
    def var_mean(self, dim: Any = None, unbiased: bool = True, keepdim: bool = False, *,
                 correction: float | None = None) -> tuple[Tensor, Tensor]:
        if isinstance(dim, bool):  # var_mean(unbiased), as var(unbiased)
            dim, unbiased = None, dim
        return self.var(dim, unbiased, keepdim, correction=correction), self.mean(dim, keepdim)

    def std_mean(self, dim: Any = None, unbiased: bool = True, keepdim: bool = False, *,
                 correction: float | None = None) -> tuple[Tensor, Tensor]:
        if isinstance(dim, bool):  # std_mean(unbiased), as std(unbiased)
            dim, unbiased = None, dim
        return self.std(dim, unbiased, keepdim, correction=correction), self.mean(dim, keepdim)

    def count_nonzero(self, dim: Any = None) -> Tensor:
        return (self != 0).sum(dim)

    def norm(self, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        """The p-norm over ``dim`` (all entries when None): 'fro' and 2 are Euclidean, inf the max.
        Floating point input only, as PyTorch; the gradient is 0 where the norm is 0."""
        if not is_floating(self.dtype):
            raise RuntimeError(f"norm: expected a floating point tensor as input, got {self.dtype}; use .float() first")
        x = self if dtype is None else self.to(dtype)
        if p in ("fro", 2, 2.0):
            return _ops().VectorNorm.apply(x, 2.0, dim, keepdim)
        if p in ("inf", "-inf"):
            p = float(p)
        if p == 0:
            return (x != 0).to(x.dtype).sum(dim, keepdim)
        return _ops().VectorNorm.apply(x, float(p), dim, keepdim)

    # ------------------------------------------------------------ shape
    def flip(self, *args: Any, dims: Any = None) -> Tensor:
        """Reverse the order of entries along ``dims`` (``flip(0, 1)``, ``flip([0, 1])``, ``flip(dims=...)``)."""
        dims = tuple(_dim("flip", d, self.ndim) for d in _dims(args if dims is None else (dims,)))
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"flip: dims {dims} name a dim more than once")
        return _ops().Flip.apply(self, dims if self.ndim else ())

    def fliplr(self) -> Tensor:
        return self.flip(1)

    def flipud(self) -> Tensor:
        return self.flip(0)

    def roll(self, shifts: Any, dims: Any = None) -> Tensor:
        """Shift entries along ``dims`` by ``shifts``, wrapping around (flattened when no dims)."""
        shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
        if dims is None:
            if len(shifts) != 1:
                raise RuntimeError(f"roll: without dims, shifts must be one number, got {shifts}")
            return _ops().Roll.apply(self, shifts, None)
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        if len(dims) != len(shifts):
            raise RuntimeError(f"roll: shifts {shifts} and dims {dims} must have the same length")
        if self.ndim == 0:
            raise IndexError(f"roll: dims {dims} given but the tensor has no dimensions (shape ())")
        return _ops().Roll.apply(self, shifts, tuple(_dim("roll", d, self.ndim) for d in dims))

    def repeat(self, *args: Any, repeats: Any = None) -> Tensor:
        """Tile ``repeats[d]`` copies along each dim (more sizes than dims add leading dims):
        ``repeat(2, 1)``, ``repeat((2, 1))`` or ``repeat(repeats=(2, 1))``, as PyTorch."""
        sizes = args if repeats is None else (repeats,)
        if not sizes:
            raise TypeError("repeat: missing the repeat sizes, one per dim (x.repeat(2, 1))")
        return _ops().Repeat.apply(self, _dims(sizes))

    def tile(self, *args: Any, dims: Any = None) -> Tensor:
        """Like repeat, but fewer sizes than dims repeat the trailing dims (NumPy's tile)."""
        dims = _dims(args if dims is None else (dims,))
        return self.repeat(*((1,) * (self.ndim - len(dims)) + dims))

    def repeat_interleave(self, repeats: Any, dim: int | None = None, *, output_size: int | None = None) -> Tensor:
        """Repeat each entry (or each slice along ``dim``) ``repeats`` times, in place order."""
        if dim is not None and self.ndim == 0:
            raise IndexError(f"repeat_interleave: dim {dim} given but the tensor has no dimensions (shape ())")
        x = self.reshape(-1) if dim is None else self
        d = 0 if dim is None else _dim("repeat_interleave", dim, self.ndim)
        if x.ndim == 0:
            x = x.reshape(1)
        if hasattr(repeats, "shape") and hasattr(repeats, "device"):
            return _ops().RepeatInterleave.apply(x, repeats, d)
        return _ops().RepeatInterleave.apply(x, int(repeats), d)

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Tensor:
        """Split dim ``dim`` into ``sizes`` (one of them may be -1)."""
        if self.ndim == 0:
            raise RuntimeError("unflatten: cannot be applied to a 0-d tensor")
        d = _dim("unflatten", dim, self.ndim)
        sizes = tuple(int(s) for s in sizes)
        known = 1
        for s in sizes:
            known *= s if s != -1 else 1
        if -1 in sizes:
            sizes = tuple(self.shape[d] // max(known, 1) if s == -1 else s for s in sizes)
        if int(np.prod(sizes)) != self.shape[d]:
            raise RuntimeError(f"unflatten: sizes {sizes} do not multiply to dim {dim} of size {self.shape[d]} "
                               f"(shape {tuple(self.shape)})")
        return self.reshape(*self.shape[:d], *sizes, *self.shape[d + 1:])

    def unfold(self, dimension: int, size: int, step: int) -> Tensor:
        """Windows of ``size`` entries every ``step`` along ``dimension``, as a new last dim."""
        return _ops().UnfoldDim.apply(self, _dim("unfold", dimension, self.ndim), int(size), int(step))

    def narrow(self, dim: int, start: Any, length: int) -> Tensor:
        """The slice [start, start + length) of ``dim`` (a view); start may be negative."""
        if self.ndim == 0:
            raise RuntimeError("narrow: cannot be applied to a 0-d tensor")
        d = _dim("narrow", dim, self.ndim)
        n = self.shape[d]
        start = int(start)
        if not -n <= start <= n:
            raise IndexError(f"narrow: start {start} is out of range for dim {dim} of size {n} (expected [{-n}, {n}])")
        if start < 0:
            start += n
        if length < 0:
            raise RuntimeError(f"narrow: length must be non-negative, got {length}")
        if start + length > n:
            raise NarrowRangeError(f"narrow: start ({start}) + length ({length}) exceeds dim {dim} of size {n} "
                               f"(shape {tuple(self.shape)})")
        return self[(slice(None),) * d + (slice(start, start + length),)]

    def select(self, dim: int, index: int) -> Tensor:
        d = _dim("select", dim, self.ndim)
        n = self.shape[d]
        if not -n <= index < n:
            raise IndexError(f"select: index {index} is out of range for dim {dim} of size {n} (shape {tuple(self.shape)})")
        return self[(slice(None),) * d + (index,)]

    def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
        d = _dim("unbind", dim, self.ndim)
        return tuple(self.select(d, i) for i in range(self.shape[d]))

    def movedim(self, source: Any, destination: Any) -> Tensor:
        """The dims ``source`` moved to positions ``destination``, the others keeping their order."""
        src = (source,) if isinstance(source, int) else tuple(source)
        dst = (destination,) if isinstance(destination, int) else tuple(destination)
        src = tuple(_dim("movedim", s, self.ndim) for s in src)
        dst = tuple(_dim("movedim", s, self.ndim) for s in dst)
        if self.ndim == 0:
            return self.permute(())
        order = [d for d in range(self.ndim) if d not in src]
        for s, t in sorted(zip(dst, src)):
            order.insert(s, t)
        return self.permute(*order)

    moveaxis = movedim

    def swapaxes(self, axis0: int, axis1: int) -> Tensor:
        return self.transpose(axis0, axis1)

    def swapdims(self, dim0: int, dim1: int) -> Tensor:
        return self.transpose(dim0, dim1)

    def ravel(self) -> Tensor:
        return self.reshape(-1)

    def tril(self, diagonal: int = 0) -> Tensor:
        return _ops().Tril.apply(self, diagonal)

    def triu(self, diagonal: int = 0) -> Tensor:
        return _ops().Triu.apply(self, diagonal)

    def tril_(self, diagonal: int = 0) -> Tensor:
        return self.copy_(self.tril(diagonal))

    def triu_(self, diagonal: int = 0) -> Tensor:
        return self.copy_(self.triu(diagonal))

    def diag(self, diagonal: int = 0) -> Tensor:
        """A vector -> the matrix with it on the diagonal; a matrix -> its diagonal."""
        return _ops().Diag.apply(self, diagonal)

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        d1, d2 = _dim("diagonal", dim1, self.ndim), _dim("diagonal", dim2, self.ndim)
        if d1 == d2:
            raise RuntimeError(f"diagonal: dim1 and dim2 are the same dim ({dim1}, {dim2})")
        return _ops().Diagonal.apply(self, offset, d1, d2)

    def trace(self) -> Tensor:
        """The sum of the main diagonal of a matrix."""
        _no_bool("trace", self)
        if self.ndim != 2:
            raise RuntimeError(f"trace: expects a matrix, got shape {tuple(self.shape)}")
        return self.diagonal().sum()

    # ------------------------------------------------------------ products
    def dot(self, tensor: Tensor) -> Tensor:
        """The inner product of two vectors of the same length and dtype."""
        if self.ndim != 1 or tensor.ndim != 1:
            raise RuntimeError(f"dot: expects two 1-d tensors, got shapes {tuple(self.shape)} and {tuple(tensor.shape)}")
        if self.shape[0] != tensor.shape[0]:
            raise RuntimeError(f"dot: vectors of sizes {self.shape[0]} and {tensor.shape[0]} differ; they must match")
        if self.dtype != tensor.dtype:
            raise RuntimeError(f"dot: expects both vectors to have the same dtype, got {self.dtype} and {tensor.dtype}")
        return self @ tensor

    def inner(self, other: Tensor) -> Tensor:
        return self.dot(other)

    def outer(self, vec2: Tensor) -> Tensor:
        if self.ndim != 1 or vec2.ndim != 1:
            raise RuntimeError(f"outer: expects two 1-d tensors, got shapes {tuple(self.shape)} and {tuple(vec2.shape)}")
        return self.reshape(-1, 1) * vec2.reshape(1, -1)

    ger = outer

    def mm(self, mat2: Tensor) -> Tensor:
        if self.ndim != 2 or mat2.ndim != 2:
            raise RuntimeError(f"mm: expects two matrices, got shapes {tuple(self.shape)} and {tuple(mat2.shape)}")
        return self @ mat2

    def bmm(self, mat2: Tensor) -> Tensor:
        if self.ndim != 3 or mat2.ndim != 3 or self.shape[0] != mat2.shape[0]:
            raise RuntimeError(f"bmm: expects two batches of matrices (b, n, m) and (b, m, p), got shapes "
                               f"{tuple(self.shape)} and {tuple(mat2.shape)}")
        return self @ mat2

    def mv(self, vec: Tensor) -> Tensor:
        if self.ndim != 2 or vec.ndim != 1:
            raise RuntimeError(f"mv: expects a matrix and a vector, got shapes {tuple(self.shape)} and {tuple(vec.shape)}")
        return self @ vec

    def addmm(self, mat1: Tensor, mat2: Tensor, *, beta: float = 1, alpha: float = 1) -> Tensor:
        """beta * self + alpha * (mat1 @ mat2); with beta = 0 self is ignored (its NaN and inf do not
        propagate), as in PyTorch."""
        prod = mat1.mm(mat2)
        prod = prod if alpha == 1 else prod * alpha
        if beta == 0:  # self only broadcasts to the product's shape: the result is the product
            return prod
        return (self if beta == 1 else self * beta) + prod

    def addcmul(self, tensor1: Tensor, tensor2: Tensor, *, value: float = 1) -> Tensor:
        return self + value * tensor1 * tensor2

    def addcdiv(self, tensor1: Tensor, tensor2: Tensor, *, value: float = 1) -> Tensor:
        return self + value * tensor1 / tensor2

    # ------------------------------------------------------------ dtypes and constructors
    def type(self, dtype: Any = None, non_blocking: bool = False) -> Any:
        """Without dtype: the legacy type name ('torch.FloatTensor'); with one: a converted copy
        (``dtype`` a dtype, a legacy type such as tf.LongTensor, or its name)."""
        if dtype is None:
            return legacy_type_name(self.dtype, self.device.type == "cuda")
        if isinstance(dtype, str) and dtype.rpartition(".")[2] in LEGACY_TYPES:
            dtype = LEGACY_TYPES[dtype.rpartition(".")[2]]
        elif hasattr(dtype, "legacy_dtype"):
            dtype = dtype.legacy_dtype
        return self.to(as_dtype(dtype))

    def byte(self) -> Tensor:
        return self.to("uint8")

    def char(self) -> Tensor:
        return self.to("int8")

    def short(self) -> Tensor:
        return self.to("int16")

    def ndimension(self) -> int:
        return self.ndim

    def get_device(self) -> int:
        """The CUDA device index, -1 on the CPU (PyTorch's convention)."""
        return -1 if self.device.type == "cpu" else int(self.device.index)

    def is_complex(self) -> bool:
        return as_dtype(self.dtype).kind == "c"

    def is_contiguous(self, memory_format: Any = None) -> bool:
        return True  # tinyflow has no strided views that PyTorch code needs to make contiguous

    def pin_memory(self, device: Any = None) -> Tensor:
        """The tensor itself: host arrays are not page-locked (copies to a GPU are synchronous)."""
        return self

    def is_pinned(self, device: Any = None) -> bool:
        return False

    def share_memory_(self) -> Tensor:
        """The tensor itself: DataLoader workers hand batches back through pipes, not shared memory."""
        return self

    def is_shared(self) -> bool:
        return False

    def element_size(self) -> int:
        return as_dtype(self.dtype).itemsize

    def nelement(self) -> int:
        return self.numel()

    def _new_like(self, fn: Callable[..., Tensor], size: Any, dtype: Any, device: Any, requires_grad: bool,
                  *args: Any) -> Tensor:
        shape = _dims(size)
        return fn(shape, *args, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)

    def new_zeros(self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
        return self._new_like(lambda s, **kw: _tf().zeros(*s, **kw), size, dtype, device, requires_grad)

    def new_ones(self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
        return self._new_like(lambda s, **kw: _tf().ones(*s, **kw), size, dtype, device, requires_grad)

    def new_empty(self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
        return self._new_like(lambda s, **kw: _tf().empty(*s, **kw), size, dtype, device, requires_grad)

    def new_full(self, size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None,
                 requires_grad: bool = False) -> Tensor:
        return self._new_like(lambda s, v, **kw: _tf().full(s, v, **kw), (size,), dtype, device, requires_grad,
                              fill_value)

    def new_tensor(self, data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
        """A new leaf copy of ``data`` with self's dtype and device unless given."""
        if hasattr(data, "detach") and hasattr(data, "device"):
            data = data.detach()
        return _tf().tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)

    def new(self, *args: Any) -> Tensor:
        """Legacy: ``x.new(2, 3)`` (uninitialised) or ``x.new(data)``, in x's dtype and device."""
        from tinyflow.surface.functions import legacy_tensor

        return legacy_tensor(self.dtype, args, device=self.device)

    # ------------------------------------------------------------ sampling
    def multinomial(self, num_samples: int, replacement: bool = False, *, generator: Any = None) -> Tensor:
        """Indices drawn from the rows of self (non-negative weights, not necessarily normalised)."""
        from tinyflow.random import rng

        if self.ndim not in (1, 2):
            raise RuntimeError(f"multinomial: probabilities must be 1-d or 2-d, got shape {tuple(self.shape)}")
        weights = np.asarray(self.detach().numpy(), dtype=np.float64).reshape(-1, self.shape[-1])
        if not np.isfinite(weights).all() or (weights < 0).any():
            raise RuntimeError("multinomial: probabilities must be finite and non-negative")
        gen = rng(generator)
        rows = []
        for w in weights:
            total = w.sum()
            if total <= 0:
                raise RuntimeError("multinomial: a row of probabilities sums to 0; every row needs a positive entry")
            if not replacement and num_samples > int((w > 0).sum()):
                raise RuntimeError(
                    f"multinomial: cannot draw {num_samples} samples without replacement from {int((w > 0).sum())} "
                    "categories with non-zero probability"
                )
            rows.append(gen.choice(w.shape[0], size=num_samples, replace=replacement, p=w / total))
        out = np.stack(rows).astype(np.int64) if rows else np.zeros((0, num_samples), np.int64)
        return _tf().tensor(out.reshape(num_samples) if self.ndim == 1 else out, device=self.device)

    def bernoulli(self, p: Any = None, *, generator: Any = None) -> Tensor:
        """1 with probability p (self's entries when p is None), else 0, in self's dtype."""
        probs = self if p is None else p
        u = _tf().rand(*self.shape, dtype="float64", device=self.device, generator=generator)
        return (u < probs).to(self.dtype)

    def bernoulli_(self, p: Any = 0.5, *, generator: Any = None) -> Tensor:
        return self.copy_(self.bernoulli(p, generator=generator))

    def random_(self, *args: Any, generator: Any = None, **kwargs: Any) -> Tensor:
        """Fill with integers: ``random_(to)`` in [0, to), ``random_(from, to)`` in [from, to)."""
        low, high = kwargs.pop("from", None), kwargs.pop("to", None)
        if kwargs:
            raise TypeError(f"random_: unexpected keyword arguments {sorted(kwargs)}")
        if len(args) == 1:
            low, high = 0, args[0]
        elif len(args) == 2:
            low, high = args
        if high is None:
            dt = as_dtype(self.dtype)
            high = 2 ** (finfo(dt).nmant + 1) if is_floating(dt) else int(np.iinfo(dt).max) + 1 if dt.kind in "iu" else 2
            low = low or 0
        draws = _tf().randint(int(low), int(high), tuple(self.shape), generator=generator, device=self.device)
        return self.copy_(draws)
