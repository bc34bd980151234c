"""PyTorch twins of the model zoo: the same layers, shapes and parameter names.

``torch_model(name, config)`` builds the torch.nn model that matches ``tinyflow.models.get_model(name)``
built from the same config, so a tinyflow state dict loads into it (``load_tinyflow_state``)
and both compute the same function. Used by `tinyflow bench train --compare torch`,
bench/gpu/bench_gpu.py and the tests that check the twins against tinyflow.
PyTorch is imported only when a twin is built.
"""
from __future__ import annotations

from typing import Any


def torch_model(name: str, config: Any) -> Any:
    """The torch.nn twin of zoo model ``name`` built from ``config`` (its config dataclass).

    The zoo is imported here (on first use), not through tinyflow.bench.workloads: workloads.py
    builds its PyTorch steps on this file, so this file does not import it."""
    import tinyflow.models as zoo

    builder = zoo.MODELS[name][1].__name__
    twins = {"AlexNet": torch_alexnet, "ResNetCifar": torch_resnet_cifar, "ResNet": torch_resnet,
             "FCN": torch_fcn, "LSTMLM": torch_lstm_lm}
    if builder not in twins:
        raise ValueError(f"no PyTorch twin of {name!r} ({builder}); twins exist for {', '.join(twins)}")
    return twins[builder](config)


def torch_alexnet(cfg: Any) -> Any:
    """tinyflow.models.alexnet.AlexNet: features (5 convs, LRN where configured, 3 max pools), avgpool, classifier."""
    import torch.nn as tnn

    c1, c2, c3, c4, c5 = cfg.channels
    g1, g2, g3, g4, g5 = cfg.groups

    def lrn() -> list:
        return [tnn.LocalResponseNorm(cfg.lrn_size, cfg.lrn_alpha, cfg.lrn_beta, cfg.lrn_k)] if cfg.lrn else []

    class AlexNet(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = tnn.Sequential(
                tnn.Conv2d(cfg.in_channels, c1, cfg.conv1_kernel, cfg.conv1_stride, cfg.conv1_padding, groups=g1),
                tnn.ReLU(), *lrn(), tnn.MaxPool2d(3, 2),
                tnn.Conv2d(c1, c2, 5, padding=2, groups=g2), tnn.ReLU(), *lrn(), tnn.MaxPool2d(3, 2),
                tnn.Conv2d(c2, c3, 3, padding=1, groups=g3), tnn.ReLU(),
                tnn.Conv2d(c3, c4, 3, padding=1, groups=g4), tnn.ReLU(),
                tnn.Conv2d(c4, c5, 3, padding=1, groups=g5), tnn.ReLU(), tnn.MaxPool2d(3, 2))
            self.avgpool = tnn.AdaptiveAvgPool2d((cfg.pool_size, cfg.pool_size))
            self.classifier = tnn.Sequential(
                tnn.Dropout(cfg.dropout), tnn.Linear(c5 * cfg.pool_size ** 2, cfg.hidden), tnn.ReLU(),
                tnn.Dropout(cfg.dropout), tnn.Linear(cfg.hidden, cfg.hidden), tnn.ReLU(),
                tnn.Linear(cfg.hidden, cfg.num_classes))

        def forward(self, x: Any) -> Any:
            return self.classifier(self.avgpool(self.features(x)).flatten(1))  # (N, num_classes)

    return AlexNet()


def _basic_block(cin: int, cout: int, stride: int, downsample: Any) -> Any:
    """tinyflow.models.resnet.BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))."""
    import torch.nn as tnn

    class BasicBlock(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = tnn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = tnn.BatchNorm2d(cout)
            self.relu = tnn.ReLU()
            self.conv2 = tnn.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = tnn.BatchNorm2d(cout)
            self.downsample = downsample

        def forward(self, x: Any) -> Any:
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(out)) + identity)

    return BasicBlock()


def _projection(cin: int, cout: int, stride: int) -> Any:
    import torch.nn as tnn

    return tnn.Sequential(tnn.Conv2d(cin, cout, 1, stride=stride, bias=False), tnn.BatchNorm2d(cout))


def _pad_shortcut(cin: int, cout: int, stride: int) -> Any:
    """Option A: every stride-th pixel, new channels zero-padded on both sides."""
    import torch.nn as tnn
    import torch.nn.functional as tF

    before = (cout - cin) // 2
    after = cout - cin - before

    class PadShortcut(tnn.Module):
        def forward(self, x: Any) -> Any:
            return tF.pad(x[:, :, ::stride, ::stride], (0, 0, 0, 0, before, after))

    return PadShortcut()


def torch_resnet_cifar(cfg: Any) -> Any:
    """tinyflow.models.resnet.ResNetCifar: conv3x3, three stages of (depth-2)/6 BasicBlocks, avgpool, fc."""
    import torch.nn as tnn

    class ResNetCifar(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            n = (cfg.depth - 2) // 6
            w1 = cfg.widths[0]
            self.conv1 = tnn.Conv2d(cfg.in_channels, w1, 3, padding=1, bias=False)
            self.bn1 = tnn.BatchNorm2d(w1)
            self.relu = tnn.ReLU()
            cin = w1
            for i, width in enumerate(cfg.widths):
                blocks = []
                for j in range(n):
                    stride = 2 if (i > 0 and j == 0) else 1
                    down = None
                    if stride != 1 or cin != width:
                        down = (_pad_shortcut if cfg.shortcut == "A" else _projection)(cin, width, stride)
                    blocks.append(_basic_block(cin, width, stride, down))
                    cin = width
                setattr(self, f"layer{i + 1}", tnn.Sequential(*blocks))
            self.avgpool = tnn.AdaptiveAvgPool2d((1, 1))
            self.fc = tnn.Linear(cin, cfg.num_classes)

        def forward(self, x: Any) -> Any:
            x = self.relu(self.bn1(self.conv1(x)))
            x = self.layer3(self.layer2(self.layer1(x)))
            return self.fc(self.avgpool(x).flatten(1))

    return ResNetCifar()


def torch_resnet(cfg: Any) -> Any:
    """tinyflow.models.resnet.ResNet (torchvision's ResNet with BasicBlocks, e.g. ResNet-18)."""
    import torch.nn as tnn

    class ResNet(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            w0 = cfg.widths[0]
            self.conv1 = tnn.Conv2d(cfg.in_channels, w0, 7, stride=2, padding=3, bias=False)
            self.bn1 = tnn.BatchNorm2d(w0)
            self.relu = tnn.ReLU()
            self.maxpool = tnn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            cin = w0
            for i, (count, width) in enumerate(zip(cfg.layers, cfg.widths)):
                blocks = []
                for j in range(count):
                    s = (1 if i == 0 else 2) if j == 0 else 1
                    down = _projection(cin, width, s) if (s != 1 or cin != width) else None
                    blocks.append(_basic_block(cin, width, s, down))
                    cin = width
                setattr(self, f"layer{i + 1}", tnn.Sequential(*blocks))
            self.avgpool = tnn.AdaptiveAvgPool2d((1, 1))
            self.fc = tnn.Linear(cin, cfg.num_classes)
            self.stages = len(cfg.layers)

        def forward(self, x: Any) -> Any:
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            for i in range(self.stages):
                x = getattr(self, f"layer{i + 1}")(x)
            return self.fc(self.avgpool(x).flatten(1))

    return ResNet()


def torch_fcn(cfg: Any) -> Any:
    """tinyflow.models.fcn.FCN: Linear, activation, Linear, ... as ``layers``."""
    import torch.nn as tnn

    act = tnn.Sigmoid if cfg.activation == "sigmoid" else tnn.ReLU
    layers: list = []
    for i, (a, b) in enumerate(zip(cfg.sizes[:-1], cfg.sizes[1:])):
        if i:
            layers.append(act())
        layers.append(tnn.Linear(a, b))

    class FCN(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = tnn.Sequential(*layers)

        def forward(self, x: Any) -> Any:
            return self.layers(x.flatten(1) if x.dim() > 2 else x)

    return FCN()


def torch_lstm_lm(cfg: Any) -> Any:
    """tinyflow.models.lstm_lm.LSTMLM: embedding, nn.LSTM, dropout, linear decoder; ``logits, state = m(ids)``."""
    import torch.nn as tnn

    class LSTMLM(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = tnn.Embedding(cfg.vocab_size, cfg.embedding_dim)
            self.rnn = tnn.LSTM(cfg.embedding_dim, cfg.hidden_size, num_layers=cfg.num_layers,
                                dropout=cfg.dropout if cfg.num_layers > 1 else 0.0)
            self.drop = tnn.Dropout(cfg.dropout)
            self.decoder = tnn.Linear(cfg.hidden_size, cfg.vocab_size)
            if cfg.tie_weights:
                self.decoder.weight = self.encoder.weight

        def forward(self, ids: Any, state: Any = None) -> Any:
            steps, batch = ids.shape
            out, state = self.rnn(self.drop(self.encoder(ids)), state)  # (T, B, H)
            logits = self.decoder(self.drop(out).reshape(steps * batch, -1))  # (T*B, V)
            return logits.reshape(steps, batch, -1), state

    return LSTMLM()


def load_tinyflow_state(torch_module: Any, tinyflow_module: Any) -> list[str]:
    """Copy a tinyflow model's parameters and buffers into its twin; returns the names not found."""
    import numpy as np
    import torch

    state = {k: torch.from_numpy(np.ascontiguousarray(np.asarray(v.numpy() if hasattr(v, "numpy") else v)))
             for k, v in tinyflow_module.state_dict().items()}
    missing, _ = torch_module.load_state_dict(state, strict=False)
    return [m for m in missing if not m.endswith("num_batches_tracked")]
