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


def test_16_bit_png_is_scaled_not_clipped(tmp_path: Path) -> None:
    """PIL opens a 16-bit grayscale PNG as I;16 and its convert() clips everything above 255 to
    white: the loader scales it to 8 bits instead, as a viewer shows it."""
    from PIL import Image

    (tmp_path / "d" / "x").mkdir(parents=True)
    wide = np.array([[0, 128, 129, 257, 1000, 32896], [40000, 50000, 60000, 65279, 65534, 65535]], np.uint16)
    Image.fromarray(wide).save(tmp_path / "d" / "x" / "deep.png")
    assert Image.open(tmp_path / "d" / "x" / "deep.png").mode == "I;16"  # what the file really holds
    expected = np.round(wide / 257.0).astype(np.uint8)  # the 8-bit value of the same brightness
    assert expected.max() == 255 and expected.min() == 0 and len(np.unique(expected)) > 6

    img, _ = ImageFolder(tmp_path / "d")[0]
    rgb = np.asarray(img)
    assert img.mode == "RGB" and rgb.dtype == np.uint8
    for c in range(3):
        np.testing.assert_array_equal(rgb[:, :, c], expected)
    x, _ = ImageFolder(tmp_path / "d", transform=T.ToTensor())[0]
    np.testing.assert_allclose(x[0], expected / 255.0, atol=1e-6)

    # mode=None keeps the 16 bits; ToTensor scales them by 1/65535.
    native, _ = ImageFolder(tmp_path / "d", transform=T.ToTensor(), mode=None)[0]
    np.testing.assert_allclose(native[0], wide / 65535.0, atol=1e-6)


def test_decompression_bomb_is_skipped_and_named(image_folder: Path, monkeypatch) -> None:
    """An image over PIL's pixel limit (a decompression bomb) is reported and skipped like any
    other unreadable image, instead of ending the run without naming the file."""
    from PIL import Image

    big = image_folder / "bee" / "huge.png"
    Image.fromarray(np.zeros((64, 64, 3), np.uint8)).save(big)  # 4096 pixels
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # bomb at > 2000 pixels; the others have 320
    ds = ImageFolder(image_folder, transform=T.ToTensor())
    loader = DataLoader(ds, batch_size=4, as_tensors=False)
    with pytest.warns(SkippedSampleWarning, match=r"huge\.png.*too large") as record:
        labels = np.concatenate([y for _, y in loader])
    assert len(labels) == 9  # every other image, the epoch went on
    assert [p for p, _ in loader.skipped] == [str(big)]
    assert "MAX_IMAGE_PIXELS" in str(record[0].message)


def _real_paths(ds: ImageFolder) -> list[str]:
    return [os.path.realpath(p) for p, _ in ds.samples]


def test_a_symlink_loop_gives_each_image_once(tmp_path: Path, make_folder) -> None:
    """The issue's case: a link to the parent folder was followed until the path got too long
    (492 samples from 12 files)."""
    root = make_folder(tmp_path / "data", {"a": 6, "b": 6})
    os.symlink("..", root / "a" / "loop")  # a/loop -> a
    (root / "b" / "sub").mkdir()
    os.symlink(root / "b", root / "b" / "sub" / "up")  # b/sub/up -> b
    ds = ImageFolder(root)
    assert len(ds) == 12 and len(set(_real_paths(ds))) == 12
    assert ds.targets == [0] * 6 + [1] * 6


def test_links_back_into_the_tree_are_not_followed(tmp_path: Path, make_folder) -> None:
    """A link into another class folder would give its images twice, once under the wrong class."""
    root = make_folder(tmp_path / "data", {"a": 2, "b": 3})
    os.symlink(root / "b", root / "a" / "to_b")
    ds = ImageFolder(root)
    assert len(ds) == 5 and len(set(_real_paths(ds))) == 5
    assert ds.targets == [0, 0, 1, 1, 1]


def test_a_link_out_of_the_tree_is_followed_once(tmp_path: Path, make_folder) -> None:
    root = make_folder(tmp_path / "data", {"a": 2, "b": 3})
    outside = make_folder(tmp_path / "elsewhere", {"extra": 2}) / "extra"
    os.symlink(outside, root / "a" / "more")  # out of the tree: its images belong to class a
    os.symlink(outside, outside / "again")  # and a loop out there
    os.symlink(tmp_path, outside / "ancestor")  # and a way back in through a plain folder out there
    ds = ImageFolder(root)
    assert len(ds) == 7 and len(set(_real_paths(ds))) == 7
    assert ds.targets == [0, 0, 0, 0, 1, 1, 1]
    assert sorted(os.path.relpath(p, root) for p, _ in ds.samples if "more" in p) == [
        os.path.join("a", "more", "img_0.png"), os.path.join("a", "more", "img_1.png")]


def test_an_empty_class_folder_is_named_in_a_warning_or_refused_when_strict(image_folder: Path) -> None:
    from tinyflow.data import EmptyClassWarning

    (image_folder / "dog").mkdir()
    (image_folder / "dog" / "readme.txt").write_text("no images here")
    with pytest.warns(EmptyClassWarning, match=r"class folder '.*dog' has no images.*class 3, with no samples"):
        ds = ImageFolder(image_folder)
    assert ds.classes == ["ant", "bee", "cat", "dog"] and len(ds) == 9  # labels stay those of the names
    with pytest.raises(EmptyDatasetError, match=r"class folder '.*dog' has no images.*add images to it or remove it"):
        ImageFolder(image_folder, strict=True)
    (image_folder / "dog" / "readme.txt").unlink()
    (image_folder / "dog").rmdir()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(ImageFolder(image_folder, strict=True)) == 9
