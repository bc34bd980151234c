"""``torch.autograd.Variable``, kept for old programs (PyTorch surface).

Variables and Tensors have been one thing since PyTorch 0.4; ``tinyflow.autograd.Variable``
(tinyflow/surface.py attaches it, loaded on first use) is this function.
"""
from __future__ import annotations

from typing import Any

from tinyflow.tensor import Tensor, tensor

__all__ = ["Variable"]


def Variable(data: Any, requires_grad: bool = False, volatile: bool = False) -> Tensor:  # noqa: N802 (PyTorch's name)
    """``torch.autograd.Variable(data, requires_grad=False)``: ``data`` as a tensor (a new one
    sharing its memory when ``requires_grad=True``, as PyTorch). ``volatile`` is ignored (use no_grad)."""
    if not isinstance(data, Tensor):
        return tensor(data, requires_grad=requires_grad)
    if not requires_grad:
        return data
    out = data.detach()
    out.requires_grad = True
    return out
