"""``torch.autograd.grad``: gradients returned as a tuple instead of added to ``.grad``.

The walk is the backward engine's (``run_backward`` in autograd.py) with ``capture=inputs``:
no ``.grad`` changes; a leaf's complete gradient is taken where the engine would have added it
to ``.grad``, and an intermediate tensor's from its node once every consumer has delivered.
"""
from __future__ import annotations

from typing import Any

from tinyflow.autograd import run_backward
from tinyflow.tensor import Tensor

__all__ = ["grad"]


def grad(
    outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
    create_graph: bool = False, allow_unused: bool | None = None, is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """``torch.autograd.grad``: the gradients of ``outputs`` with respect to ``inputs``, returned
    as a tuple, leaving every ``.grad`` as it was.

    ``grad_outputs`` weights each output (ones for a scalar output, else required); an input that
    the outputs do not depend on is an error unless ``allow_unused=True`` (then its gradient is
    None, or zeros with ``materialize_grads=True``). ``create_graph=True`` (gradients that are
    themselves differentiable, for gradient penalties or Hessian-vector products) is not
    supported: tinyflow's backward passes compute on raw arrays outside the graph.
    """
    if create_graph:
        raise NotImplementedError(
            "autograd.grad(create_graph=True): tinyflow's backward passes run on raw arrays, so "
            "gradients are not differentiable again (no higher-order gradients); use create_graph=False")
    if is_grads_batched:
        raise NotImplementedError("autograd.grad(is_grads_batched=True) is not supported; loop over the grad_outputs")
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

