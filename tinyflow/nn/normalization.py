"""nn.LocalResponseNorm (AlexNet 2012): cross-channel normalisation, no parameters."""
from __future__ import annotations

from tinyflow.nn import functional as F
from tinyflow.nn.module import Module
from tinyflow.tensor import Tensor

__all__ = ["LocalResponseNorm"]


class LocalResponseNorm(Module):
    """Normalise each activation by its ``size`` neighbouring channels (no parameters)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, x: Tensor) -> Tensor:
        return F.local_response_norm(x, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
