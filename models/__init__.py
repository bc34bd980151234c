"""The model zoo: ``get_model(name, **config_overrides)`` builds a registered model (see
models/registry.py, which lists them); the architectures live one per file (alexnet.py,
resnet.py, fcn.py, lstm_lm.py).

    from tinyflow.models import get_model
    net = get_model("alexnet", num_classes=10)      # config fields as keyword overrides

A re-export module: the registry loads with it, each architecture's file on first use of one of
its names (PEP 562 ``__getattr__`` below), so building AlexNet reads no other model's file.
This folder installs as ``tinyflow.models`` (see pyproject.toml), never as a top-level
``models`` package that would shadow a user's own.
"""
from __future__ import annotations

import importlib
from typing import Any

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


def __getattr__(name: str) -> Any:
    """A model class, config or file: imported on first use (PEP 562)."""
    for module, names in _LAZY.items():
        if name in names:
            value = getattr(importlib.import_module(module), name)
            break
        if module == f"{__name__}.{name}":
            value = importlib.import_module(module)
            break
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | {n for names in _LAZY.values() for n in names})
