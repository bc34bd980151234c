"""The ``tinyflow.*`` functions that mirror ``torch.*``, the dtype names and the legacy types.

Most are a Tensor method with the tensor first (``tinyflow.sin(x)`` is ``x.sin()``): the surface
table (tinyflow/surface/__init__.py) declares them and :func:`function` below makes them. The
others are defined below: creation (eye, from_numpy, *_like), einsum, max/min (which also compare two tensors),
meshgrid, sampling, the legacy constructors (``tinyflow.FloatTensor(2, 3)``) and
``inference_mode``. ``import tinyflow as torch`` then finds them under PyTorch's names (tinyflow/__init__.py
loads this module on the first such name).

This module defines ``sum``, ``max``, ``all``, ``abs``, ``round``, ... (PyTorch's names): its own
code reaches Python's builtins of those names as ``builtins.<name>``.
"""
from __future__ import annotations

import builtins
import importlib
import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tinyflow.arg_parser import accept_axis_alias, takes_dim
from tinyflow.autograd.grad_mode import is_grad_enabled, set_grad_enabled
from tinyflow.creation import _make, cat, legacy_tensor, randint
from tinyflow.device import CPU
from tinyflow.dtypes import LEGACY_TYPES, as_dtype, finfo, int64
from tinyflow.promotion import can_cast
from tinyflow.return_types import Size
from tinyflow.surface import FUNCTIONS
from tinyflow.tensor import Tensor

# ------------------------------------------------------------------------------ dtype names
dtype = np.dtype  # isinstance(x.dtype, tinyflow.dtype)
iinfo = np.iinfo  # finfo is tinyflow.dtypes.finfo (it knows bfloat16)


def function(name: str) -> Callable[..., Any]:
    """The ``tinyflow.<name>`` function the table declares (``FUNCTIONS[name]``), with its real
    signature: the method's, ``self`` named ``input``, and PyTorch's ``out=``."""
    entry = FUNCTIONS[name]
    if ":" not in entry.source and entry.source != "Tensor":  # a plain function of a module
        fn = getattr(importlib.import_module(f"tinyflow.surface.{entry.source}"), entry.attr)
        target = accept_axis_alias(fn) if takes_dim(fn) else fn
        if "out" in inspect.signature(fn).parameters:
            if target is not fn:
                target.__module__, target.__qualname__ = __name__, name  # pickled as tinyflow.surface.functions.<name>
            return target

        def function(*args: Any, out: Any = None, **kwargs: Any) -> Any:
            result = target(*args, **kwargs)
            return result if out is None else write_out(name, result, out)

        function.__doc__ = fn.__doc__
        function.__signature__ = _with_out(inspect.signature(fn))  # type: ignore[attr-defined]
    else:
        method = getattr(Tensor, name)  # the real method (its module loads now): its signature is ours

        def function(input: Tensor, *args: Any, out: Any = None, **kwargs: Any) -> Any:  # noqa: A002 (PyTorch's name)
            if not isinstance(input, Tensor):
                raise TypeError(f"tinyflow.{name}: expected a Tensor as the first argument, got {type(input).__name__}")
            result = getattr(input, name)(*args, **kwargs)
            return result if out is None else write_out(name, result, out)

        function.__doc__ = f"``tinyflow.{name}(input, ...)`` is ``input.{name}(...)``: see ``Tensor.{name}``."
        signature = inspect.signature(method)
        params = list(signature.parameters.values())
        params[0] = params[0].replace(name="input", kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
        function.__signature__ = _with_out(signature.replace(parameters=params))  # type: ignore[attr-defined]
    function.__name__ = function.__qualname__ = name  # pickled as tinyflow.surface.functions.<name>, which it is
    return function


def _with_out(signature: inspect.Signature) -> inspect.Signature:
    """``signature`` with PyTorch's keyword-only ``out=None`` (before a ``**kwargs``)."""
    params = [p for p in signature.parameters.values() if p.kind != p.VAR_KEYWORD]
    rest = [p for p in signature.parameters.values() if p.kind == p.VAR_KEYWORD]
    if "out" not in signature.parameters:
        params.append(inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None))
    return signature.replace(parameters=params + rest)


def write_out(name: str, result: Any, out: Any) -> Any:
    """PyTorch's ``out=`` contract: ``result`` (a Tensor or a tuple of them) copied into ``out``.

    ``out`` must match the result's structure and device; each result must be castable to its
    out's dtype (float into an integer tensor is an error, as in PyTorch). An out of another shape
    is resized (with PyTorch's warning when it had elements). Like PyTorch, out= does not support
    autograd: a result that requires grad is an error. Returns ``out``.
    """
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
            o.data = Tensor._from_array(o.device.xp.empty(tuple(r.shape), dtype=o.dtype), device=o.device)
        with set_grad_enabled(False):
            o.copy_(r)
    return type(result)(*outs) if hasattr(result, "_fields") else out  # a named tuple (sort, topk) stays one


# ------------------------------------------------------------------------------ the table's functions
def __getattr__(name: str) -> Any:
    """tinyflow.sin(x) & co.: every name the surface table declares with the "f" variant, made on
    its first look-up (which loads the module of its method, whose signature it shows)."""
    if name not in FUNCTIONS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    made = globals()[name] = function(name)
    return made


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


def pow(input: Any, exponent: Any, *, out: Tensor | None = None) -> Tensor:  # noqa: A001, A002
    """input ** exponent (either may be a number)."""
    result = input**exponent
    return result if out is None else write_out("pow", result, out)


def max(input: Tensor, dim: Any = None, keepdim: bool = False, *, other: Tensor | None = None,  # noqa: A001, A002
        out: Any = None) -> Any:
    """The maximum; along ``dim``: (values, indices); with a tensor second (or ``other=``): the
    elementwise maximum."""
    result = input.max(dim, keepdim, other=other)
    return result if out is None else write_out("max", result, out)


def min(input: Tensor, dim: Any = None, keepdim: bool = False, *, other: Tensor | None = None,  # noqa: A001, A002
        out: Any = None) -> Any:
    result = input.min(dim, keepdim, other=other)
    return result if out is None else write_out("min", result, out)


def norm(input: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False, out: Tensor | None = None,  # noqa: A002
         dtype: Any = None) -> Tensor:
    """``torch.norm`` (out before dtype, as PyTorch's order): ``input.norm(p, dim, keepdim, dtype)``."""
    result = input.norm(p, dim, keepdim, dtype=dtype)
    return result if out is None else write_out("norm", result, out)


def is_tensor(obj: Any) -> bool:
    return isinstance(obj, Tensor)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, layout: Any = None, device: Any = None,
                 pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """The (2, n) row and column indices of the lower triangle of a row x col matrix."""
    rows, cols = np.tril_indices(row, offset, col)
    return _make(lambda xp, s, d: xp.asarray(np.stack([rows, cols]), dtype=d), (), dtype or int64, device,
                 requires_grad, op="tril_indices", layout=layout)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, layout: Any = None, device: Any = None,
                 pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """The (2, n) row and column indices of the upper triangle of a row x col matrix."""
    rows, cols = np.triu_indices(row, offset, col)
    return _make(lambda xp, s, d: xp.asarray(np.stack([rows, cols]), dtype=d), (), dtype or int64, device,
                 requires_grad, op="triu_indices", layout=layout)


def concat(tensors: Sequence[Tensor], dim: int = 0, *, out: Tensor | None = None) -> Tensor:
    return cat(tensors, dim, out=out)


concatenate = concat


def einsum(equation: str, *operands: Any) -> Tensor:
    """Sums of products over the subscripts of ``equation`` ('ij,jk->ik', '...ij->...ji', 'ii->i').

    The operands may also come as one list, as ``torch.einsum('ij,jk', [a, b])``."""
    from tinyflow.surface.ops.einsum import Einsum

    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return Einsum.apply(equation, *operands)


def eye(n: int, m: int | None = None, *, out: Tensor | None = None, dtype: Any = None, layout: Any = None,
        device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """The n x m matrix with ones on the diagonal."""
    return _make(lambda xp, s, d: xp.eye(n, n if m is None else m, dtype=d), (), dtype, device, requires_grad,
                 op="eye", out=out, layout=layout)


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A CPU tensor that shares ``ndarray``'s memory (an edit of one shows in the other)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(ndarray).__name__}")
    if ndarray.dtype.kind not in "fiub":
        raise TypeError(f"from_numpy: unsupported dtype {ndarray.dtype}; use float, int, uint8 or bool arrays")
    return Tensor._from_array(ndarray, device=CPU)


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


def randint_like(input: Tensor, low: int = 0, high: int | None = None, *, generator: Any = None,  # noqa: A002
                 memory_format: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
                 pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """Integers in [low, high) (or [0, low)) in input's shape, dtype and device."""
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(input.shape), generator=generator, dtype=dtype or input.dtype, layout=layout,
                   device=device or input.device, requires_grad=requires_grad)


def normal(mean: Any = 0.0, std: Any = 1.0, size: Sequence[int] | None = None, *, generator: Any = None,
           out: Tensor | None = None, dtype: Any = None, layout: Any = None, device: Any = None,
           pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """Samples of N(mean, std): numbers with ``size``, or tensors of mean and std (broadcast)."""
    from tinyflow.tensor import randn

    ref = mean if isinstance(mean, Tensor) else std if isinstance(std, Tensor) else None
    if ref is None:
        noise = randn(*(size or ()), generator=generator, dtype=dtype, layout=layout, device=device)
        result = noise * std + mean
    else:
        shape = broadcast_shapes(*(t.shape for t in (mean, std) if isinstance(t, Tensor)))
        noise = randn(*shape, generator=generator, dtype=dtype or ref.dtype, device=device or ref.device)
        result = (noise * std + mean).detach()
    if requires_grad:
        result.requires_grad_()
    return result if out is None else write_out("normal", result, out)


def bernoulli(input: Tensor, p: Any = None, *, generator: Any = None, out: Tensor | None = None) -> Tensor:  # noqa: A002
    result = input.bernoulli(p, generator=generator)
    return result if out is None else write_out("bernoulli", result, out)


class inference_mode(set_grad_enabled):  # noqa: N801 (PyTorch's name)
    """``with tinyflow.inference_mode():`` records no graph, like no_grad."""

    def __init__(self, mode: bool = True) -> None:
        super().__init__(not mode)


# ------------------------------------------------------------------------------ compilation, determinism


def compile(model: Any = None, *, fullgraph: bool = False, dynamic: Any = None, backend: Any = "inductor",  # noqa: A001
            mode: Any = None, options: Any = None, name: str | None = None, disable: bool = False,
            recompile_limit: int | None = None, isolate_recompiles: bool = False, shapes_spec: Any = None) -> Any:
    """``torch.compile``: tinyflow has no graph compiler, so the module or function comes back
    as it is (the same results; no speed-up). As a decorator, with or without arguments."""
    if model is None:
        return lambda fn: fn
    if not callable(model):
        raise TypeError(f"compile: expected a Module or a function, got {type(model).__name__}")
    return model


def set_num_threads(num: int) -> None:
    """``torch.set_num_threads``: threads for tinyflow's CPU kernels and NumPy's OpenBLAS."""
    from tinyflow.kernels import _cpu

    _cpu.set_num_threads(num)


def get_num_threads() -> int:
    """``torch.get_num_threads``: the threads tinyflow's CPU kernels use."""
    from tinyflow.kernels import _cpu

    return _cpu.num_threads()


def set_num_interop_threads(num: int) -> None:
    """``torch.set_num_interop_threads``: accepted; tinyflow runs ops one after the other."""
    if isinstance(num, bool) or not isinstance(num, int) or num < 1:
        raise ValueError(f"set_num_interop_threads: expected a positive integer, got {num!r}")


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


_float32_matmul_precision = {"value": "highest"}


def set_float32_matmul_precision(precision: str) -> None:
    """``torch.set_float32_matmul_precision``: "highest" (the default), "high" or "medium", recorded
    (another value warns and changes nothing, as PyTorch). tinyflow's float32 GEMMs round to TF32
    where CuPy's ``CUPY_TF32=1`` says so (docs/cuda.md); this switch, like
    ``backends.cuda.matmul.allow_tf32``, is a flag PyTorch programs set and changes no kernel."""
    if precision not in ("highest", "high", "medium"):
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", UserWarning, stacklevel=2)
        return
    _float32_matmul_precision["value"] = precision


def get_float32_matmul_precision() -> str:
    return _float32_matmul_precision["value"]


# ------------------------------------------------------------------------------ legacy constructors


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

# Functions that take dim= also take axis= (see tinyflow/surface/tensor_methods.py).
for _name, _fn in list(globals().items()):
    if callable(_fn) and not isinstance(_fn, type) and getattr(_fn, "__module__", None) == __name__ and takes_dim(_fn):
        globals()[_name] = accept_axis_alias(_fn)

__all__ = [
    *FUNCTIONS, "memory_format", "contiguous_format", "preserve_format", "channels_last",
    "channels_last_3d", "cosine_similarity", "pairwise_distance", "pdist", "pow", "max", "min", "is_tensor", "Size", "tril_indices", "triu_indices", "concat", "concatenate", "einsum", "eye", "from_numpy",
    "meshgrid", "broadcast_shapes", "broadcast_tensors", "randint_like", "normal", "bernoulli",
    "inference_mode", "compile", "set_num_threads", "get_num_threads", "set_num_interop_threads",
    "get_num_interop_threads", "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "set_float32_matmul_precision",
    "get_float32_matmul_precision", "dtype", "finfo", "iinfo",
    "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor",
    "ByteTensor", "BoolTensor",
]
