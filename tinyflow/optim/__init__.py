"""Optimizers, learning-rate schedulers and gradient clipping (``torch.optim``-compatible)."""

from tinyflow.optim import lr_scheduler
from tinyflow.optim.adam import Adam, AdamW
from tinyflow.optim.clip_grad import clip_grad_norm_, clip_grad_value_
from tinyflow.optim.lr_scheduler import (
    CosineAnnealingLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    LRScheduler,
    MultiStepLR,
    SequentialLR,
    StepLR,
    warmup_cosine,
)
from tinyflow.optim.optimizer import Optimizer
from tinyflow.optim.sgd import SGD

__all__ = [
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "clip_grad_norm_",
    "clip_grad_value_",
    "lr_scheduler",
    "LRScheduler",
    "LambdaLR",
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "LinearLR",
    "SequentialLR",
    "warmup_cosine",
]
