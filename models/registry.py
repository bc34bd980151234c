"""The model registry: each name maps to (config dataclass, builder); ``get_model`` builds one.

    from tinyflow.models import get_model
    net = get_model("alexnet", num_classes=10)      # config fields as keyword overrides

A builder takes a config instance and returns a Module. Presets of one architecture are
config subclasses with other defaults (``AlexNet64Config``, ``AlexNet224Config``, ...).
To add a model to the zoo, add one entry to ``_ENTRIES``: the module that defines it, its config
class and its builder, by name (a program adds one at run time as ``MODELS[name] = (config, builder)``). A model's module is imported the first time its entry is looked up, so
``get_model("alexnet")`` reads models/alexnet.py and no other model file.
"""
from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tinyflow.nn import Module

__all__ = ["MODELS", "ModelRegistry", "get_model", "get_config", "build"]

# name -> (module, config class, builder)
_ENTRIES: dict[str, tuple[str, str, str]] = {
    "alexnet": ("tinyflow.models.alexnet", "AlexNet64Config", "AlexNet"),  # 64x64 input, the `tinyflow train` default
    "alexnet-224": ("tinyflow.models.alexnet", "AlexNet224Config", "AlexNet"),  # torchvision.models.alexnet
    "alexnet-2012": ("tinyflow.models.alexnet", "AlexNet2012Config", "AlexNet"),  # two towers (groups=2), LRN, 224x224
    "resnet20": ("tinyflow.models.resnet", "ResNet20Config", "ResNetCifar"),
    "resnet56": ("tinyflow.models.resnet", "ResNet56Config", "ResNetCifar"),
    "resnet18": ("tinyflow.models.resnet", "ResNet18Config", "ResNet"),  # torchvision.models.resnet18
    "fcn-r": ("tinyflow.models.fcn", "FCNConfig", "FCN"),  # dlbench's FCN-R, 784-2048-4096-1024-10 sigmoid
    "lstm-lm": ("tinyflow.models.lstm_lm", "LSTMLMConfig", "LSTMLM"),  # dlbench's LSTM: 2 x 256, seq 32
}


class ModelRegistry(MutableMapping[str, tuple[type, Callable[[Any], "Module"]]]):
    """A mapping name -> (config class, builder) whose zoo entries are imported on lookup:
    iterating, ``len`` and ``in`` read only the names. A program adds its own model as
    ``MODELS["mine"] = (MyConfig, MyModel)``."""

    def __init__(self, entries: Mapping[str, tuple[str, str, str]]) -> None:
        self._entries: dict[str, Any] = dict(entries)  # (module, config, builder) names, or the pair itself

    def __getitem__(self, name: str) -> tuple[type, Callable[[Any], Module]]:
        entry = self._entries[name]
        if isinstance(entry[0], type):  # added by a program: the pair itself
            return entry
        module_name, config_name, builder_name = entry
        module = importlib.import_module(module_name)
        return getattr(module, config_name), getattr(module, builder_name)

    def __setitem__(self, name: str, value: tuple[type, Callable[[Any], Module]]) -> None:
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
