"""Packing an image folder into a memory-mapped array, and reading it back."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tinyflow.data import DataLoader, ImageFolder, PackedDataset, is_packed, pack_folder
from tinyflow.data import transforms as T


@pytest.mark.parametrize("workers", [0, 2])
def test_pack_round_trip(make_folder, tmp_path: Path, workers: int) -> None:
    src = make_folder(tmp_path / "src", {"b": 3, "a": 2}, size=(21, 14))
    (src / "a" / "bad.jpg").write_bytes(b"garbage")
    with pytest.warns(UserWarning, match=r"bad\.jpg"):
        meta = pack_folder(src, tmp_path / "packed", size=10, workers=workers)
    assert is_packed(tmp_path / "packed")
    assert meta["count"] == 5 and meta["classes"] == ["a", "b"]
    assert [s["path"] for s in meta["skipped"]] == [str(src / "a" / "bad.jpg")]
    assert json.loads((tmp_path / "packed" / "meta.json").read_text())["size"] == 10

    packed = PackedDataset(tmp_path / "packed")
    assert isinstance(packed.images, np.memmap) and packed.images.shape == (5, 10, 10, 3)
    folder = ImageFolder(src, transform=T.Compose([T.Resize(10), T.CenterCrop(10)]))
    readable = [i for i, (p, _) in enumerate(folder.samples) if not p.endswith("bad.jpg")]
    for k, i in enumerate(readable):
        img, label = packed[k]
        ref, ref_label = folder[i]
        assert label == ref_label
        np.testing.assert_array_equal(img, np.asarray(ref))


def test_packed_dataset_through_loader_with_augmentation(make_folder, tmp_path: Path) -> None:
    src = make_folder(tmp_path / "src", {"x": 4, "y": 4}, size=(16, 16))
    pack_folder(src, tmp_path / "p", size=16)
    tf_ = T.Compose([T.RandomResizedCrop(8), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize([0.5] * 3, [0.5] * 3)])
    ds = PackedDataset(tmp_path / "p", transform=tf_)
    a = [b[0] for b in DataLoader(ds, batch_size=3, shuffle=True, seed=0, as_tensors=False)]
    b = [b[0] for b in DataLoader(ds, batch_size=3, shuffle=True, seed=0, num_workers=2, as_tensors=False)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b)) and len(a) == 3
    assert a[0].shape == (3, 3, 8, 8)


def test_pack_refuses_a_non_empty_destination_and_reading_a_non_packed_folder(make_folder, tmp_path: Path) -> None:
    src = make_folder(tmp_path / "src", {"x": 1})
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        pack_folder(src, tmp_path / "dst", size=8)
    assert (tmp_path / "dst" / "keep.txt").read_text() == "mine"
    with pytest.raises(FileNotFoundError, match="tinyflow data pack"):
        PackedDataset(src)


def _packed(make_folder, tmp_path: Path) -> Path:
    src = make_folder(tmp_path / "src", {"x": 3, "y": 3}, size=(12, 12))
    pack_folder(src, tmp_path / "p", size=8)
    return tmp_path / "p"


def _truncate(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


@pytest.mark.parametrize(
    "damage, file, what",
    [
        (lambda p: _truncate(p / "images.npy", 300), "images.npy", "truncated"),  # mmap length > file size
        (lambda p: _truncate(p / "labels.npy", 140), "labels.npy", "truncated"),  # read past the end
        (lambda p: _truncate(p / "labels.npy", 60), "labels.npy", "truncated"),  # EOF inside the header
        (lambda p: _truncate(p / "labels.npy", 0), "labels.npy", "empty"),  # EOFError
        (lambda p: (p / "images.npy").write_bytes(b"garbage" * 40), "images.npy", "not a .npy array file"),
        (lambda p: (p / "meta.json").write_text('{"classes": ["x", "y"], "size": 8, "cou'), "meta.json",
         "not valid JSON"),
        (lambda p: (p / "meta.json").write_text('{"size": 8}'), "meta.json", "'classes' entry is missing"),
        (lambda p: (p / "meta.json").write_text('{"classes": ["x", "y"], "size": 16}'), "images.npy",
         r"shape \(N, 16, 16, 3\)"),
        (lambda p: (p / "meta.json").write_text('{"classes": ["x"], "size": 8}'), "labels.npy",
         "labels run from 0 to 1 but meta.json lists 1 classes"),
        (lambda p: np.save(p / "labels.npy", np.zeros(4, np.int64)), "p", "6 images but 4 labels"),
    ],
)
def test_a_damaged_packed_set_names_the_file_and_says_pack_again(make_folder, tmp_path: Path, damage, file,
                                                                  what) -> None:
    from tinyflow.data import PackedDataError

    root = _packed(make_folder, tmp_path)
    assert len(PackedDataset(root)) == 6
    damage(root)
    with pytest.raises(PackedDataError) as info:
        PackedDataset(root)
    message = str(info.value)
    assert repr(str(root / file) if file != "p" else str(root)) in message, message
    assert "tinyflow data pack" in message and "\n" not in message
    assert re.search(what, message), message
    assert isinstance(info.value, ValueError)  # the CLI's one-line handlers catch ValueError
