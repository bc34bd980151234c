"""Packing an image folder into a memory-mapped array, and reading it back."""
from __future__ import annotations

import json
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
