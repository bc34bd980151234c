"""The ``tinyflow.*`` functions that mirror ``torch.*``, the dtype names and the legacy types.

Most are a Tensor method with the tensor first (``tinyflow.sin(x)`` is ``x.sin()``): they are
listed in ``METHOD_FUNCTIONS`` and made by :func:`_method_function`. The others are defined
below: creation (eye, from_numpy, *_like), einsum, max/min (which also compare two tensors),
meshgrid, sampling, the legacy constructors (``tinyflow.FloatTensor(2, 3)``) and
``inference_mode``. ``import tinyflow as torch`` then finds them under PyTorch's names.

This module defines ``sum``, ``max``, ``all``, ``abs``, ``round``, ... (PyTorch's names): its own
code reaches Python's builtins of those names as ``builtins.<name>``.
"""
from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tinyflow import tensor_methods_layout as _methods_layout
from tinyflow import tensor_methods_linalg as _methods_linalg
from tinyflow import tensor_methods_special as _methods_special
from tinyflow import tensor_methods_stats as _methods_stats
from tinyflow.autograd import is_grad_enabled, set_grad_enabled
from tinyflow.device import CPU
from tinyflow.dtypes import as_dtype
from tinyflow.tensor import Tensor, _make, empty, float16, float32, float64, int32, int64, randint, tensor
from tinyflow.tensor_methods import LEGACY_TYPES, accept_axis_alias, takes_dim

# ------------------------------------------------------------------------------ dtype names
double, half, long = float64, float16, int64
int8, uint8, int16, short = np.dtype("int8"), np.dtype("uint8"), np.dtype("int16"), np.dtype("int16")
dtype = np.dtype  # isinstance(x.dtype, tinyflow.dtype)
finfo, iinfo = np.finfo, np.iinfo

# Names that would shadow Python's builtins inside the package: tinyflow/__init__.py serves
# tinyflow.float / int / bool from its module __getattr__ instead of defining them.
BUILTIN_DTYPE_NAMES = {"float": float32, "int": int32, "bool": np.dtype("bool")}

# ------------------------------------------------------------------------------ method functions
METHOD_FUNCTIONS = [
    # maths
    "sin", "cos", "tan", "asin", "acos", "atan", "arcsin", "arccos", "arctan", "sinh", "cosh", "asinh",
    "acosh", "atanh", "arcsinh", "arccosh", "arctanh", "atan2", "arctan2", "rsqrt", "log2", "log10",
    "log1p", "expm1", "exp2", "erf", "erfinv", "reciprocal", "square", "neg", "negative", "logaddexp",
    "lerp", "copysign", "floor", "ceil", "trunc", "fix", "round", "sign", "frac", "div", "divide",
    "true_divide", "floor_divide", "fmod", "remainder", "exp", "log", "sqrt", "tanh", "sigmoid", "relu",
    "abs", "clamp", "clip", "clamp_min", "clamp_max", "nan_to_num", "add", "sub", "mul", "matmul", "maximum",
    "minimum", "softmax", "log_softmax", "diff",
    # predicates, logical and bitwise
    "isinf", "isnan", "isfinite", "isposinf", "isneginf", "signbit", "isclose", "allclose", "equal",
    "logical_not", "logical_and", "logical_or", "logical_xor", "bitwise_not", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "eq", "ne", "lt", "le",
    "gt", "ge",
    # indexing
    "gather", "scatter", "scatter_add", "scatter_reduce", "index_select", "index_add", "masked_select",
    "masked_fill", "nonzero", "argwhere", "take", "take_along_dim",
    # sorting, scans, reductions
    "sort", "argsort", "msort", "topk", "kthvalue", "median", "unique", "bincount", "cumsum", "cumprod", "cummax",
    "cummin", "logcumsumexp", "prod", "sum", "mean", "var", "std", "var_mean", "std_mean", "amax", "amin",
    "argmax", "argmin", "logsumexp", "all", "any", "count_nonzero", "norm",
    # shape
    "flip", "fliplr", "flipud", "roll", "tile", "repeat_interleave", "unflatten", "narrow", "select",
    "unbind", "movedim", "moveaxis", "swapaxes", "swapdims", "ravel", "tril", "triu", "diag", "diagonal",
    "trace", "reshape", "flatten", "squeeze", "unsqueeze", "transpose", "permute", "t", "chunk",
    "clone", "numel", "is_floating_point", "is_complex",
    # products
    "dot", "inner", "outer", "ger", "mm", "bmm", "mv", "addmm", "addcmul", "addcdiv",
    # sampling
    "multinomial", "bernoulli",
]


def _method_function(name: str) -> Callable[..., Any]:
    def function(input: Tensor, *args: Any, out: Any = None, **kwargs: Any) -> Any:  # noqa: A002 (PyTorch's name)
        if not isinstance(input, Tensor):
            raise TypeError(f"tinyflow.{name}: expected a Tensor as the first argument, got {type(input).__name__}")
        result = getattr(input, name)(*args, **kwargs)
        return result if out is None else write_out(name, result, out)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``tinyflow.{name}(input, ...)`` is ``input.{name}(...)``: see ``Tensor.{name}``."
    return function


def write_out(name: str, result: Any, out: Any) -> Any:
    """PyTorch's ``out=`` contract: ``result`` (a Tensor or a tuple of them) copied into ``out``.

    ``out`` must match the result's structure and device; each result must be castable to its
    out's dtype (float into an integer tensor is an error, as in PyTorch). An out of another shape
    is resized (with PyTorch's warning when it had elements). Like PyTorch, out= does not support
    autograd: a result that requires grad is an error. Returns ``out``.
    """
    import warnings

    from tinyflow.promotion import can_cast

    results, outs = (result, out) if isinstance(result, tuple) else ((result,), (out,))
    if not isinstance(outs, (tuple, list)) or len(outs) != len(results) or not builtins.all(
        isinstance(o, Tensor) for o in outs
    ):
        kind = f"a tuple of {len(results)} Tensors" if isinstance(result, tuple) else "a Tensor"
        raise TypeError(f"{name}(): argument 'out' must be {kind}, got {type(out).__name__}")
    for r, o in zip(results, outs):
        if r.requires_grad and is_grad_enabled():
            raise RuntimeError(
                f"{name}(): functions with out=... arguments don't support automatic differentiation, but one of "
                "the arguments requires grad. Call it under tinyflow.no_grad() or drop out=."
            )
        if not can_cast(r.dtype, o.dtype):
            raise RuntimeError(f"{name}(): result type {r.dtype} can't be cast to the desired output type {o.dtype}")
        if r.device != o.device:
            raise RuntimeError(f"{name}(): the result is on {r.device} but out is on {o.device}; move out there first")
        if tuple(o.shape) != tuple(r.shape):
            if o.numel() != 0:
                warnings.warn(
                    f"An output with one or more elements was resized since it had shape {list(o.shape)}, which does "
                    f"not match the required output shape {list(r.shape)}. Pass an empty out tensor to avoid this "
                    "warning.",
                    UserWarning,
                    stacklevel=3,
                )
            o.data = empty(tuple(r.shape), dtype=o.dtype, device=o.device)
        with set_grad_enabled(False):
            o.copy_(r)
    return type(result)(*outs) if hasattr(result, "_fields") else out  # a named tuple (sort, topk) stays one


# The methods and functions of the linalg, special, layout and statistics mixins.
_EXTRA_FUNCTIONS: dict[str, Callable[..., Any]] = {}
for _module in (_methods_linalg, _methods_special, _methods_layout, _methods_stats):
    METHOD_FUNCTIONS += [n for n in _module.METHOD_FUNCTIONS if n not in METHOD_FUNCTIONS]
    _EXTRA_FUNCTIONS.update(_module.FUNCTIONS)
globals().update(_EXTRA_FUNCTIONS)

for _name in METHOD_FUNCTIONS:
    globals()[_name] = _method_function(_name)


class memory_format:
    """``torch.memory_format``: the name of a tensor layout. tinyflow keeps every array in the
    default (contiguous, NCHW) layout, so ``x.to(memory_format=tinyflow.channels_last)`` and
    ``model.to(memory_format=...)`` accept these names and change nothing."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"tinyflow.{self.name}"


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``torch.cosine_similarity``: ``tinyflow.nn.functional.cosine_similarity``."""
    from tinyflow.nn import functional as F

    return F.cosine_similarity(x1, x2, dim, eps)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """``torch.pairwise_distance``: ``tinyflow.nn.functional.pairwise_distance``."""
    from tinyflow.nn import functional as F

    return F.pairwise_distance(x1, x2, p, eps, keepdim)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:  # noqa: A002
    """``torch.pdist``: ``tinyflow.nn.functional.pdist``."""
    from tinyflow.nn import functional as F

    return F.pdist(input, p)


def pow(input: Any, exponent: Any) -> Tensor:  # noqa: A001, A002
    """input ** exponent (either may be a number)."""
    return input**exponent


def max(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001, A002
    """The maximum; along ``dim``: (values, indices); with a tensor second: the elementwise maximum."""
    return input.max(dim, keepdim)


def min(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001, A002
    return input.min(dim, keepdim)


def is_tensor(obj: Any) -> bool:
    return isinstance(obj, Tensor)


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


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None) -> Tensor:
    """The (2, n) row and column indices of the lower triangle of a row x col matrix."""
    rows, cols = np.tril_indices(row, offset, col)
    return tensor(np.stack([rows, cols]), dtype=dtype or int64, device=device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None) -> Tensor:
    """The (2, n) row and column indices of the upper triangle of a row x col matrix."""
    rows, cols = np.triu_indices(row, offset, col)
    return tensor(np.stack([rows, cols]), dtype=dtype or int64, device=device)


def concat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    from tinyflow.tensor import cat

    return cat(tensors, dim)


concatenate = concat


def einsum(equation: str, *operands: Any) -> Tensor:
    """Sums of products over the subscripts of ``equation`` ('ij,jk->ik', '...ij->...ji', 'ii->i').

    The operands may also come as one list, as ``torch.einsum('ij,jk', [a, b])``."""
    from tinyflow.ops.linalg import Einsum

    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return Einsum.apply(equation, *operands)


def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """The n x m matrix with ones on the diagonal."""
    return _make(lambda xp, s, d: xp.eye(n, n if m is None else m, dtype=d), (), dtype, device, requires_grad)


def from_numpy(array: np.ndarray) -> Tensor:
    """A CPU tensor that shares ``array``'s memory (an edit of one shows in the other)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    if array.dtype.kind not in "fiub":
        raise TypeError(f"from_numpy: unsupported dtype {array.dtype}; use float, int, uint8 or bool arrays")
    return Tensor._from_array(array, device=CPU)


def meshgrid(*tensors: Any, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids from 1-d tensors ('ij': matrix indexing, 'xy': Cartesian)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    shape = [t.numel() for t in tensors]
    if indexing == "xy" and len(tensors) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    grids = []
    for i, t in enumerate(tensors):
        axis = i
        if indexing == "xy" and i < 2 and len(tensors) >= 2:
            axis = 1 - i
        view = [1] * len(tensors)
        view[axis] = -1
        grids.append(t.reshape(*view).expand(*shape))
    return tuple(grids)


def broadcast_shapes(*shapes: Any) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*(tuple(s) if isinstance(s, (tuple, list)) else (s,) for s in shapes)))


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t.expand(*shape) for t in tensors)


def _like_args(input: Tensor, dtype: Any, device: Any) -> dict[str, Any]:  # noqa: A002
    return {"dtype": dtype or input.dtype, "device": device or input.device}


def randint_like(input: Tensor, low: int = 0, high: int | None = None, *, dtype: Any = None,  # noqa: A002
                 device: Any = None, generator: Any = None) -> Tensor:
    """Integers in [low, high) (or [0, low)) in input's shape, dtype and device."""
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(input.shape), generator=generator, **_like_args(input, dtype, device))


def normal(mean: Any = 0.0, std: Any = 1.0, size: Sequence[int] | None = None, *, generator: Any = None,
           dtype: Any = None, device: Any = None) -> Tensor:
    """Samples of N(mean, std): numbers with ``size``, or tensors of mean and std (broadcast)."""
    from tinyflow.tensor import randn

    ref = mean if isinstance(mean, Tensor) else std if isinstance(std, Tensor) else None
    if ref is None:
        noise = randn(*(size or ()), generator=generator, dtype=dtype, device=device)
        return noise * std + mean
    shape = broadcast_shapes(*(t.shape for t in (mean, std) if isinstance(t, Tensor)))
    noise = randn(*shape, generator=generator, dtype=dtype or ref.dtype, device=device or ref.device)
    return (noise * std + mean).detach()


def bernoulli(input: Tensor, p: Any = None, *, generator: Any = None) -> Tensor:  # noqa: A002
    return input.bernoulli(p, generator=generator)


class inference_mode(set_grad_enabled):  # noqa: N801 (PyTorch's name)
    """``with tinyflow.inference_mode():`` records no graph, like no_grad."""

    def __init__(self, mode: bool = True) -> None:
        super().__init__(not mode)


# ------------------------------------------------------------------------------ compilation, determinism


def compile(model: Any = None, *, fullgraph: bool = False, dynamic: Any = None, backend: Any = "inductor",  # noqa: A001
            mode: Any = None, options: Any = None, disable: bool = False) -> Any:
    """``torch.compile``: tinyflow has no graph compiler, so the module or function comes back
    as it is (the same results; no speed-up). As a decorator, with or without arguments."""
    if model is None:
        return lambda fn: fn
    if not callable(model):
        raise TypeError(f"compile: expected a Module or a function, got {type(model).__name__}")
    return model


def set_num_threads(n: int) -> None:
    """``torch.set_num_threads``: threads for tinyflow's CPU kernels and NumPy's OpenBLAS."""
    from tinyflow.kernels import _cpu

    _cpu.set_num_threads(n)


def get_num_threads() -> int:
    """``torch.get_num_threads``: the threads tinyflow's CPU kernels use."""
    from tinyflow.kernels import _cpu

    return _cpu.num_threads()


def set_num_interop_threads(n: int) -> None:
    """``torch.set_num_interop_threads``: accepted; tinyflow runs ops one after the other."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_interop_threads: expected a positive integer, got {n!r}")


def get_num_interop_threads() -> int:
    return 1


_deterministic = {"mode": False, "warn_only": False}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """``torch.use_deterministic_algorithms``: recorded. tinyflow's CPU kernels are
    deterministic already (fixed reduction orders, no atomics); so are its CUDA kernels, apart
    from the scatter-adds of embedding backward (documented in docs/cuda.md)."""
    _deterministic.update(mode=bool(mode), warn_only=bool(warn_only))


def are_deterministic_algorithms_enabled() -> bool:
    return _deterministic["mode"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _deterministic["warn_only"]


# ------------------------------------------------------------------------------ legacy constructors


def legacy_tensor(dt: Any, args: tuple, device: Any = None) -> Tensor:
    """``FloatTensor(2, 3)`` (sizes: an uninitialised tensor), ``FloatTensor([1, 2])`` or
    ``FloatTensor(array)`` (data, converted), ``FloatTensor()`` (empty), in dtype ``dt``."""
    dt = as_dtype(dt)
    if not args:
        return empty(0, dtype=dt, device=device)
    if builtins.all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        return empty(*args, dtype=dt, device=device)
    if len(args) == 1:
        data = args[0]
        if isinstance(data, Tensor):
            data = data.detach()
        return tensor(data, dtype=dt, device=device)
    raise TypeError(f"{dt.name} tensor constructor: expected sizes (ints) or one sequence of data, got {args!r}")


class _LegacyTensorType(type):
    """The metaclass of tinyflow.FloatTensor & co.: calling one builds a Tensor of its dtype and
    ``isinstance(x, tinyflow.FloatTensor)`` asks for that dtype."""

    legacy_dtype: np.dtype

    def __call__(cls, *args: Any, device: Any = None) -> Tensor:  # type: ignore[override]
        return legacy_tensor(cls.legacy_dtype, args, device=device)

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls.legacy_dtype

    def __repr__(cls) -> str:
        return f"<class 'tinyflow.{cls.__name__}'>"


def _legacy_type(name: str) -> type:
    cls = _LegacyTensorType(name, (), {"__doc__": f"Legacy constructor: a {LEGACY_TYPES[name]} Tensor."})
    cls.legacy_dtype = as_dtype(LEGACY_TYPES[name])
    return cls


FloatTensor = _legacy_type("FloatTensor")
DoubleTensor = _legacy_type("DoubleTensor")
HalfTensor = _legacy_type("HalfTensor")
LongTensor = _legacy_type("LongTensor")
IntTensor = _legacy_type("IntTensor")
ShortTensor = _legacy_type("ShortTensor")
CharTensor = _legacy_type("CharTensor")
ByteTensor = _legacy_type("ByteTensor")
BoolTensor = _legacy_type("BoolTensor")

# Functions that take dim= also take axis= (see tinyflow/tensor_methods.py).
for _name, _fn in list(globals().items()):
    if callable(_fn) and not isinstance(_fn, type) and getattr(_fn, "__module__", None) == __name__ and takes_dim(_fn):
        globals()[_name] = accept_axis_alias(_fn)

__all__ = [
    *METHOD_FUNCTIONS, *_EXTRA_FUNCTIONS, "memory_format", "contiguous_format", "preserve_format", "channels_last",
    "channels_last_3d", "cosine_similarity", "pairwise_distance", "pdist", "pow", "max", "min", "is_tensor", "Size", "tril_indices", "triu_indices", "concat", "concatenate", "einsum", "eye", "from_numpy",
    "meshgrid", "broadcast_shapes", "broadcast_tensors", "randint_like", "normal", "bernoulli",
    "inference_mode", "compile", "set_num_threads", "get_num_threads", "set_num_interop_threads",
    "get_num_interop_threads", "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "double", "half", "long", "int8", "uint8", "int16", "short", "dtype", "finfo", "iinfo",
    "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor",
    "ByteTensor", "BoolTensor",
]
