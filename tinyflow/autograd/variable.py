"""``torch.autograd.Variable``, kept for old programs.

Variables and Tensors have been one thing since PyTorch 0.4; ``tinyflow.autograd.Variable`` is
this function.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tinyflow.tensor import Tensor

__all__ = ["Variable"]


def Variable(data: Any, requires_grad: bool = False, volatile: bool = False) -> Tensor:  # noqa: N802 (PyTorch's name)
    """``torch.autograd.Variable(data, requires_grad=False)``: ``data`` as a tensor (a new one
    sharing its memory when ``requires_grad=True``, as PyTorch). ``volatile`` is ignored (use no_grad)."""
    from tinyflow.tensor import Tensor, tensor  # tensor.py imports this package: the circle's one late import
    if not isinstance(data, Tensor):
        return tensor(data, requires_grad=requires_grad)
    if not requires_grad:
        return data
    out = data.detach()
    out.requires_grad = True
    return out
