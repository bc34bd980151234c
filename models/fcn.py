"""FCN-R of the dlbench study (Shi et al., 2016): a fully connected net 784-2048-4096-1024-10
with sigmoid activations, for MNIST-sized input. Its layers are ``layers.0``, ``layers.2`` ...
(Linear) with Sigmoid in between, the same names a ``torch.nn.Sequential`` would give."""
from __future__ import annotations

from dataclasses import dataclass

import tinyflow.nn as nn
from tinyflow.tensor import Tensor

__all__ = ["FCNConfig", "FCN"]


@dataclass
class FCNConfig:
    """Layer widths from input to output; sigmoid between every pair of Linear layers."""

    sizes: tuple[int, ...] = (784, 2048, 4096, 1024, 10)
    activation: str = "sigmoid"  # "sigmoid" (dlbench) or "relu"
    num_classes: int | None = None  # when given, replaces sizes[-1] (as every model's num_classes does)

    def __post_init__(self) -> None:
        self.sizes = tuple(self.sizes)
        if self.num_classes is None:
            self.num_classes = self.sizes[-1]
        self.sizes = self.sizes[:-1] + (int(self.num_classes),)
        if len(self.sizes) < 2:
            raise ValueError(f"FCNConfig: need at least an input and an output size, got {self.sizes}")
        if self.activation not in ("sigmoid", "relu"):
            raise ValueError(f"FCNConfig: activation must be 'sigmoid' or 'relu', got {self.activation!r}")


class FCN(nn.Module):
    """Flatten -> Linear -> act -> ... -> Linear; logits (N, sizes[-1])."""

    def __init__(self, config: FCNConfig | None = None) -> None:
        super().__init__()
        cfg = self.config = config or FCNConfig()
        act = nn.Sigmoid if cfg.activation == "sigmoid" else nn.ReLU
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(cfg.sizes[:-1], cfg.sizes[1:])):
            if i:
                layers.append(act())
            layers.append(nn.Linear(a, b))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        x = x.flatten(1) if x.ndim > 2 else x  # (N, 1, 28, 28) -> (N, 784)
        if x.ndim != 2 or x.shape[1] != self.config.sizes[0]:
            raise ValueError(f"FCN: expected inputs of {self.config.sizes[0]} features per example, "
                             f"got shape {tuple(x.shape)}")
        return self.layers(x)
