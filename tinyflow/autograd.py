"""Reverse-mode automatic differentiation: the graph and the backward engine.

Every differentiable op is a ``Function`` subclass with a ``forward`` and a ``backward`` over raw
arrays. ``Function.apply`` runs ``forward`` on the inputs' arrays and, when any input needs a
gradient, records a ``Context`` node that links the outputs to their inputs. ``backward`` (the
engine, ``run_backward``) orders those nodes topologically with an explicit stack — no recursion,
so an unrolled LSTM of tens of thousands of nodes is fine — and walks them once in reverse,
summing the gradients that reach each node before calling its ``backward``.

The rest of ``torch.autograd`` lives in files named after PyTorch's: autograd_grad_mode.py
(``no_grad`` and the other switches of recording) and autograd_anomaly_mode.py
(``detect_anomaly``), imported here; autograd_grad.py (``autograd.grad``) and
autograd_function.py (PyTorch's contract for user-written Functions), attached at the end of
this file, loaded on first use; in the PyTorch surface, autograd_functional.py
(``autograd.functional``) and autograd_variable.py (``autograd.Variable``), which the core never
imports: tinyflow/surface.py attaches them to this module the same way.

See docs/autograd.md for a walk through this file.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from tinyflow import _lazy_names
from tinyflow.autograd_anomaly_mode import _state as _anomaly
from tinyflow.autograd_anomaly_mode import check_finite, detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from tinyflow.autograd_grad_mode import _state as _grad_mode
from tinyflow.autograd_grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from tinyflow.device import array_module, catch_oom, device_of, kernel_module
from tinyflow.dtypes import is_floating_or_complex

if TYPE_CHECKING:
    from tinyflow.tensor import Tensor

__all__ = [
    "Context", "Function", "run_backward", "sum_to_shape",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
    "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
]

# --------------------------------------------------------------------------------------------
# Function and its Context
# --------------------------------------------------------------------------------------------


class Context:
    """What one op application remembers for its backward: a node of the graph.

    ``inputs`` are the input Tensors (None for non-tensor arguments), ``saved_tensors`` the arrays
    the op asked to keep, ``needs_input_grad`` a bool per positional input. ``edges`` holds, per
    input, the node that produced it and which of that node's outputs it was, taken when this op
    ran: an in-place op later moves the tensor onto a new node (``x += y``), and the gradient
    of this use must still reach the node that produced the value this op saw, as in PyTorch.

    Attributes that most nodes leave at their default are class attributes (a node is made per
    op call, so every attribute set here is paid on the hot path): ``watched`` becomes a dict
    through ``watch``, ``versions`` a list when the op saved one of its tensors.
    """

    num_outputs = 1
    output_meta: Sequence[tuple[tuple[int, ...], Any]] = ()  # (shape, dtype) per output
    _saved: tuple = ()
    freed = False
    watched: Mapping[int, Any] = MappingProxyType({})  # output index -> weakref of a tensor with hooks
    versions: Sequence[tuple[list[int], int]] = ()  # saved tensors: (shared counter, value then)
    inputs: tuple = ()
    edges: tuple = ()

    def __init__(self, fn: type[Function], inputs: tuple, xp: Any) -> None:
        self.fn = fn
        self.inputs = inputs
        self.xp = xp
        self.needs_input_grad = tuple(t is not None and t._requires_grad for t in inputs)
        self.edges = tuple(None if t is None else (t._ctx, t._out_index) for t in inputs)

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
        """Accepted for PyTorch programs: tinyflow's user Functions see copy-free wrappers of the
        inputs' arrays, so an in-place edit of an input in forward is already visible to its owner."""

    def set_materialize_grads(self, value: bool) -> None:
        """Accepted for PyTorch programs: backward always receives a gradient array per output
        (zeros for outputs nobody used), which is PyTorch's default, ``True``."""

    @property
    def saved_tensors(self) -> tuple:
        if self.freed:
            raise RuntimeError(
                f"{self.fn.__name__}.backward: the graph was already freed by an earlier backward. "
                "Call backward(retain_graph=True) the first time if you need to backward twice."
            )
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

    Two contracts, chosen per subclass by ``tensor_api``:

    - tinyflow's ops (classes defined in the tinyflow packages, ``tensor_api = False``): forward
      and backward get and return raw NumPy/CuPy arrays (docs/autograd.md);
    - PyTorch's ``torch.autograd.Function`` (``tensor_api = True``, the default for classes
      defined anywhere else, i.e. user code): forward and backward get and return Tensors, as
      in PyTorch; ``apply`` hands such a class to autograd_function.py.

    Set ``tensor_api`` in a class body to choose explicitly.
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
        """Run ``forward`` on the arrays of ``args`` and, if needed, record the graph node.

        This runs once per op call, so it is written for speed: one pass over the arguments,
        the node built directly, the output Tensors made without going through a constructor.
        """
        if cls.tensor_api:
            from tinyflow.autograd_function import apply_tensor_function  # PyTorch's contract (see there)

            return apply_tensor_function(cls, args, kwargs)
        Tensor = _TENSOR if _TENSOR is not None else _tensor_class()
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
        ctx = _new_object(Context)  # Context.__init__'s work, done here in one pass
        ctx.fn = cls
        ctx.xp = xp
        ctx.needs_input_grad = needs
        if record:
            ctx.inputs = tuple(inputs)
            ctx.edges = tuple(edges)
        if xp is np:
            out = cls.forward(ctx, *raw, **kwargs)
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


_TENSOR: Any = None


def _tensor_class() -> Any:
    global _TENSOR
    if _TENSOR is None:
        from tinyflow.tensor import Tensor

        _TENSOR = Tensor
    return _TENSOR


# --------------------------------------------------------------------------------------------
# The backward engine
# --------------------------------------------------------------------------------------------


def sum_to_shape(grad: Any, shape: tuple[int, ...]) -> Any:
    """Sum a broadcast gradient back down to ``shape`` (the inverse of broadcasting)."""
    if grad.shape == tuple(shape):
        return grad
    extra = grad.ndim - len(shape)
    if extra < 0:
        raise RuntimeError(f"gradient of shape {grad.shape} cannot be summed to shape {shape}")
    axes = tuple(range(extra)) + tuple(
        extra + i for i, n in enumerate(shape) if n == 1 and grad.shape[extra + i] != 1
    )
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad.reshape(shape)


def _topological_order(roots: Sequence[Context], leaf_uses: dict[int, int] | None = None) -> list[Context]:
    """Nodes reachable from ``roots``, each after every node that consumes its outputs.

    With ``leaf_uses``, the same walk also counts the edges into each leaf that needs a
    gradient (``id(leaf) -> count``) and refuses a node an earlier backward already freed.
    """
    order: list[Context] = []
    seen: set[Context] = set()  # nodes hash by identity
    stack: list[tuple[Context, bool]] = [(r, False) for r in roots]
    pop, push, emit, mark = stack.pop, stack.append, order.append, seen.add
    while stack:
        node, expanded = pop()
        if expanded:
            emit(node)
            continue
        if node in seen:
            continue
        if leaf_uses is not None and node.freed:
            raise RuntimeError(
                f"Trying to backward through the graph a second time ({node.fn.__name__} was "
                "already freed). Specify retain_graph=True on the first backward call if you "
                "need to backward twice."
            )
        mark(node)
        push((node, True))
        for t, edge, need in zip(node.inputs, node.edges, node.needs_input_grad):
            if edge is not None:
                child = edge[0]
                if child is None:
                    if need and leaf_uses is not None:
                        leaf_uses[id(t)] = leaf_uses.get(id(t), 0) + 1
                elif child not in seen:
                    push((child, False))
    order.reverse()  # consumers first
    return order


def _accumulate(total: Any, g: Any, owned: dict[int, Any]) -> Any:
    """``total + g``. A sum this backward made itself (listed in ``owned``, which keeps it alive so
    its id stays unique) is added into in place: no other node or leaf holds it yet. Gradients
    that ops returned are never written into: an op may hand one array to several inputs."""
    if id(total) in owned and total.shape == g.shape and total.dtype == g.dtype:
        total += g
        return total
    total = total + g
    owned[id(total)] = total
    return total


def run_backward(
    roots: Sequence[Tensor], grads: Sequence[Any], retain_graph: bool = False,
    capture: Sequence[Tensor] | None = None,
) -> list[Any] | None:
    """Backpropagate ``grads`` (raw arrays) from ``roots`` into the leaves' ``.grad``.

    Gradients reaching a node are summed in ``pending`` until every consumer has run (the
    topological order guarantees that), then handed to its ``backward`` in one call. A leaf's
    gradient is added to ``.grad`` once all its uses have delivered, and only then do its
    post-accumulate hooks run (DataParallel starts a bucket's all-reduce from there).

    With ``capture`` (``autograd.grad``) no ``.grad`` changes: the complete gradient of each
    tensor in ``capture`` (a leaf or not) is returned instead, in order (None where none arrived).
    """
    pending: dict[Context, list[Any]] = {}  # node -> summed gradient per output
    leaf_grads: dict[int, Any] = {}  # id(leaf) -> summed gradient in this backward
    leaf_uses: dict[int, int] = {}  # how many edges still have to deliver to each leaf
    handed_out: set[int] = {id(g) for g in grads}  # arrays that some leaf's .grad may not own
    owned: dict[int, Any] = {}  # sums made here (see _accumulate)
    captured: list[Any] | None = None
    if capture is not None:
        captured = [None] * len(capture)
        capture_leaf = {id(t): k for k, t in enumerate(capture) if t._ctx is None}
        capture_node: dict[Context, list[tuple[int, int]]] = {}
        for k, t in enumerate(capture):
            if t._ctx is not None:
                capture_node.setdefault(t._ctx, []).append((t._out_index, k))

    # Count the edges that reach each leaf (during the walk that orders the nodes), so its
    # hooks run once its gradient is complete.
    for r in roots:
        if r._ctx is None and r.requires_grad:
            leaf_uses[id(r)] = leaf_uses.get(id(r), 0) + 1
    order = _topological_order([r._ctx for r in roots if r._ctx is not None], leaf_uses)

    def leaf_delivered(t: Tensor, g: Any) -> None:
        """One more use of leaf ``t`` has run (``g``: its gradient, or None for none)."""
        key = id(t)
        if g is not None:
            prev = leaf_grads.get(key)
            leaf_grads[key] = g if prev is None else _accumulate(prev, g, owned)
        uses = leaf_uses[key] - 1
        leaf_uses[key] = uses
        if uses == 0 and key in leaf_grads:
            total = leaf_grads.pop(key)
            owned.pop(id(total), None)
            if captured is None:
                _finish_leaf(t, total, handed_out)
            elif key in capture_leaf:
                for hook in t._grad_hooks:
                    new = hook(_tensor_class()._from_array(total, device=t.device))
                    if new is not None:
                        total = new.array
                captured[capture_leaf[key]] = total

    for r, g in zip(roots, grads):
        if r._ctx is None:
            leaf_delivered(r, g)
        else:
            slots = pending.setdefault(r._ctx, [None] * r._ctx.num_outputs)
            prev = slots[r._out_index]
            slots[r._out_index] = g if prev is None else _accumulate(prev, g, owned)

    anomaly = _anomaly.enabled
    for node in order:
        xp = node.xp
        slots = pending.pop(node, None)
        if slots is None:
            slots = [None] * node.num_outputs
        elif owned:  # from here on, the op holds them: never add into them again
            for s in slots:
                if s is not None:
                    owned.pop(id(s), None)
        # Outputs nobody used get a zero gradient (ops may assume an array for each output).
        if len(slots) > 1 or slots[0] is None:
            for i, s in enumerate(slots):
                if s is None:
                    shape, dtype = node.output_meta[i]
                    slots[i] = xp.zeros(shape, dtype=dtype)
        if node.watched:
            slots = _run_watchers(node, slots)
        if captured is not None and node in capture_node:
            for index, k in capture_node[node]:
                captured[k] = slots[index]
        for counter, seen in node.versions:
            if counter[0] != seen:
                raise RuntimeError(
                    f"{node.fn.__name__}.backward: one of the tensors it needs was modified by an in-place "
                    "operation after the forward pass; use an out-of-place op (x = x + y) or .clone() first"
                )
        if xp is np:
            in_grads = node.fn.backward(node, *slots)
        else:
            with catch_oom(f"{node.fn.__name__}.backward", slots[0].shape):
                in_grads = node.fn.backward(node, *slots)
        del slots
        if not isinstance(in_grads, tuple):
            in_grads = (in_grads,)
        if anomaly:
            check_finite(node.fn.__name__, "backward", in_grads)
        needs = node.needs_input_grad
        if len(in_grads) < len(needs):  # trailing inputs without a gradient
            in_grads += (None,) * (len(needs) - len(in_grads))
        for t, edge, need, g in zip(node.inputs, node.edges, needs, in_grads):
            if not need:
                continue
            producer = edge[0]
            if g is not None:
                if type(g) is not xp.ndarray:
                    g = xp.asarray(g)  # a NumPy scalar (a device gradient of ToDevice stays)
                arr = t.array
                if g.shape != arr.shape:
                    g = sum_to_shape(g, arr.shape)
                if g.dtype != arr.dtype:
                    g = g.astype(arr.dtype)
            if producer is None:
                leaf_delivered(t, g)
            elif g is not None:
                slots = pending.get(producer)
                if slots is None:
                    slots = pending[producer] = [None] * producer.num_outputs
                index = edge[1]
                prev = slots[index]
                slots[index] = g if prev is None else _accumulate(prev, g, owned)
        del in_grads
        if not retain_graph:
            node.free()
    return captured


def _run_watchers(node: Context, slots: list[Any]) -> list[Any]:
    """Run hooks and retain_grad of the node's output tensors on their complete gradients."""
    from tinyflow.tensor import Tensor

    slots = list(slots)
    for index, ref in node.watched.items():
        t = ref()
        if t is None:
            continue
        for hook in t._grad_hooks:
            new = hook(Tensor._from_array(slots[index], device=t.device))
            if new is not None:
                slots[index] = new.array
        if t._retains_grad:
            t.grad = Tensor._from_array(slots[index], device=t.device)
    return slots


def _finish_leaf(t: Tensor, g: Any, handed_out: set[int]) -> None:
    """Add a leaf's complete gradient to ``.grad`` and run its hooks."""
    from tinyflow.tensor import Tensor

    for hook in t._grad_hooks:
        new = hook(Tensor._from_array(g, device=t.device))
        if new is not None:
            g = new.array
    if t.grad is None:
        # .grad must own its array: optimizers and clipping update it in place.
        if g.base is not None or id(g) in handed_out:
            g = g.copy()
        handed_out.add(id(g))
        t.grad = Tensor._from_array(g, device=t.device)
    else:
        t.grad.array += g  # .grad owns its array (see above), so adding in place is safe
    for hook in t._post_accumulate_hooks:
        hook(t)


# PyTorch's other torch.autograd names live in core files that import this one, so this module
# names them in a lazy table instead of importing them: loaded on first use, no import circle.
_lazy_names.attach(__name__, {
    "grad": "tinyflow.autograd_grad:grad",
    "function": "tinyflow.autograd_function",  # also ``import tinyflow.autograd.function``
    "FunctionCtx": "tinyflow.autograd_function:FunctionCtx",
    "once_differentiable": "tinyflow.autograd_function:once_differentiable",
})
