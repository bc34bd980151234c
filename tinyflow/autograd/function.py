"""``torch.autograd.function``: ``Function``, the base class of every differentiable op, and the
``Context`` node that one application of it records.

``Function.apply`` runs ``forward`` on the inputs' raw arrays and, when any input needs a
gradient, records a ``Context`` that links the outputs to their inputs: the graph that the
engine (engine.py) walks backward. docs/autograd.md walks through this file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from tinyflow.autograd.anomaly_mode import _state as _anomaly
from tinyflow.autograd.anomaly_mode import check_finite
from tinyflow.autograd.grad_mode import _state as _grad_mode
from tinyflow.autograd.grad_mode import set_grad_enabled
from tinyflow.device import array_module, catch_oom, device_of, kernel_module, quiet_numpy, restore_numpy
from tinyflow.dtypes import is_floating_or_complex

__all__ = ["Context", "Function", "FunctionCtx", "once_differentiable"]


class Context:
    """What one op application remembers for its backward: a node of the graph.

    ``inputs`` are the input Tensors (None for non-tensor arguments), ``saved_tensors`` the arrays
    the op asked to keep, ``needs_input_grad`` a bool per positional input, ``edges`` per input the
    (node, output index) that produced it when this op ran (an in-place op may move the tensor
    later). ``Function.apply`` builds each node directly (one per op call, so no ``__init__``), and
    defaults are class attributes: each attribute set costs.
    """

    fn: type[Function]  # the op
    xp: Any  # numpy or cupy, the inputs' array module
    needs_input_grad: tuple[bool, ...]
    num_outputs = 1
    output_meta: Sequence[tuple[tuple[int, ...], Any]] = ()  # (shape, dtype) per output
    _saved: tuple = ()
    freed = False
    watched: Mapping[int, Any] = MappingProxyType({})  # output index -> weakref of a tensor with hooks
    versions: Sequence[tuple[list[int], int]] = ()  # saved tensors: (shared counter, value then)
    inputs: tuple = ()
    edges: tuple = ()

    @property
    def kernels(self) -> Any:
        """The kernel module of the inputs' device (``ctx.kernels.im2col(...)``): the NumPy
        references on the CPU, their CUDA twins on a GPU (see tinyflow/device.py)."""
        return kernel_module(self.xp)

    def save_for_backward(self, *arrays: Any) -> None:
        self._saved = arrays

    # PyTorch's ctx methods for user-defined Functions (see Function.tensor_api)
    def mark_non_differentiable(self, *outputs: Any) -> None:
        """These outputs of a user Function's forward do not require grad (argmax indices, masks)."""
        self.non_differentiable = {id(t) for t in outputs}

    def mark_dirty(self, *tensors: Any) -> None:
        """Accepted: user Functions see the inputs' own arrays, so an in-place edit is already seen."""

    def set_materialize_grads(self, value: bool) -> None:
        """Accepted: backward always gets a gradient per output (zeros if unused), PyTorch's default."""

    @property
    def saved_tensors(self) -> tuple:
        if self.freed:
            raise RuntimeError(f"{self.fn.__name__}.backward: the graph was already freed by an earlier backward. "
                               "Call backward(retain_graph=True) the first time if you need to backward twice.")
        return self._saved

    def watch(self, index: int, ref: Any) -> None:
        """Run the hooks (and retain_grad) of output ``index``'s tensor, held by weakref ``ref``."""
        if "watched" not in self.__dict__:
            self.watched = {}
        self.watched[index] = ref

    def free(self) -> None:
        """Drop what backward needed, so the memory goes as soon as the graph is used."""
        self._saved = ()
        self.inputs = ()
        self.edges = ()
        self.freed = True

    def __repr__(self) -> str:
        return f"<{self.fn.__name__} node>"


_new_object = object.__new__
_NO_GRAD_NEEDS: dict[int, tuple] = {}  # number of inputs -> (False, ...) (for nodes not recorded)


class Function:
    """Base class of every differentiable op. Subclasses define static forward/backward.

    ``tensor_api`` chooses the contract: False (tinyflow's ops) for raw NumPy/CuPy arrays in
    forward and backward; True (the default for classes defined outside the tinyflow packages:
    user code) for PyTorch's Tensors (``apply_tensor_function``, below). A class body may set it.
    """

    moves_device = False  # True for ops whose outputs live on another device than their inputs
    returns_view = False  # True for ops whose output is a view of the first input's data
    tensor_api = False  # see the class docstring; set per subclass by __init_subclass__

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "tensor_api" not in cls.__dict__:
            cls.tensor_api = not cls.__module__.startswith(("tinyflow.", "tinyflow_cuda."))

    @staticmethod
    def forward(ctx: Context, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Context, *grads: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward`` on the arrays of ``args`` and, if needed, record the graph node (once per
        op call, so one pass over the arguments, no constructors: the node and Tensors built directly)."""
        if cls.tensor_api:
            return apply_tensor_function(cls, args, kwargs)
        Tensor = _TENSOR
        raw = []
        first = None
        wants_grad = False
        for a in args:
            if isinstance(a, Tensor):
                if first is None:
                    first = a
                if a._requires_grad:
                    wants_grad = True
                raw.append(a.array)
            else:
                raw.append(a)
        if first is None:
            xp = np
        else:
            xp = np if type(first.array) is np.ndarray else array_module(first.array)
        record = wants_grad and _grad_mode.enabled
        if record:
            inputs = []
            needs = []
            edges = []
            for a in args:
                if isinstance(a, Tensor):
                    inputs.append(a)
                    needs.append(a._requires_grad)
                    edges.append((a._ctx, a._out_index))
                else:
                    inputs.append(None)
                    needs.append(False)
                    edges.append(None)
            needs = tuple(needs)
        else:
            n = len(args)
            needs = _NO_GRAD_NEEDS.get(n)
            if needs is None:
                needs = _NO_GRAD_NEEDS[n] = (False,) * n
        ctx = _new_object(Context)  # the node, built here in one pass
        ctx.fn = cls
        ctx.xp = xp
        ctx.needs_input_grad = needs
        if record:
            ctx.inputs = tuple(inputs)
            ctx.edges = tuple(edges)
        if xp is np:
            quiet = quiet_numpy()
            try:
                out = cls.forward(ctx, *raw, **kwargs)
            finally:
                restore_numpy(quiet)
        else:  # on a GPU an allocation can fail: name the op and the shape
            with catch_oom(f"{cls.__name__}.forward", first.shape):
                out = cls.forward(ctx, *raw, **kwargs)
        multi = type(out) is tuple
        outs = out if multi else (out,)
        if _anomaly.enabled:
            check_finite(cls.__name__, "forward", outs)
        device = first._device if first is not None and not cls.moves_device else None
        results = []
        meta = []  # (shape, dtype) per output, for the node
        new = _new_object
        for i, o in enumerate(outs):
            if type(o) is not xp.ndarray and not cls.moves_device:
                o = xp.asarray(o)  # NumPy reductions return scalars, not 0-d arrays
            t = new(Tensor)
            t.array = o
            t._device = device if device is not None else device_of(o)
            t._versions = [0]  # in-place edits so far (see Tensor._from_array)
            if record:
                dtype = o.dtype
                meta.append((o.shape, dtype))
                kind = dtype.kind
                if kind == "f" or kind == "c" or (kind == "V" and is_floating_or_complex(dtype)):
                    t._requires_grad = True
                    t._ctx = ctx
                    t._out_index = i
            results.append(t)
        if cls.returns_view and first is not None:
            for r in results:
                r._versions = first._versions  # an in-place edit of either is an edit of both
        if record:
            if multi:
                ctx.num_outputs = len(outs)
            ctx.output_meta = meta
            if ctx._saved:
                ctx.versions = _saved_versions(ctx._saved, ctx.inputs, results)
        return tuple(results) if multi else results[0]


def _memory_root(a: Any) -> Any:
    """The array that owns ``a``'s memory (NumPy and CuPy point a view's ``base`` at the owner)."""
    base = getattr(a, "base", None)
    return a if base is None else base


def _saved_versions(saved: tuple, inputs: tuple, results: list) -> list[tuple[list[int], int]]:
    """The in-place counters of the tensors whose memory an op saved for backward, with their
    values now: backward refuses to run if one moved (PyTorch's "modified by an inplace
    operation"). Tensors the op only read are not watched: ``out = conv(x); out += x`` is fine."""
    roots = set()
    for a in saved:
        if type(a) is np.ndarray:
            base = a.base
        elif hasattr(a, "shape"):
            base = getattr(a, "base", None)
        else:
            continue
        roots.add(id(a) if base is None else id(base))
    watched = []
    for group in (inputs, results):
        for t in group:
            if t is None:
                continue
            arr = t.array
            base = arr.base if type(arr) is np.ndarray else getattr(arr, "base", None)
            if (id(arr) if base is None else id(base)) in roots:
                watched.append((t._versions, t._versions[0]))
    return watched


# The class that wraps arrays: tinyflow.tensor.Tensor, which registers itself when tensor.py is
# imported (``set_tensor_class``). autograd sits below Tensor and never imports it: the engine
# makes Tensors of the class it was given.
_TENSOR: Any = None
TensorLike = Any  # a tinyflow Tensor (annotations of autograd's signatures)


def set_tensor_class(cls: type) -> None:
    """Called once by tensor.py: the class ``apply`` wraps outputs in and the engine hands hooks."""
    global _TENSOR
    _TENSOR = cls


def _tensor_class() -> Any:
    return _TENSOR


# ---- PyTorch's contract for Functions that users write (``Function.tensor_api``) ---------------
# forward receives Tensors, outside autograd, and returns Tensors; ``ctx.save_for_backward``,
# ``saved_tensors``, ``needs_input_grad`` and ``mark_non_differentiable`` behave as in PyTorch;
# backward receives and returns Tensors (None for an input without a gradient), without recording:
# its result is not differentiated again (tinyflow has no higher-order gradients).


FunctionCtx = Context  # the ``ctx`` a user Function's forward and backward receive, for type annotations


def once_differentiable(fn: Any) -> Any:
    """``torch.autograd.function.once_differentiable``: tinyflow's backward passes are never
    differentiated again, so the function is returned as it is."""
    return fn


def apply_tensor_function(cls: type[Function], args: tuple, kwargs: dict) -> Any:
    """``apply`` of a Function with PyTorch's contract: run through an array-level twin made once
    per class (``_array_twin``, so the engine sees one kind of node), then drop the outputs forward
    marked non-differentiable."""
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
