"""``torch.autograd.functional``: Jacobians and vector-Jacobian products of a function of tensors,
computed with reverse mode (``tinyflow.autograd.grad``), as PyTorch does by default.

``jacobian``
runs one backward pass per output element, like PyTorch's reverse-mode strategy without
``vectorize``; ``jvp`` is computed from the Jacobian. Second derivatives (``hessian``, ``vhp``,
``hvp``) need differentiable backward passes, which tinyflow does not record: they are errors.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tinyflow.autograd.engine import grad

__all__ = ["jacobian_blocks", "jacobian_vector_products", "jacobian", "vjp", "jvp", "hessian", "vhp", "hvp"]


def _as_tuple(name: str, what: str, value: Any) -> tuple[tuple[Any, ...], bool]:
    from tinyflow.tensor import Tensor

    is_tuple = isinstance(value, (tuple, list))
    items = tuple(value) if is_tuple else (value,)
    if not all(isinstance(t, Tensor) for t in items):
        raise TypeError(f"{name}: the {what} must be a Tensor or a tuple of Tensors, got "
                        f"{[type(t).__name__ for t in items]}")
    return items, is_tuple


def _prepare(name: str, inputs: Any) -> tuple[tuple[Any, ...], bool]:
    items, is_tuple = _as_tuple(name, "inputs", inputs)
    return tuple(t.detach().requires_grad_(True) for t in items), is_tuple


def _no_second_order(name: str, create_graph: bool) -> None:
    if create_graph:
        raise NotImplementedError(f"{name}(create_graph=True): tinyflow's backward passes are not differentiable "
                                  "again (no higher-order gradients); use create_graph=False")


def jacobian_blocks(outputs: Sequence[Any], inputs: Sequence[Any], strict: bool = False) -> list[list[Any]]:
    """[output][input] -> d output / d input of shape output.shape + input.shape, by one backward
    pass per output element (the one Jacobian loop of tinyflow: ``jacobian`` here and the
    ``tinyflow.func`` transforms use it). An input an output does not depend on gets zeros, or
    with ``strict`` a RuntimeError."""
    from tinyflow import creation  # here, not at the top: creation imports tensor.py, which imports autograd

    blocks = []
    for o_index, out in enumerate(outputs):
        flat = out.reshape(-1)
        rows: list[list[Any]] = [[] for _ in inputs]
        for k in range(flat.numel()):
            grads = grad(flat[k], list(inputs), retain_graph=True, allow_unused=True) \
                if out.requires_grad else (None,) * len(inputs)
            for i, (g, x) in enumerate(zip(grads, inputs)):
                if g is None:
                    if strict:
                        raise RuntimeError(f"jacobian: output {o_index} is independent of input {i} "
                                           "(strict=True makes that an error)")
                    g = creation.zeros_like(x)
                rows[i].append(g)
        blocks.append([creation.stack(r).reshape(*out.shape, *x.shape) if r
                       else creation.zeros(*out.shape, *x.shape, dtype=x.dtype) for r, x in zip(rows, inputs)])
    return blocks


def jacobian_vector_products(outputs: Sequence[Any], blocks: list[list[Any]], tangents: Sequence[Any]) -> list[Any]:
    """J v per output: the sum over inputs of block @ tangent (blocks from ``jacobian_blocks``),
    shaped as the output and detached."""
    from tinyflow import creation  # here, not at the top: creation imports tensor.py, which imports autograd

    products = []
    for out, row in zip(outputs, blocks):
        total = creation.zeros(tuple(out.shape), dtype=out.dtype)
        for j, t in zip(row, tangents):
            flat = j.reshape(out.numel(), t.numel())  # (outputs, inputs)
            total = total + (flat @ t.detach().reshape(-1).to(flat.dtype)).reshape(tuple(out.shape))
        products.append(total.detach())
    return products


def jacobian(func: Callable[..., Any], inputs: Any, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode") -> Any:
    """d func(inputs) / d inputs: for one output and one input a Tensor of shape
    ``output.shape + input.shape``; a tuple over the inputs (or outputs), or a tuple of tuples
    (outputs x inputs), where func takes (or returns) a tuple, as PyTorch. An input the output
    does not depend on gets zeros (``strict=True`` makes that an error)."""

    _no_second_order("jacobian", create_graph)
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f'jacobian: strategy must be "reverse-mode" or "forward-mode", got {strategy!r}')
    ins, in_tuple = _prepare("jacobian", inputs)
    outs, out_tuple = _as_tuple("jacobian", "outputs of func", func(*ins))
    rows = [tuple(row) for row in jacobian_blocks(outs, ins, strict=strict)]
    if not out_tuple:
        return rows[0] if in_tuple else rows[0][0]
    return tuple(row if in_tuple else row[0] for row in rows)


def vjp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """(func(inputs), v^T J): the outputs (detached) and the vector-Jacobian product. ``v`` may be
    None only for a single-element output, as PyTorch."""
    from tinyflow import creation  # here, not at the top: creation imports tensor.py, which imports autograd

    _no_second_order("vjp", create_graph)
    ins, in_tuple = _prepare("vjp", inputs)
    outs, out_tuple = _as_tuple("vjp", "outputs of func", func(*ins))
    if v is None:
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("vjp: v can be None only when func returns a single-element Tensor; pass v")
        vs = (creation.ones_like(outs[0]),)
    else:
        vs, _ = _as_tuple("vjp", "v", v)
        if len(vs) != len(outs) or any(tuple(a.shape) != tuple(b.shape) for a, b in zip(vs, outs)):
            raise RuntimeError(f"vjp: v has shapes {[tuple(a.shape) for a in vs]} but func's outputs have "
                               f"{[tuple(b.shape) for b in outs]}")
    live = [(o, w) for o, w in zip(outs, vs) if o.requires_grad]
    if live:
        grads = grad([o for o, _ in live], ins, grad_outputs=[w for _, w in live], allow_unused=True)
    else:
        grads = (None,) * len(ins)
    result = []
    for i, (g, x) in enumerate(zip(grads, ins)):
        if g is None:
            if strict:
                raise RuntimeError(f"vjp: the outputs are independent of input {i} (strict=True makes that an error)")
            g = creation.zeros_like(x)
        result.append(g)
    detached = tuple(o.detach() for o in outs)
    return (detached if out_tuple else detached[0]), (tuple(result) if in_tuple else result[0])


def jvp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """(func(inputs), J v): the outputs and the Jacobian-vector product, from the Jacobian (one
    backward pass per output element: meant for small outputs)."""
    from tinyflow import creation  # here, not at the top: creation imports tensor.py, which imports autograd

    _no_second_order("jvp", create_graph)
    ins, in_tuple = _prepare("jvp", inputs)
    if v is None:
        if len(ins) != 1 or ins[0].numel() != 1:
            raise RuntimeError("jvp: v can be None only when the input is a single-element Tensor; pass v")
        vs = (creation.ones_like(ins[0]),)
    else:
        vs, _ = _as_tuple("jvp", "v", v)
        if len(vs) != len(ins) or any(tuple(a.shape) != tuple(b.shape) for a, b in zip(vs, ins)):
            raise RuntimeError(f"jvp: v has shapes {[tuple(a.shape) for a in vs]} but the inputs have "
                               f"{[tuple(b.shape) for b in ins]}")
    outs, out_tuple = _as_tuple("jvp", "outputs of func", func(*ins))
    products = jacobian_vector_products(outs, jacobian_blocks(outs, ins, strict=strict), vs)
    detached = tuple(o.detach() for o in outs)
    return (detached if out_tuple else detached[0]), (tuple(products) if out_tuple else products[0])


def _second_order(name: str) -> Callable[..., Any]:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"autograd.functional.{name}: second derivatives need differentiable backward passes, which tinyflow "
            "does not record; use jacobian of a function that returns the gradient you compute analytically"
        )

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``torch.autograd.functional.{name}``: not available (second derivatives)."
    return fn


hessian, vhp, hvp = _second_order("hessian"), _second_order("vhp"), _second_order("hvp")
