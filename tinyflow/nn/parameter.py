"""Parameter: a leaf tensor that a Module registers as learnable."""
from __future__ import annotations

from typing import Any

from tinyflow.tensor import Tensor, tensor


class Parameter(Tensor):
    """A tensor that requires grad and is listed by ``Module.parameters()``."""

    def __new__(cls, data: Any = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            data = tensor([])
        src = data if isinstance(data, Tensor) else tensor(data)
        p = Parameter._from_array(src.array, device=src.device)
        p.requires_grad = requires_grad
        return p

    def __init__(self, data: Any = None, requires_grad: bool = True) -> None:
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (Parameter, (self.numpy(), self.requires_grad))
