"""Optimizers, learning-rate schedulers and gradient clipping (``torch.optim``-compatible).

A re-export module, as torch/optim/__init__.py: each optimizer in its own file (optimizer.py holds
the base), the schedulers in ``optim.lr_scheduler``, weight averaging in ``optim.swa_utils``.
"""
from __future__ import annotations

from tinyflow.optim import lr_scheduler, swa_utils
from tinyflow.optim.adadelta import Adadelta
from tinyflow.optim.adagrad import Adagrad
from tinyflow.optim.adam import Adam, AdamW
from tinyflow.optim.adamax import Adamax, NAdam, RAdam
from tinyflow.optim.clip_grad import clip_grad_norm_, clip_grad_value_
from tinyflow.optim.lbfgs import LBFGS
from tinyflow.optim.lr_scheduler import (
    ChainedScheduler,
    ConstantLR,
    CosineAnnealingLR,
    CosineAnnealingWarmRestarts,
    CyclicLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    LRScheduler,
    MultiplicativeLR,
    MultiStepLR,
    OneCycleLR,
    PolynomialLR,
    ReduceLROnPlateau,
    SequentialLR,
    StepLR,
    warmup_cosine,
)
from tinyflow.optim.optimizer import Optimizer
from tinyflow.optim.rmsprop import RMSprop
from tinyflow.optim.rprop import ASGD, Rprop
from tinyflow.optim.sgd import SGD

__all__ = [
    "swa_utils",
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "Adadelta",
    "Adagrad",
    "RMSprop",
    "LBFGS",
    "Adamax",
    "NAdam",
    "RAdam",
    "Rprop",
    "ASGD",
    "clip_grad_norm_",
    "clip_grad_value_",
    "lr_scheduler",
    "LRScheduler",
    "LambdaLR",
    "MultiplicativeLR",
    "StepLR",
    "MultiStepLR",
    "ConstantLR",
    "LinearLR",
    "ExponentialLR",
    "PolynomialLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "CyclicLR",
    "OneCycleLR",
    "ReduceLROnPlateau",
    "SequentialLR",
    "ChainedScheduler",
    "warmup_cosine",
]
