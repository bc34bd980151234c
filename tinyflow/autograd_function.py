"""``torch.autograd.function``: PyTorch's contract for Functions that users write.

tinyflow's own ops are ``Function`` subclasses whose forward and backward work on raw arrays
(autograd.py). A subclass defined outside tinyflow's packages (a user's program, a test) gets
PyTorch's contract instead (``Function.tensor_api``): forward receives Tensors, outside autograd,
and returns Tensors; ``ctx.save_for_backward(*tensors)``, ``ctx.saved_tensors``,
``ctx.needs_input_grad`` and ``ctx.mark_non_differentiable`` behave as in PyTorch; backward
receives and returns Tensors (None for an input without a gradient). ``Function.apply`` hands
such a class to ``apply_tensor_function`` here, which runs it through an array-level twin made
once per class, so the engine sees one kind of node. Backward runs without recording, so its
result is not differentiated again (tinyflow has no higher-order gradients).

Importable as ``tinyflow.autograd.function`` (``from torch.autograd.function import
once_differentiable``), with ``Function`` and ``FunctionCtx``.
"""
from __future__ import annotations

from typing import Any

from tinyflow.autograd import Context, Function, _tensor_class
from tinyflow.autograd_grad_mode import set_grad_enabled
from tinyflow.device import device_of

__all__ = ["Function", "FunctionCtx", "once_differentiable"]

FunctionCtx = Context  # the ``ctx`` a user Function's forward and backward receive, for type annotations


def once_differentiable(fn: Any) -> Any:
    """``torch.autograd.function.once_differentiable``: tinyflow's backward passes are never
    differentiated again, so the function is returned as it is."""
    return fn


def apply_tensor_function(cls: type[Function], args: tuple, kwargs: dict) -> Any:
    """``apply`` of a Function with PyTorch's contract: run through an array-level twin made once
    per class (``_array_twin``), then drop the outputs forward marked non-differentiable."""
    twin = cls.__dict__.get("_array_twin")
    if twin is None:
        twin = _make_array_twin(cls)
        type.__setattr__(cls, "_array_twin", twin)
    out = twin.apply(*args, **kwargs)
    outs = out if type(out) is tuple else (out,)
    ctx = next((o._ctx for o in outs if o._ctx is not None), None)
    marked = getattr(ctx, "non_differentiable_outputs", ())
    for i in marked:
        outs[i]._requires_grad = False
        outs[i]._ctx = None
    return out


def _make_array_twin(cls: type[Function]) -> type[Function]:
    """An array-level Function that wraps ``cls``'s Tensor-level forward and backward."""
    user_forward, user_backward = cls.forward, cls.backward
    Tensor = _tensor_class()

    def wrap(a: Any) -> Any:
        return Tensor._from_array(a, device=device_of(a)) if hasattr(a, "dtype") and hasattr(a, "shape") else a

    def unwrap(name: str, what: str, value: Any) -> Any:
        if value is None or not isinstance(value, Tensor):
            if value is not None and not isinstance(value, (int, float, bool)):
                raise TypeError(f"{name}.{what}: expected Tensors (or None) to be returned, got "
                                f"{type(value).__name__}")
            return value
        return value.array

    def forward(ctx: Context, *raw: Any, **kw: Any) -> Any:
        with set_grad_enabled(False):
            out = user_forward(ctx, *(wrap(a) for a in raw), **kw)
        marked = ctx.__dict__.pop("non_differentiable", None)
        if type(out) is tuple:
            if marked:
                ctx.non_differentiable_outputs = [i for i, o in enumerate(out) if id(o) in marked]
            return tuple(unwrap(cls.__name__, "forward", o) for o in out)
        if marked and id(out) in marked:
            ctx.non_differentiable_outputs = [0]
        return unwrap(cls.__name__, "forward", out)

    def backward(ctx: Context, *grads: Any) -> Any:
        with set_grad_enabled(False):
            result = user_backward(ctx, *(wrap(g) for g in grads))
        if type(result) is tuple:
            return tuple(unwrap(cls.__name__, "backward", g) for g in result)
        return unwrap(cls.__name__, "backward", result)

    return type(cls.__name__, (Function,), {
        "__module__": __name__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__, "tensor_api": False,
        "moves_device": cls.moves_device, "forward": staticmethod(forward), "backward": staticmethod(backward),
    })
