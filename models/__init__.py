"""The model zoo: ``get_model(name, **config_overrides)`` builds a registered model (see
models/registry.py, which lists them); the architectures live one per file (alexnet.py,
resnet.py, fcn.py, lstm_lm.py).

    from tinyflow.models import get_model
    net = get_model("alexnet", num_classes=10)      # config fields as keyword overrides

A re-export module: the registry loads with it, each architecture's file on first use of one of
its names (``tinyflow._lazy_names.attach``, below), so building AlexNet reads no other model's file.
This folder installs as ``tinyflow.models`` (see pyproject.toml), never as a top-level
``models`` package that would shadow a user's own.
"""
from __future__ import annotations

from tinyflow._lazy_names import attach, by_module
from tinyflow.models.registry import MODELS, build, get_config, get_model

# module -> the names it defines, imported on first use (a module's own name, e.g. "alexnet",
# gives the module).
_LAZY = {
    "tinyflow.models.alexnet": ("AlexNet", "AlexNetConfig", "AlexNet64Config", "AlexNet224Config",
                                "AlexNet2012Config"),
    "tinyflow.models.fcn": ("FCN", "FCNConfig"),
    "tinyflow.models.lstm_lm": ("LSTMLM", "LSTMLMConfig"),
    "tinyflow.models.resnet": ("ResNet", "ResNet18Config", "ResNet20Config", "ResNet56Config", "ResNetCifar",
                               "ResNetCifarConfig"),
}

__all__ = ["MODELS", "get_model", "get_config", "build", "AlexNet", "AlexNetConfig", "ResNet",
           "ResNetCifar", "ResNetCifarConfig", "FCN", "FCNConfig"]

attach(__name__, by_module(_LAZY), export=False)  # each name loads its file on first use
