"""AlexNet: torchvision's single-tower layout, the 2012 paper's two-tower layout, a 64x64 preset.

* ``alexnet-224`` is ``torchvision.models.alexnet`` layer for layer, with its parameter names
  (``features.0.weight`` ... ``classifier.6.bias``) and shapes, so its weights load.
* ``alexnet-2012`` is the network of Krizhevsky et al. (2012) for 224x224 input: the two GPU towers
  as ``groups=2`` on conv2, conv4 and conv5 (conv3 sees both), LRN after conv1 and conv2.
* ``alexnet`` (the default for ``tinyflow train``) keeps the same five conv layers and three
  fully connected ones for 64x64 ImageNet subsets: conv1 is 5x5 stride 2 (64 -> 32 -> pool 15),
  so that the feature map stays large enough for three overlapping 3x3/2 poolings (15 -> 7 -> 3),
  and the classifier is 2048 wide, sized for a few hundred classes rather than 1000.
"""
from __future__ import annotations

from dataclasses import dataclass

import tinyflow.nn as nn
from tinyflow.kernels.conv import conv_output_size
from tinyflow.tensor import Tensor

__all__ = ["AlexNetConfig", "AlexNet64Config", "AlexNet224Config", "AlexNet2012Config", "AlexNet"]


@dataclass
class AlexNetConfig:
    """Every knob of the AlexNet family; the presets below only change defaults."""

    num_classes: int = 1000
    image_size: int = 224  # expected input height and width
    in_channels: int = 3
    channels: tuple[int, int, int, int, int] = (64, 192, 384, 256, 256)
    groups: tuple[int, int, int, int, int] = (1, 1, 1, 1, 1)  # per conv layer; 2 = two towers
    conv1_kernel: int = 11
    conv1_stride: int = 4
    conv1_padding: int = 2
    lrn: bool = False  # LocalResponseNorm after the ReLU of conv1 and conv2 (2012 paper)
    lrn_size: int = 5
    lrn_alpha: float = 1e-4
    lrn_beta: float = 0.75
    lrn_k: float = 2.0
    pool_size: int = 6  # AdaptiveAvgPool2d output side before the classifier
    hidden: int = 4096
    dropout: float = 0.5

    def __post_init__(self) -> None:
        self.channels, self.groups = tuple(self.channels), tuple(self.groups)
        if len(self.channels) != 5 or len(self.groups) != 5:
            raise ValueError(f"AlexNetConfig: channels and groups need 5 entries, got {self.channels}, {self.groups}")
        cin = (self.in_channels, *self.channels[:4])
        for i, (ci, co, g) in enumerate(zip(cin, self.channels, self.groups)):
            if ci % g or co % g:
                raise ValueError(f"AlexNetConfig: conv{i + 1} has {ci} -> {co} channels, not divisible by groups={g}")
        if self.feature_size() < 1:
            raise ValueError(f"AlexNetConfig: image_size={self.image_size} is too small for this network "
                             "(its three 3x3/2 max pools leave no pixel)")

    def feature_size(self) -> int:
        """Side of the last feature map for an ``image_size`` input (before adaptive pooling)."""
        s = conv_output_size(self.image_size, self.conv1_kernel, self.conv1_stride, self.conv1_padding)
        s = conv_output_size(s, 3, 2, 0)  # pool1
        s = conv_output_size(s, 3, 2, 0)  # conv2 keeps the size; pool2
        return conv_output_size(s, 3, 2, 0)  # conv3-5 keep it; pool5


@dataclass
class AlexNet64Config(AlexNetConfig):
    """The 64x64 preset (the ``tinyflow train alexnet`` default)."""

    num_classes: int = 200
    image_size: int = 64
    conv1_kernel: int = 5
    conv1_stride: int = 2
    conv1_padding: int = 2
    pool_size: int = 3
    hidden: int = 2048


@dataclass
class AlexNet224Config(AlexNetConfig):
    """torchvision.models.alexnet (61,100,840 parameters at 1000 classes)."""


@dataclass
class AlexNet2012Config(AlexNetConfig):
    """The 2012 paper's two-tower network with LRN, for 224x224 input."""

    channels: tuple[int, int, int, int, int] = (96, 256, 384, 384, 256)
    groups: tuple[int, int, int, int, int] = (1, 2, 1, 2, 2)
    lrn: bool = True


class AlexNet(nn.Module):
    """features (5 convs, 3 overlapping max pools) -> adaptive avg pool -> classifier (3 FCs); without
    LRN the submodule indices are torchvision's (``features.0`` is conv1), so its state dicts load."""

    def __init__(self, config: AlexNetConfig | None = None) -> None:
        super().__init__()
        cfg = self.config = config or AlexNetConfig()
        c1, c2, c3, c4, c5 = cfg.channels
        g1, g2, g3, g4, g5 = cfg.groups

        def lrn() -> list[nn.Module]:
            return [nn.LocalResponseNorm(cfg.lrn_size, cfg.lrn_alpha, cfg.lrn_beta, cfg.lrn_k)] if cfg.lrn else []

        self.features = nn.Sequential(
            nn.Conv2d(cfg.in_channels, c1, cfg.conv1_kernel, stride=cfg.conv1_stride,
                      padding=cfg.conv1_padding, groups=g1),
            nn.ReLU(),
            *lrn(),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(c1, c2, kernel_size=5, padding=2, groups=g2),
            nn.ReLU(),
            *lrn(),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(c2, c3, kernel_size=3, padding=1, groups=g3),
            nn.ReLU(),
            nn.Conv2d(c3, c4, kernel_size=3, padding=1, groups=g4),
            nn.ReLU(),
            nn.Conv2d(c4, c5, kernel_size=3, padding=1, groups=g5),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((cfg.pool_size, cfg.pool_size))
        self.classifier = nn.Sequential(
            nn.Dropout(p=cfg.dropout),
            nn.Linear(c5 * cfg.pool_size * cfg.pool_size, cfg.hidden),
            nn.ReLU(),
            nn.Dropout(p=cfg.dropout),
            nn.Linear(cfg.hidden, cfg.hidden),
            nn.ReLU(),
            nn.Linear(cfg.hidden, cfg.num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        check_image_input("AlexNet", x, self.config.in_channels, self.config.image_size)
        x = self.features(x)  # (N, C5, S, S)
        x = self.avgpool(x)  # (N, C5, P, P)
        x = x.flatten(1)  # (N, C5*P*P)
        return self.classifier(x)  # (N, num_classes)


def check_image_input(model: str, x: Tensor, channels: int, image_size: int | None) -> None:
    """Raise a ValueError naming the model, the expected and the actual image shape."""
    if x.ndim != 4:
        raise ValueError(f"{model}: expected a batch of images (N, C, H, W), got shape {tuple(x.shape)}")
    if x.shape[1] != channels:
        raise ValueError(f"{model}: expected images with {channels} channels, got shape {tuple(x.shape)} "
                         f"({x.shape[1]} channels); convert grayscale/RGBA images to RGB")
    if image_size is not None and tuple(x.shape[2:]) != (image_size, image_size):
        raise ValueError(f"{model}: this configuration expects {image_size}x{image_size} images, got "
                         f"{x.shape[2]}x{x.shape[3]} (input shape {tuple(x.shape)}); resize the images "
                         f"or build the model with image_size={x.shape[2]}")
