"""einsum: a product of tensors over named indices (``torch.einsum``), an op of the PyTorch surface."""
from __future__ import annotations

from typing import Any

from tinyflow.autograd.engine import sum_to_shape

from tinyflow.autograd.function import Context, Function
from tinyflow.errors import ShapeError

__all__ = ["Einsum", "parse_einsum"]


def parse_einsum(equation: str, ndims: list[int]) -> tuple[list[str], str]:
    """The subscripts of each operand and of the output, with '...' spelled out as letters the
    equation does not use (right-aligned, so ellipsis dims broadcast as in PyTorch) and the
    implicit output (no '->': the ellipsis dims, then the letters used once, sorted) made explicit."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise ShapeError(f"einsum: equation {equation!r} names {len(terms)} operands but {len(ndims)} were given")
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in eq]
    widths = []
    for term, nd in zip(terms, ndims):
        letters = len(term.replace("...", ""))
        if term.count("...") > 1:
            raise ShapeError(f"einsum: subscripts {term!r} of {equation!r} hold more than one ellipsis")
        if "..." in term:
            widths.append(nd - letters)
        elif letters != nd:
            raise ShapeError(f"einsum: subscripts {term!r} name {letters} dims but the operand has {nd}")
        else:
            widths.append(0)
        if widths[-1] < 0:
            raise ShapeError(f"einsum: subscripts {term!r} name more dims than the operand's {nd}")
    width = max(widths, default=0)
    ellipsis = "".join(spare[:width])
    inputs = [t.replace("...", ellipsis[width - w:]) for t, w in zip(terms, widths)]
    for t in inputs:
        if not t.isalpha() and t:
            raise ShapeError(f"einsum: subscripts must be letters, got {equation!r}")
    if arrow:
        output = rhs.replace("...", ellipsis)
    else:
        used = "".join(inputs)
        output = ellipsis + "".join(sorted(c for c in set(used) if used.count(c) == 1 and c not in ellipsis))
    for c in output:
        if c not in "".join(inputs):
            raise ShapeError(f"einsum: output subscript {c!r} of {equation!r} appears in no operand")
    if len(set(output)) != len(output):
        raise ShapeError(f"einsum: output subscripts of {equation!r} repeat a letter")
    return inputs, output


class Einsum(Function):
    """einsum over the operands; each operand's gradient is the einsum of the output gradient with
    the other operands, spread over the dims only that operand sums and put back on its diagonal
    where its subscripts repeat a letter (``ii->i``)."""

    @staticmethod
    def forward(ctx: Context, equation: str, *operands: Any) -> Any:
        inputs, output = parse_einsum(equation, [o.ndim for o in operands])
        sizes: dict[str, int] = {}
        for term, o in zip(inputs, operands):
            for c, n in zip(term, o.shape):
                if sizes.get(c, 1) not in (1, n) and n != 1:
                    raise ShapeError(
                        f"einsum: subscript {c!r} of {equation!r} has size {sizes[c]} in one operand and {n} in "
                        f"another (operand shapes {[tuple(o.shape) for o in operands]})"
                    )
                sizes[c] = max(sizes.get(c, 1), n)
        ctx.save_for_backward(*operands)
        ctx.terms, ctx.output, ctx.sizes = inputs, output, sizes
        return ctx.xp.einsum(f"{','.join(inputs)}->{output}", *operands)

    @staticmethod
    def backward(ctx: Context, g: Any) -> tuple:
        xp = ctx.xp
        operands = ctx.saved_tensors
        grads: list[Any] = [None]
        for k, (term, op) in enumerate(zip(ctx.terms, operands)):
            if not ctx.needs_input_grad[k + 1]:
                grads.append(None)
                continue
            others = [(t, o) for j, (t, o) in enumerate(zip(ctx.terms, operands)) if j != k]
            reachable = set(ctx.output).union(*(set(t) for t, _ in others))
            distinct = "".join(dict.fromkeys(term))  # term's letters, each once, in order
            kept = "".join(c for c in distinct if c in reachable)
            spec = ",".join([ctx.output] + [t for t, _ in others]) + "->" + kept
            grad = xp.einsum(spec, g, *(o for _, o in others))
            # letters only this operand sums over: the gradient is the same along them
            for axis, c in enumerate(distinct):
                if c not in reachable:
                    grad = xp.expand_dims(grad, axis)
            grad = xp.broadcast_to(grad, tuple(ctx.sizes[c] for c in distinct))
            if len(distinct) == len(term):
                grad = sum_to_shape(grad, op.shape)
            else:  # a repeated letter: the gradient lives on that diagonal of the operand
                full = xp.zeros(op.shape, dtype=g.dtype)
                grids = xp.ix_(*(xp.arange(ctx.sizes[c]) for c in distinct)) if distinct else ()
                full[tuple(grids[distinct.index(c)] for c in term)] = grad
                grad = full
            grads.append(grad)
        return tuple(grads)
