"""Packed data sets: an image folder decoded once into a memory-mapped uint8 array.

``tinyflow data pack SRC DST --size S`` writes
    DST/images.npy   (N, S, S, 3) uint8, opened with mmap_mode="r" (no JPEG decoding later)
    DST/labels.npy   (N,) int64
    DST/meta.json    classes, size, count, and the files that could not be decoded
This is the role LMDB plays in Caffe: later epochs read raw pixels straight from the page cache.
Each image is resized so that its shorter side is S, then centre-cropped to S x S.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tinyflow.data.dataset import Dataset, SkippedSample
from tinyflow.data.folder import ImageFolder, load_image
from tinyflow.data.transforms import CenterCrop, Resize

__all__ = ["pack_folder", "PackedDataset", "is_packed"]

META = "meta.json"


def is_packed(path: str | os.PathLike) -> bool:
    """True when ``path`` holds a packed data set."""
    p = Path(path)
    return (p / META).is_file() and (p / "images.npy").is_file() and (p / "labels.npy").is_file()


def _decode(args: tuple[str, int]) -> tuple[np.ndarray | None, str | None]:
    """Decode, resize and crop one image; (pixels, None) or (None, reason)."""
    path, size = args
    try:
        img = CenterCrop(size)(Resize(size)(load_image(path, "RGB")))
    except SkippedSample as exc:
        return None, exc.reason
    return np.asarray(img, dtype=np.uint8), None


def _decoded(paths: list[str], size: int, workers: int) -> Iterator[tuple[np.ndarray | None, str | None]]:
    jobs = [(p, size) for p in paths]
    if workers <= 0:
        yield from map(_decode, jobs)
        return
    with multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn").Pool(workers) as pool:
        yield from pool.imap(_decode, jobs, chunksize=32)


def pack_folder(src: str | os.PathLike, dst: str | os.PathLike, size: int, workers: int = 0,
                progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Pack the ImageFolder ``src`` into ``dst`` (see the module docstring); returns the metadata.

    Unreadable images are skipped with a warning and listed under "skipped" in meta.json. The
    output is written to a temporary folder beside ``dst`` and renamed into place at the end.
    """
    if size <= 0:
        raise ValueError(f"pack: --size must be positive, got {size}")
    folder = ImageFolder(src)
    dst = Path(dst)
    if dst.exists() and any(dst.iterdir()):
        raise FileExistsError(f"pack: destination {str(dst)!r} exists and is not empty; choose a new folder")
    tmp = dst.with_name(f".{dst.name}.packing")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        n = len(folder.samples)
        images = np.lib.format.open_memmap(tmp / "images.npy", mode="w+", dtype=np.uint8, shape=(n, size, size, 3))
        labels = np.empty(n, dtype=np.int64)
        skipped: list[dict[str, str]] = []
        kept = 0
        paths = [p for p, _ in folder.samples]
        for k, (pixels, reason) in enumerate(_decoded(paths, size, workers)):
            path, target = folder.samples[k]
            if pixels is None:
                warnings.warn(f"pack: skipped unreadable image {path}: {reason}", stacklevel=2)
                skipped.append({"path": path, "reason": str(reason)})
            else:
                images[kept] = pixels
                labels[kept] = target
                kept += 1
            if progress is not None:
                progress(k + 1, n)
        images.flush()
        del images
        if kept < n:  # shrink the array to the images that were kept
            full = np.load(tmp / "images.npy", mmap_mode="r")
            trimmed = np.lib.format.open_memmap(tmp / "images.tmp.npy", mode="w+", dtype=np.uint8, shape=(kept, size, size, 3))
            trimmed[:] = full[:kept]
            trimmed.flush()
            del full, trimmed
            os.replace(tmp / "images.tmp.npy", tmp / "images.npy")
        np.save(tmp / "labels.npy", labels[:kept])
        meta = {"classes": folder.classes, "size": size, "count": kept, "source": str(Path(src).resolve()),
                "skipped": skipped}
        (tmp / META).write_text(json.dumps(meta, indent=1))
        if dst.exists():
            dst.rmdir()
        os.replace(tmp, dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return meta


class PackedDataset(Dataset[tuple]):
    """Samples (image (S, S, 3) uint8 array, label) read from a packed folder, memory-mapped."""

    def __init__(self, root: str | os.PathLike, transform: Callable[[Any], Any] | None = None,
                 target_transform: Callable[[int], Any] | None = None):
        root = Path(root)
        if not is_packed(root):
            raise FileNotFoundError(
                f"{str(root)!r} is not a packed data set (expected images.npy, labels.npy and {META}); "
                "create one with `tinyflow data pack SRC DST --size S`"
            )
        self.root = str(root)
        meta = json.loads((root / META).read_text())
        self.classes: list[str] = meta["classes"]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.size: int = meta["size"]
        self.images = np.load(root / "images.npy", mmap_mode="r")  # (N, S, S, 3) uint8
        self.labels = np.load(root / "labels.npy")
        self.targets = self.labels.tolist()
        if len(self.images) != len(self.labels):
            raise ValueError(f"packed data set {self.root!r} is inconsistent: "
                             f"{len(self.images)} images but {len(self.labels)} labels; pack it again")
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple:
        img = np.array(self.images[index])  # (S, S, 3) uint8, copied out of the map
        target = int(self.labels[index])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def __repr__(self) -> str:
        return f"PackedDataset(root={self.root!r}, {len(self)} images {self.size}x{self.size}, {len(self.classes)} classes)"
