"""Model registry: each name maps to (config dataclass, builder); ``get_model`` builds one.

    from tinyflow.models import get_model
    net = get_model("alexnet", num_classes=10)      # config fields as keyword overrides

A builder takes a config instance and returns a Module. Presets of one architecture are
config subclasses with other defaults (``AlexNet64Config``, ``AlexNet224Config``, ...).
To add a model, add one entry to ``MODELS``. This folder installs as ``tinyflow.models`` (see
pyproject.toml), never as a top-level ``models`` package that would shadow a user's own.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tinyflow.models.alexnet import AlexNet, AlexNet64Config, AlexNet224Config, AlexNet2012Config, AlexNetConfig
from tinyflow.models.fcn import FCN, FCNConfig
from tinyflow.models.lstm_lm import LSTMLM, LSTMLMConfig
from tinyflow.models.resnet import (
    ResNet,
    ResNet18Config,
    ResNet20Config,
    ResNet56Config,
    ResNetCifar,
    ResNetCifarConfig,
)
from tinyflow.nn import Module

__all__ = ["MODELS", "get_model", "get_config", "build", "AlexNet", "AlexNetConfig", "ResNet",
           "ResNetCifar", "ResNetCifarConfig", "FCN", "FCNConfig"]

MODELS: dict[str, tuple[type, Callable[[Any], Module]]] = {
    "alexnet": (AlexNet64Config, AlexNet),  # 64x64 input, the `tinyflow train` default
    "alexnet-224": (AlexNet224Config, AlexNet),  # torchvision.models.alexnet
    "alexnet-2012": (AlexNet2012Config, AlexNet),  # two towers (groups=2) with LRN, 224x224
    "resnet20": (ResNet20Config, ResNetCifar),
    "resnet56": (ResNet56Config, ResNetCifar),
    "resnet18": (ResNet18Config, ResNet),  # torchvision.models.resnet18
    "fcn-r": (FCNConfig, FCN),  # dlbench's FCN-R, 784-2048-4096-1024-10 sigmoid
    "lstm-lm": (LSTMLMConfig, LSTMLM),  # dlbench's LSTM: 2 x 256, seq 32 (seq_len=64 for the other preset)
}


def get_config(name: str, **overrides: Any) -> Any:
    """The preset config of ``name`` with ``overrides`` applied (unknown fields are an error)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(sorted(MODELS))}")
    config_cls, _ = MODELS[name]
    fields = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"model {name!r} has no config field(s) {unknown}; its fields are: "
                         f"{', '.join(sorted(fields))}")
    return config_cls(**overrides)


def build(name: str, config: Any) -> Module:
    """Build model ``name`` from a config instance (e.g. one restored from a checkpoint)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(sorted(MODELS))}")
    return MODELS[name][1](config)


def get_model(name: str, **overrides: Any) -> Module:
    """Build the model registered as ``name``, with config fields overridden by keyword."""
    return build(name, get_config(name, **overrides))
