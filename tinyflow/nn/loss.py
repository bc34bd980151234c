"""Loss modules wrapping the functional losses."""
from __future__ import annotations

from typing import Any

from tinyflow.nn import functional as F
from tinyflow.nn.module import Module
from tinyflow.tensor import Tensor


class CrossEntropyLoss(Module):
    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__()
        self.weight, self.ignore_index = weight, ignore_index
        self.reduction, self.label_smoothing = reduction, label_smoothing

    def forward(self, logits: Tensor, target: Any) -> Tensor:
        return F.cross_entropy(logits, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing)


class NLLLoss(Module):
    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100, reduction: str = "mean") -> None:
        super().__init__()
        self.weight, self.ignore_index, self.reduction = weight, ignore_index, reduction

    def forward(self, log_probs: Tensor, target: Any) -> Tensor:
        return F.nll_loss(log_probs, target, self.weight, self.ignore_index, self.reduction)


class MSELoss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        return F.mse_loss(a, b, self.reduction)
