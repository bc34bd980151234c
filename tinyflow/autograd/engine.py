"""The backward engine: ``run_backward`` orders the recorded ``Context`` nodes topologically with
an explicit stack (no recursion: an unrolled LSTM has tens of thousands of nodes) and walks them
once, summing the gradients that reach each node before calling its ``backward``; ``grad`` is the
same walk returning the gradients. docs/autograd.md ("backward") walks through it.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyflow.autograd.anomaly_mode import _state as _anomaly
from tinyflow.autograd.anomaly_mode import check_finite
from tinyflow.autograd.function import Context, TensorLike, _tensor_class
from tinyflow.device import catch_oom, numpy_quietly

__all__ = ["run_backward", "sum_to_shape", "grad"]


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
    """Nodes reachable from ``roots``, each after every node that consumes its outputs; with
    ``leaf_uses``, also the edges into each leaf that needs a gradient, refusing freed nodes."""
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
            raise RuntimeError(f"Trying to backward through the graph a second time ({node.fn.__name__} was "
                               "already freed). Specify retain_graph=True on the first backward call if you "
                               "need to backward twice.")
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
    """``total + g``, in place into a sum this backward made itself (``owned``, which keeps it alive),
    never into a gradient an op returned (an op may hand one array to several inputs)."""
    if id(total) in owned and total.shape == g.shape and total.dtype == g.dtype:
        total += g
        return total
    total = total + g
    owned[id(total)] = total
    return total


@numpy_quietly  # log(0)'s gradient, inf - inf in a sum: inf and NaN, silently, as PyTorch
def run_backward(roots: Sequence[TensorLike], grads: Sequence[Any], retain_graph: bool = False,
                 capture: Sequence[TensorLike] | None = None) -> list[Any] | None:
    """Backpropagate ``grads`` (raw arrays) from ``roots`` into the leaves' ``.grad``.

    A node's gradients are summed in ``pending`` until every consumer has run, then handed to its
    ``backward`` in one call; a leaf's ``.grad`` and post-accumulate hooks (DataParallel's bucket
    all-reduce) once all its uses have delivered. With ``capture`` (``autograd.grad``) no ``.grad``
    changes: the gradient of each tensor in ``capture`` is returned, in order (None where none came).
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

    def leaf_delivered(t: TensorLike, g: Any) -> None:
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
                captured[capture_leaf[key]] = _hooked(t, total)

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
                raise RuntimeError(f"{node.fn.__name__}.backward: one of the tensors it needs was modified by "
                                   "an in-place operation after the forward pass; use an out-of-place op "
                                   "(x = x + y) or .clone() first")
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
    slots = list(slots)
    for index, ref in node.watched.items():
        t = ref()
        if t is None:
            continue
        slots[index] = _hooked(t, slots[index])
        if t._retains_grad:
            t.grad = _tensor_class()._from_array(slots[index], device=t.device)
    return slots


def _hooked(t: TensorLike, g: Any) -> Any:
    """``g`` after ``t``'s gradient hooks (``register_hook``), each of which may replace it."""
    for hook in t._grad_hooks:
        new = hook(_tensor_class()._from_array(g, device=t.device))
        if new is not None:
            g = new.array
    return g


def _finish_leaf(t: TensorLike, g: Any, handed_out: set[int]) -> None:
    """Add a leaf's complete gradient to ``.grad`` and run its hooks."""
    g = _hooked(t, g)
    if t.grad is None:
        # .grad must own its array: optimizers and clipping update it in place.
        if g.base is not None or id(g) in handed_out:
            g = g.copy()
        handed_out.add(id(g))
        t.grad = _tensor_class()._from_array(g, device=t.device)
    else:
        t.grad.array += g  # .grad owns its array (see above), so adding in place is safe
    for hook in t._post_accumulate_hooks:
        hook(t)


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool | None = None, is_grads_batched: bool = False,
         materialize_grads: bool = False) -> tuple[TensorLike | None, ...]:
    """``torch.autograd.grad``: the gradients of ``outputs`` with respect to ``inputs``, as a tuple,
    leaving every ``.grad`` as it was. ``grad_outputs`` weights each output (ones for a scalar one);
    an unused input is an error unless ``allow_unused=True`` (None, or zeros with
    ``materialize_grads=True``); ``create_graph=True`` is refused (backward runs on raw arrays).
    """
    if create_graph:
        raise NotImplementedError("autograd.grad(create_graph=True): tinyflow's backward passes run on raw arrays, "
                                  "so gradients are not differentiable again (no higher-order gradients); use "
                                  "create_graph=False")
    if is_grads_batched:
        raise NotImplementedError("autograd.grad(is_grads_batched=True) is not supported; loop over the grad_outputs")
    Tensor = _tensor_class()
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if not outs or not ins:
        raise ValueError("autograd.grad: outputs and inputs must each hold at least one tensor")
    if grad_outputs is None or isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs] * len(outs) if grad_outputs is None else [grad_outputs]
    grad_outputs = list(grad_outputs)
    if len(grad_outputs) != len(outs):
        raise ValueError(f"autograd.grad: got {len(grad_outputs)} grad_outputs for {len(outs)} outputs")
    for k, t in enumerate(ins):
        if not isinstance(t, Tensor) or not t.requires_grad:
            raise RuntimeError(f"autograd.grad: input {k} does not require grad; only tensors with "
                               "requires_grad=True (or computed from one) can be differentiated")
    roots, seeds = [], []
    for k, (out, g) in enumerate(zip(outs, grad_outputs)):
        if not out.requires_grad:
            raise RuntimeError(f"autograd.grad: output {k} does not require grad and has no grad_fn")
        if g is None:
            if out.array.size != 1:
                raise RuntimeError(f"autograd.grad: grad can be implicitly created only for scalar outputs; "
                                   f"output {k} has shape {out.shape}, so pass grad_outputs")
            seed = out.device.xp.ones(out.array.shape, dtype=out.dtype)
        else:
            seed = g.array if isinstance(g, Tensor) else out.device.xp.asarray(g, dtype=out.dtype)
            if tuple(seed.shape) != out.shape:
                raise RuntimeError(f"autograd.grad: grad_outputs[{k}] has shape {tuple(seed.shape)} but "
                                   f"output {k} has shape {out.shape}")
        roots.append(out)
        seeds.append(seed)
    got = run_backward(roots, seeds, retain_graph=bool(retain_graph), capture=ins)
    results: list[Any] = []
    seen: set[int] = set()
    for k, (t, g) in enumerate(zip(ins, got)):
        if g is None:
            if materialize_grads:
                results.append(Tensor._from_array(t.device.xp.zeros(t.shape, dtype=t.dtype), device=t.device))
                continue
            if not allow_unused:
                raise RuntimeError(f"autograd.grad: input {k} was not used in the graph of the outputs; "
                                   "set allow_unused=True if that is expected")
            results.append(None)
            continue
        if id(g) in seen or g.base is not None:  # each returned tensor owns its memory
            g = g.copy()
        seen.add(id(g))
        results.append(Tensor._from_array(g, device=t.device))
    return tuple(results)
