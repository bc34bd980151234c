"""ImageFolder: torchvision class order, corrupt images reported and skipped, empty folders refused."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tinyflow.data import DataLoader, EmptyDatasetError, ImageFolder, SkippedSampleWarning
from tinyflow.data import transforms as T


def test_classes_by_sorted_name_and_samples(image_folder: Path) -> None:
    ds = ImageFolder(image_folder)
    assert ds.classes == ["ant", "bee", "cat"]
    assert ds.class_to_idx == {"ant": 0, "bee": 1, "cat": 2}
    assert len(ds) == 9
    assert ds.targets == [0] * 4 + [1] * 2 + [2] * 3
    img, label = ds[4]
    assert label == 1 and img.size == (20, 16) and img.mode == "RGB"
    assert ds.samples[4][0].endswith(os.path.join("bee", "img_0.png"))


def _corrupt(root: Path) -> tuple[str, str]:
    bad = root / "bee" / "broken.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 this is not really a jpeg")
    empty = root / "cat" / "empty.png"
    empty.write_bytes(b"")
    return str(bad), str(empty)


@pytest.mark.parametrize("workers", [0, 2])
def test_corrupt_images_are_reported_and_skipped(image_folder: Path, tmp_path: Path, workers: int) -> None:
    bad, empty = _corrupt(image_folder)
    ds = ImageFolder(image_folder, transform=T.ToTensor())
    assert len(ds) == 11
    log = tmp_path / "skipped.txt"
    loader = DataLoader(ds, batch_size=4, num_workers=workers, skip_log=str(log), as_tensors=False)
    with pytest.warns(SkippedSampleWarning) as record:
        batches = list(loader)
    messages = " ".join(str(w.message) for w in record)
    assert bad in messages and empty in messages and "cannot decode" in messages
    labels = np.concatenate([y for _, y in batches])
    assert len(labels) == 9  # the epoch went on with every readable image
    assert sorted(p for p, _ in loader.skipped) == sorted([bad, empty])
    logged = log.read_text().splitlines()
    assert sorted(line.split("\t")[0] for line in logged) == sorted([bad, empty])
    # A second epoch skips them again but reports them only once.
    again = list(loader)
    assert sum(len(y) for _, y in again) == 9
    assert len(log.read_text().splitlines()) == 2


def test_empty_folder_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmptyDatasetError, match=r"no class folders.*<class name>/<image>"):
        ImageFolder(tmp_path / "empty")
    (tmp_path / "noimgs" / "a").mkdir(parents=True)
    (tmp_path / "noimgs" / "a" / "notes.txt").write_text("x")
    with pytest.raises(EmptyDatasetError, match=r"no images"):
        ImageFolder(tmp_path / "noimgs")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ImageFolder(tmp_path / "missing")


def test_grayscale_images_are_converted_to_rgb(tmp_path: Path) -> None:
    (tmp_path / "g" / "x").mkdir(parents=True)
    from PIL import Image

    Image.fromarray(np.full((5, 6), 7, np.uint8)).save(tmp_path / "g" / "x" / "a.png")
    x, _ = ImageFolder(tmp_path / "g", transform=T.ToTensor())[0]
    assert x.shape == (3, 5, 6)
    x1, _ = ImageFolder(tmp_path / "g", transform=T.ToTensor(), mode=None)[0]
    assert x1.shape == (1, 5, 6)


def test_jpeg_folder_with_workers(make_folder, tmp_path: Path) -> None:
    root = make_folder(tmp_path / "j", {"x": 3, "y": 3}, ext="jpg")
    ds = ImageFolder(root, transform=T.Compose([T.CenterCrop(8), T.ToTensor()]))
    xs, ys = next(iter(DataLoader(ds, batch_size=6, num_workers=2, as_tensors=False)))
    assert xs.shape == (6, 3, 8, 8) and ys.tolist() == [0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize("workers", [0, 2])
def test_refill_keeps_every_batch_full_for_data_parallel_ranks(image_folder: Path, workers: int) -> None:
    bad, empty = _corrupt(image_folder)
    ds = ImageFolder(image_folder, transform=T.ToTensor())
    loader = DataLoader(ds, batch_size=4, num_workers=workers, as_tensors=False, refill_skipped=True, drop_last=True)
    with pytest.warns(SkippedSampleWarning):
        sizes = [len(y) for _, y in loader]
    assert sizes == [4, 4]  # 11 indices, 2 unreadable: still two full batches, as the sampler promised
    assert sorted(p for p, _ in loader.skipped) == sorted([bad, empty])
