"""ResNets: the CIFAR-style ResNet-20/56 of He et al. (2016, section 4.2) used by the dlbench
study, and torchvision's ResNet-18 (same parameter names and shapes, so its weights load).

Both are stacks of the same ``BasicBlock`` (two 3x3 convs with batch norm and an identity
shortcut). The CIFAR nets have three stages of ``(depth - 2) / 6`` blocks with 16, 32 and 64
channels and, by default, the paper's parameter-free "option A" shortcut (subsample and pad
channels with zeros) where the shape changes; ResNet-18 uses 1x1-conv projections there.
"""
from __future__ import annotations

from dataclasses import dataclass

import tinyflow.nn as nn
from tinyflow.models.alexnet import check_image_input
from tinyflow.nn import init
from tinyflow.tensor import Tensor, pad

__all__ = ["ResNetCifarConfig", "ResNet20Config", "ResNet56Config", "ResNet18Config", "BasicBlock",
           "ResNetCifar", "ResNet"]


class PadShortcut(nn.Module):
    """Option A shortcut: take every ``stride``-th pixel and zero-pad the new channels."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.before = (out_channels - in_channels) // 2
        self.after = out_channels - in_channels - self.before

    def forward(self, x: Tensor) -> Tensor:
        x = x[:, :, ::self.stride, ::self.stride]  # (N, C, H/s, W/s)
        return pad(x, (0, 0, 0, 0, self.before, self.after))  # (N, C_out, H/s, W/s)


def projection(in_channels: int, out_channels: int, stride: int) -> nn.Sequential:
    """Option B shortcut (torchvision's ``downsample``): 1x1 conv with stride, then batch norm."""
    return nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                         nn.BatchNorm2d(out_channels))


class BasicBlock(nn.Module):
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), torchvision's names."""

    expansion = 1

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1,
                 downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


def _init_resnet(model: nn.Module) -> None:
    """torchvision's initialisation: kaiming-normal (fan_out) convs, unit-scale batch norms."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            init.ones_(m.weight)
            init.zeros_(m.bias)


@dataclass
class ResNetCifarConfig:
    """CIFAR-style ResNet: depth = 6n + 2 (20, 32, 44, 56, 110, ...)."""

    depth: int = 20
    num_classes: int = 10
    in_channels: int = 3
    widths: tuple[int, int, int] = (16, 32, 64)
    shortcut: str = "A"  # "A": subsample + zero-pad (the paper's CIFAR nets); "B": 1x1 projection

    def __post_init__(self) -> None:
        self.widths = tuple(self.widths)
        if self.depth < 8 or (self.depth - 2) % 6:
            raise ValueError(f"ResNetCifarConfig: depth must be 6n+2 (20, 32, 44, 56, 110), got {self.depth}")
        if self.shortcut not in ("A", "B"):
            raise ValueError(f"ResNetCifarConfig: shortcut must be 'A' or 'B', got {self.shortcut!r}")


@dataclass
class ResNet20Config(ResNetCifarConfig):
    depth: int = 20


@dataclass
class ResNet56Config(ResNetCifarConfig):
    depth: int = 56


class ResNetCifar(nn.Module):
    """conv3x3(16) -> 3 stages of n BasicBlocks (stride 1, 2, 2) -> global avg pool -> fc."""

    def __init__(self, config: ResNetCifarConfig | None = None) -> None:
        super().__init__()
        cfg = self.config = config or ResNetCifarConfig()
        n = (cfg.depth - 2) // 6
        w1 = cfg.widths[0]
        self.conv1 = nn.Conv2d(cfg.in_channels, w1, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(w1)
        self.relu = nn.ReLU()
        stages, cin = [], w1
        for i, width in enumerate(cfg.widths):
            blocks = []
            for j in range(n):
                stride = 2 if (i > 0 and j == 0) else 1
                down = None
                if stride != 1 or cin != width:
                    down = PadShortcut(cin, width, stride) if cfg.shortcut == "A" else projection(cin, width, stride)
                blocks.append(BasicBlock(cin, width, stride, down))
                cin = width
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cin, cfg.num_classes)
        _init_resnet(self)

    def forward(self, x: Tensor) -> Tensor:
        check_image_input("ResNetCifar", x, self.config.in_channels, None)
        x = self.relu(self.bn1(self.conv1(x)))  # (N, 16, H, W)
        x = self.layer3(self.layer2(self.layer1(x)))  # (N, 64, H/4, W/4)
        x = self.avgpool(x).flatten(1)  # (N, 64)
        return self.fc(x)


@dataclass
class ResNet18Config:
    """torchvision.models.resnet18 (11,689,512 parameters at 1000 classes)."""

    num_classes: int = 1000
    in_channels: int = 3
    layers: tuple[int, int, int, int] = (2, 2, 2, 2)
    widths: tuple[int, int, int, int] = (64, 128, 256, 512)


class ResNet(nn.Module):
    """torchvision's ResNet with BasicBlocks: conv7x7/2, maxpool3x3/2, four stages, avgpool, fc."""

    def __init__(self, config: ResNet18Config | None = None) -> None:
        super().__init__()
        cfg = self.config = config or ResNet18Config()
        w0 = cfg.widths[0]
        self.conv1 = nn.Conv2d(cfg.in_channels, w0, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(w0)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        cin = w0
        for i, (count, width) in enumerate(zip(cfg.layers, cfg.widths)):
            stride = 1 if i == 0 else 2
            blocks = []
            for j in range(count):
                s = stride if j == 0 else 1
                down = projection(cin, width, s) if (s != 1 or cin != width) else None
                blocks.append(BasicBlock(cin, width, s, down))
                cin = width
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cin, cfg.num_classes)
        _init_resnet(self)

    def forward(self, x: Tensor) -> Tensor:
        check_image_input("ResNet", x, self.config.in_channels, None)
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))  # (N, 64, H/4, W/4)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))  # (N, 512, H/32, W/32)
        x = self.avgpool(x).flatten(1)  # (N, 512)
        return self.fc(x)
