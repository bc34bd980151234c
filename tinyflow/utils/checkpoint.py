"""``torch.utils.checkpoint``: trade compute for memory by recomputing a block in backward.

``checkpoint(block, x)`` runs ``block`` without recording a graph, so none of its activations
are kept; backward runs it again with the graph recorded (from the same random state, so dropout
draws the same masks), backpropagates through that, and hands on the gradient of ``x``. The
parameters inside ``block`` get their gradients during that inner backward, as with PyTorch's
reentrant checkpoint. Where no tensor argument requires grad, the block simply runs as usual
(recomputing would leave the parameters without gradients).

    from tinyflow.utils.checkpoint import checkpoint
    h = checkpoint(self.layer1, x, use_reentrant=False)
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinyflow.autograd.engine import run_backward

from tinyflow.autograd.function import Context, Function

from tinyflow.autograd.grad_mode import enable_grad, no_grad

__all__ = ["checkpoint", "checkpoint_sequential"]


def checkpoint(function: Callable[..., Any], *args: Any, use_reentrant: bool | None = None,
               preserve_rng_state: bool = True, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)``, its activations recomputed in backward instead of kept.
    ``function`` returns a Tensor or a tuple of Tensors; ``use_reentrant`` is accepted (both of
    PyTorch's modes give the same gradients here)."""
    from tinyflow.tensor import Tensor

    if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        return function(*args, **kwargs)
    kinds = tuple((a.device, a.requires_grad) if isinstance(a, Tensor) else None for a in args)
    return CheckpointFunction.apply(*args, function=function, kinds=kinds, kwargs=kwargs,
                                    preserve_rng_state=preserve_rng_state)


def checkpoint_sequential(functions: Any, segments: int, input: Any, use_reentrant: bool | None = None,  # noqa: A002
                          **kwargs: Any) -> Any:
    """Run a Sequential (or a list of modules) in ``segments`` checkpointed pieces; the last
    piece runs normally, as in PyTorch."""
    modules = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be >= 1, got {segments}")
    size = -(-len(modules) // segments)

    def run(chunk: list[Any]) -> Callable[[Any], Any]:
        def forward(x: Any) -> Any:
            for m in chunk:
                x = m(x)
            return x
        return forward

    pieces = [modules[k:k + size] for k in range(0, len(modules), size)]
    for chunk in pieces[:-1]:
        input = checkpoint(run(chunk), input, use_reentrant=use_reentrant, **kwargs)  # noqa: A001
    return run(pieces[-1])(input) if pieces else input


class CheckpointFunction(Function):
    """The op behind ``checkpoint``: forward without a graph, backward by recomputing."""

    @staticmethod
    def forward(ctx: Context, *arrays: Any, function: Callable[..., Any], kinds: tuple, kwargs: dict,
                preserve_rng_state: bool) -> Any:
        from tinyflow import random as tf_random

        ctx.function, ctx.kinds, ctx.kwargs, ctx.arrays = function, kinds, kwargs, arrays
        ctx.rng_state = tf_random.get_rng_state() if preserve_rng_state else None
        with no_grad():
            out = function(*_tensors(arrays, kinds, requires_grad=False), **kwargs)
        ctx.single = not isinstance(out, tuple)
        outs = (out,) if ctx.single else out
        return outs[0].array if ctx.single else tuple(o.array for o in outs)

    @staticmethod
    def backward(ctx: Context, *grads: Any) -> Any:
        from tinyflow import random as tf_random

        inputs = _tensors(ctx.arrays, ctx.kinds, requires_grad=True)
        now = tf_random.get_rng_state()
        if ctx.rng_state is not None:
            tf_random.set_rng_state(ctx.rng_state)  # the forward's dropout masks again
        try:
            with enable_grad():
                out = ctx.function(*inputs, **ctx.kwargs)
        finally:
            tf_random.set_rng_state(now)
        outs = (out,) if ctx.single else out
        pairs = [(o, g) for o, g in zip(outs, grads) if o.requires_grad]
        if pairs:
            run_backward([o for o, _ in pairs], [g for _, g in pairs])
        return tuple(None if kind is None or not kind[1] or t.grad is None else t.grad.array
                     for t, kind in zip(inputs, ctx.kinds))


def _tensors(arrays: tuple, kinds: tuple, requires_grad: bool) -> list[Any]:
    """The arguments again: Tensors (fresh leaves over the saved arrays) where they were Tensors."""
    from tinyflow.tensor import Tensor

    return [a if kind is None else Tensor._from_array(a, device=kind[0], requires_grad=requires_grad and kind[1])
            for a, kind in zip(arrays, kinds)]
