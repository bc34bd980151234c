"""Dropout (active in training mode only). Dropout1d/2d/3d (whole channels), AlphaDropout and
FeatureAlphaDropout (for SELU networks) are the PyTorch surface, in dropout_extra.py."""
from __future__ import annotations

from tinyflow._lazy_names import attach, by_module
from tinyflow.nn import functional as F
from tinyflow.nn.modules.module import Module
from tinyflow.tensor import Tensor

__all__ = ["Dropout"]


class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"{type(self).__name__}: dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Inverted dropout: zero each element with probability p in training, scale by 1/(1-p)."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.dropout(input, self.p, self.training)


# PyTorch's module path names the rest too (torch.nn.modules.dropout.<Name>): they live in dropout_extra.py,
# the PyTorch surface, and load from there the first time one of them is asked for here.
attach(__name__, by_module({"tinyflow.nn.modules.dropout_extra": (
    "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
)}, submodules=False))  # and in __all__, as PyTorch lists them
