"""The stand-in's array: NumPy memory behind CuPy's rules.

``ndarray`` holds a NumPy array (``_a``) but is not an ``np.ndarray`` subclass, and refuses
everything a CuPy array refuses on the host:

- ``numpy.asarray(a)`` / ``np.array(a)`` raise CuPy's TypeError ("Implicit conversion to a NumPy
  array is not allowed"); a NumPy function called on it runs the stand-in's function of the same
  name if CuPy has one (``__array_function__``), else raises, as CuPy's dispatch does;
- operators and NumPy ufuncs go through the stand-in's ufuncs, which refuse NumPy array
  operands and keyword arguments CuPy does not take;
- methods exist only where ``cupy.ndarray`` has them, with its keyword arguments.

``get()``, ``item()``, ``tolist()``, ``float()``, ``int()``, ``bool()`` and ``repr()`` copy to the
host: each is counted as a host read (``host_reads``), and inside tinyflow's
``forbid_host_reads()`` it raises, because on a GPU it would wait for the device.

While the current stream captures a CUDA graph (strict_cupy/graph.py) nothing runs: calls are
recorded with their outputs poisoned, and host reads or copies of host data raise as CUDA would.

Where this file sits: above the current stream (current_stream.py), the errors and the call
counts (launches.py); below the capture (graph.py), ``cupy.cuda`` (cuda.py) and the module
(module.py), which all build on the array. The array's operators run the module's ufuncs: module.py
hands its module over with ``bind_module`` when it builds it, since this file cannot import it.
"""
from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

import numpy as np

from cuda_tools.strict_cupy.current_stream import capturing
from cuda_tools.strict_cupy.errors import CUDARuntimeError
from cuda_tools.strict_cupy.launches import Call, gpu_work

IMPLICIT_CONVERSION = ("Implicit conversion to a NumPy array is not allowed. "
                       "Please use `.get()` to construct a NumPy array explicitly.")


class _PerThread(threading.local):
    reads = 0  # host reads so far
    calls: list[str] | None = None  # the open record_calls() list, if any


_thread = _PerThread()


def record(name: str, kernels: int = 0, memops: int = 0) -> None:
    """Note a call or kernel launch in this thread's ``record_calls`` list, when one is open, with
    the GPU work it stands for (strict_cupy/launches.py); in a capture, in its recording too."""
    recording = capturing()
    if _thread.calls is not None or recording is not None:
        call = Call(name, kernels, memops)
        if _thread.calls is not None:
            _thread.calls.append(call)
        if recording is not None:
            recording.calls.append(call)


def record_work(qualname: str, inputs: Any, result: Any, device_inputs: bool = True) -> None:
    """``record`` a call with the kernels and memory operations launches.gpu_work counts for it."""
    if _thread.calls is not None or capturing() is not None:
        record(qualname, *gpu_work(qualname.rsplit(".", 1)[-1], inputs, result, device_inputs))


def host_read(why: str) -> None:
    """Count one host read on this thread; inside tinyflow's ``forbid_host_reads()``, raise."""
    from tinyflow.device import HostSyncError
    from tinyflow.device import _reads as tinyflow_reads

    recording = capturing()
    if recording is not None:
        raise recording.refuse(f"host read: ndarray.{why}")
    if tinyflow_reads.forbidden:
        raise HostSyncError(
            f"host read ({why}) of a device array inside forbid_host_reads(): on a GPU it would "
            "wait for the device")
    _thread.reads += 1


def host_reads() -> int:
    """How many device-to-host reads this thread has made through the stand-in so far."""
    return _thread.reads


def wrap(value: Any) -> Any:
    """NumPy results as stand-in arrays: arrays and NumPy scalars (CuPy returns 0-d arrays),
    tuples and lists element-wise; anything else (dtypes, Python values) as it is."""
    if isinstance(value, np.ndarray):
        out = object.__new__(ndarray)
        out._a = value
        return out
    if isinstance(value, np.generic):
        out = object.__new__(ndarray)
        out._a = np.asarray(value)
        return out
    if isinstance(value, tuple):
        return tuple(wrap(v) for v in value)
    if isinstance(value, list):
        return [wrap(v) for v in value]
    return value


def unwrap(value: Any, op: str, allow_host: bool = False) -> Any:
    """The NumPy arrays behind stand-in arrays (in tuples and lists too). A NumPy array is refused
    as CuPy refuses it, unless ``allow_host`` (creation functions, indices, assigned values)."""
    if isinstance(value, ndarray):
        return value._a
    if isinstance(value, np.ndarray):
        if not allow_host:
            raise TypeError(f"Unsupported type <class 'numpy.ndarray'> (cupy.{op} got a NumPy array: "
                            "move it to the device first; the strict CuPy stand-in refuses it as CuPy does)")
        refuse_host_copy(op, value)
        return value.copy()  # a host-to-device copy: the device array never aliases host memory
    if isinstance(value, (tuple, list)):
        items = [unwrap(v, op, allow_host) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):  # keyword arguments
        return {k: unwrap(v, op, allow_host) for k, v in value.items()}
    return value


def refuse_host_copy(op: str, value: Any) -> None:
    """Inside a capture, a copy of host data to the device raises (a 0-d value is a fill kernel in
    CuPy, its value baked into the graph: allowed)."""
    recording = capturing()
    if recording is None:
        return
    if isinstance(value, np.ndarray) and value.ndim > 0:
        raise recording.refuse(f"host-to-device copy of a NumPy array {value.shape} in cupy.{op}")
    if isinstance(value, (list, tuple)) and value and not all(isinstance(v, ndarray) for v in value):
        raise recording.refuse(f"host-to-device copy of a Python {type(value).__name__} in cupy.{op}")


class _Device:
    """``cupy.cuda.Device``: an id and a context manager (the stand-in has device 0 only)."""

    def __init__(self, device: int | None = None) -> None:
        self.id = 0 if device is None else int(device)
        if self.id != 0:
            raise CUDARuntimeError(f"cudaErrorInvalidDevice: invalid device ordinal {self.id}")

    def __enter__(self) -> _Device:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def synchronize(self) -> None:
        recording = capturing()
        if recording is not None:
            raise recording.refuse("Device.synchronize()")
        return None

    def use(self) -> None:
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Device) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"<CUDA Device {self.id}>"


class _MemoryPointer:
    """``ndarray.data``: the device pointer (here the NumPy buffer's address)."""

    def __init__(self, a: np.ndarray) -> None:
        self.ptr = int(a.__array_interface__["data"][0])


_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "matmul": "matmul",
    "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift",
    "rshift": "right_shift",
}
_COMPARE = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
            "eq": "equal", "ne": "not_equal"}


IN_PLACE_METHODS = {"fill", "sort", "put", "partition", "set", "__setitem__"}
"""ndarray methods that write into the array itself (while a stream captures, only recorded)."""


# ---- the module whose ufuncs the array's operators run --------------------------------------------
_bound_module: ModuleType | None = None


def bind_module(module: ModuleType) -> None:
    """Make ``module`` (the stand-in's ``cupy``) the one whose ufuncs and functions the arrays'
    operators and NumPy's ``__array_ufunc__`` / ``__array_function__`` protocols run.

    module.py calls it once, as it builds that module from this file's ``ndarray``; importing
    the package (strict_cupy/__init__.py) loads module.py, so it is bound before any array exists."""
    global _bound_module
    _bound_module = module


def _module() -> ModuleType:
    if _bound_module is None:
        raise RuntimeError("strict CuPy stand-in: no module bound to its arrays (import cuda_tools.strict_cupy)")
    return _bound_module


class ndarray:  # noqa: N801 (CuPy's name)
    """A device array of the strict CuPy stand-in (see the module docstring)."""

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 100
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, shape: Any, dtype: Any = float, memptr: Any = None, strides: Any = None,
                 order: str = "C") -> None:
        if memptr is not None or strides is not None:
            raise NotImplementedError("strict CuPy stand-in: ndarray(memptr=, strides=) is not emulated")
        recording = capturing()
        if recording is None:
            self._a = np.empty(shape, dtype=dtype, order=order)
        else:
            self._a = recording.allocate(tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),), dtype)

    # ---- refusing the host ----------------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(IMPLICIT_CONVERSION)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        mine = getattr(_module(), ufunc.__name__, None)
        if mine is None or not hasattr(mine, "nin"):
            return NotImplemented
        if method == "__call__":
            return mine(*inputs, **kwargs)
        return getattr(mine, method)(*inputs, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        target: Any = _module()
        for part in func.__module__.split(".")[1:]:
            target = getattr(target, part, None)
            if target is None:
                return NotImplemented
        mine = getattr(target, func.__name__, None)
        if mine is None:
            return NotImplemented
        return mine(*args, **kwargs)

    # ---- host reads ------------------------------------------------------------------------
    def get(self, stream: Any = None, order: str = "C", out: Any = None, blocking: bool = True) -> np.ndarray:
        host_read("get")
        record("ndarray.get", memops=1)
        copy = np.array(self._a, order=order)
        if out is not None:
            out[...] = copy
            return out
        return copy

    def set(self, arr: Any, stream: Any = None) -> None:
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"Only numpy.ndarray can be set to cupy.ndarray, got {type(arr).__name__}")
        if arr.shape != self._a.shape:
            raise ValueError(f"Shape mismatch. Old shape: {self._a.shape}, new shape: {arr.shape}")
        recording = capturing()
        if recording is not None:
            raise recording.refuse("host-to-device copy: ndarray.set()")
        record("ndarray.set", memops=1)
        self._a[...] = arr

    def item(self) -> Any:
        host_read("item")
        return self._a.item()

    def tolist(self) -> Any:
        host_read("tolist")
        return self._a.tolist()

    def __bool__(self) -> bool:
        host_read("bool")
        return bool(self._a)

    def __float__(self) -> float:
        host_read("float")
        return float(self._a)

    def __int__(self) -> int:
        host_read("int")
        return int(self._a)

    def __complex__(self) -> complex:
        host_read("complex")
        return complex(self._a)

    def __repr__(self) -> str:
        host_read("repr")
        return repr(self._a)

    def __str__(self) -> str:
        host_read("str")
        return str(self._a)

    def __format__(self, spec: str) -> str:
        host_read("format")
        return format(self._a.item() if self._a.ndim == 0 else self._a, spec)

    # ---- attributes ------------------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    strides = property(lambda self: self._a.strides)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: wrap(self._a.T))
    mT = property(lambda self: wrap(np.swapaxes(self._a, -1, -2)))
    real = property(lambda self: wrap(self._a.real))
    imag = property(lambda self: wrap(self._a.imag))
    device = property(lambda self: _Device(0))
    data = property(lambda self: _MemoryPointer(self._a))
    base = property(lambda self: None if self._a.base is None else wrap(self._a.base))

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self._a.shape, "typestr": self._a.dtype.str, "version": 3,
                "data": (_MemoryPointer(self._a).ptr, False),
                "strides": None if self._a.flags.c_contiguous else self._a.strides}

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self) -> Any:
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (wrap(self._a[i]) for i in range(len(self._a)))

    def __getitem__(self, index: Any) -> Any:
        recording = capturing()
        key = unwrap(_index(index, "ndarray.__getitem__", recording), "ndarray.__getitem__", allow_host=True)
        if recording is None:
            out = self._a[key]
        else:
            out = recording.run("ndarray.__getitem__", lambda a, k: a[k], (self._a, key), {})
        record_work("ndarray.__getitem__", self._a, out)  # a view, or a gather kernel
        return wrap(out)

    def __setitem__(self, index: Any, value: Any) -> None:
        recording = capturing()
        record("ndarray.__setitem__", kernels=1, memops=int(isinstance(value, np.ndarray)))
        key = unwrap(_index(index, "ndarray.__setitem__", recording), "ndarray.__setitem__", allow_host=True)
        source = unwrap(value, "ndarray.__setitem__", allow_host=True)
        if recording is None:
            self._a[key] = source
        else:
            target = self._a
            recording.defer(lambda: target.__setitem__(key, source))

    def __getattr__(self, name: str) -> Any:
        """Every other method of ``cupy.ndarray``, checked against CuPy's list."""
        from cuda_tools.strict_cupy.api import api

        if name.startswith("__") or name not in api().ndarray_methods:
            raise AttributeError(f"'cupy.ndarray' object has no attribute '{name}' "
                                 "(not in CuPy's ndarray API, strict CuPy stand-in)")
        method = getattr(self._a, name, None)
        if method is None:
            raise NotImplementedError(f"strict CuPy stand-in: ndarray.{name} is in CuPy but not emulated")
        params = api().ndarray_methods[name]

        def call(*args: Any, **kwargs: Any) -> Any:
            if params is not None:
                api().check_kwargs(f"cupy.ndarray.{name}", params, kwargs)
            inputs = unwrap(args, f"ndarray.{name}"), unwrap(kwargs, f"ndarray.{name}")
            recording = capturing()
            if recording is None:
                out = method(*inputs[0], **inputs[1])
            elif name in IN_PLACE_METHODS or inputs[1].get("out") is not None:
                recording.defer(lambda: method(*inputs[0], **inputs[1]))
                out = inputs[1].get("out")
            else:
                out = recording.run(f"ndarray.{name}", lambda a, *x, **k: getattr(a, name)(*x, **k),
                                    (self._a, *inputs[0]), inputs[1])
            record_work(f"ndarray.{name}", self._a, out)
            return wrap(out)

        return call

    # ---- operators: through the stand-in's ufuncs (NumPy operands refused as CuPy does) ---
    def _binary(self, name: str, other: Any, reflected: bool = False) -> Any:
        ufunc = getattr(_module(), name)
        return ufunc(other, self) if reflected else ufunc(self, other)

    def _inplace(self, name: str, other: Any) -> ndarray:
        getattr(_module(), name)(self, other, out=self)
        return self

    def __neg__(self) -> Any:
        return _module().negative(self)

    def __pos__(self) -> Any:
        return _module().positive(self)

    def __abs__(self) -> Any:
        return _module().absolute(self)

    def __invert__(self) -> Any:
        return _module().invert(self)

    def __divmod__(self, other: Any) -> Any:
        return _module().divmod(self, other)


def _index(index: Any, op: str, recording: Any) -> Any:
    """An index as it is; inside a capture, host arrays and lists in it (which CuPy copies to the
    device) are refused."""
    if recording is not None:
        for part in index if isinstance(index, tuple) else (index,):
            if isinstance(part, (np.ndarray, list)):
                refuse_host_copy(op, part if isinstance(part, np.ndarray) else list(part))
    return index


def _install_operators() -> None:
    for short, ufunc in _BINARY.items():
        setattr(ndarray, f"__{short}__", lambda self, o, _u=ufunc: self._binary(_u, o))
        setattr(ndarray, f"__r{short}__", lambda self, o, _u=ufunc: self._binary(_u, o, reflected=True))
        if short != "matmul":
            setattr(ndarray, f"__i{short}__", lambda self, o, _u=ufunc: self._inplace(_u, o))
    for short, ufunc in _COMPARE.items():
        setattr(ndarray, f"__{short}__", lambda self, o, _u=ufunc: self._binary(_u, o))


_install_operators()
