"""Transforms: torchvision semantics on PIL images and (H, W, C) arrays, seeded randomness."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from tinyflow.data import transforms as T


def _img(h: int, w: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


@settings(max_examples=25, deadline=None)
@given(h=st.integers(4, 40), w=st.integers(4, 40), size=st.integers(2, 30))
def test_resize_int_scales_shorter_side_keeping_aspect(h: int, w: int, size: int) -> None:
    out = T.Resize(size)(_img(h, w))
    oh, ow = out.shape[:2]
    assert min(oh, ow) == size
    assert max(oh, ow) == int(size * max(h, w) / min(h, w))
    assert out.dtype == np.uint8 and out.shape[2] == 3


@settings(max_examples=25, deadline=None)
@given(h=st.integers(1, 30), w=st.integers(1, 30), ch=st.integers(1, 30), cw=st.integers(1, 30))
def test_center_crop_matches_slicing_and_pads_small_images(h: int, w: int, ch: int, cw: int) -> None:
    img = _img(h, w)
    out = T.CenterCrop((ch, cw))(img)
    assert out.shape == (ch, cw, 3)
    if h >= ch and w >= cw:
        top, left = int(round((h - ch) / 2)), int(round((w - cw) / 2))
        np.testing.assert_array_equal(out, img[top : top + ch, left : left + cw])
    # PIL input gives the same pixels as the array path
    np.testing.assert_array_equal(np.asarray(T.CenterCrop((ch, cw))(Image.fromarray(img))), out)


def test_random_transforms_are_seeded_and_agree_between_pil_and_array() -> None:
    img = _img(37, 29)

    def make() -> T.Compose:
        return T.Compose([T.RandomResizedCrop(16, scale=(0.2, 1.0), generator=7), T.RandomHorizontalFlip(generator=8)])

    a = [make()(img) for _ in range(1)]
    t1, t2 = make(), make()
    outs1 = [t1(img) for _ in range(10)]
    outs2 = [np.asarray(t2(Image.fromarray(img))) for _ in range(10)]
    for x, y in zip(outs1, outs2):
        assert x.shape == (16, 16, 3)
        np.testing.assert_array_equal(x, y)
    assert len({x.tobytes() for x in outs1}) > 1  # it is random from call to call
    np.testing.assert_array_equal(a[0], outs1[0])


def test_sample_rng_context_drives_random_transforms() -> None:
    flip = T.RandomHorizontalFlip(p=0.5)
    img = _img(5, 7)
    results = []
    for _ in range(2):
        with T.sample_rng(np.random.default_rng(123)):
            results.append([flip(img).tobytes() for _ in range(8)])
    assert results[0] == results[1]


def test_flip_with_p_one_mirrors() -> None:
    img = _img(4, 6)
    np.testing.assert_array_equal(T.RandomHorizontalFlip(p=1.0)(img), img[:, ::-1])
    np.testing.assert_array_equal(T.RandomHorizontalFlip(p=0.0)(img), img)


def test_random_resized_crop_window_is_within_bounds_and_scale() -> None:
    t = T.RandomResizedCrop(8, scale=(0.25, 0.5), generator=0)
    for _ in range(50):
        top, left, h, w = t.window(40, 30)
        assert 0 <= top and top + h <= 40 and 0 <= left and left + w <= 30
        assert 0.2 * 1200 <= h * w <= 0.56 * 1200


def test_to_tensor_and_normalize() -> None:
    img = _img(3, 5)
    x = T.ToTensor()(img)
    assert x.shape == (3, 3, 5) and x.dtype == np.float32
    np.testing.assert_allclose(x, img.transpose(2, 0, 1) / 255.0, rtol=1e-6)
    y = T.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.5])(x)
    np.testing.assert_allclose(y[1], (x[1] - 0.4) / 0.25, rtol=1e-5)
    with pytest.raises(ValueError, match="Normalize.*C=3.*ToTensor"):
        T.Normalize([0.5, 0.4, 0.3], [1, 1, 1])(_img(4, 5))


def test_to_tensor_matches_torch_layout() -> None:
    torch = pytest.importorskip("torch")
    img = _img(6, 4)
    ours = T.ToTensor()(img)
    theirs = torch.from_numpy(img).permute(2, 0, 1).float().div(255).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_to_tensor_scales_16_bit_images_to_unit_range() -> None:
    """torchvision leaves 16-bit images at 0..65535; here they come out in [0, 1] like 8-bit ones."""
    wide = np.array([[0, 257, 32896, 65535]], dtype=np.uint16)
    np.testing.assert_allclose(T.ToTensor()(wide)[0], wide / 65535.0, atol=1e-7)  # a (H, W) uint16 array
    np.testing.assert_allclose(T.ToTensor()(Image.fromarray(wide))[0], wide / 65535.0, atol=1e-7)  # mode I;16
    np.testing.assert_allclose(T.ToTensor()(Image.fromarray(wide).convert("I"))[0], wide / 65535.0, atol=1e-7)
    assert T.ToTensor()(np.array([[7]], np.int32))[0, 0, 0] == 7.0  # other dtypes keep their values
