"""ImageFolder: ``root/<class>/<image>.jpg`` with classes numbered by sorted name (torchvision)."""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError

from tinyflow.data.dataset import Dataset, SkippedSample

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


class EmptyDatasetError(ValueError):
    """A data folder without class folders or without images."""


def find_classes(root: str | os.PathLike) -> tuple[list[str], dict[str, int]]:
    """Class folder names under ``root`` sorted by name, and name -> index."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"data folder {str(root)!r} does not exist or is not a directory")
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))
    if not classes:
        raise EmptyDatasetError(
            f"data folder {str(root)!r} has no class folders: expected the layout "
            f"{root}/<class name>/<image>.jpg (one sub-folder per class)"
        )
    return classes, {name: i for i, name in enumerate(classes)}


def load_image(path: str | os.PathLike, mode: str | None = "RGB") -> Image.Image:
    """Decode an image file fully (so corrupt data fails here), converted to ``mode`` if given.

    Raises SkippedSample naming the path and the reason when the file cannot be decoded.
    """
    try:
        with Image.open(path) as img:
            img.load()
            return img.convert(mode) if mode is not None and img.mode != mode else img.copy()
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
        raise SkippedSample(str(path), f"cannot decode image ({reason})") from exc


class ImageFolder(Dataset[tuple]):
    """Images in ``root/<class>/`` labelled by the index of their class in sorted order.

    ``samples`` lists (path, class index) sorted by class then file name. An image that cannot
    be decoded raises SkippedSample from ``__getitem__``: the DataLoader reports and skips it.
    """

    def __init__(
        self,
        root: str | os.PathLike,
        transform: Callable[[Any], Any] | None = None,
        target_transform: Callable[[int], Any] | None = None,
        extensions: Sequence[str] = IMG_EXTENSIONS,
        mode: str | None = "RGB",
    ):
        self.root = str(root)
        self.transform = transform
        self.target_transform = target_transform
        self.mode = mode
        self.classes, self.class_to_idx = find_classes(root)
        exts = tuple(e.lower() for e in extensions)
        self.samples: list[tuple[str, int]] = []
        for name in self.classes:
            folder = os.path.join(self.root, name)
            for dirpath, _, files in sorted(os.walk(folder, followlinks=True)):
                for fname in sorted(files):
                    if fname.lower().endswith(exts):
                        self.samples.append((os.path.join(dirpath, fname), self.class_to_idx[name]))
        if not self.samples:
            raise EmptyDatasetError(
                f"data folder {self.root!r} has class folders {self.classes[:5]}"
                f"{'...' if len(self.classes) > 5 else ''} but no images with extensions {list(exts)}"
            )
        self.targets = [t for _, t in self.samples]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple:
        path, target = self.samples[index]
        img = load_image(path, self.mode)
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def __repr__(self) -> str:
        return f"ImageFolder(root={self.root!r}, {len(self)} images, {len(self.classes)} classes)"
