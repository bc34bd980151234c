"""Tensor: an n-dimensional array (NumPy or CuPy) that remembers how it was computed.

A Tensor holds its raw array in ``.array`` (NumPy or CuPy, never copied) and, when it was
produced by an op that needs a gradient, the graph node (``_ctx``, a ``tinyflow.autograd.Context``)
that produced it. ``.data`` is PyTorch's: a Tensor over the same array, outside autograd. Every
method here is a thin call into an op in ``tinyflow.ops``; the maths lives there.
"""
from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from tinyflow import amp, autograd, promotion, return_types
from tinyflow.autograd import _memory_root
from tinyflow.device import CPU, Device, device_of, move, to_host
from tinyflow.dtypes import as_dtype, is_dtype_name, is_floating, is_floating_or_complex
from tinyflow.errors import ShapeError
from tinyflow.tensor_methods import TensorMethods, accept_axis_alias, add_axis_alias

__all__ = [
    "Tensor",
    "tensor",
    "as_tensor",
    "zeros",
    "ones",
    "full",
    "empty",
    "randn",
    "rand",
    "randint",
    "arange",
    "linspace",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "randn_like",
    "rand_like",
    "float16",
    "float32",
    "float64",
    "int32",
    "int64",
    "bool_",
    "get_default_dtype",
    "set_default_dtype",
]

float16 = np.dtype("float16")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
bool_ = np.dtype("bool")
_default_dtype = float32


def __getattr__(name: str) -> Any:
    """``bfloat16``: resolved on first use, so tinyflow imports without ml_dtypes."""
    if name == "bfloat16":
        return as_dtype("bfloat16")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_default_dtype() -> np.dtype:
    return _default_dtype


def set_default_dtype(dtype: Any) -> None:
    global _default_dtype
    dtype = as_dtype(dtype)
    if not is_floating(dtype):
        raise TypeError(f"set_default_dtype: only floating dtypes can be the default, got {dtype}")
    _default_dtype = dtype


# ------------------------------------------------------------------------------ printing
_PRINT_DEFAULTS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}
_PRINT_PROFILES = {"default": _PRINT_DEFAULTS, "short": {**_PRINT_DEFAULTS, "precision": 2, "edgeitems": 2},
                   "full": {**_PRINT_DEFAULTS, "threshold": float("inf")}}
_print_options = dict(_PRINT_DEFAULTS)


def set_printoptions(precision: int | None = None, threshold: float | None = None, edgeitems: int | None = None,
                     linewidth: int | None = None, profile: str | None = None, sci_mode: bool | None = None) -> None:
    """``torch.set_printoptions``: how tensors print. ``profile`` ("default", "short", "full")
    resets every option first; ``sci_mode`` True/False forces/suppresses scientific notation
    (None: chosen from the values)."""
    if profile is not None:
        if profile not in _PRINT_PROFILES:
            raise ValueError(f"set_printoptions: unknown profile {profile!r}; choose from {sorted(_PRINT_PROFILES)}")
        _print_options.update(_PRINT_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                        ("linewidth", linewidth)):
        if value is not None:
            _print_options[name] = value
    if sci_mode is not None or profile is not None:
        _print_options["sci_mode"] = sci_mode


def get_printoptions() -> dict[str, Any]:
    """The current print options (``torch._tensor_str.PRINT_OPTS`` as a dict)."""
    return dict(_print_options)


def _format_array(a: Any) -> str:
    opts = _print_options
    threshold = opts["threshold"]
    kwargs: dict[str, Any] = {
        "separator": ", ", "prefix": "tensor(", "precision": opts["precision"], "edgeitems": opts["edgeitems"],
        "threshold": sys.maxsize if threshold == float("inf") else int(threshold), "max_line_width": opts["linewidth"],
    }
    if opts["sci_mode"] is True and a.dtype.kind == "f":
        kwargs["formatter"] = {"float_kind": lambda x: np.format_float_scientific(x, precision=opts["precision"])}
    elif opts["sci_mode"] is False:
        kwargs["suppress_small"] = True
    if a.dtype.kind == "f" and "formatter" not in kwargs:
        finite = a[np.isfinite(a)]
        if finite.size and not np.all(finite == np.round(finite)):
            kwargs["floatmode"] = "fixed"  # PyTorch: every element with `precision` digits (2.5000, not 2.5)
    return np.array2string(a, **kwargs)


def _resolve_dtype(dtype: Any) -> np.dtype | None:
    """None, or the dtype named by ``dtype`` (a dtype, a type or a name such as "bf16")."""
    return None if dtype is None else as_dtype(dtype)


class Tensor(TensorMethods):
    """An array plus its autograd history. Create one with ``tinyflow.tensor(...)``.

    This class holds the core (storage, autograd, arithmetic, reductions, reshape); the wider
    PyTorch surface (sin, gather, sort, cumsum, flip, type, new_zeros, ...) comes from
    ``TensorMethods`` in tinyflow/tensor_methods.py. Methods that take ``dim=`` accept ``axis=``.
    """

    __array_priority__ = 1000  # numpy_array + tensor -> Tensor.__radd__

    def __init__(self, *args: Any, device: Any = None) -> None:
        """Legacy constructor, as ``torch.Tensor``: ``Tensor(2, 3)`` is an uninitialised 2x3
        tensor and ``Tensor(data)`` a copy of data, both in the default float dtype. Prefer
        ``tinyflow.tensor``, ``zeros`` or ``empty``."""
        from tinyflow.functions import legacy_tensor

        t = legacy_tensor(_default_dtype, args, device=device)
        self.__dict__.update(t.__dict__)

    # What a fresh tensor holds until told otherwise. These are class attributes, so that making
    # a tensor (once per op output) sets only its array, device and in-place counter; an instance
    # attribute of the same name takes over when one is assigned.
    grad: Tensor | None = None
    _requires_grad = False
    _ctx: autograd.Context | None = None
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
            raise TypeError(
                f"Tensor.data: can only assign a Tensor, got {type(value).__name__}; wrap it with "
                "tinyflow.tensor(...) (or set .array to replace the raw array)"
            )
        self.array, self._device = value.array, value._device

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape  # a tuple already (NumPy and CuPy)

    def size(self, dim: int | None = None) -> Any:
        """``x.size()``: the shape as a ``tinyflow.Size`` (prints as PyTorch's); ``x.size(d)``: one side."""
        if dim is None:
            from tinyflow.functions import Size

            return Size(self.array.shape)
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
            raise RuntimeError(
                f"only floating point tensors can require gradients, got dtype {self.array.dtype}; "
                "convert first, e.g. x.float()"
            )
        if not value and self._ctx is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf tensors; use .detach() to get a "
                "tensor that is cut from the graph"
            )
        self._requires_grad = bool(value)

    def requires_grad_(self, value: bool = True) -> Tensor:
        self.requires_grad = value
        return self

    @property
    def is_leaf(self) -> bool:
        return self._ctx is None

    @property
    def grad_fn(self) -> autograd.Context | None:
        return self._ctx

    @property
    def T(self) -> Tensor:
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> Tensor:
        if self.ndim < 2:
            raise RuntimeError(
                f"tensor.mT is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor."
            )
        return self.transpose(-2, -1)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        body = _format_array(self._read("repr"))
        extra = []
        if self.dtype != _default_dtype and is_floating(self.dtype) or self.dtype.kind not in "fib":
            extra.append(f"dtype={self.dtype}")
        if self._device.type != "cpu":
            extra.append(f"device='{self._device}'")
        if self._ctx is not None:
            extra.append(f"grad_fn=<{self._ctx.fn.__name__}Backward>")
        elif self._requires_grad:
            extra.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extra) + ")"

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

    def numpy(self) -> np.ndarray:
        """The data as a NumPy array (copied to the host for CUDA tensors; a host read)."""
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

    def clone(self) -> Tensor:
        return _ops().Clone.apply(self)

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
            out = _ops().Cast.apply(out, _resolve_dtype(dtype))
        if device is not None and Device(device) != self._device:
            out = _ops().ToDevice.apply(out, Device(device))
        return out.clone() if copy and out is self else out

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, index: int = 0) -> Tensor:
        return self.to(Device("cuda", index))

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
    def backward(self, gradient: Any = None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``."""
        if not self._requires_grad:
            raise RuntimeError(
                "backward: this tensor does not require grad and has no grad_fn; make sure an "
                "input has requires_grad=True and that it was not computed under no_grad()"
            )
        if gradient is None:
            if self.array.size != 1:
                raise RuntimeError(
                    f"backward: grad can be implicitly created only for scalar outputs; this tensor "
                    f"has shape {self.shape}, so pass gradient= of that shape"
                )
            g = self._device.xp.ones(self.array.shape, dtype=self.dtype)
        else:
            g = gradient.array if isinstance(gradient, Tensor) else self._device.xp.asarray(gradient, dtype=self.dtype)
            if tuple(g.shape) != self.shape:
                raise ShapeError(f"backward: gradient of shape {tuple(g.shape)} does not match tensor of shape {self.shape}")
        autograd.run_backward([self], [g], retain_graph=retain_graph)

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

    # ---------------------------------------------------------------- in-place ops
    # As in PyTorch, an in-place op writes into this tensor's memory (views see the change) and
    # bumps its in-place counter. When autograd records it (grad mode on, and this tensor or an
    # operand requires grad), the op runs out of place on a stand-in for the old value, the
    # result is written back, and this tensor moves onto the op's node: later uses see the new
    # value and its history, uses recorded earlier keep their edge to the old node. A view's
    # base moves too (x[0] += y changes x's history). Backward refuses a node whose saved
    # array was overwritten since (the counters). On a leaf that requires grad it is an error,
    # unless under no_grad() (how optimizers update parameters).

    @property
    def _version(self) -> int:
        return self._versions[0]

    def _alias(self) -> Tensor:
        """A second Tensor for this one's current value and history (the in-place op's input)."""
        t = Tensor._from_array(self.array, device=self._device, requires_grad=self._requires_grad)
        t._ctx, t._out_index, t._versions = self._ctx, self._out_index, self._versions
        return t

    def _inplace(self, op: str, compute: Callable[[Tensor], Tensor], operands: Sequence[Any] = (),
                 fast: Callable[[Any], Any] | None = None) -> Tensor:
        """Run in-place op ``op``. ``compute(old)`` returns the new value as a Tensor made by
        tinyflow ops (so autograd records it); ``fast(array)``, when given, updates the raw array
        directly and runs when autograd has nothing to record. ``operands`` are the op's other
        arguments (those that are tensors may require grad)."""
        tracked = autograd.is_grad_enabled() and (
            self._requires_grad or any(isinstance(o, Tensor) and o._requires_grad for o in operands)
        )
        if tracked and self._requires_grad and (self._ctx is None or _leaf_behind_view(self) is not None):
            what = "a leaf tensor" if self._ctx is None else "a view of a leaf tensor"
            raise RuntimeError(
                f"{op}: {what} that requires grad (shape {self.shape}) cannot be modified in "
                "place while autograd records; update it under tinyflow.no_grad() (as optimizers "
                "do), through .data, or work on a copy (x = x + ...)"
            )
        if not tracked and fast is not None:
            try:
                fast(self.array)
            except ShapeError:
                raise
            except ValueError as exc:
                raise _inplace_shape_error(op, self, operands, exc) from None
            self._versions[0] += 1
            return self
        new = compute(self._alias())
        if new.shape != self.shape:
            raise ShapeError(
                f"{op}: the result has shape {new.shape} but the tensor written in place has shape "
                f"{self.shape}; an in-place op cannot broadcast its own tensor (use x = x op y)"
            )
        _check_can_cast(op, new.dtype, self.dtype)
        if tracked and new._ctx is not None:
            _keep_saved_old_values(new._ctx, self)
        self.array[...] = new.array
        self._versions[0] += 1
        if tracked and new._ctx is not None:
            self._rebase(new)
        return self

    def _rebase(self, new: Tensor) -> None:
        """Make ``new``'s node this tensor's history; a view's base takes the view's new value
        into its own history the same way (PyTorch's CopySlices)."""
        view_node, view_index = self._ctx, self._out_index
        self._ctx, self._out_index, self._requires_grad = new._ctx, new._out_index, True
        if new.dtype != self.dtype:  # written back in this tensor's dtype: so is its history
            cast = _ops().Cast.apply(new, self.dtype)
            self._ctx, self._out_index = cast._ctx, cast._out_index
        if view_node is None or not view_node.fn.returns_view or view_node.freed:
            return
        base = view_node.inputs[0]
        if base is None or _memory_root(base.array) is not _memory_root(self.array):
            return  # advanced indexing made a copy: the base did not change
        scatter = _VIEW_WRITE_BACK.get(view_node.fn.__name__)
        if scatter is None:
            raise RuntimeError(
                f"in-place op on a view made by {view_node.fn.__name__} of a tensor that requires grad "
                f"(shape {base.shape}) is not supported; clone() the view first"
            )
        view_now = Tensor._from_array(self.array, device=self._device)
        view_now._ctx, view_now._out_index, view_now._requires_grad = self._ctx, self._out_index, True
        base._rebase(scatter(base._alias(), view_now, view_node, view_index))

    def add_(self, other: Any, alpha: float = 1) -> Tensor:
        def fast(a: Any) -> None:
            b = _raw(other)
            if alpha == 1:
                a += b
            else:
                _add_scaled_(a, b, alpha)

        _check_can_cast("add_", promotion.result_type(self, other), self.dtype)
        return self._inplace("add_", lambda old: old.add(other, alpha=alpha), (other,), fast)

    def sub_(self, other: Any, alpha: float = 1) -> Tensor:
        def fast(a: Any) -> None:
            b = _raw(other)
            if alpha == 1:
                a -= b
            else:
                _add_scaled_(a, b, alpha, subtract=True)

        _check_can_cast("sub_", promotion.result_type(self, other), self.dtype)
        return self._inplace("sub_", lambda old: old.sub(other, alpha=alpha), (other,), fast)

    def mul_(self, other: Any) -> Tensor:
        def fast(a: Any) -> None:
            a *= _raw(other)

        _check_can_cast("mul_", promotion.result_type(self, other), self.dtype)
        return self._inplace("mul_", lambda old: old * other, (other,), fast)

    def div_(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        def fast(a: Any) -> None:
            a /= _raw(other)

        if rounding_mode is not None:
            return self._inplace("div_", lambda old: old.div(other, rounding_mode=rounding_mode), (other,))
        _check_can_cast("div_", promotion.result_type(self, other, 1.0), self.dtype)
        return self._inplace("div_", lambda old: old / other, (other,), fast)

    def zero_(self) -> Tensor:
        return self._inplace("zero_", lambda old: _ops().Fill.apply(old, 0), (), lambda a: a.fill(0))

    def fill_(self, value: Any) -> Tensor:
        if isinstance(value, Tensor) and value.ndim != 0:
            raise RuntimeError(
                f"fill_: only a 0-dim value tensor can fill a tensor, got shape {value.shape}; use copy_"
            )

        def fast(a: Any) -> None:
            a[...] = _raw(value)

        return self._inplace("fill_", lambda old: _ops().Fill.apply(old, value), (value,), fast)

    def copy_(self, src: Any, non_blocking: bool = False) -> Tensor:
        """Copy ``src`` (broadcast to this shape, cast to this dtype, moved to this device)."""
        if isinstance(src, Tensor):
            if src._device != self._device:
                src = src.to(self._device)
        else:
            src = tensor(src, dtype=self.dtype, device=self._device)

        def fast(a: Any) -> None:
            a[...] = src.array

        def compute(old: Tensor) -> Tensor:
            if src._ctx is not None:  # src = f(self), e.g. x.copy_(x.sin()): f keeps self's old value
                _keep_saved_old_values(src._ctx, self)
            return _ops().Fill.apply(old, src)

        return self._inplace("copy_", compute, (src,), fast)

    def clamp_(self, min: Any = None, max: Any = None) -> Tensor:
        xp = self._device.xp
        return self._inplace("clamp_", lambda old: old.clamp(min, max), (),
                             lambda a: xp.clip(a, min, max, out=a))

    clip_ = clamp_

    def uniform_(self, low: float = 0.0, high: float = 1.0, generator: Any = None, **kwargs: Any) -> Tensor:
        from tinyflow.random import rng

        low, high = kwargs.pop("from", low), kwargs.pop("to", high)
        vals = _draw(rng(generator).random, self.shape, self.dtype)
        vals *= high - low
        vals += low
        return self._fill_values("uniform_", vals)

    def normal_(self, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
        from tinyflow.random import rng

        vals = _draw(rng(generator).standard_normal, self.shape, self.dtype)
        vals *= std
        vals += mean
        return self._fill_values("normal_", vals)

    def _fill_values(self, op: str, vals: Any) -> Tensor:
        """Overwrite with freshly drawn host values (no gradient flows to the old value)."""
        vals = move(vals, self._device)

        def fast(a: Any) -> None:
            a[...] = vals

        return self._inplace(op, lambda old: _ops().Fill.apply(old, vals), (), fast)

    def exp_(self) -> Tensor:
        return self._inplace("exp_", lambda old: old.exp())

    def log_(self) -> Tensor:
        return self._inplace("log_", lambda old: old.log())

    def sqrt_(self) -> Tensor:
        return self._inplace("sqrt_", lambda old: old.sqrt())

    def abs_(self) -> Tensor:
        return self._inplace("abs_", lambda old: old.abs())

    def tanh_(self) -> Tensor:
        return self._inplace("tanh_", lambda old: old.tanh())

    def sigmoid_(self) -> Tensor:
        return self._inplace("sigmoid_", lambda old: old.sigmoid())

    def relu_(self) -> Tensor:
        return self._inplace("relu_", lambda old: old.relu())

    def pow_(self, exponent: Any) -> Tensor:
        return self._inplace("pow_", lambda old: old.pow(exponent), (exponent,))

    def addcmul_(self, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
        """self += value * tensor1 * tensor2 (hand-written Adam's second moment)."""
        return self._inplace("addcmul_", lambda old: old.addcmul(tensor1, tensor2, value=value), (tensor1, tensor2))

    def addcdiv_(self, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
        """self += value * tensor1 / tensor2 (hand-written Adam's update)."""
        return self._inplace("addcdiv_", lambda old: old.addcdiv(tensor1, tensor2, value=value), (tensor1, tensor2))

    def detach_(self) -> Tensor:
        """Cut this tensor from the graph in place (it becomes a leaf that needs no gradient)."""
        self._ctx, self._out_index, self._requires_grad = None, 0, False
        return self

    def __iadd__(self, other: Any) -> Tensor:
        return self.add_(other)

    def __isub__(self, other: Any) -> Tensor:
        return self.sub_(other)

    def __imul__(self, other: Any) -> Tensor:
        return self.mul_(other)

    def __itruediv__(self, other: Any) -> Tensor:
        return self.div_(other)

    def __ifloordiv__(self, other: Any) -> Tensor:
        return self._inplace("floor_divide_", lambda old: old // other, (other,) if isinstance(other, Tensor) else ())

    def __imod__(self, other: Any) -> Tensor:
        return self._inplace("remainder_", lambda old: old % other, (other,) if isinstance(other, Tensor) else ())

    def __ipow__(self, other: Any) -> Tensor:
        return self.pow_(other)

    def __ilshift__(self, other: Any) -> Tensor:
        return self._inplace("bitwise_left_shift_", lambda old: old << other, (other,) if isinstance(other, Tensor) else ())

    def __irshift__(self, other: Any) -> Tensor:
        return self._inplace("bitwise_right_shift_", lambda old: old >> other,
                             (other,) if isinstance(other, Tensor) else ())

    def __setitem__(self, index: Any, value: Any) -> None:
        """``x[index] = value`` with PyTorch's indexing rules; recorded by autograd when x or value
        requires grad (x's history moves onto the assignment, as in PyTorch)."""
        steps = _index_steps(index)
        if not isinstance(value, Tensor) and not (autograd.is_grad_enabled() and self._requires_grad):
            v = value if isinstance(value, (bool, int, float, complex)) else _raw_value(value, self)

            def fast(a: Any) -> None:
                _assign(a, steps, v)

            self._inplace("setitem", lambda old: old, (), fast)
            return
        if not isinstance(value, Tensor):
            value = tensor(value, dtype=self.dtype, device=self._device)
        elif value._device != self._device:
            value = value.to(self._device)

        def fast_tensor(a: Any) -> None:
            _assign(a, steps, value.array)

        self._inplace("setitem", lambda old: _ops().SetItem.apply(old, value, steps), (value,), fast_tensor)

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
        return _ops().Add.apply(*self._pair(other))

    def __radd__(self, other: Any) -> Tensor:
        a, b = self._pair(other)
        return _ops().Add.apply(b, a)

    def __sub__(self, other: Any) -> Tensor:
        return _ops().Sub.apply(*self._pair(other))

    def __rsub__(self, other: Any) -> Tensor:
        a, b = self._pair(other)
        return _ops().Sub.apply(b, a)

    def __mul__(self, other: Any) -> Tensor:
        return _ops().Mul.apply(*self._pair(other))

    def __rmul__(self, other: Any) -> Tensor:
        a, b = self._pair(other)
        return _ops().Mul.apply(b, a)

    def __truediv__(self, other: Any) -> Tensor:
        return _ops().Div.apply(*self._pair(other, floating=True))

    def __rtruediv__(self, other: Any) -> Tensor:
        a, b = self._pair(other, floating=True)
        return _ops().Div.apply(b, a)

    def __pow__(self, other: Any) -> Tensor:
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            base = self if isinstance(other, int) or is_floating_or_complex(self.dtype) else promotion.float_operand(self)
            return _ops().PowScalar.apply(base, other)
        return _ops().Pow.apply(*self._pair(other))

    def __rpow__(self, other: Any) -> Tensor:
        a, b = self._pair(other)
        return _ops().Pow.apply(b, a)

    def __matmul__(self, other: Any) -> Tensor:
        return _ops().MatMul.apply(*amp.autocast_inputs(self, self._wrap(other)))

    def __rmatmul__(self, other: Any) -> Tensor:
        return _ops().MatMul.apply(*amp.autocast_inputs(self._wrap(other), self))

    def __neg__(self) -> Tensor:
        return _ops().Neg.apply(self)

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return self.abs()

    # comparisons: never differentiable, return boolean tensors
    def _compare(self, other: Any, fn: Callable[[Any, Any], Any], op: str) -> Tensor:
        b = other.array if isinstance(other, Tensor) else other
        try:
            return Tensor._from_array(fn(self.array, b), device=self._device)
        except ValueError:
            from tinyflow.ops.elementwise import broadcast_error

            raise broadcast_error(op, self.array, b) from None

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

    def eq(self, other: Any) -> Tensor:
        return self == other

    def ne(self, other: Any) -> Tensor:
        return self != other

    def lt(self, other: Any) -> Tensor:
        return self < other

    def le(self, other: Any) -> Tensor:
        return self <= other

    def gt(self, other: Any) -> Tensor:
        return self > other

    def ge(self, other: Any) -> Tensor:
        return self >= other

    def add(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """self + alpha * other."""
        return self + (other if alpha == 1 else other * alpha)

    def sub(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """self - alpha * other."""
        return self - (other if alpha == 1 else other * alpha)

    def mul(self, other: Any) -> Tensor:
        return self * other

    def pow(self, other: Any) -> Tensor:
        return self**other

    def matmul(self, other: Any) -> Tensor:
        return self @ other

    def all(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """True where every entry (over ``dim``, or all of them) is non-zero; a bool tensor."""
        return _ops().NoGradient.apply(lambda xp, a: xp.all(a, axis=_reduce_axes(dim, a.ndim), keepdims=keepdim), self)

    def any(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        """True where some entry (over ``dim``, or any at all) is non-zero; a bool tensor."""
        return _ops().NoGradient.apply(lambda xp, a: xp.any(a, axis=_reduce_axes(dim, a.ndim), keepdims=keepdim), self)

    def isnan(self) -> Tensor:
        return Tensor._from_array(self._device.xp.isnan(self.array), device=self._device)

    def isfinite(self) -> Tensor:
        return Tensor._from_array(self._device.xp.isfinite(self.array), device=self._device)

    # ---------------------------------------------------------------- unary maths
    def exp(self) -> Tensor:
        return _ops().Exp.apply(promotion.float_operand(self))

    def log(self) -> Tensor:
        return _ops().Log.apply(promotion.float_operand(self))

    def sqrt(self) -> Tensor:
        return _ops().Sqrt.apply(promotion.float_operand(self))

    def tanh(self) -> Tensor:
        return _ops().TanhFunction.apply(promotion.float_operand(self))

    def sigmoid(self) -> Tensor:
        return _ops().SigmoidFunction.apply(promotion.float_operand(self))

    def relu(self) -> Tensor:
        return _ops().ReLUFunction.apply(self)

    def abs(self) -> Tensor:
        return _ops().Abs.apply(self)

    def clip(self, min: float | None = None, max: float | None = None) -> Tensor:
        if min is None and max is None:
            raise RuntimeError("clamp: at least one of min and max must be given (not both None)")
        return _ops().Clip.apply(self, min, max)

    clamp = clip

    def maximum(self, other: Any) -> Tensor:
        return _ops().Maximum.apply(*self._pair(other))

    def minimum(self, other: Any) -> Tensor:
        return _ops().Minimum.apply(*self._pair(other))

    def softmax(self, dim: int = -1, dtype: Any = None) -> Tensor:
        """Softmax along ``dim``, computed in ``dtype`` when given (as ``F.softmax``)."""
        src = self if dtype is None else self.to(dtype)
        return _ops().SoftmaxFunction.apply(src, dim)

    def log_softmax(self, dim: int = -1, dtype: Any = None) -> Tensor:
        """log(softmax) along ``dim``, computed in ``dtype`` when given (as ``F.log_softmax``)."""
        src = self if dtype is None else self.to(dtype)
        return _ops().LogSoftmaxFunction.apply(src, dim)

    def logsumexp(self, dim: int = -1, keepdim: bool = False) -> Tensor:
        return _ops().LogSumExp.apply(self, dim, keepdim)

    # ---------------------------------------------------------------- reductions
    def sum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        """Sum over ``dim`` (all dims when None); integer and bool tensors sum to int64, as PyTorch."""
        x = self if dtype is None else self.to(dtype)
        return _ops().Sum.apply(x, dim, keepdim)

    def mean(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        x = self if dtype is None else self.to(dtype)
        return _ops().Mean.apply(x, dim, keepdim)

    def var(self, dim: Any = None, unbiased: bool = True, keepdim: bool = False, *,
            correction: float | None = None) -> Tensor:
        """Variance over ``dim`` with ``correction`` (default 1, Bessel's; ``unbiased=False`` is 0).
        PyTorch's order: the second positional argument is ``unbiased``, ``var(False)`` too."""
        if isinstance(dim, bool):
            dim, unbiased = None, dim
        corr = correction if correction is not None else (1 if unbiased else 0)
        return _ops().Var.apply(self, dim, keepdim, corr)

    def std(self, dim: Any = None, unbiased: bool = True, keepdim: bool = False, *,
            correction: float | None = None) -> Tensor:
        """Standard deviation: sqrt of var (same arguments); its gradient is 0 where it is 0."""
        if isinstance(dim, bool):
            dim, unbiased = None, dim
        corr = correction if correction is not None else (1 if unbiased else 0)
        return _ops().Std.apply(self, dim, keepdim, corr)

    def max(self, dim: Any = None, keepdim: bool = False) -> Any:
        """Without dim: the maximum. With dim: (values, indices), a return_types.max. With a
        tensor instead of a dim: the elementwise maximum, as PyTorch."""
        if isinstance(dim, Tensor):
            return self.maximum(dim)
        if dim is None:
            return _ops().Max.apply(self, None, keepdim)
        return return_types.max(*_ops().MaxDim.apply(self, dim, keepdim, True))

    def min(self, dim: Any = None, keepdim: bool = False) -> Any:
        """Like max: the minimum, (values, indices) along dim, or the elementwise minimum."""
        if isinstance(dim, Tensor):
            return self.minimum(dim)
        if dim is None:
            return _ops().Min.apply(self, None, keepdim)
        return return_types.min(*_ops().MaxDim.apply(self, dim, keepdim, False))

    def amax(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        return _ops().Max.apply(self, dim, keepdim)

    def amin(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        return _ops().Min.apply(self, dim, keepdim)

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return _arg(self, "argmax", dim, keepdim)

    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        return _arg(self, "argmin", dim, keepdim)

    # ---------------------------------------------------------------- shape
    def reshape(self, *shape: Any) -> Tensor:
        shape = _shape_arg(shape)
        if shape == self.shape:
            return self
        return _ops().Reshape.apply(self, shape)

    def view(self, *shape: Any) -> Tensor:
        """A reshape (``view(2, -1)``), or with a dtype the same bytes read as that dtype
        (``view(tf.int32)``, no gradient), as PyTorch."""
        if len(shape) == 1 and not isinstance(shape[0], (int, tuple, list)) and not isinstance(shape[0], Tensor):
            dt = as_dtype(shape[0])
            return _ops().NoGradient.apply(lambda xp, a: a.view(dt), self)
        return self.reshape(*shape)

    def view_as(self, other: Tensor) -> Tensor:
        return self.reshape(other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        if self.ndim == 0:
            return self.reshape(1)
        s, e = start_dim % self.ndim, end_dim % self.ndim
        n = 1
        for d in self.shape[s : e + 1]:
            n *= d
        return self.reshape(*self.shape[:s], n, *self.shape[e + 1 :])

    def permute(self, *dims: Any) -> Tensor:
        return _ops().Permute.apply(self, _shape_arg(dims))

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        from tinyflow.ops.indexing import normalize_dim

        if self.ndim == 0:  # PyTorch: a 0-d tensor transposes over dims 0/-1 to itself
            normalize_dim("transpose", dim0, 0), normalize_dim("transpose", dim1, 0)
            return _ops().Permute.apply(self, ())
        dim0, dim1 = normalize_dim("transpose", dim0, self.ndim), normalize_dim("transpose", dim1, self.ndim)
        axes = list(range(self.ndim))
        axes[dim0], axes[dim1] = axes[dim1], axes[dim0]
        return _ops().Permute.apply(self, tuple(axes))

    def t(self) -> Tensor:
        if self.ndim > 2:
            raise ShapeError(f"t(): expects a tensor with <= 2 dims, got shape {self.shape}")
        return self.T

    def expand(self, *shape: Any) -> Tensor:
        shape = _shape_arg(shape)
        lead = len(shape) - self.ndim
        full = tuple(self.shape[i - lead] if s == -1 else s for i, s in enumerate(shape))
        return _ops().Expand.apply(self, full)

    def broadcast_to(self, *shape: Any) -> Tensor:
        return self.expand(*shape)

    def expand_as(self, other: Tensor) -> Tensor:
        return self.expand(other.shape)

    def squeeze(self, dim: int | Sequence[int] | None = None) -> Tensor:
        """Drop size-1 dims: all of them, or those of ``dim`` (an int or a tuple) that have size 1."""
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        axes = {_wrap_dim("squeeze", d, self.ndim) for d in dims}
        return self.reshape(tuple(s for i, s in enumerate(self.shape) if not (i in axes and s == 1)))

    def unsqueeze(self, dim: int) -> Tensor:
        """Insert a size-1 dim at ``dim`` (in [-ndim-1, ndim], as PyTorch)."""
        d = _wrap_dim("unsqueeze", dim, self.ndim + 1)
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def split(self, split_size: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
        return split(self, split_size, dim)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        """At most ``chunks`` pieces of equal size (the last may be smaller) along ``dim``."""
        from tinyflow.ops.indexing import normalize_dim

        if self.ndim == 0:
            raise RuntimeError("chunk expects at least a 1-dimensional tensor")
        if chunks <= 0:
            raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
        n = self.shape[normalize_dim("chunk", dim, self.ndim)]
        if n == 0:  # PyTorch: `chunks` empty pieces
            return split(self, [0] * chunks, dim)
        return split(self, -(-n // chunks), dim)

    def __getitem__(self, index: Any) -> Tensor:
        """Indexing as PyTorch: integers select first, then tensor indices gather (see _index_steps)."""
        out = self
        for step in _index_steps(index):
            out = _ops().GetItem.apply(out, step)
        return out

    # ---------------------------------------------------------------- misc
    def where(self, cond: Any, other: Any) -> Tensor:
        return where(cond, self, other)


_OPS: Any = None


def _ops() -> Any:
    """The tinyflow.ops package (imported on first use: ops import this module)."""
    global _OPS
    if _OPS is None:
        import tinyflow.ops as ops

        _OPS = ops
    return _OPS


def _shape_arg(shape: tuple) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(int(s) for s in shape[0])
    return tuple(int(s) for s in shape)


def _wrap_dim(op: str, dim: int, ndim: int) -> int:
    """``dim`` as a non-negative index of ``ndim`` dims; IndexError (PyTorch's) when out of range.
    A 0-d tensor takes dim 0 and -1."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"{op}: dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim % n


def _index_steps(index: Any) -> tuple:
    """``index`` as one or two raw NumPy/CuPy indexes applied in turn, with PyTorch's meaning.

    PyTorch applies integers (and 0-d integer tensors) first, as selections, then the tensor
    indices; NumPy treats an integer beside an index array as one more index array. The two
    differ when an integer and an index array are separated by a slice: for x of shape
    (A, B, C), ``x[0, :, idx]`` is (B, K) in PyTorch and (K, B) in NumPy. So when integers meet
    index arrays, the integers (with the slices, None and Ellipsis) go first and the arrays
    second, on what remains; otherwise NumPy's rule is PyTorch's and one step does.
    """
    items = index if isinstance(index, tuple) else (index,)
    raw = []
    for i in items:
        if isinstance(i, Tensor):
            i = i.array
            if i.ndim == 0 and i.dtype.kind in "iu":
                i = int(to_host(i, "0-d tensor index"))
        elif isinstance(i, list):
            i = np.asarray(i)  # a list is an index tensor, as in PyTorch
            if i.dtype.kind == "f" or (i.size == 0 and i.dtype.kind not in "iub"):
                i = i.astype(np.int64)
        raw.append(i)
    arrays = [isinstance(i, np.ndarray) or hasattr(i, "__cuda_array_interface__") for i in raw]
    ints = [isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)) for i in raw]
    if not any(arrays) or not any(ints):
        return (tuple(raw) if isinstance(index, tuple) else raw[0],)
    first: list = []
    second: list = []
    for i, is_array, is_int in zip(raw, arrays, ints):
        if is_int:
            first.append(i)
        elif is_array:
            first.extend([slice(None)] * (i.ndim if i.dtype.kind == "b" else 1))
            second.append(i)
        elif i is None:
            first.append(None)
            second.append(slice(None))
        elif i is Ellipsis:
            first.append(Ellipsis)
            second.append(Ellipsis)
        else:
            first.append(i)
            second.append(slice(None))
    return tuple(first), tuple(second)


def _assign(arr: Any, steps: tuple, value: Any) -> None:
    """``arr[steps] = value`` for index steps from _index_steps (the first step is basic, a view)."""
    target = arr[steps[0]] if len(steps) > 1 else arr
    try:
        target[steps[-1]] = value
    except ValueError:
        selected = target[steps[-1]]
        raise ShapeError(
            f"setitem: a value of shape {tuple(getattr(value, 'shape', ()))} cannot be assigned to "
            f"the selected shape {tuple(getattr(selected, 'shape', ()))} of a tensor of shape {tuple(arr.shape)}"
        ) from None


_SCALED_BLOCK = 1 << 16  # elements per block of _add_scaled_: its temporary stays in cache


def _add_scaled_(a: Any, b: Any, alpha: Any, subtract: bool = False) -> None:
    """``a += alpha * b`` (``-=`` with ``subtract``) in place: the hand-written SGD step
    ``p.data.add_(p.grad, alpha=-lr)``. Large same-shape, same-dtype NumPy arrays go block by
    block through one small temporary (no parameter-sized ``alpha * b``, the same roundings)."""
    if (type(a) is not np.ndarray or type(b) is not np.ndarray or not isinstance(alpha, (int, float))
            or a.shape != b.shape or a.dtype != b.dtype or a.size <= _SCALED_BLOCK
            or not (a.flags.c_contiguous and b.flags.c_contiguous)):
        if subtract:
            a -= alpha * b
        else:
            a += alpha * b
        return
    op = np.subtract if subtract else np.add
    fa, fb = a.reshape(-1), b.reshape(-1)
    tmp = np.empty(_SCALED_BLOCK, dtype=a.dtype)
    for start in range(0, fa.size, _SCALED_BLOCK):
        stop = min(start + _SCALED_BLOCK, fa.size)
        t = tmp[: stop - start]
        np.multiply(fb[start:stop], alpha, out=t)
        op(fa[start:stop], t, out=fa[start:stop])


def _raw(x: Any) -> Any:
    """The raw array of a Tensor; anything else as it is."""
    return x.array if isinstance(x, Tensor) else x


def _raw_value(value: Any, ref: Tensor) -> Any:
    """A value to assign into ``ref``'s array: an array on ref's device."""
    arr = value if hasattr(value, "shape") else np.asarray(value)
    return move(arr, ref._device) if ref._device.type != "cpu" else arr


def _check_can_cast(op: str, result: np.dtype, dtype: np.dtype) -> None:
    """An in-place op writes its result in its tensor's dtype: refuse float -> int as PyTorch."""
    if not promotion.can_cast(result, dtype):
        raise RuntimeError(
            f"{op}: result type {result} can't be cast to the desired output type {dtype}; "
            f"use the out-of-place x = x.{op.rstrip('_')}(...) or convert x first (x = x.float())"
        )


def _inplace_shape_error(op: str, t: Tensor, operands: Sequence[Any], exc: Exception) -> Exception:
    shapes = [tuple(o.shape) for o in operands if hasattr(o, "shape")]
    if "read-only" in str(exc):
        return RuntimeError(
            f"{op}: the tensor of shape {t.shape} is a broadcast (expanded) view and cannot be written "
            "in place; clone() it first"
        )
    return ShapeError(
        f"{op}: shapes {t.shape} and {', '.join(map(str, shapes))} do not fit in place: the operand must "
        "broadcast to the shape of the tensor written in place; use an out-of-place op (x = x op y)"
    )


def _keep_saved_old_values(ctx: autograd.Context, t: Tensor) -> None:
    """An in-place op that saved its input's old value for backward keeps a copy of it (as
    PyTorch's in-place ops save ``self.clone()``), since that memory is written next."""
    root = _memory_root(t.array)
    saved = ctx._saved
    if not any(hasattr(a, "shape") and _memory_root(a) is root for a in saved):
        return
    ctx._saved = tuple(a.copy() if hasattr(a, "shape") and _memory_root(a) is root else a for a in saved)
    ctx.versions = [(c, v) for c, v in ctx.versions if c is not t._versions]


def _leaf_behind_view(t: Tensor) -> Tensor | None:
    """The leaf requiring grad whose memory ``t`` views (through view ops), if any."""
    node, root = t._ctx, _memory_root(t.array)
    while node is not None and node.fn.returns_view and not node.freed:
        base = node.inputs[0]
        if base is None or _memory_root(base.array) is not root:
            return None
        if base._ctx is None:
            return base if base._requires_grad else None
        node = base._ctx
    return None


def _write_back_getitem(base: Tensor, view: Tensor, node: autograd.Context, index: int) -> Tensor:
    return _ops().SetItem.apply(base, view, (node.index,))


def _write_back_split(base: Tensor, view: Tensor, node: autograd.Context, index: int) -> Tensor:
    start = sum(shape[node.dim] for shape, _ in node.output_meta[:index])
    sl = (slice(None),) * node.dim + (slice(start, start + view.shape[node.dim]),)
    return _ops().SetItem.apply(base, view, (sl,))


def _write_back_reshape(base: Tensor, view: Tensor, node: autograd.Context, index: int) -> Tensor:
    return _ops().Reshape.apply(view, tuple(node.shape))


def _write_back_permute(base: Tensor, view: Tensor, node: autograd.Context, index: int) -> Tensor:
    inverse = [0] * len(node.axes)
    for i, ax in enumerate(node.axes):
        inverse[ax % len(node.axes)] = i
    return _ops().Permute.apply(view, tuple(inverse))


# How a base takes in the new value of a view written in place, per view op.
_VIEW_WRITE_BACK: dict[str, Callable[[Tensor, Tensor, Any, int], Tensor]] = {
    "GetItem": _write_back_getitem,
    "Split": _write_back_split,
    "Reshape": _write_back_reshape,
    "Permute": _write_back_permute,
}


def _draw(sampler: Callable[..., np.ndarray], shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Samples drawn directly in float32/float64 (drawing float64 and casting is 10x slower)."""
    native = dtype if dtype in (float32, float64) else float64
    return sampler(shape, dtype=native).astype(dtype, copy=False)


def _scalar_like(value: Any, ref: Tensor) -> Tensor:
    """A constant operand for ``ref``: Python floats take ref's float dtype (no upcasting)."""
    xp = ref._device.xp
    if isinstance(value, bool):
        dtype = ref.dtype
    elif isinstance(value, int):
        dtype = ref.dtype
    elif isinstance(value, float):
        dtype = ref.dtype if is_floating_or_complex(ref.dtype) else _default_dtype
    else:
        arr = value if hasattr(value, "dtype") else np.asarray(value)
        if isinstance(arr, np.ndarray) and ref._device.type != "cpu":
            arr = move(arr, ref._device)
        if arr.dtype == np.float64 and not isinstance(value, np.ndarray) and is_floating(ref.dtype):
            arr = arr.astype(ref.dtype)
        return Tensor._from_array(arr, device=ref._device)
    return Tensor._from_array(xp.asarray(value, dtype=dtype), device=ref._device)


def _arg(t: Tensor, name: str, dim: int | None, keepdim: bool) -> Tensor:
    """argmax/argmin: over all elements (dim None) or one dim; PyTorch's errors for bool and empty input."""
    from tinyflow.ops.indexing import normalize_dim

    if t.dtype == np.bool_:
        raise RuntimeError(f"{name}(): does not support bool input; convert with .int() or .float() first")
    if dim is not None:
        dim = normalize_dim(name, dim, t.ndim)
    if t.array.size == 0 and dim is None:
        raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0 (shape "
                         f"{tuple(t.shape)})")
    if dim is not None and t.ndim and t.shape[dim] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {dim} to have non-zero size (shape {tuple(t.shape)})")
    if t.ndim == 0:  # PyTorch: dim 0 / -1 of a 0-d tensor, and keepdim keeps it 0-d
        return Tensor._from_array(t._device.xp.zeros((), dtype=np.int64), device=t._device)
    arr = getattr(t.array, name)(axis=dim)
    if keepdim and dim is not None:
        arr = t._device.xp.expand_dims(arr, dim)
    return Tensor._from_array(arr.astype(np.int64), device=t._device)


# -------------------------------------------------------------------- creation functions


def _natural_dtype(dtype: np.dtype) -> np.dtype:
    """The tensor dtype for array data of ``dtype`` when none is asked for: its own, as
    ``torch.tensor`` keeps an int32 or uint8 array's dtype (Python ints arrive as int64)."""
    if is_floating_or_complex(dtype) or dtype.kind in "biu":
        return dtype
    raise TypeError(f"tensor: unsupported data of dtype {dtype}; use float, int or bool data")


def tensor(data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of ``data`` (a list, number, ndarray or Tensor).

    Python floats become float32 (the default dtype), ints int64 and complex numbers complex64;
    arrays and NumPy scalars keep their dtype, as ``torch.tensor`` does.
    """
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
                arr = arr.astype(_default_dtype)
            elif arr.dtype == np.complex128:
                arr = arr.astype(np.complex128 if _default_dtype == float64 else np.complex64)
    dt = _resolve_dtype(dtype) or _natural_dtype(arr.dtype)
    dev = Device(device) if device is not None else src
    out = move(arr, dev)
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


def _make(fn: Callable[..., Any], shape: Sequence[Any], dtype: Any, device: Any, requires_grad: bool) -> Tensor:
    dev = Device(device) if device is not None else CPU
    dt = _resolve_dtype(dtype) or _default_dtype
    arr = fn(dev.xp, _shape_arg(tuple(shape)), dt)
    t = Tensor._from_array(arr, device=dev)
    if requires_grad:
        t.requires_grad = True
    return t


def zeros(*shape: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return _make(lambda xp, s, d: xp.zeros(s, dtype=d), shape, dtype, device, requires_grad)


def ones(*shape: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return _make(lambda xp, s, d: xp.ones(s, dtype=d), shape, dtype, device, requires_grad)


def empty(*shape: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return _make(lambda xp, s, d: xp.empty(s, dtype=d), shape, dtype, device, requires_grad)


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    if dtype is None and isinstance(fill_value, (bool, int)):
        dtype = bool_ if isinstance(fill_value, bool) else int64
    return _make(lambda xp, s, d: xp.full(s, fill_value, dtype=d), (tuple(shape),), dtype, device, requires_grad)


def _random(draw: Callable[[np.random.Generator, tuple, np.dtype], np.ndarray], shape: Sequence[Any], dtype: Any,
            device: Any, requires_grad: bool, generator: Any) -> Tensor:
    from tinyflow.random import rng

    dev = Device(device) if device is not None else CPU
    dt = _resolve_dtype(dtype) or _default_dtype
    arr = draw(rng(generator), _shape_arg(tuple(shape)), dt)
    t = Tensor._from_array(move(arr, dev), device=dev)
    if requires_grad:
        t.requires_grad = True
    return t


def randn(*shape: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False, generator: Any = None) -> Tensor:
    """Standard normal samples, drawn on the host from the (seeded) generator."""
    return _random(lambda g, s, d: _draw(g.standard_normal, s, d), shape, dtype, device, requires_grad, generator)


def rand(*shape: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False, generator: Any = None) -> Tensor:
    """Uniform samples in [0, 1)."""
    return _random(lambda g, s, d: _draw(g.random, s, d), shape, dtype, device, requires_grad, generator)


def randint(low: int, high: int | None = None, size: Sequence[int] = (), dtype: Any = None, device: Any = None,
            generator: Any = None) -> Tensor:
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
    return _random(lambda g, s, d: g.integers(low, high, size=s).astype(d), (tuple(size),), dtype or int64, device,
                   False, generator)


def randperm(n: int, device: Any = None, generator: Any = None) -> Tensor:
    from tinyflow.random import rng

    dev = Device(device) if device is not None else CPU
    return Tensor._from_array(move(rng(generator).permutation(n).astype(np.int64), dev), device=dev)


def arange(start: float, end: float | None = None, step: float = 1, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = int64 if all(isinstance(v, (int, np.integer)) for v in (start, end, step)) else _default_dtype
    if step == 0 or (end - start) * step < 0:
        raise RuntimeError(f"arange: upper bound {end} and lower bound {start} inconsistent with step sign {step}")

    def values(xp: Any, s: Any, d: np.dtype) -> Any:
        if d.kind in "iu" and all(isinstance(v, (int, np.integer)) for v in (start, end, step)):
            return xp.arange(start, end, step, dtype=d)
        return xp.arange(start, end, step, dtype=np.float64).astype(d)  # computed in double, as PyTorch

    return _make(values, (), dtype, device, requires_grad)


def linspace(start: float, end: float, steps: int, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from start to end; for an integer dtype they are computed in
    floating point and truncated toward zero, as PyTorch does (NumPy floors)."""
    return _make(lambda xp, s, d: xp.linspace(start, end, steps, dtype=np.float64).astype(d), (), dtype, device,
                 requires_grad)


def _like(fn: Callable[..., Tensor], t: Tensor, dtype: Any, device: Any, requires_grad: bool, **kw: Any) -> Tensor:
    return fn(*t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad, **kw)


def zeros_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return _like(zeros, t, dtype, device, requires_grad)


def ones_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return _like(ones, t, dtype, device, requires_grad)


def empty_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return _like(empty, t, dtype, device, requires_grad)


def randn_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False, generator: Any = None) -> Tensor:
    return _like(randn, t, dtype, device, requires_grad, generator=generator)


def rand_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False, generator: Any = None) -> Tensor:
    return _like(rand, t, dtype, device, requires_grad, generator=generator)


def full_like(t: Tensor, fill_value: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return full(t.shape, fill_value, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


# -------------------------------------------------------------------- functions over tensors


def _as_operand(x: Any, ref: Tensor | None) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if ref is not None:
        return _scalar_like(x, ref)
    return tensor(x)


def where(cond: Any, a: Any = None, b: Any = None) -> Any:
    """Elementwise ``a if cond else b``; differentiable in a and b. ``where(cond)`` alone is
    ``cond.nonzero(as_tuple=True)``, as PyTorch."""
    if a is None and b is None:
        return _as_operand(cond, None).nonzero(as_tuple=True)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = tensor(a, device=cond.device if isinstance(cond, Tensor) else None)
    a, b = promotion.promote(a, b)  # a and b meet in their result dtype, as in PyTorch
    c = cond.array if isinstance(cond, Tensor) else a.device.xp.asarray(cond)
    if c.dtype != bool:
        c = c.astype(bool)
    return _ops().Where.apply(c, a, b)


def _same_dtype(tensors: Iterable[Tensor]) -> list[Tensor]:
    """The tensors cast to their common dtype (PyTorch's promotion: cat of int64 and float32 is
    float32)."""
    tensors = list(tensors)
    if len({t.dtype for t in tensors}) > 1:
        return list(promotion.promote(*tensors))
    return tensors


def cat(tensors: Iterable[Tensor], dim: int = 0) -> Tensor:
    return _ops().Cat.apply(*_same_dtype(tensors), dim)


def stack(tensors: Iterable[Tensor], dim: int = 0) -> Tensor:
    return _ops().Stack.apply(*_same_dtype(tensors), dim)


def split(t: Tensor, split_size: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces of ``split_size`` along ``dim`` (the last may be smaller), or of the given sizes; a
    size-0 dim gives one empty piece, as PyTorch."""
    from tinyflow.ops.indexing import normalize_dim

    if t.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    n = t.shape[normalize_dim("split", dim, t.ndim)]
    if isinstance(split_size, int):
        if split_size <= 0:
            raise ShapeError(f"split: split_size must be positive, got {split_size}")
        sizes = [min(split_size, n - i) for i in range(0, n, split_size)] or [0]
    else:
        sizes = list(split_size)
    out = _ops().Split.apply(t, sizes, dim)
    return out if isinstance(out, tuple) else (out,)


def pad(t: Tensor, pad: Sequence[int], value: float = 0.0) -> Tensor:
    return _ops().Pad.apply(t, tuple(pad), value)


def _reduce_axes(dim: Any, ndim: int) -> Any:
    """A dim argument (None, an int or a sequence) as NumPy's axis, checked against ``ndim``."""
    from tinyflow.ops.reduce import normalize_axis

    axes = normalize_axis("reduce", dim, ndim)
    return None if ndim == 0 else axes


# PyTorch takes axis= wherever it takes dim= (see tinyflow/tensor_methods.py).
add_axis_alias(Tensor)
cat, stack, split = accept_axis_alias(cat), accept_axis_alias(stack), accept_axis_alias(split)
