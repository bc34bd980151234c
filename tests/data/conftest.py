"""Fixtures for the data tests: a tiny image folder written with PIL."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image


def write_folder(root: Path, classes: dict[str, int], size: tuple[int, int] = (20, 16), seed: int = 0,
                 ext: str = "png") -> Path:
    """root/<class>/img_<k>.<ext>: class c holds ``classes[c]`` random RGB images of (w, h) = size."""
    rng = np.random.default_rng(seed)
    for name, count in classes.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for k in range(count):
            pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / name / f"img_{k}.{ext}")
    return root


@pytest.fixture
def make_folder():  # noqa: ANN201
    """The ``write_folder`` helper, as a fixture (tests run with --import-mode=importlib)."""
    return write_folder


@pytest.fixture
def image_folder(tmp_path: Path) -> Path:
    return write_folder(tmp_path / "imgs", {"cat": 3, "ant": 4, "bee": 2})
