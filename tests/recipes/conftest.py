"""Shared fixtures of the recipe tests: a tiny image model and data set, and `tinyflow train` on them."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import tinyflow.nn as nn
from tinyflow import cli
from tinyflow.data import synthetic
from tinyflow.recipes import vision


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Model 'tiny' (an MLP over 8x8 images) and a small two-class data set."""
    monkeypatch.setattr(vision, "build_model", lambda name, num_classes: nn.Sequential(
        nn.Flatten(), nn.Linear(192, 16), nn.ReLU(), nn.Linear(16, num_classes)))
    monkeypatch.setattr(vision, "available_models", lambda: ["tiny"])
    return synthetic.generate(tmp_path_factory.mktemp("data"), train_per_class=16, val_per_class=4, size=8,
                              classes=("circle", "stripes"))


def _train(data: Path, run: Path, *extra: str) -> int:
    return cli.main(["train", "tiny", "--data", str(data), "--image-size", "8", "--checkpoint-dir", str(run),
                     "--workers", "0", "--quiet", "--batch-size", "8", *extra])


@pytest.fixture
def train() -> Callable[..., int]:
    """``train(data, run_dir, *options)``: `tinyflow train tiny` on ``data``, its exit status."""
    return _train
