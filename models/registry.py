"""The model registry: each name maps to (config dataclass, builder); ``get_model`` builds one.

    from tinyflow.models import get_model
    net = get_model("alexnet", num_classes=10)      # config fields as keyword overrides

A builder takes a config instance and returns a Module. Presets of one architecture are
config subclasses with other defaults (``AlexNet64Config``, ``AlexNet224Config``, ...).
To add a model to the zoo, add one entry to ``_ENTRIES``: its config class and its builder (a
program adds one at run time as ``MODELS[name] = (config, builder)``).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

from tinyflow.models.alexnet import AlexNet, AlexNet64Config, AlexNet224Config, AlexNet2012Config
from tinyflow.models.fcn import FCN, FCNConfig
from tinyflow.models.lstm_lm import LSTMLM, LSTMLMConfig
from tinyflow.models.resnet import ResNet, ResNet18Config, ResNet20Config, ResNet56Config, ResNetCifar
from tinyflow.nn import Module

__all__ = ["MODELS", "ModelRegistry", "get_model", "get_config", "build"]

Entry = tuple[type, Callable[[Any], Module]]  # (config class, builder)

_ENTRIES: dict[str, Entry] = {
    "alexnet": (AlexNet64Config, AlexNet),  # 64x64 input, the `tinyflow train` default
    "alexnet-224": (AlexNet224Config, AlexNet),  # torchvision.models.alexnet
    "alexnet-2012": (AlexNet2012Config, AlexNet),  # two towers (groups=2), LRN, 224x224
    "resnet20": (ResNet20Config, ResNetCifar),
    "resnet56": (ResNet56Config, ResNetCifar),
    "resnet18": (ResNet18Config, ResNet),  # torchvision.models.resnet18
    "fcn-r": (FCNConfig, FCN),  # dlbench's FCN-R, 784-2048-4096-1024-10 sigmoid
    "lstm-lm": (LSTMLMConfig, LSTMLM),  # dlbench's LSTM: 2 x 256, seq 32
}


class ModelRegistry(MutableMapping[str, Entry]):
    """A mapping name -> (config class, builder) that checks what a program adds:
    ``MODELS["mine"] = (MyConfig, MyModel)``."""

    def __init__(self, entries: Mapping[str, Entry]) -> None:
        self._entries: dict[str, Entry] = {}
        for name, entry in entries.items():
            self[name] = entry

    def __getitem__(self, name: str) -> Entry:
        return self._entries[name]

    def __setitem__(self, name: str, value: Entry) -> None:
        config_cls, builder = value
        if not isinstance(config_cls, type) or not callable(builder):
            raise TypeError(f"MODELS[{name!r}]: expected (config class, builder), got {value!r}")
        self._entries[name] = (config_cls, builder)

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"ModelRegistry({sorted(self._entries)})"


MODELS = ModelRegistry(_ENTRIES)


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
