"""The stand-in's array module: exactly the functions, keyword arguments and ufunc methods of the
pinned CuPy (cupy_api.json), each run by NumPy on the arrays' host memory.

A name CuPy lacks is an AttributeError; a keyword argument CuPy's function does not take is a
``CupyAPIError``; a ufunc method CuPy has not implemented (``multiply.at``, ``maximum.reduce``)
raises CuPy's own NotImplementedError; a NumPy array where CuPy wants a device array is CuPy's
TypeError. Where CuPy has a name NumPy lacks, and the stand-in does not emulate it, calling it
raises NotImplementedError naming it: nothing passes silently.
"""
from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from cuda_tools.strict_cupy import cuda as _cuda
from cuda_tools.strict_cupy.api import api
from cuda_tools.strict_cupy.array import bind_module, ndarray, record, record_work, refuse_host_copy, unwrap, wrap
from cuda_tools.strict_cupy.current_stream import capturing
from cuda_tools.strict_cupy.graph import IN_PLACE_FUNCTIONS
from cuda_tools.strict_cupy.launches import ALLOCATE, HOST_ONLY

# functions that take host data (NumPy arrays, lists) and copy it to the device
HOST_INPUT = {"array", "asarray", "asanyarray", "asnumpy",  # (ascontiguousarray takes device arrays only)
              "get_array_module", "isscalar", "ndim", "shape", "size", "result_type", "can_cast",
              "min_scalar_type", "promote_types", "iterable"}


def _not_emulated(qualname: str) -> Callable[..., Any]:
    def missing(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"strict CuPy stand-in: {qualname} is in CuPy but not emulated; add it "
                                  "to cuda_tools/strict_cupy/module.py")

    missing.__name__ = qualname.rsplit(".", 1)[-1]
    return missing


def _run(qualname: str, impl: Callable[..., Any], args: Any, kwargs: dict[str, Any], in_place: bool = False) -> Any:
    """``impl(*args, **kwargs)`` on NumPy arrays; while the current stream captures, recorded
    instead (strict_cupy/graph.py): in-place work (``out=``, ``in_place``) is deferred to the
    replay and returns ``out``, other calls get poisoned outputs."""
    recording = capturing()
    if recording is None:
        return impl(*args, **kwargs)
    if in_place or kwargs.get("out") is not None:
        recording.defer(lambda: impl(*args, **kwargs))
        return kwargs.get("out")
    return recording.run(qualname, impl, args, kwargs, replay=qualname.rsplit(".", 1)[-1] not in ALLOCATE)


def _function(qualname: str, impl: Callable[..., Any], params: dict[str, Any] | None,
              allow_host: bool) -> Callable[..., Any]:
    short = qualname.rsplit(".", 1)[-1]
    in_place = short in IN_PLACE_FUNCTIONS

    def call(*args: Any, **kwargs: Any) -> Any:
        api().check_kwargs(qualname, params, kwargs)
        if short in HOST_ONLY:  # answered on the host: nothing on the device, nothing to capture
            return wrap(impl(*unwrap(args, qualname, allow_host), **unwrap(kwargs, qualname, allow_host)))
        if allow_host and args and capturing() is not None:
            refuse_host_copy(qualname.removeprefix("cupy."), args[0])
        inputs = unwrap(args, qualname, allow_host), unwrap(kwargs, qualname, allow_host)
        out = _run(qualname, impl, inputs[0], inputs[1], in_place)
        on_device = not allow_host or any(isinstance(a, ndarray) for a in (*args, *kwargs.values()))
        record_work(qualname, inputs, out, device_inputs=on_device)
        return wrap(out)

    call.__name__ = qualname.rsplit(".", 1)[-1]
    call.__qualname__ = qualname
    return call


class ufunc:  # noqa: N801 (CuPy's name)
    """A CuPy ufunc: the call with CuPy's keyword arguments, and only the methods CuPy implements."""

    def __init__(self, name: str, entry: dict[str, Any], impl: Any) -> None:
        self.__name__ = self.name = name
        self.nin, self.nout = entry["nin"], entry["nout"]
        self._kwargs = entry["kwargs"]
        self._methods = set(entry["methods"])
        self._impl = impl

    def __repr__(self) -> str:
        return f"<ufunc 'cupy_{self.name}'>"

    def _check_method(self, method: str) -> None:
        if method not in self._methods:
            raise NotImplementedError(f"`cupy_{self.name}.{method}` is not supported yet")
        if not isinstance(self._impl, np.ufunc):
            raise NotImplementedError(f"strict CuPy stand-in: cupy.{self.name}.{method} is not emulated")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        unknown = [k for k in kwargs if k not in self._kwargs]
        if unknown:
            from cuda_tools.strict_cupy.api import CupyAPIError

            raise CupyAPIError(f"cupy.{self.name}() got an unexpected keyword argument {unknown[0]!r}: CuPy "
                               f"{api().version}'s ufuncs take {', '.join(self._kwargs)}")
        record(f"cupy.{self.name}", kernels=1)
        return wrap(_run(f"cupy.{self.name}", self._impl, unwrap(args, self.name), unwrap(kwargs, self.name)))

    def reduce(self, array: Any, axis: Any = 0, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        self._check_method("reduce")
        record(f"cupy.{self.name}.reduce", kernels=1)
        return wrap(_run(f"cupy.{self.name}.reduce", self._impl.reduce, (unwrap(array, self.name),),
                         dict(axis=axis, dtype=dtype, out=unwrap(out, self.name), keepdims=keepdims)))

    def accumulate(self, array: Any, axis: int = 0, dtype: Any = None, out: Any = None) -> Any:
        self._check_method("accumulate")
        record(f"cupy.{self.name}.accumulate", kernels=1)
        return wrap(_run(f"cupy.{self.name}.accumulate", self._impl.accumulate, (unwrap(array, self.name),),
                         dict(axis=axis, dtype=dtype, out=unwrap(out, self.name))))

    def reduceat(self, array: Any, indices: Any, axis: int = 0, dtype: Any = None, out: Any = None) -> Any:
        self._check_method("reduceat")
        record(f"cupy.{self.name}.reduceat", kernels=1)
        return wrap(_run(f"cupy.{self.name}.reduceat", self._impl.reduceat,
                         (unwrap(array, self.name), unwrap(indices, self.name)),
                         dict(axis=axis, dtype=dtype, out=unwrap(out, self.name))))

    def outer(self, A: Any, B: Any, **kwargs: Any) -> Any:  # noqa: N803 (CuPy's names)
        self._check_method("outer")
        record(f"cupy.{self.name}.outer", kernels=1)
        return wrap(_run(f"cupy.{self.name}.outer", self._impl.outer, (unwrap(A, self.name), unwrap(B, self.name)),
                         unwrap(kwargs, self.name)))

    def at(self, a: Any, indices: Any, b: Any = None) -> None:
        self._check_method("at")
        if not isinstance(a, ndarray):
            raise TypeError(f"cupy_{self.name}.at: the operand must be a cupy.ndarray, got {type(a).__name__}")
        record(f"cupy.{self.name}.at", kernels=1)
        operands = (a._a, unwrap(indices, self.name, allow_host=True)) + (() if b is None else (unwrap(b, self.name),))
        _run(f"cupy.{self.name}.at", self._impl.at, operands, {}, in_place=True)


# ---- functions CuPy has and NumPy has not (or has with other behaviour) ------------------------
def _asnumpy(a: Any, stream: Any = None, order: str = "C", out: Any = None, blocking: bool = True) -> Any:
    if isinstance(a, ndarray):
        return a.get(order=order, out=out)
    return np.asarray(a, order=order)


def _get_array_module(*args: Any) -> ModuleType:
    return strict_cupy if any(isinstance(a, ndarray) for a in args) else np


def _count_nonzero(a: Any, axis: Any = None) -> Any:
    return np.asarray(np.count_nonzero(a, axis=axis))  # CuPy returns a 0-d array, not an int


def _matmul(a: Any, b: Any, out: Any = None, **kwargs: Any) -> Any:
    """cuBLAS keeps a half-precision product in its dtype; NumPy's matmul of ml_dtypes' bfloat16
    returns float32."""
    product = np.matmul(a, b, **kwargs)
    if a.dtype == b.dtype and a.dtype.itemsize == 2 and product.dtype != a.dtype:
        product = product.astype(a.dtype)
    if out is None:
        return product
    out[...] = product
    return out


def _scatter_add(a: Any, slices: Any, value: Any) -> None:
    np.add.at(a, slices, value)


CUSTOM: dict[str, Callable[..., Any]] = {
    "cupy.asnumpy": _asnumpy,
    "cupy.count_nonzero": _count_nonzero,
    "cupy.matmul": _matmul,
    "cupyx.scatter_add": _scatter_add,
}
CUSTOM_RAW = {  # called with the caller's arguments as they are (no unwrapping)
    "cupy.get_array_module": _get_array_module,
    "cupy.get_default_memory_pool": _cuda.get_default_memory_pool,
    "cupy.asnumpy": _asnumpy,
}
NAMES: dict[str, Any] = {"cupy.ndarray": ndarray, "cupy.RawModule": _cuda.RawModule, "cupy.ufunc": ufunc}
NUMPY_TWINS = {"cupy": np, "cupy.linalg": np.linalg, "cupy.random": np.random, "cupy.fft": np.fft, "cupyx": None}


def _build(qualname: str) -> ModuleType:
    entry = api().modules[qualname]
    twin = NUMPY_TWINS[qualname]
    module = ModuleType(qualname, f"strict CuPy stand-in for {qualname} {api().version}")
    for name, params in entry["functions"].items():
        full = f"{qualname}.{name}"
        if full in CUSTOM_RAW:
            setattr(module, name, CUSTOM_RAW[full])
            continue
        impl = CUSTOM.get(full) or (getattr(twin, name, None) if twin is not None else None)
        if impl is None or not callable(impl):
            setattr(module, name, _not_emulated(full))
        else:
            setattr(module, name, _function(full, impl, params, allow_host=name in HOST_INPUT))
    for name, ufunc_entry in entry["ufuncs"].items():
        impl = getattr(twin, name, None) if twin is not None else None
        setattr(module, name, ufunc(name, ufunc_entry, impl) if impl is not None
                else _not_emulated(f"{qualname}.{name}"))
    for name in entry["names"]:
        full = f"{qualname}.{name}"
        if full in NAMES:
            setattr(module, name, NAMES[full])
        elif twin is not None and hasattr(twin, name):
            setattr(module, name, getattr(twin, name))
        else:
            setattr(module, name, _not_emulated(full))
    return module


def _build_cupy() -> ModuleType:
    cupy = _build("cupy")
    cupy.__version__ = api().version
    cupy.linalg = _build("cupy.linalg")
    cupy.random = _build("cupy.random")
    cupy.fft = _build("cupy.fft")
    cuda = ModuleType("cupy.cuda", "strict CuPy stand-in for cupy.cuda")
    for name in ("Device", "Stream", "Event", "runtime", "driver", "memory", "get_current_stream", "Graph",
                 "MemoryPool", "using_allocator"):
        if name not in api().cuda:
            raise AssertionError(f"cupy.cuda.{name} is not in CuPy {api().version}'s API")
        setattr(cuda, name, getattr(_cuda, name))
    cupy.cuda = cuda
    cupy.get_default_memory_pool = _cuda.get_default_memory_pool
    cupy.strict_stand_in = True  # how a test tells the stand-in from the real CuPy
    return cupy


strict_cupy = _build_cupy()
bind_module(strict_cupy)  # the arrays' operators run its ufuncs (array.py cannot import this file)
cupyx = _build("cupyx")
