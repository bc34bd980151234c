"""The embedded synthetic data set: layout, determinism, caching location."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tinyflow.data import ImageFolder, synthetic


def test_generate_layout_and_determinism(tmp_path: Path) -> None:
    a = synthetic.generate(tmp_path / "a", train_per_class=3, val_per_class=1, size=32, seed=4)
    b = synthetic.generate(tmp_path / "b", train_per_class=3, val_per_class=1, size=32, seed=4)
    train, val = ImageFolder(a / "train"), ImageFolder(a / "val")
    assert train.classes == sorted(synthetic.CLASSES) and len(train) == 30 and len(val) == 10
    img, _ = train[0]
    assert img.size == (32, 32) and img.mode == "RGB"
    for (pa, _), (pb, _) in zip(train.samples, ImageFolder(b / "train").samples):
        assert Path(pa).read_bytes() == Path(pb).read_bytes()
    c = synthetic.generate(tmp_path / "c", train_per_class=3, val_per_class=1, size=32, seed=5)
    assert (c / "train" / "star" / "star_0000.jpg").read_bytes() != (a / "train" / "star" / "star_0000.jpg").read_bytes()


def test_images_of_a_class_vary() -> None:
    imgs = [np.asarray(synthetic.render(3, 32, np.random.default_rng(i)), dtype=np.float32) for i in range(4)]
    assert min(np.abs(imgs[i] - imgs[j]).mean() for i in range(4) for j in range(i)) > 10


def test_cache_dir_respects_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TINYFLOW_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert synthetic.cache_dir() == tmp_path / "xdg" / "tinyflow" / "datasets"
    monkeypatch.setenv("TINYFLOW_HOME", str(tmp_path / "home"))
    assert synthetic.cache_dir() == tmp_path / "home" / "datasets"


def test_default_dataset_is_generated_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TINYFLOW_HOME", str(tmp_path))
    root = synthetic.default_dataset(train_per_class=2, val_per_class=1, size=24, verbose=False)
    assert root.parent == tmp_path / "datasets" and (root / "info.json").is_file()
    stamp = os.stat(root / "train" / "ring" / "ring_0000.jpg").st_mtime_ns
    calls = []
    monkeypatch.setattr(synthetic, "generate", lambda *a, **k: calls.append(a))
    assert synthetic.default_dataset(train_per_class=2, val_per_class=1, size=24, verbose=False) == root
    assert calls == [] and os.stat(root / "train" / "ring" / "ring_0000.jpg").st_mtime_ns == stamp
    assert not [p for p in root.parent.iterdir() if p.name.startswith(".")]  # no temporary left over
