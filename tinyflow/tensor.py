"""Tensor: an n-dimensional array (NumPy or CuPy) that remembers how it was computed.

A Tensor holds its raw array in ``.array`` (NumPy or CuPy, never copied) and, when an op that
needs a gradient produced it, that graph node (``_ctx``, a ``tinyflow.autograd.Context``). ``.data``
is PyTorch's: a Tensor over the same array, outside autograd. Every method is a thin call into an
op of ``tinyflow.ops`` (the families are imported at the end); the maths lives there.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tinyflow import promotion, return_types
from tinyflow._tensor_str import tensor_repr
from tinyflow.arg_parser import add_axis_alias, index_steps, normalize_axis, normalize_dim
from tinyflow.autograd.engine import run_backward
from tinyflow.autograd.function import Context, set_tensor_class
from tinyflow.device import Device, device_of, move, quiet_numpy, restore_numpy, to_host
from tinyflow.dtypes import (
    as_dtype, bool_, float16, float32, float64, get_default_dtype, int32, int64, is_dtype_name, is_floating,
    is_floating_or_complex,
)
from tinyflow.errors import ShapeError

__all__ = ["Tensor"]


def _resolve_dtype(dtype: Any) -> np.dtype | None:
    """None, or the dtype named by ``dtype`` (a dtype, a type or a name such as "bf16")."""
    return None if dtype is None else as_dtype(dtype)


class Tensor:
    """An array plus its autograd history. Create one with ``tinyflow.tensor(...)``.

    The core: storage, autograd, arithmetic, reductions, reshape, indexing. The in-place methods
    (add_, copy_, ``x[i] = v``, ...) come from tinyflow/inplace.py (INPLACE_METHODS, at the end of
    this file); the wider PyTorch surface (sin, gather, cumsum, ...) from tinyflow/surface/.
    """

    __array_priority__ = 1000  # numpy_array + tensor -> Tensor.__radd__

    def __init__(self, *args: Any, device: Any = None) -> None:
        """Legacy constructor, as ``torch.Tensor``: ``Tensor(2, 3)`` is an uninitialised 2x3
        tensor and ``Tensor(data)`` a copy of data, both in the default float dtype. Prefer
        ``tinyflow.tensor``, ``zeros`` or ``empty``."""
        t = legacy_tensor(get_default_dtype(), args, device=device)
        self.__dict__.update(t.__dict__)

    # What a fresh tensor holds until told otherwise. These are class attributes, so that making
    # a tensor (once per op output) sets only its array, device and in-place counter; an instance
    # attribute of the same name takes over when one is assigned.
    grad: Tensor | None = None
    _requires_grad = False
    _ctx: Context | None = None
    _out_index = 0
    _grad_hooks: Sequence[Callable[[Tensor], Tensor | None]] = ()  # a list once one is registered
    _post_accumulate_hooks: Sequence[Callable[[Tensor], None]] = ()
    _retains_grad = False

    @classmethod
    def _from_array(cls, arr: Any, device: Device | None = None, requires_grad: bool = False) -> Tensor:
        """Wrap a raw array without copying or checking (the fast path used by ops)."""
        t = object.__new__(cls)
        t.array = arr
        t._device = device if device is not None else device_of(arr)
        t._versions = [0]  # in-place edits so far; shared with detach() and views of this data
        if requires_grad:
            t._requires_grad = True
        return t

    # ---------------------------------------------------------------- basic attributes
    # ``array`` (set in _from_array) is the raw NumPy/CuPy array: ops and optimizers work on it.

    @property
    def data(self) -> Tensor:
        """PyTorch's ``.data``: a Tensor over the same array, outside autograd (no graph, no
        requires_grad, its own in-place counter, so edits through it are not seen by backward:
        exactly PyTorch's contract). Use ``.array`` for the raw array."""
        return Tensor._from_array(self.array, device=self._device)

    @data.setter
    def data(self, value: Tensor) -> None:
        """``t.data = other``: t takes other's array (shape, dtype, device may change, as in PyTorch);
        t keeps its identity, its .grad, its requires_grad and its in-place counter."""
        if not isinstance(value, Tensor):
            raise TypeError(f"Tensor.data: can only assign a Tensor, got {type(value).__name__}; wrap it with "
                            "tinyflow.tensor(...) (or set .array to replace the raw array)")
        self.array, self._device = value.array, value._device

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape  # a tuple already (NumPy and CuPy)

    def size(self, dim: int | None = None) -> Any:
        """``x.size()``: the shape as a ``tinyflow.Size`` (prints as PyTorch's); ``x.size(d)``: one side."""
        if dim is None:
            return return_types.Size(self.array.shape)
        return self.shape[dim]

    @property
    def ndim(self) -> int:
        return self.array.ndim

    def dim(self) -> int:
        return self.array.ndim

    def numel(self) -> int:
        return int(self.array.size)

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype

    @property
    def device(self) -> Device:
        return self._device

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and not is_floating_or_complex(self.array.dtype):
            raise RuntimeError(f"only floating point tensors can require gradients, got dtype {self.array.dtype}; "
                               "convert first, e.g. x.float()")
        if not value and self._ctx is not None:
            raise RuntimeError("you can only change requires_grad flags of leaf tensors; use .detach() to get a "
                               "tensor that is cut from the graph")
        self._requires_grad = bool(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        return self._ctx is None

    @property
    def grad_fn(self) -> Context | None:
        return self._ctx

    @property
    def T(self) -> Tensor:
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> Tensor:
        if self.ndim < 2:
            raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. "
                               f"Got {self.ndim}-D tensor.")
        return self.transpose(-2, -1)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return tensor_repr(self)

    def __bool__(self) -> bool:
        if self.array.size != 1:
            raise RuntimeError(f"the truth value of a tensor with {self.array.size} elements is ambiguous")
        return bool(self._read("bool"))

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __index__(self) -> int:
        if self.dtype.kind not in "iu" or self.array.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self._scalar("index"))

    def __hash__(self) -> int:
        return id(self)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self._read("__array__")
        return arr if dtype is None else arr.astype(dtype)

    # ---------------------------------------------------------------- conversion
    def _read(self, why: str) -> np.ndarray:
        """The data on the host. Every read of a tensor's values comes through here, and so
        through ``tinyflow.device.to_host``, which counts it (a sync on a GPU)."""
        return to_host(self.array, why)

    def _scalar(self, why: str) -> Any:
        if self.array.size != 1:
            raise ShapeError(f"item(): only one-element tensors can be converted, got shape {self.shape}")
        return self._read(why).reshape(()).item()

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The data as a NumPy array (a host read, copied for CUDA tensors; ``force`` changes nothing)."""
        return self._read("numpy")

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number (a host read: a sync on a GPU)."""
        return self._scalar("item")

    def tolist(self) -> Any:
        return self._read("tolist").tolist()

    def detach(self) -> Tensor:
        """The same data, cut from the graph (shares memory and the in-place counter, as PyTorch)."""
        t = Tensor._from_array(self.array, device=self._device)
        t._versions = self._versions
        return t

    def clone(self, *, memory_format: Any = None) -> Tensor:
        return Clone.apply(self)

    def contiguous(self, memory_format: Any = None) -> Tensor:
        """The tensor itself: tinyflow's arrays are always in the default (contiguous) layout."""
        return self

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """Move and/or cast: ``to("cuda:0")``, ``to(tf.float64)``, ``to(device, dtype)``. PyTorch's
        ``non_blocking``, ``copy`` and ``memory_format`` are accepted (the layout stays the default
        contiguous one; see ``tinyflow.channels_last``)."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None), kwargs.pop("memory_format", None)
        copy = kwargs.pop("copy", False)
        if kwargs:
            raise TypeError(f"to(): unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, (Device, str)) and not (isinstance(a, str) and is_dtype_name(a)):
                device = a
            elif isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            else:
                dtype = a
        out = self
        if dtype is not None and _resolve_dtype(dtype) != self.dtype:
            out = Cast.apply(out, _resolve_dtype(dtype))
        if device is not None and Device(device) != self._device:
            out = ToDevice.apply(out, Device(device))
        return out.clone() if copy and out is self else out

    def cpu(self, memory_format: Any = None) -> Tensor:
        return self.to("cpu")

    def cuda(self, device: Any = None, non_blocking: bool = False, memory_format: Any = None) -> Tensor:
        return self.to(Device("cuda", device or 0) if device is None or isinstance(device, int) else device)

    def float(self) -> Tensor:
        return self.to(float32)

    def double(self) -> Tensor:
        return self.to(float64)

    def half(self) -> Tensor:
        return self.to(float16)

    def bfloat16(self) -> Tensor:
        return self.to("bfloat16")

    def is_floating_point(self) -> bool:
        return is_floating(self.dtype)

    def long(self) -> Tensor:
        return self.to(int64)

    def int(self) -> Tensor:
        return self.to(int32)

    def bool(self) -> Tensor:
        return self.to(bool_)

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    # ---------------------------------------------------------------- autograd
    def backward(self, gradient: Any = None, retain_graph: bool | None = None, create_graph: bool = False,
                 inputs: Any = None) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (PyTorch's create_graph and inputs: refused)."""
        if create_graph or inputs is not None:
            raise NotImplementedError("backward(create_graph=True / inputs=...): tinyflow's backward computes on raw arrays "
                                      "into every leaf; drop them, or use tinyflow.autograd.grad(outputs, inputs)")
        if not self._requires_grad:
            raise RuntimeError("backward: this tensor does not require grad and has no grad_fn; make sure an "
                               "input has requires_grad=True and that it was not computed under no_grad()")
        if gradient is None:
            if self.array.size != 1:
                raise RuntimeError(f"backward: grad can be implicitly created only for scalar outputs; this tensor "
                                   f"has shape {self.shape}, so pass gradient= of that shape")
            g = self._device.xp.ones(self.array.shape, dtype=self.dtype)
        else:
            g = gradient.array if isinstance(gradient, Tensor) else self._device.xp.asarray(gradient, dtype=self.dtype)
            if tuple(g.shape) != self.shape:
                raise ShapeError(f"backward: gradient of shape {tuple(g.shape)} does not match tensor of shape {self.shape}")
        run_backward([self], [g], retain_graph=bool(retain_graph))

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> Callable[[], None]:
        """Call ``hook(grad)`` with this tensor's complete gradient; it may return a new one."""
        if not self._requires_grad:
            raise RuntimeError("register_hook: cannot register a hook on a tensor that doesn't require gradient")
        if "_grad_hooks" not in self.__dict__:
            self._grad_hooks = []
        self._grad_hooks.append(hook)
        if self._ctx is not None:
            self._ctx.watch(self._out_index, weakref.ref(self))
        return lambda: self._grad_hooks.remove(hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> Callable[[], None]:
        """Call ``hook(self)`` once per backward, after this leaf's ``.grad`` is complete."""
        if self._ctx is not None:
            raise RuntimeError("register_post_accumulate_grad_hook: only leaf tensors have an accumulated .grad")
        if "_post_accumulate_hooks" not in self.__dict__:
            self._post_accumulate_hooks = []
        self._post_accumulate_hooks.append(hook)
        return lambda: self._post_accumulate_hooks.remove(hook)

    def retain_grad(self) -> None:
        """Keep ``.grad`` on a non-leaf tensor after backward."""
        if self._ctx is None:
            return
        self._retains_grad = True
        self._ctx.watch(self._out_index, weakref.ref(self))

    @property
    def _version(self) -> int:
        return self._versions[0]

    # ---------------------------------------------------------------- arithmetic
    # Operands meet in PyTorch's result dtype (tinyflow.promotion), never NumPy's.
    def _wrap(self, other: Any) -> Tensor:
        return other if isinstance(other, Tensor) else _scalar_like(other, self)

    def _pair(self, other: Any, floating: bool = False) -> tuple[Tensor, Tensor]:
        """(self, other) cast to their result dtype (a float one when ``floating``)."""
        dtype = self.array.dtype
        if isinstance(other, Tensor):
            if other.array.dtype == dtype and (not floating or is_floating_or_complex(dtype)):
                return self, other
        elif isinstance(other, (int, float)) and not isinstance(other, bool) and is_floating(dtype):
            return self, _scalar_like(other, self)
        return promotion.promote(self, other, floating=floating)

    def __add__(self, other: Any) -> Tensor:
        return elementwise.Add.apply(*self._pair(other))

    def __radd__(self, other: Any) -> Tensor:
        a, b = self._pair(other)
        return elementwise.Add.apply(b, a)

    def __sub__(self, other: Any) -> Tensor:
        return elementwise.Sub.apply(*self._pair(elementwise.sub_operand(self, other)))

    def __rsub__(self, other: Any) -> Tensor:
        a, b = self._pair(elementwise.sub_operand(self, other))
        return elementwise.Sub.apply(b, a)

    def __mul__(self, other: Any) -> Tensor:
        return elementwise.Mul.apply(*self._pair(other))

    def __rmul__(self, other: Any) -> Tensor:
        a, b = self._pair(other)
        return elementwise.Mul.apply(b, a)

    def __truediv__(self, other: Any) -> Tensor:
        return elementwise.Div.apply(*self._pair(other, floating=True))

    def __rtruediv__(self, other: Any) -> Tensor:
        a, b = self._pair(other, floating=True)
        return elementwise.Div.apply(b, a)

    def __pow__(self, other: Any) -> Tensor:
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            base = self if isinstance(other, int) or is_floating_or_complex(self.dtype) else promotion.float_operand(self)
            return elementwise.PowScalar.apply(base, other)
        return elementwise.Pow.apply(*self._pair(other))

    def __rpow__(self, other: Any) -> Tensor:
        a, b = self._pair(other)
        return elementwise.Pow.apply(b, a)

    def __matmul__(self, other: Any) -> Tensor:
        return linear.matmul(self, self._wrap(other))

    def __rmatmul__(self, other: Any) -> Tensor:
        return linear.matmul(self._wrap(other), self)

    def __neg__(self) -> Tensor:
        return elementwise.Neg.apply(self)

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return self.abs()

    # comparisons: never differentiable, return boolean tensors
    def _compare(self, other: Any, fn: Callable[[Any, Any], Any], op: str) -> Tensor:
        """``fn(a, b)`` in torch.result_type's dtype (NumPy's would compare int64 with 2.5 exactly, and
        float32 with a 0-d float64 tensor in float64), a number wrapped into an integer tensor's dtype."""
        a, b = self.array, other.array if isinstance(other, Tensor) else other
        if isinstance(other, Tensor) and b.dtype != a.dtype or type(other) is float and a.dtype.kind in "iub":
            dtype = promotion.result_type(self, other)
            a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False) if isinstance(other, Tensor) else b
        elif type(other) is int and a.dtype.kind in "iu" and not _INT_RANGE[a.dtype][0] <= other <= _INT_RANGE[a.dtype][1]:
            b = np.array(other).astype(a.dtype).item()  # -1 is 255 in uint8, as PyTorch casts it
        quiet = quiet_numpy()  # ml_dtypes' bfloat16 warns on NaN
        try:
            return Tensor._from_array(fn(a, b), device=self._device)
        except ValueError:
            raise elementwise.broadcast_error(op, self.array, b) from None
        finally:
            restore_numpy(quiet)

    def __eq__(self, other: Any) -> Tensor:  # type: ignore[override]
        return self._compare(other, lambda a, b: a == b, "eq")

    def __ne__(self, other: Any) -> Tensor:  # type: ignore[override]
        return self._compare(other, lambda a, b: a != b, "ne")

    def __lt__(self, other: Any) -> Tensor:
        return self._compare(other, lambda a, b: a < b, "lt")

    def __le__(self, other: Any) -> Tensor:
        return self._compare(other, lambda a, b: a <= b, "le")

    def __gt__(self, other: Any) -> Tensor:
        return self._compare(other, lambda a, b: a > b, "gt")

    def __ge__(self, other: Any) -> Tensor:
        return self._compare(other, lambda a, b: a >= b, "ge")

    eq = __eq__
    ne = __ne__
    lt = __lt__
    le = __le__
    gt = __gt__
    ge = __ge__

    def add(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """self + alpha * other."""
        return self + (other if alpha == 1 else other * alpha)

    def sub(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """self - alpha * other."""
        return self - (other if alpha == 1 else elementwise.sub_operand(self, other) * alpha)

    mul = __mul__
    matmul = __matmul__

    def pow(self, exponent: Any) -> Tensor:
        return self**exponent

    def all(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """True where every entry (over ``dim``, or all of them) is non-zero; a bool tensor."""
        return elementwise.NoGradient.apply(lambda xp, a: _truth(xp.all, a, dim, keepdim), self)

    def any(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """True where some entry (over ``dim``, or any at all) is non-zero; a bool tensor."""
        return elementwise.NoGradient.apply(lambda xp, a: _truth(xp.any, a, dim, keepdim), self)

    def isnan(self) -> Tensor:
        return Tensor._from_array(self._device.xp.isnan(self.array), device=self._device)

    def isfinite(self) -> Tensor:
        return Tensor._from_array(self._device.xp.isfinite(self.array), device=self._device)

    # ---------------------------------------------------------------- unary maths
    def exp(self) -> Tensor:
        return elementwise.Exp.apply(promotion.float_operand(self))

    def log(self) -> Tensor:
        return elementwise.Log.apply(promotion.float_operand(self))

    def sqrt(self) -> Tensor:
        return elementwise.Sqrt.apply(promotion.float_operand(self))

    def tanh(self) -> Tensor:
        return activation.TanhFunction.apply(promotion.float_operand(self))

    def sigmoid(self) -> Tensor:
        return activation.SigmoidFunction.apply(promotion.float_operand(self))

    def relu(self) -> Tensor:
        return activation.ReLUFunction.apply(self)

    def abs(self) -> Tensor:
        return elementwise.Abs.apply(self)

    def clip(self, min: float | None = None, max: float | None = None) -> Tensor:
        if min is None and max is None:
            raise RuntimeError("clamp: at least one of min and max must be given (not both None)")
        return elementwise.Clip.apply(self, min, max)

    clamp = clip

    def maximum(self, other: Any) -> Tensor:
        return elementwise.Maximum.apply(*self._pair(other))

    def minimum(self, other: Any) -> Tensor:
        return elementwise.Minimum.apply(*self._pair(other))

    def softmax(self, dim: int = -1, dtype: Any = None) -> Tensor:
        """Softmax along ``dim``, computed in ``dtype`` when given (as ``F.softmax``)."""
        src = self if dtype is None else self.to(dtype)
        return activation.SoftmaxFunction.apply(src, dim)

    def log_softmax(self, dim: int = -1, dtype: Any = None) -> Tensor:
        """log(softmax) along ``dim``, computed in ``dtype`` when given (as ``F.log_softmax``)."""
        src = self if dtype is None else self.to(dtype)
        return activation.LogSoftmaxFunction.apply(src, dim)

    def logsumexp(self, dim: int = -1, keepdim: bool = False) -> Tensor:
        return activation.LogSumExp.apply(self, dim, keepdim)

    # ---------------------------------------------------------------- reductions
    def sum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        """Sum over ``dim`` (all dims when None); integer and bool tensors sum to int64, as PyTorch."""
        x = self if dtype is None else self.to(dtype)
        return reduce.Sum.apply(x, dim, keepdim)

    def mean(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        x = self if dtype is None else self.to(dtype)
        return reduce.Mean.apply(x, dim, keepdim)

    def var(self, dim: Any = None, unbiased: bool = True, keepdim: bool = False, *,
            correction: float | None = None) -> Tensor:
        """Variance over ``dim`` with ``correction`` (default 1, Bessel's; ``unbiased=False`` is 0).
        PyTorch's order: the second positional argument is ``unbiased``, ``var(False)`` too."""
        return reduce.Var.apply(self, *_var_arguments(dim, unbiased, keepdim, correction))

    def std(self, dim: Any = None, unbiased: bool = True, keepdim: bool = False, *,
            correction: float | None = None) -> Tensor:
        """Standard deviation: sqrt of var (same arguments); its gradient is 0 where it is 0."""
        return reduce.Std.apply(self, *_var_arguments(dim, unbiased, keepdim, correction))

    def max(self, dim: Any = None, keepdim: bool = False, *, other: Tensor | None = None) -> Any:
        """Without dim: the maximum. With dim: (values, indices), a return_types.max. With a
        tensor instead of a dim (or ``other=``): the elementwise maximum, as PyTorch."""
        if other is not None or isinstance(dim, Tensor):
            return self.maximum(dim if other is None else other)
        if dim is None:
            return reduce.Max.apply(self, None, keepdim)
        return return_types.max(*reduce.MaxDim.apply(self, dim, keepdim, True))

    def min(self, dim: Any = None, keepdim: bool = False, *, other: Tensor | None = None) -> Any:
        """Like max: the minimum, (values, indices) along dim, or the elementwise minimum."""
        if other is not None or isinstance(dim, Tensor):
            return self.minimum(dim if other is None else other)
        if dim is None:
            return reduce.Min.apply(self, None, keepdim)
        return return_types.min(*reduce.MaxDim.apply(self, dim, keepdim, False))

    def amax(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        return reduce.Max.apply(self, dim, keepdim)

    def amin(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        return reduce.Min.apply(self, dim, keepdim)

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return Tensor._from_array(reduce.arg_extreme(self._device.xp, self.array, "argmax", dim, keepdim),
                                  device=self._device)

    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return Tensor._from_array(reduce.arg_extreme(self._device.xp, self.array, "argmin", dim, keepdim),
                                  device=self._device)

    # ---------------------------------------------------------------- shape
    def reshape(self, *args: Any, shape: Sequence[int] | None = None) -> Tensor:
        """``reshape(2, 3)``, ``reshape((2, 3))`` or ``reshape(shape=(2, 3))``, as PyTorch."""
        shape = _shape_arg(args if shape is None else (shape,))
        if shape == self.shape:
            return self
        return Reshape.apply(self, shape)

    def view(self, *args: Any, size: Sequence[int] | None = None, dtype: Any = None) -> Tensor:
        """A reshape (as reshape takes it, or ``size=``), or the bytes read as ``dtype`` (``view(tf.int32)``)."""
        if dtype is not None or (len(args) == 1 and not isinstance(args[0], (int, tuple, list, Tensor))):
            dt = as_dtype(args[0] if dtype is None else dtype)
            return elementwise.NoGradient.apply(lambda xp, a: a.view(dt), self)
        return self.reshape(*args, shape=size)

    def view_as(self, other: Tensor) -> Tensor:
        return self.reshape(other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        s, e = normalize_dim("flatten", start_dim, self.ndim), normalize_dim("flatten", end_dim, self.ndim)
        if s > e:
            raise RuntimeError(f"flatten() has invalid args: start_dim ({start_dim}) cannot come after end_dim ({end_dim})")
        if self.ndim == 0:
            return self.reshape(1)
        n = 1
        for d in self.shape[s : e + 1]:
            n *= d
        return self.reshape(*self.shape[:s], n, *self.shape[e + 1 :])

    def permute(self, *dims: Any) -> Tensor:
        return Permute.apply(self, _shape_arg(dims))

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        if self.ndim == 0:  # PyTorch: a 0-d tensor transposes over dims 0/-1 to itself
            normalize_dim("transpose", dim0, 0), normalize_dim("transpose", dim1, 0)
            return Permute.apply(self, ())
        dim0, dim1 = normalize_dim("transpose", dim0, self.ndim), normalize_dim("transpose", dim1, self.ndim)
        axes = list(range(self.ndim))
        axes[dim0], axes[dim1] = axes[dim1], axes[dim0]
        return Permute.apply(self, tuple(axes))

    def t(self) -> Tensor:
        if self.ndim > 2:
            raise ShapeError(f"t(): expects a tensor with <= 2 dims, got shape {self.shape}")
        return self.T

    def expand(self, *args: Any, size: Sequence[int] | None = None, implicit: bool = False) -> Tensor:
        """A broadcast view to ``size`` (as reshape takes it; -1 keeps a dim; ``implicit`` changes nothing)."""
        shape = _shape_arg(args if size is None else (size,))
        lead = len(shape) - self.ndim
        if -1 in shape[:lead]:
            raise RuntimeError(f"expand: the expanded size of the tensor (-1) isn't allowed in a leading, non-existing "
                               f"dimension {shape.index(-1)} (tensor of shape {tuple(self.shape)} to {shape})")
        sizes = tuple(self.shape[i - lead] if s == -1 else s for i, s in enumerate(shape))
        return Expand.apply(self, sizes)

    def broadcast_to(self, *args: Any, size: Sequence[int] | None = None) -> Tensor:
        return self.expand(*args, size=size)

    def expand_as(self, other: Tensor) -> Tensor:
        return self.expand(other.shape)

    def squeeze(self, dim: int | Sequence[int] | None = None) -> Tensor:
        """Drop size-1 dims: all of them, or those of ``dim`` (an int or a tuple) that have size 1."""
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        axes = set(normalize_axis("squeeze", dim, self.ndim) or ())  # torch's errors: out of range, repeated
        return self.reshape(tuple(s for i, s in enumerate(self.shape) if not (i in axes and s == 1)))

    def unsqueeze(self, dim: int) -> Tensor:
        """Insert a size-1 dim at ``dim`` (in [-ndim-1, ndim], as PyTorch)."""
        d = _wrap_dim("unsqueeze", dim, self.ndim + 1)
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def split(self, split_size: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
        return split(self, split_size, dim)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        """At most ``chunks`` pieces of equal size (the last may be smaller) along ``dim``."""
        if self.ndim == 0:
            raise RuntimeError("chunk expects at least a 1-dimensional tensor")
        if chunks <= 0:
            raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
        n = self.shape[normalize_dim("chunk", dim, self.ndim)]
        if n == 0:  # PyTorch: `chunks` empty pieces
            return split(self, [0] * chunks, dim)
        return split(self, -(-n // chunks), dim)

    def __getitem__(self, index: Any) -> Tensor:
        """Indexing as PyTorch: integers select first, then tensor indices gather (see index_steps)."""
        out = self
        for step in index_steps(index, Tensor, self.array.shape):
            out = GetItem.apply(out, step)
        return out


_INT_RANGE = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max)) for t in "i1 i2 i4 i8 u1 u2 u4 u8".split()}


def _truth(fn: Callable[..., Any], a: Any, dim: Any, keepdim: bool) -> Any:
    """all / any over ``dim``: bool, or uint8 for a uint8 input, as PyTorch keeps it."""
    out = fn(a, axis=_reduce_axes(dim, a.ndim), keepdims=keepdim)
    return out.astype(a.dtype) if a.dtype == np.uint8 else out


def _shape_arg(shape: tuple) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(int(s) for s in shape[0])
    return tuple(int(s) for s in shape)


def _wrap_dim(op: str, dim: int, ndim: int) -> int:
    """``dim`` as a non-negative index of ``ndim`` dims; IndexError (PyTorch's) when out of range.
    A 0-d tensor takes dim 0 and -1."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def _var_arguments(dim: Any, unbiased: bool, keepdim: bool, correction: float | None) -> tuple:
    """(dim, keepdim, correction) for Var and Std from PyTorch's arguments (``var(False)``: unbiased)."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return dim, keepdim, correction if correction is not None else (1 if unbiased else 0)


def _scalar_like(value: Any, ref: Tensor) -> Tensor:
    """A constant operand for ``ref``: Python floats take ref's float dtype (no upcasting)."""
    xp = ref._device.xp
    if isinstance(value, int):  # bool too
        dtype = ref.dtype
    elif isinstance(value, float):
        dtype = ref.dtype if is_floating_or_complex(ref.dtype) else get_default_dtype()
    else:
        arr = value if hasattr(value, "dtype") else np.asarray(value)
        if isinstance(arr, np.ndarray) and ref._device.type != "cpu":
            arr = move(arr, ref._device)
        if arr.dtype == np.float64 and not isinstance(value, np.ndarray) and is_floating(ref.dtype):
            arr = arr.astype(ref.dtype)
        return Tensor._from_array(arr, device=ref._device)
    return Tensor._from_array(xp.asarray(value, dtype=dtype), device=ref._device)


def _reduce_axes(dim: Any, ndim: int) -> Any:
    """A dim argument (None, an int or a sequence) as NumPy's axis, checked against ``ndim``."""
    axes = normalize_axis("reduce", dim, ndim)
    return None if ndim == 0 else axes


# PyTorch takes axis= wherever it takes dim= (tinyflow/arg_parser.py).
add_axis_alias(Tensor)
set_tensor_class(Tensor)  # the class autograd wraps op outputs in

# The in-place methods, defined with how they meet autograd in tinyflow/inplace.py (built on Tensor).
INPLACE_METHODS = tuple(
    "_alias _inplace _rebase add_ sub_ mul_ div_ zero_ fill_ copy_ clamp_ clip_ exp_ log_ sqrt_ abs_ tanh_ "
    "sigmoid_ relu_ pow_ addcmul_ addcdiv_ detach_ __iadd__ __isub__ __imul__ __itruediv__ __ifloordiv__ "
    "__imod__ __ipow__ __ilshift__ __irshift__ __setitem__ uniform_ normal_ _fill_values".split()
)
from tinyflow import inplace as _inplace_methods  # noqa: E402

for _name in INPLACE_METHODS:
    setattr(Tensor, _name, getattr(_inplace_methods, _name))

# The creation functions live in tinyflow/creation.py; these names stay importable from here.
from tinyflow.creation import legacy_tensor  # noqa: E402
from tinyflow.creation import (  # noqa: E402,F401
    arange, as_tensor, cat, empty, empty_like, full, full_like, linspace, ones, ones_like, pad, rand, rand_like,
    randint, randn, randn_like, randperm, split, stack, tensor, where, zeros, zeros_like,
)
# The op families the methods call, imported once Tensor exists: their files build on it (their F functions).
# copy's and shape's ops by name: the arguments called copy and shape would hide those modules.
from tinyflow.ops import activation, elementwise, linear, reduce  # noqa: E402
from tinyflow.ops.copy import Cast, Clone, ToDevice  # noqa: E402
from tinyflow.ops.shape import Expand, GetItem, Permute, Reshape  # noqa: E402
