"""A module's backward hooks (``register_full_backward_hook``, ``register_full_backward_pre_hook``):
the plumbing PyTorch keeps in torch/utils/hooks.py (BackwardHook). Module.__call__ uses it only for
a module that has such hooks; the identities below put the hooks on the graph.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinyflow.autograd.function import Function
from tinyflow.tensor import Tensor

__all__ = ["BackwardHookFunction", "BackwardHookState"]


class BackwardHookFunction(Function):
    """The identity on some tensors; its backward hands their gradients to ``report`` (which may
    replace them): how a module's backward hooks see grad_output and grad_input."""

    @staticmethod
    def forward(ctx: Any, *arrays: Any, report: Callable[[tuple], tuple | None] | None = None) -> Any:
        ctx.report = report
        return arrays if len(arrays) > 1 else arrays[0]

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        new = ctx.report(grads)
        return tuple(grads if new is None else new)


class BackwardHookState:
    """One call's worth of backward-hook plumbing: identities on the inputs and outputs that
    requires grad, and the hooks called from their backward."""

    def __init__(self, module: Any) -> None:  # the Module being called
        self.module = module
        self.grad_output: tuple | None = None
        self.input_positions: list[int] = []
        self.n_inputs = 0

    def wrap_inputs(self, args: tuple) -> tuple[tuple, BackwardHookState]:
        self.n_inputs = len(args)
        self.input_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if not self.input_positions:
            return args, self
        wrapped = BackwardHookFunction.apply(*(args[i] for i in self.input_positions), report=self._on_grad_input)
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        args = list(args)
        for i, t in zip(self.input_positions, wrapped):
            args[i] = t
        return tuple(args), self

    def wrap_outputs(self, out: Any) -> Any:
        outs = out if isinstance(out, tuple) else (out,)
        positions = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if not positions:
            return out
        wrapped = BackwardHookFunction.apply(*(outs[i] for i in positions), report=self._on_grad_output)
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        outs = list(outs)
        for i, t in zip(positions, wrapped):
            outs[i] = t
        return tuple(outs) if isinstance(out, tuple) else outs[0]

    def _tensors(self, grads: tuple) -> tuple:
        return tuple(None if g is None else Tensor._from_array(g) for g in grads)

    def _on_grad_output(self, grads: tuple) -> tuple | None:
        grad_output = self._tensors(grads)
        for hook in list(self.module._backward_pre_hooks.values()):
            new = hook(self.module, grad_output)
            if new is not None:
                grad_output = tuple(new) if isinstance(new, (tuple, list)) else (new,)
        self.grad_output = grad_output
        if not self.input_positions:  # no input needs a gradient: the hooks run now, as PyTorch
            for hook in list(self.module._backward_hooks.values()):
                hook(self.module, (None,) * self.n_inputs, grad_output)
        return tuple(None if g is None else g.array for g in grad_output)

    def _on_grad_input(self, grads: tuple) -> tuple | None:
        full = [None] * self.n_inputs
        for i, g in zip(self.input_positions, self._tensors(grads)):
            full[i] = g
        grad_input = tuple(full)
        for hook in list(self.module._backward_hooks.values()):
            new = hook(self.module, grad_input, self.grad_output)
            if new is not None:
                grad_input = tuple(new) if isinstance(new, (tuple, list)) else (new,)
        return tuple(None if grad_input[i] is None else grad_input[i].array for i in self.input_positions)
