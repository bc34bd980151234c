"""ImageFolder: ``root/<class>/<image>.jpg`` with classes numbered by sorted name (torchvision)."""
from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from tinyflow.data.dataset import Dataset, SkippedSample
from tinyflow.data.transforms import SIXTEEN_BIT_MODES

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

    16-bit images (PNG, PGM, TIFF open as modes ``I;16`` / ``I``) are scaled to 8 bits
    (value / 257, rounded) before the conversion: PIL's own conversion clips them to 255.
    Raises SkippedSample naming the path and the reason when the file cannot be decoded,
    including an image too large to decode safely (PIL's decompression-bomb limit).
    """
    try:
        with Image.open(path) as img:
            img.load()
            if mode is not None and img.mode != mode:
                return _to_8bit(img).convert(mode) if img.mode in SIXTEEN_BIT_MODES else img.convert(mode)
            return img.copy()
    except Image.DecompressionBombError as exc:
        raise SkippedSample(
            str(path), f"image too large to decode safely ({exc}); resize the file, or raise "
            "PIL.Image.MAX_IMAGE_PIXELS if you trust it"
        ) from exc
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
        raise SkippedSample(str(path), f"cannot decode image ({reason})") from exc


def _to_8bit(img: Image.Image) -> Image.Image:
    """A 16-bit grayscale image as mode "L": round(value * 255 / 65535), values beyond 16 bits clipped."""
    wide = np.asarray(img).astype(np.int64)  # (H, W); I;16B comes back in native byte order
    return Image.fromarray(((np.clip(wide, 0, 65535) + 128) // 257).astype(np.uint8), mode="L")


class EmptyClassWarning(UserWarning):
    """A class folder without images: the class keeps its index but has no samples."""


def _inside(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _image_files(folder: str, extensions: tuple[str, ...], tree: Sequence[str]) -> list[str]:
    """The image files under ``folder``, in the order of ``sorted(os.walk(folder))`` then name.

    Symbolic links to directories are followed only out of the data tree (``tree``: the real
    paths of the root and of every class folder), and each directory is read once: a link back
    into the tree would give its images twice or under the wrong class, and a link loop would
    never end. Links to files are kept (a dangling one is reported as unreadable when loaded).
    """
    listed: list[tuple[str, list[str]]] = []
    seen: set[tuple[int, int]] = set()
    stack = [(folder, False)]  # (directory, reached through a link out of the tree)
    while stack:
        directory, outside = stack.pop()
        try:
            st = os.stat(directory)
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            entries = list(os.scandir(directory))
        except OSError:
            continue  # unreadable: os.walk skipped these silently too
        files = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()  # follows links
            except OSError:
                is_dir = False
            if is_dir:
                # Out there, even a plain folder can lead back in (a link to an ancestor of the root).
                leaves = entry.is_symlink() or outside
                if leaves and _inside(os.path.realpath(entry.path), tree):
                    continue
                stack.append((entry.path, leaves))
            elif entry.name.lower().endswith(extensions):
                files.append(entry.path)
        listed.append((directory, sorted(files)))
    return [path for _, files in sorted(listed) for path in files]


class ImageFolder(Dataset[tuple]):
    """Images in ``root/<class>/`` labelled by the index of their class in sorted order.

    ``samples`` lists (path, class index) sorted by class then file name. An image that cannot
    be decoded raises SkippedSample from ``__getitem__``: the DataLoader reports and skips it.
    A class folder without images keeps its index (so labels stay those of a sibling train/val
    folder) and is reported with an EmptyClassWarning, or refused with ``strict=True``.
    Symbolic links are followed out of the tree, never back into it, and each directory once.
    """

    def __init__(
        self,
        root: str | os.PathLike,
        transform: Callable[[Any], Any] | None = None,
        target_transform: Callable[[int], Any] | None = None,
        extensions: Sequence[str] = IMG_EXTENSIONS,
        mode: str | None = "RGB",
        strict: bool = False,
    ):
        self.root = str(root)
        self.transform = transform
        self.target_transform = target_transform
        self.mode = mode
        self.classes, self.class_to_idx = find_classes(root)
        exts = tuple(e.lower() for e in extensions)
        folders = [os.path.join(self.root, name) for name in self.classes]
        tree = [os.path.realpath(self.root)] + [os.path.realpath(f) for f in folders]
        self.samples: list[tuple[str, int]] = []
        empty: list[tuple[str, str]] = []  # (class name, folder)
        for name, folder in zip(self.classes, folders):
            files = _image_files(folder, exts, tree)
            if not files:
                empty.append((name, folder))
            self.samples.extend((path, self.class_to_idx[name]) for path in files)
        if not self.samples:
            raise EmptyDatasetError(
                f"data folder {self.root!r} has class folders {self.classes[:5]}"
                f"{'...' if len(self.classes) > 5 else ''} but no images with extensions {list(exts)}"
            )
        for name, folder in empty:
            message = (f"class folder {folder!r} has no images with extensions {list(exts)}: add images "
                       "to it or remove it")
            if strict:
                raise EmptyDatasetError(message)
            warnings.warn(f"{message} (it stays class {self.class_to_idx[name]}, with no samples)",
                          EmptyClassWarning, stacklevel=2)
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
