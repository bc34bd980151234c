"""Loss modules wrapping the functional losses (CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, BCELoss,
BCEWithLogitsLoss; the rest of PyTorch's set is in loss_extra.py), with PyTorch's constructor signatures: the
deprecated ``size_average`` / ``reduce`` map to ``reduction`` as in PyTorch, and ``weight`` /
``pos_weight`` are buffers (they move with ``.to()`` and appear in the state dict)."""
from __future__ import annotations

from typing import Any

from tinyflow._lazy_names import attach, by_module
from tinyflow.nn import functional as F
from tinyflow.nn.functional.loss import _reduction
from tinyflow.nn.modules.module import Module
from tinyflow.tensor import Tensor

__all__ = [
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCELoss", "BCEWithLogitsLoss",
]


class _Loss(Module):
    def __init__(self, size_average: bool | None = None, reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = _reduction(type(self).__name__, size_average, reduce, reduction)
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None, ignore_index: int = -100,
                 reduce: bool | None = None, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None, ignore_index: int = -100,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(_Loss):
    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.l1_loss(input, target, reduction=self.reduction)


class BCELoss(_WeightedLoss):
    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", pos_weight: Tensor | None = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


# PyTorch's module path names the rest too (torch.nn.modules.loss.<Name>): they live in loss_extra.py,
# the PyTorch surface, and load from there the first time one of them is asked for here.
attach(__name__, by_module({"tinyflow.nn.modules.loss_extra": (
    "SmoothL1Loss", "HuberLoss", "KLDivLoss", "SoftMarginLoss", "MarginRankingLoss",
    "HingeEmbeddingLoss", "CosineEmbeddingLoss", "TripletMarginLoss", "PoissonNLLLoss",
    "GaussianNLLLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss", "MultiLabelMarginLoss",
    "NLLLoss2d", "TripletMarginWithDistanceLoss",
)}, submodules=False))  # and in __all__, as PyTorch lists them
