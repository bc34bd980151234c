"""Making tensors: tensor, as_tensor, zeros, ones, full, empty, randn, rand, randint, randperm,
arange, linspace, the ``*_like`` forms, and cat, stack, split, where (PyTorch's names and signatures).
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from tinyflow import promotion
from tinyflow.arg_parser import accept_axis_alias, normalize_dim
from tinyflow.autograd.grad_mode import is_grad_enabled
from tinyflow.device import CPU, Device, device_of, move
from tinyflow.dtypes import as_dtype, bool_, float32, float64, get_default_dtype, int64, is_floating_or_complex
from tinyflow.errors import ShapeError
from tinyflow.random import rng
from tinyflow.tensor import Tensor, _resolve_dtype, _shape_arg

__all__ = [
    "tensor", "as_tensor", "zeros", "ones", "full", "empty", "randn", "rand", "randint", "randperm", "arange",
    "linspace", "zeros_like", "ones_like", "full_like", "empty_like", "randn_like", "rand_like", "where", "cat",
    "stack", "split", "pad", "legacy_tensor",
]


def _draw(sampler: Callable[..., np.ndarray], shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Samples drawn directly in float32/float64 (drawing float64 and casting is 10x slower)."""
    native = dtype if dtype in (float32, float64) else float64
    return sampler(shape, dtype=native).astype(dtype, copy=False)


def _natural_dtype(dtype: np.dtype) -> np.dtype:
    """The tensor dtype for array data of ``dtype`` when none is asked for: its own, as
    ``torch.tensor`` keeps an int32 or uint8 array's dtype (Python ints arrive as int64)."""
    if is_floating_or_complex(dtype) or dtype.kind in "biu":
        return dtype
    raise TypeError(f"tensor: unsupported data of dtype {dtype}; use float, int or bool data")


def tensor(data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of ``data`` (a list, number, ndarray or Tensor): Python floats
    in the default dtype, ints int64, complex numbers complex64; arrays keep their dtype (torch's rule)."""
    if isinstance(data, Tensor):
        arr, src = data.array, data.device
    elif isinstance(data, np.ndarray) or hasattr(data, "__cuda_array_interface__"):
        arr, src = data, device_of(data)
    else:  # Python numbers and (nested) lists, NumPy scalars
        arr, src = np.asarray(data), CPU
        # Python floats take the default dtype, unless a dtype is asked for: then they convert
        # straight to it, as in PyTorch (tensor(0.3, dtype=float64) is 0.3, not float32(0.3)).
        if dtype is None and not isinstance(data, np.generic):
            if arr.dtype == np.float64:
                arr = arr.astype(get_default_dtype())
            elif arr.dtype == np.complex128:
                arr = arr.astype(np.complex128 if get_default_dtype() == float64 else np.complex64)
    dt = _resolve_dtype(dtype) or _natural_dtype(arr.dtype)
    dev = Device(device) if device is not None else src
    out = move(arr, dev)
    with np.errstate(all="ignore"):  # 1e10 is inf in float16, silently, as PyTorch
        out = out.astype(dt, copy=out is arr)  # always a fresh array, never an alias of ``data``
    t = Tensor._from_array(out, device=dev)
    if requires_grad:
        t.requires_grad = True
    return t


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Like ``tensor`` but without a copy when ``data`` already fits."""
    if isinstance(data, Tensor) and (dtype is None or data.dtype == _resolve_dtype(dtype)) and (
        device is None or data.device == Device(device)
    ):
        return data
    if isinstance(data, np.ndarray) and (dtype is None or data.dtype == _resolve_dtype(dtype)) and (
        device is None or Device(device) == CPU
    ) and (is_floating_or_complex(data.dtype) or data.dtype.kind in "biu"):
        return Tensor._from_array(data, device=CPU)  # shares memory, as torch.as_tensor
    return tensor(data, dtype=dtype, device=device)


def as_constant(value: Any, like: Tensor) -> Tensor:
    """A NumPy array (or number) as a constant tensor of ``like``'s dtype and device (no gradient):
    the masks and matrices the ops' F functions build on the host."""
    return tensor(value, dtype=like.dtype, device=like.device)


def target_array(t: Any, like: Tensor) -> Any:
    """A target (class ids, offsets) given as Tensor, ndarray or list, as a raw array on ``like``'s
    device (a list converts as ``tinyflow.tensor`` does: Python ints to int64)."""
    if isinstance(t, Tensor):
        return t.array
    arr = as_tensor(t).to(like.device) if not hasattr(t, "shape") else as_tensor(t)
    return arr.array


def _into(op: str, result: Tensor, out: Tensor | None) -> Tensor:
    """PyTorch's ``out=`` here (functions.write_out the surface's): ``out`` takes ``result``, in its dtype."""
    if out is None:
        return result
    if result.requires_grad and is_grad_enabled():
        raise RuntimeError(f"{op}(): functions with out=... arguments don't support automatic differentiation, but one "
                           "of the arguments requires grad. Call it under tinyflow.no_grad() or drop out=.")
    if not promotion.can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"{op}(): result type {result.dtype} can't be cast to the desired output type {out.dtype}")
    out.data = result.to(out.dtype)
    return out


def _dense(op: str, layout: Any) -> None:
    """PyTorch's ``layout`` must be None (dense); its ``pin_memory`` and ``memory_format`` change
    nothing (tinyflow's host memory is contiguous)."""
    if layout is not None:
        raise ValueError(f"{op}: layout={layout!r} is not supported; tinyflow tensors are dense (strided), "
                         "pass layout=None")


def _make(fn: Callable[..., Any], shape: Sequence[Any], dtype: Any, device: Any, requires_grad: bool, *,
          op: str = "tensor", out: Tensor | None = None, layout: Any = None) -> Tensor:
    """``fn(xp, shape, dtype)`` as a tensor; ``out`` gives the default dtype and device."""
    _dense(op, layout)
    if out is not None:
        dtype, device = dtype or out.dtype, device or out.device
    dev = Device(device) if device is not None else CPU
    dt = _resolve_dtype(dtype) or get_default_dtype()
    arr = fn(dev.xp, _shape_arg(tuple(shape)), dt)
    t = Tensor._from_array(arr, device=dev)
    if requires_grad:
        t.requires_grad = True
    return _into(op, t, out)


def zeros(*args: Any, size: Sequence[int] | None = None, out: Tensor | None = None, dtype: Any = None,
          layout: Any = None, device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    return _make(lambda xp, s, d: xp.zeros(s, dtype=d), args if size is None else (size,), dtype, device,
                 requires_grad, op="zeros", out=out, layout=layout)


def ones(*args: Any, size: Sequence[int] | None = None, out: Tensor | None = None, dtype: Any = None,
         layout: Any = None, device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    return _make(lambda xp, s, d: xp.ones(s, dtype=d), args if size is None else (size,), dtype, device,
                 requires_grad, op="ones", out=out, layout=layout)


def empty(*args: Any, size: Sequence[int] | None = None, out: Tensor | None = None, dtype: Any = None,
          layout: Any = None, device: Any = None, pin_memory: bool = False, requires_grad: bool = False,
          memory_format: Any = None) -> Tensor:
    return _make(lambda xp, s, d: xp.empty(s, dtype=d), args if size is None else (size,), dtype, device,
                 requires_grad, op="empty", out=out, layout=layout)


def full(size: Sequence[int], fill_value: Any, *, out: Tensor | None = None, dtype: Any = None, layout: Any = None,
         device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    if dtype is None and out is None and isinstance(fill_value, (bool, int)):
        dtype = bool_ if isinstance(fill_value, bool) else int64
    return _make(lambda xp, s, d: xp.full(s, promotion.checked_scalar("full", fill_value, d), dtype=d),
                 (tuple(size),), dtype, device, requires_grad, op="full", out=out, layout=layout)


def _random(op: str, draw: Callable[[np.random.Generator, tuple, np.dtype], np.ndarray], shape: Sequence[Any],
            dtype: Any, device: Any, requires_grad: bool, generator: Any, out: Tensor | None = None,
            layout: Any = None) -> Tensor:
    """Samples drawn on the host from the (seeded) generator, then moved to ``device``."""
    dev = Device(device) if device is not None else out.device if out is not None else CPU
    return _make(lambda xp, s, d: move(draw(rng(generator), s, d), dev), shape, dtype, dev, requires_grad, op=op,
                 out=out, layout=layout)


def randn(*args: Any, size: Sequence[int] | None = None, generator: Any = None, out: Tensor | None = None,
          dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: bool = False,
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples."""
    return _random("randn", lambda g, s, d: _draw(g.standard_normal, s, d), args if size is None else (size,),
                   dtype, device, requires_grad, generator, out, layout)


def rand(*args: Any, size: Sequence[int] | None = None, generator: Any = None, out: Tensor | None = None,
         dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: bool = False,
         requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1)."""
    return _random("rand", lambda g, s, d: _draw(g.random, s, d), args if size is None else (size,), dtype, device,
                   requires_grad, generator, out, layout)


def randint(low: int = 0, high: int | None = None, size: Sequence[int] = (), *, generator: Any = None,
            out: Tensor | None = None, dtype: Any = None, layout: Any = None, device: Any = None,
            pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """Integers in [low, high), int64 by default: ``randint(low, high, size)`` or, as PyTorch,
    ``randint(high, size)`` (and ``randint(high, size=...)``), which draw from [0, high)."""
    if isinstance(high, (tuple, list)):  # randint(high, size)
        if size != ():
            raise TypeError(f"randint: got two sizes, {tuple(high)} and {tuple(size)}; call randint(low, high, size)")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if not low < high:
        raise RuntimeError(f"randint: expects low < high, but got low={low} >= high={high}")
    return _random("randint", lambda g, s, d: g.integers(low, high, size=s).astype(d), (tuple(size),),
                   dtype or (None if out is not None else int64), device, requires_grad, generator, out, layout)


def randperm(n: int, *, generator: Any = None, out: Tensor | None = None, dtype: Any = None, layout: Any = None,
             device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """A random permutation of 0 .. n-1 (int64 by default)."""
    return _random("randperm", lambda g, s, d: g.permutation(n).astype(d), (), dtype or (None if out is not None
                   else int64), device, requires_grad, generator, out, layout)


def _no_bool(op: str, dtype: Any, steps: int = 2) -> None:
    """PyTorch computes ranges in a number type: a bool range (of two or more values) is refused."""
    if dtype is not None and _resolve_dtype(dtype) == bool_ and steps > 1:
        raise NotImplementedError(f'{op}: not implemented for dtype bool (PyTorch: "{op}_cpu" not implemented for '
                                  f"'Bool'); make the range in an integer or floating dtype and compare it, e.g. != 0")


def arange(start: float = 0, end: float | None = None, step: float = 1, *, out: Tensor | None = None, dtype: Any = None,
           layout: Any = None, device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    if end is None:
        start, end = 0, start
    _no_bool("arange", dtype or (out.dtype if out is not None else None))
    if dtype is None and out is None:
        dtype = int64 if all(isinstance(v, (int, np.integer)) for v in (start, end, step)) else get_default_dtype()
    if step == 0 or (end - start) * step < 0:
        raise RuntimeError(f"arange: upper bound {end} and lower bound {start} inconsistent with step sign {step}")

    def values(xp: Any, s: Any, d: np.dtype) -> Any:
        if d.kind in "iu" and all(isinstance(v, (int, np.integer)) for v in (start, end, step)):
            return xp.arange(start, end, step, dtype=d)
        return xp.arange(start, end, step, dtype=np.float64).astype(d)  # computed in double, as PyTorch

    return _make(values, (), dtype, device, requires_grad, op="arange", out=out, layout=layout)


def linspace(start: float, end: float, steps: int, *, out: Tensor | None = None, dtype: Any = None,
             layout: Any = None, device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from start to end; for an integer dtype they are computed in
    floating point and truncated toward zero, as PyTorch does (NumPy floors)."""
    _no_bool("linspace", dtype or (out.dtype if out is not None else None), steps)
    return _make(lambda xp, s, d: xp.linspace(start, end, steps, dtype=np.float64).astype(d), (), dtype, device,
                 requires_grad, op="linspace", out=out, layout=layout)


def _like(op: str, fn: Callable[..., Tensor], input: Tensor, dtype: Any, layout: Any, device: Any,  # noqa: A002
          requires_grad: bool, **kw: Any) -> Tensor:
    """``fn`` (zeros, randn, ...) in input's shape, dtype and device unless given (PyTorch's *_like)."""
    _dense(op, layout)
    return fn(*input.shape, dtype=dtype or input.dtype, device=device or input.device, requires_grad=requires_grad,
              **kw)


def zeros_like(input: Tensor, *, memory_format: Any = None, dtype: Any = None, layout: Any = None,  # noqa: A002
               device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    return _like("zeros_like", zeros, input, dtype, layout, device, requires_grad)


def ones_like(input: Tensor, *, memory_format: Any = None, dtype: Any = None, layout: Any = None,  # noqa: A002
              device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    return _like("ones_like", ones, input, dtype, layout, device, requires_grad)


def empty_like(input: Tensor, *, memory_format: Any = None, dtype: Any = None, layout: Any = None,  # noqa: A002
               device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    return _like("empty_like", empty, input, dtype, layout, device, requires_grad)


def randn_like(input: Tensor, *, generator: Any = None, memory_format: Any = None, dtype: Any = None,  # noqa: A002
               layout: Any = None, device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    return _like("randn_like", randn, input, dtype, layout, device, requires_grad, generator=generator)


def rand_like(input: Tensor, *, generator: Any = None, memory_format: Any = None, dtype: Any = None,  # noqa: A002
              layout: Any = None, device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    return _like("rand_like", rand, input, dtype, layout, device, requires_grad, generator=generator)


def full_like(input: Tensor, fill_value: Any, *, memory_format: Any = None, dtype: Any = None,  # noqa: A002
              layout: Any = None, device: Any = None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    return _like("full_like", lambda *shape, **kw: full(shape, fill_value, **kw), input, dtype, layout, device,
                 requires_grad)


# -------------------------------------------------------------------- functions over tensors


def where(condition: Any, input: Any = None, other: Any = None, *, out: Tensor | None = None) -> Any:  # noqa: A002
    """Elementwise ``input if condition else other``; differentiable in input and other.
    ``where(condition)`` alone is ``condition.nonzero(as_tuple=True)``, as PyTorch."""
    if input is None and other is None:
        return (condition if isinstance(condition, Tensor) else tensor(condition)).nonzero(as_tuple=True)
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        input = tensor(input, device=condition.device if isinstance(condition, Tensor) else None)
    a, b = promotion.promote(input, other)  # input and other meet in their result dtype, as in PyTorch
    c = condition.array if isinstance(condition, Tensor) else a.device.xp.asarray(condition)
    if c.dtype != bool:
        if c.dtype != np.uint8:  # PyTorch takes a uint8 mask (deprecated), no other
            raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype {c.dtype}; "
                               "compare to make one (e.g. cond != 0)")
        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated and will be removed in "
                      "a future version of PyTorch. Use a boolean condition instead.", UserWarning, stacklevel=2)
        c = c.astype(bool)
    return _into("where", Where.apply(c, a, b), out)


def _same_dtype(tensors: Iterable[Tensor]) -> list[Tensor]:
    """The tensors cast to their common dtype (PyTorch's promotion: cat of int64 and float32 is
    float32)."""
    tensors = list(tensors)
    if len({t.dtype for t in tensors}) > 1:
        return list(promotion.promote(*tensors))
    return tensors


def cat(tensors: Iterable[Tensor], dim: int = 0, *, out: Tensor | None = None) -> Tensor:
    return _into("cat", Cat.apply(*_same_dtype(tensors), dim), out)


def stack(tensors: Iterable[Tensor], dim: int = 0, *, out: Tensor | None = None) -> Tensor:
    return _into("stack", Stack.apply(*_same_dtype(tensors), dim), out)


def split(tensor: Tensor, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces of ``split_size_or_sections`` along ``dim`` (the last may be smaller), or of the given
    sizes; a size-0 dim gives one empty piece, as PyTorch."""
    t, split_size = tensor, split_size_or_sections
    if t.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    n = t.shape[normalize_dim("split", dim, t.ndim)]
    if isinstance(split_size, int):
        if split_size <= 0:
            raise ShapeError(f"split: split_size must be positive, got {split_size}")
        sizes = [min(split_size, n - i) for i in range(0, n, split_size)] or [0]
    else:
        sizes = list(split_size)
    out = Split.apply(t, sizes, dim)
    return out if isinstance(out, tuple) else (out,)


def pad(t: Tensor, pad: Sequence[int], value: float = 0.0) -> Tensor:
    return Pad.apply(t, tuple(pad), value)


def legacy_tensor(dt: Any, args: tuple, device: Any = None) -> Tensor:
    """``FloatTensor(2, 3)`` (sizes: an uninitialised tensor), ``FloatTensor([1, 2])`` or
    ``FloatTensor(array)`` (data, converted), ``FloatTensor()`` (empty), in dtype ``dt``."""
    dt = as_dtype(dt)
    if not args:
        return empty(0, dtype=dt, device=device)
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        return empty(*args, dtype=dt, device=device)
    if len(args) == 1:
        data = args[0]
        if isinstance(data, Tensor):
            data = data.detach()
        return tensor(data, dtype=dt, device=device)
    raise TypeError(f"{dt.name} tensor constructor: expected sizes (ints) or one sequence of data, got {args!r}")


cat, stack, split = accept_axis_alias(cat), accept_axis_alias(stack), accept_axis_alias(split)

# The ops these functions call, imported last: the op files build on the functions above.
from tinyflow.ops.elementwise import Where  # noqa: E402
from tinyflow.ops.shape import Cat, Pad, Split, Stack  # noqa: E402
