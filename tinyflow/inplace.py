"""In-place ops and how they meet autograd: version counters, writing back into a view's base.

As in PyTorch, an in-place op writes into a tensor's memory (views see the change) and bumps its
in-place counter. When autograd records it (grad mode on, and the tensor or an operand requires
grad), the op runs out of place on a stand-in for the old value, the result is written back, and
the tensor moves onto the op's node: later uses see the new value and its history, uses recorded
earlier keep their edge to the old node. A view's base moves too (``x[0] += y`` changes x's
history). Backward refuses a node whose saved array was overwritten since (the counters). On a
leaf that requires grad it is an error, unless under no_grad() (how optimizers update parameters).

The functions named in ``METHODS`` are Tensor methods (``self`` first): tensor.py names them and
sets them on Tensor once this file has loaded (at the end of tensor.py's import), ``uniform_`` and
``normal_`` (what nn.init builds a model with) among them.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tinyflow import promotion
from tinyflow._indexing import selection_shape
from tinyflow.arg_parser import index_steps, is_advanced
from tinyflow.autograd.function import _memory_root
from tinyflow import creation  # (creation imports tensor.py, which imports this file: names read at call time)
from tinyflow.autograd.function import Context
from tinyflow.autograd.grad_mode import is_grad_enabled
from tinyflow.device import move, quiet_numpy, restore_numpy
from tinyflow.dtypes import is_half
from tinyflow.errors import ShapeError
from tinyflow.ops.copy import Cast, Fill
from tinyflow.ops.shape import Permute, Reshape, SetItem
from tinyflow.random import rng
from tinyflow.tensor import INPLACE_METHODS, Tensor

# The names tensor.py puts on Tensor (the list is written there; tests/test_tensor.py checks that it
# names exactly this file's methods).
METHODS = INPLACE_METHODS


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
    tracked = is_grad_enabled() and (
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
        quiet = quiet_numpy()  # 1 / 0 and overflow silently, as PyTorch (tinyflow/device.py)
        try:
            fast(self.array)
        except ShapeError:
            raise
        except ValueError as exc:
            raise _inplace_shape_error(op, self, operands, exc) from None
        finally:
            restore_numpy(quiet)
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
        cast = Cast.apply(new, self.dtype)
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

def add_(self, other: Any, *, alpha: float = 1) -> Tensor:
    def fast(a: Any) -> None:
        b = _raw(other)
        if alpha == 1:
            a += b
        else:
            _add_scaled_(a, b, alpha)

    _check_can_cast("add_", promotion.result_type(self, other), self.dtype)
    return self._inplace("add_", lambda old: old.add(other, alpha=alpha), (other,), fast)

def sub_(self, other: Any, *, alpha: float = 1) -> Tensor:
    def fast(a: Any) -> None:
        b = _raw(other)
        if alpha == 1:
            a -= b
        else:
            _add_scaled_(a, b, alpha, subtract=True)

    _check_can_cast("sub_", promotion.result_type(self, other), self.dtype)
    if self.dtype == np.bool_ and promotion.result_type(self, other) == np.bool_:
        raise RuntimeError("sub_: subtraction, the `-` operator, with two bool tensors is not supported; use the `^` "
                           "or logical_xor() operator instead (as PyTorch)")
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
    return self._inplace("zero_", lambda old: Fill.apply(old, 0), (), lambda a: a.fill(0))

def fill_(self, value: Any) -> Tensor:
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError(
            f"fill_: only a 0-dim value tensor can fill a tensor, got shape {value.shape}; use copy_"
        )
    value = promotion.checked_scalar("fill_", value, self.dtype)

    def fast(a: Any) -> None:
        a[...] = _raw(value)

    return self._inplace("fill_", lambda old: Fill.apply(old, value), (value,), fast)

def uniform_(self, from_: float = 0.0, to: float = 1.0, *, generator: Any = None, **kwargs: Any) -> Tensor:
    low, high = kwargs.pop("from", from_), to  # PyTorch's keyword is "from": uniform_(**{"from": a})
    if kwargs:
        raise TypeError(f"uniform_() got an unexpected keyword argument {next(iter(kwargs))!r}")
    vals = creation._draw(rng(generator).random, self.shape, self.dtype)
    vals *= high - low
    vals += low
    return self._fill_values("uniform_", vals)

def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> Tensor:
    vals = creation._draw(rng(generator).standard_normal, self.shape, self.dtype)
    vals *= std
    vals += mean
    return self._fill_values("normal_", vals)

def _fill_values(self, op: str, vals: Any) -> Tensor:
    """Overwrite with freshly drawn host values (no gradient flows to the old value). nn.init draws
    every parameter so, under no_grad: such a write goes straight into the array; only one that
    autograd must record or refuse takes ``_inplace``."""
    vals = move(vals, self._device)

    def fast(a: Any) -> None:
        a[...] = vals

    if not (self._requires_grad and is_grad_enabled()):
        try:
            fast(self.array)
        except ValueError:  # a read-only broadcast view: _inplace's fast path says so
            pass
        else:
            self._versions[0] += 1
            return self
    return self._inplace(op, lambda old: Fill.apply(old, vals), (), fast)

def copy_(self, other: Any, non_blocking: bool = False) -> Tensor:
    """Copy ``other`` (broadcast to this shape, cast to this dtype, moved to this device)."""
    if isinstance(other, Tensor):
        if other._device != self._device:
            other = other.to(self._device)
    else:
        other = creation.tensor(other, dtype=self.dtype, device=self._device)

    def fast(a: Any) -> None:
        a[...] = other.array

    def compute(old: Tensor) -> Tensor:
        if other._ctx is not None:  # other = f(self), e.g. x.copy_(x.sin()): f keeps self's old value
            _keep_saved_old_values(other._ctx, self)
        return Fill.apply(old, other)

    return self._inplace("copy_", compute, (other,), fast)

def clamp_(self, min: Any = None, max: Any = None) -> Tensor:
    xp = self._device.xp
    for bound in (min, max):
        if bound is not None:
            _check_can_cast("clamp_", promotion.result_type(self, bound), self.dtype)
    return self._inplace("clamp_", lambda old: old.clamp(min, max), (),
                         lambda a: xp.clip(a, min, max, out=a))

clip_ = clamp_

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

_SCALAR_VALUES = (bool, int, float, complex, np.number, np.bool_)


def __setitem__(self, index: Any, value: Any) -> None:
    """``x[index] = value`` with PyTorch's indexing rules; recorded by autograd when x or value
    requires grad (x's history moves onto the assignment, as in PyTorch).

    As PyTorch: the value is a number or a tensor (a list or a tuple is refused; a NumPy array,
    tinyflow's own storage, is taken as a tensor of x's dtype); a tensor value loses its leading
    1-sized dims, then broadcasts to the selection; through index tensors (a copy, not a view) it
    must have x's dtype; ``x[False] = value`` writes nothing."""
    if isinstance(value, np.ndarray):
        value = creation.tensor(value, dtype=self.dtype, device=self._device)
    elif not isinstance(value, (Tensor, *_SCALAR_VALUES)):
        raise TypeError(f"setitem: can't assign a {type(value).__name__} to a tensor; assign a number or a "
                        "tensor (tinyflow.tensor(value, dtype=x.dtype))")
    if index is False:
        return
    if not is_half(self.dtype):  # PyTorch's setitem rounds a number into a half tensor unchecked (inf)
        value = promotion.checked_scalar("setitem", value, self.dtype)
    steps = index_steps(index, Tensor, self.array.shape)
    fill = _fills_mask(steps, value)
    if fill and any(isinstance(i, Tensor) and i.ndim and i.dtype == np.uint8 for i in _items(index)) \
            and selection_shape(self.array.shape, steps) is not None:
        raise RuntimeError("setitem: masked_fill_ only supports boolean masks, got a uint8 mask (as PyTorch); "
                           "index with mask.bool()")
    if isinstance(value, Tensor):
        value = _setitem_value(self, value, steps, fill)
    try:
        _write(self, steps, value)
    except (IndexError, TypeError):
        # PyTorch checks the value's shape before the indices' bounds; NumPy refuses a value of 2+
        # dims for a mask's selection with a TypeError where PyTorch's error is about the shape
        _check_fits(self.array.shape, steps, value)
        raise


def _write(x: Tensor, steps: tuple, value: Any) -> None:
    """``x[steps] = value`` for index steps from arg_parser.index_steps, in place."""
    if not isinstance(value, Tensor) and not (is_grad_enabled() and x._requires_grad):

        def fast(a: Any) -> None:
            _assign(a, steps, value)

        x._inplace("setitem", lambda old: old, (), fast)
        return
    if not isinstance(value, Tensor):
        value = creation.tensor(value, dtype=x.dtype, device=x._device)

    def fast_tensor(a: Any) -> None:
        _assign(a, steps, value.array)

    x._inplace("setitem", lambda old: SetItem.apply(old, value, steps), (value,), fast_tensor)


def _setitem_value(x: Tensor, value: Tensor, steps: tuple, fill: bool) -> Tensor:
    """A tensor value as PyTorch assigns it: on x's device, without leading 1-sized dims; x's dtype
    through index tensors (PyTorch's index_put_ does not convert), unless it fills a mask."""
    if value._device != x._device:
        value = value.to(x._device)
    if value.dtype != x.dtype and is_advanced(steps) and not fill \
            and selection_shape(x.array.shape, steps) is not None:  # a bad index is an IndexError first
        raise RuntimeError(
            f"setitem: index put requires the value's dtype to match the tensor's, got a {value.dtype} value for a "
            f"{x.dtype} tensor; convert the value with .to(x.dtype)"
        )
    shape = value.shape
    lead = 0
    while lead < len(shape) and shape[lead] == 1:
        lead += 1
    return value.reshape(shape[lead:]) if lead else value


def _items(index: Any) -> tuple:
    """The items of an index, a short list holding a tensor read as a tuple (as PyTorch)."""
    if isinstance(index, tuple) or (isinstance(index, list) and any(isinstance(i, Tensor) for i in index)):
        return tuple(index)
    return (index,)


def _fills_mask(steps: tuple, value: Any) -> bool:
    """True when PyTorch's assignment is ``masked_fill_``: a one-element value on the host and one
    bool (or uint8) mask as the only index tensor. It converts the value to x's dtype."""
    if isinstance(value, Tensor) and (value.numel() != 1 or value._device.type != "cpu"):
        return False
    if not is_advanced(steps):
        return False
    arrays = [i for i in (steps[-1] if isinstance(steps[-1], tuple) else (steps[-1],)) if hasattr(i, "dtype")]
    return len(arrays) == 1 and arrays[0].dtype == np.bool_


def _check_fits(shape: tuple[int, ...], steps: tuple, value: Any) -> None:
    """Raise ShapeError when ``value`` cannot broadcast to what ``steps`` select from ``shape``."""
    selected = selection_shape(shape, steps)
    vshape = tuple(getattr(value, "shape", ()))
    if selected is None:
        return
    try:
        fits = np.broadcast_shapes(vshape, selected) == selected
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(
            f"setitem: a value of shape {vshape} cannot be assigned to the selected shape {selected} of a tensor "
            f"of shape {tuple(shape)}"
        )


def _assign(arr: Any, steps: tuple, value: Any) -> None:
    """``arr[steps] = value`` for index steps from arg_parser.index_steps (the first step is basic, a view)."""
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


def _keep_saved_old_values(ctx: Context, t: Tensor) -> None:
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


def _write_back_getitem(base: Tensor, view: Tensor, node: Context, index: int) -> Tensor:
    return SetItem.apply(base, view, (node.index,))


def _write_back_split(base: Tensor, view: Tensor, node: Context, index: int) -> Tensor:
    start = sum(shape[node.dim] for shape, _ in node.output_meta[:index])
    sl = (slice(None),) * node.dim + (slice(start, start + view.shape[node.dim]),)
    return SetItem.apply(base, view, (sl,))


def _write_back_reshape(base: Tensor, view: Tensor, node: Context, index: int) -> Tensor:
    return Reshape.apply(view, tuple(node.shape))


def _write_back_permute(base: Tensor, view: Tensor, node: Context, index: int) -> Tensor:
    inverse = [0] * len(node.axes)
    for i, ax in enumerate(node.axes):
        inverse[ax % len(node.axes)] = i
    return Permute.apply(view, tuple(inverse))


# How a base takes in the new value of a view written in place, per view op.
_VIEW_WRITE_BACK: dict[str, Callable[[Tensor, Tensor, Any, int], Tensor]] = {
    "GetItem": _write_back_getitem,
    "Split": _write_back_split,
    "Reshape": _write_back_reshape,
    "Permute": _write_back_permute,
}
