"""Optimizers, learning-rate schedulers and gradient clipping (``torch.optim``-compatible).

A re-export module: the Optimizer base and SGD load with it; every other optimizer, the
schedulers (``optim.lr_scheduler``), ``optim.swa_utils`` and gradient clipping load on first use
of one of their names (``tinyflow._lazy_names.attach``, below), so a training step reads only the
optimizer it runs.
"""
from __future__ import annotations

from tinyflow._lazy_names import attach, by_module
from tinyflow.optim.optimizer import Optimizer
from tinyflow.optim.sgd import SGD

# module -> the names it defines, imported on first use (a module's own name, e.g.
# "lr_scheduler", gives the module).
_LAZY = {
    "tinyflow.optim.adadelta": ("Adadelta",),
    "tinyflow.optim.adagrad": ("Adagrad",),
    "tinyflow.optim.adam": ("Adam", "AdamW"),
    "tinyflow.optim.adamax": ("Adamax", "NAdam", "RAdam"),
    "tinyflow.optim.clip_grad": ("clip_grad_norm_", "clip_grad_value_"),
    "tinyflow.optim.lbfgs": ("LBFGS",),
    "tinyflow.optim.lr_scheduler": (
        "LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
        "ExponentialLR", "PolynomialLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "CyclicLR", "OneCycleLR",
        "ReduceLROnPlateau", "SequentialLR", "ChainedScheduler", "warmup_cosine",
    ),
    "tinyflow.optim.rmsprop": ("RMSprop",),
    "tinyflow.optim.rprop": ("ASGD", "Rprop"),
    "tinyflow.optim.swa_utils": (),
}

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

attach(__name__, by_module(_LAZY), export=False)  # each name loads its file on first use
