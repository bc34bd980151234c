"""The model zoo: ``get_model(name, **config_overrides)`` builds a registered model (see
models/registry.py, which lists them); the architectures live one per file (alexnet.py,
resnet.py, fcn.py, lstm_lm.py).

    from tinyflow.models import get_model
    net = get_model("alexnet", num_classes=10)      # config fields as keyword overrides

A re-export module. This folder installs as ``tinyflow.models`` (see pyproject.toml), never as a
top-level ``models`` package that would shadow a user's own.
"""
from __future__ import annotations

from tinyflow.models import alexnet, fcn, lstm_lm, registry, resnet
from tinyflow.models.alexnet import AlexNet, AlexNet64Config, AlexNet224Config, AlexNet2012Config, AlexNetConfig
from tinyflow.models.fcn import FCN, FCNConfig
from tinyflow.models.lstm_lm import LSTMLM, LSTMLMConfig
from tinyflow.models.registry import MODELS, build, get_config, get_model
from tinyflow.models.resnet import (
    ResNet,
    ResNet18Config,
    ResNet20Config,
    ResNet56Config,
    ResNetCifar,
    ResNetCifarConfig,
)

__all__ = ["MODELS", "get_model", "get_config", "build", "AlexNet", "AlexNetConfig", "ResNet",
           "ResNetCifar", "ResNetCifarConfig", "FCN", "FCNConfig"]
