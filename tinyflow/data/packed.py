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

__all__ = ["pack_folder", "PackedDataset", "PackedDataError", "is_packed"]

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


class PackedDataError(ValueError):
    """A packed data set whose files are damaged (truncated, overwritten, or from another pack)."""


def _damaged(path: Path, what: str) -> PackedDataError:
    kind = "" if path.is_dir() else "file "
    return PackedDataError(f"damaged packed data set {kind}{str(path)!r}: {what}; pack the image folder again "
                           "with `tinyflow data pack SRC DST --size S`")


def _read_meta(path: Path) -> dict[str, Any]:
    """meta.json, checked for the keys PackedDataset reads."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _damaged(path, f"it is not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise _damaged(path, f"it holds a JSON {type(meta).__name__}, not an object")
    classes, size = meta.get("classes"), meta.get("size")
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        raise _damaged(path, "its 'classes' entry is missing or not a list of class names")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise _damaged(path, f"its 'size' entry is {size!r}, not a positive image side")
    return meta


def _read_array(path: Path, mmap_mode: str | None = None) -> np.ndarray:
    """np.load, with a truncated or overwritten .npy file turned into an error that names it."""
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic != b"\x93NUMPY":
        what = "it is empty" if not magic else "it is not a .npy array file (no .npy header)"
        raise _damaged(path, what)
    try:
        return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except (ValueError, EOFError, SyntaxError) as exc:
        message = str(exc)
        truncated = isinstance(exc, EOFError) or any(
            s in message for s in ("EOF", "mmap length is greater", "Failed to read all data"))
        what = "it is truncated" if truncated else "it is not a readable .npy array"
        raise _damaged(path, f"{what} ({type(exc).__name__}: {message})") from None


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
        meta = _read_meta(root / META)
        self.classes: list[str] = meta["classes"]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.size: int = meta["size"]
        self.images = _read_array(root / "images.npy", mmap_mode="r")  # (N, S, S, 3) uint8
        self.labels = _read_array(root / "labels.npy")  # (N,) int64
        if self.images.ndim != 4 or self.images.shape[1:] != (self.size, self.size, 3) or self.images.dtype != np.uint8:
            raise _damaged(root / "images.npy", f"it holds {self.images.dtype} of shape {self.images.shape}, not "
                           f"uint8 images of shape (N, {self.size}, {self.size}, 3) as {META} says")
        if self.labels.ndim != 1 or self.labels.dtype.kind not in "iu":
            raise _damaged(root / "labels.npy", f"it holds {self.labels.dtype} of shape {self.labels.shape}, "
                           "not one integer label per image")
        if len(self.images) != len(self.labels):
            raise _damaged(root, f"{len(self.images)} images but {len(self.labels)} labels")
        if isinstance(meta.get("count"), int) and meta["count"] != len(self.labels):
            raise _damaged(root, f"{META} says {meta['count']} images but the arrays hold {len(self.labels)}")
        if len(self.labels) and not (0 <= self.labels.min() and self.labels.max() < len(self.classes)):
            raise _damaged(root / "labels.npy", f"labels run from {self.labels.min()} to {self.labels.max()} "
                           f"but {META} lists {len(self.classes)} classes")
        self.targets = self.labels.tolist()
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
