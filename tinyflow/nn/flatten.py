"""nn.Flatten: flatten a range of dims into one (by default all but the batch dim)."""
from __future__ import annotations

from tinyflow.nn.module import Module
from tinyflow.tensor import Tensor

__all__ = ["Flatten"]


class Flatten(Module):
    """Flatten dims start_dim..end_dim (default: all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
