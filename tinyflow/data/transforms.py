"""Image transforms with torchvision's names and semantics.

Each transform takes a PIL image or an ``(H, W, C)`` uint8 NumPy array (what PackedDataset
returns) and gives back the same kind, except ``ToTensor`` which gives a ``(C, H, W)``
float32 array in [0, 1] (the DataLoader turns batches of these into tinyflow tensors).

Randomness. A random transform draws from, in order of preference:
1. its own ``generator`` (a ``numpy.random.Generator``, an int seed, or a tinyflow Generator);
2. the per-sample generator that the DataLoader installs while it loads sample ``i`` of
   epoch ``e`` (seeded from the loader's seed, ``e`` and ``i``), so that augmentations are the
   same whatever the number of worker processes and whichever worker loads the sample;
3. tinyflow's default generator (``tf.manual_seed`` reseeds it).
"""
from __future__ import annotations

import contextlib
import math
import numbers
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Union

import numpy as np
from PIL import Image

__all__ = [
    "Compose", "Resize", "CenterCrop", "RandomCrop", "RandomResizedCrop", "RandomHorizontalFlip",
    "ToTensor", "Normalize", "Lambda", "sample_rng", "current_rng",
]

ImageLike = Union[Image.Image, np.ndarray]
GeneratorLike = Union[np.random.Generator, int, Any, None]

_INTERPOLATION = {
    "nearest": Image.NEAREST,
    "bilinear": Image.BILINEAR,
    "bicubic": Image.BICUBIC,
    "lanczos": Image.LANCZOS,
}

# PIL modes of 16-bit grayscale: PNG/TIFF open as I;16 (or I;16B), 16-bit PGM as I (0..65535).
SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I")

_local = threading.local()
@contextlib.contextmanager
def sample_rng(rng: np.random.Generator) -> Iterator[np.random.Generator]:
    """Make ``rng`` the generator of random transforms in this thread for the ``with`` block."""
    previous = getattr(_local, "rng", None)
    _local.rng = rng
    try:
        yield rng
    finally:
        _local.rng = previous


def current_rng() -> np.random.Generator:
    """The per-sample generator installed by the DataLoader, else tinyflow's default generator
    (so ``tf.manual_seed`` also fixes transforms used outside a loader)."""
    rng = getattr(_local, "rng", None)
    if rng is not None:
        return rng
    from tinyflow.random import rng as default_rng

    return default_rng()


def _to_numpy_generator(generator: GeneratorLike) -> np.random.Generator | None:
    if generator is None or isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, numbers.Integral):
        return np.random.default_rng(int(generator))
    # A tinyflow Generator: use its NumPy generator when it exposes one, else seed from it.
    for attr in ("numpy_generator", "np_generator", "rng", "_rng"):
        inner = getattr(generator, attr, None)
        if isinstance(inner, np.random.Generator):
            return inner
    seed = getattr(generator, "initial_seed", None)
    seed = seed() if callable(seed) else seed
    if seed is None:
        raise TypeError(f"expected a numpy Generator, an int seed or a tinyflow Generator, got {generator!r}")
    return np.random.default_rng(int(seed))


class _RandomTransform:
    """A transform that draws random numbers; see the module docstring for which generator."""

    def __init__(self, generator: GeneratorLike = None):
        self.generator = _to_numpy_generator(generator)

    @property
    def rng(self) -> np.random.Generator:
        return self.generator if self.generator is not None else current_rng()


# ----------------------------------------------------------------------------- image helpers


def _check_image(img: Any, where: str) -> None:
    if isinstance(img, Image.Image):
        return
    if isinstance(img, np.ndarray) and img.ndim in (2, 3):
        return
    got = f"array of shape {img.shape}" if isinstance(img, np.ndarray) else type(img).__name__
    raise TypeError(f"{where}: expected a PIL image or an (H, W, C) array, got {got}")


def image_size(img: ImageLike) -> tuple[int, int]:
    """(height, width) of a PIL image or an (H, W[, C]) array."""
    if isinstance(img, Image.Image):
        return img.height, img.width
    return int(img.shape[0]), int(img.shape[1])


def _crop(img: ImageLike, top: int, left: int, height: int, width: int) -> ImageLike:
    if isinstance(img, Image.Image):
        return img.crop((left, top, left + width, top + height))
    return img[top : top + height, left : left + width]


def _resize(img: ImageLike, height: int, width: int, interpolation: str) -> ImageLike:
    if image_size(img) == (height, width):
        return img
    if isinstance(img, Image.Image):
        return img.resize((width, height), _INTERPOLATION[interpolation])
    return np.asarray(Image.fromarray(img).resize((width, height), _INTERPOLATION[interpolation]))


def _pair(size: int | Sequence[int], name: str) -> tuple[int, int]:
    if isinstance(size, numbers.Integral):
        size = (int(size), int(size))
    size = tuple(int(s) for s in size)
    if len(size) != 2 or min(size) <= 0:
        raise ValueError(f"{name}: size must be a positive int or (height, width), got {size}")
    return size  # type: ignore[return-value]


def _check_interpolation(interpolation: str, name: str) -> str:
    if interpolation not in _INTERPOLATION:
        raise ValueError(f"{name}: interpolation must be one of {sorted(_INTERPOLATION)}, got {interpolation!r}")
    return interpolation


# ----------------------------------------------------------------------------- transforms


class Compose:
    """Apply transforms one after another."""

    def __init__(self, transforms: Sequence[Callable[[Any], Any]]):
        self.transforms = list(transforms)

    def __call__(self, img: Any) -> Any:
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        inner = "".join(f"\n    {t!r}," for t in self.transforms)
        return f"Compose([{inner}\n])"


class Lambda:
    """Wrap a plain function as a transform."""

    def __init__(self, fn: Callable[[Any], Any]):
        self.fn = fn

    def __call__(self, img: Any) -> Any:
        return self.fn(img)


class Resize:
    """Resize to ``(h, w)``; an int resizes the shorter side to it, keeping the aspect ratio."""

    def __init__(self, size: int | Sequence[int], interpolation: str = "bilinear"):
        self.size = size if isinstance(size, numbers.Integral) else _pair(size, "Resize")
        if isinstance(self.size, numbers.Integral) and self.size <= 0:
            raise ValueError(f"Resize: size must be positive, got {size}")
        self.interpolation = _check_interpolation(interpolation, "Resize")

    def __call__(self, img: ImageLike) -> ImageLike:
        _check_image(img, "Resize")
        h, w = image_size(img)
        if isinstance(self.size, numbers.Integral):
            short, long = (h, w) if h <= w else (w, h)
            new_short, new_long = int(self.size), int(self.size * long / short)
            oh, ow = (new_short, new_long) if h <= w else (new_long, new_short)
        else:
            oh, ow = self.size
        return _resize(img, oh, ow, self.interpolation)

    def __repr__(self) -> str:
        return f"Resize(size={self.size}, interpolation={self.interpolation!r})"


class CenterCrop:
    """Crop the centre ``(h, w)``; an image smaller than that is zero-padded first (torchvision)."""

    def __init__(self, size: int | Sequence[int]):
        self.size = _pair(size, "CenterCrop")

    def __call__(self, img: ImageLike) -> ImageLike:
        _check_image(img, "CenterCrop")
        th, tw = self.size
        img = _pad_to(img, th, tw)
        h, w = image_size(img)
        top, left = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
        return _crop(img, top, left, th, tw)

    def __repr__(self) -> str:
        return f"CenterCrop(size={self.size})"


def _pad_to(img: ImageLike, th: int, tw: int) -> ImageLike:
    """Zero-pad symmetrically so the image is at least (th, tw)."""
    h, w = image_size(img)
    if h >= th and w >= tw:
        return img
    ph, pw = max(th - h, 0), max(tw - w, 0)
    arr = np.asarray(img)
    pad = [(ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2)] + [(0, 0)] * (arr.ndim - 2)
    out = np.pad(arr, pad)
    return Image.fromarray(out) if isinstance(img, Image.Image) else out


class RandomCrop(_RandomTransform):
    """Crop a random ``(h, w)`` window, after zero-padding each side by ``padding`` pixels."""

    def __init__(self, size: int | Sequence[int], padding: int = 0, generator: GeneratorLike = None):
        super().__init__(generator)
        self.size = _pair(size, "RandomCrop")
        self.padding = int(padding)

    def __call__(self, img: ImageLike) -> ImageLike:
        _check_image(img, "RandomCrop")
        th, tw = self.size
        if self.padding:
            h, w = image_size(img)
            img = _pad_to(img, h + 2 * self.padding, w + 2 * self.padding)
        img = _pad_to(img, th, tw)
        h, w = image_size(img)
        top = int(self.rng.integers(0, h - th + 1))
        left = int(self.rng.integers(0, w - tw + 1))
        return _crop(img, top, left, th, tw)

    def __repr__(self) -> str:
        return f"RandomCrop(size={self.size}, padding={self.padding})"


class RandomResizedCrop(_RandomTransform):
    """Crop a random area fraction ``scale`` and aspect ``ratio``, then resize to ``size``.

    torchvision's algorithm: ten tries at a window that fits, else the central crop at the
    nearest allowed aspect ratio.
    """

    def __init__(
        self,
        size: int | Sequence[int],
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
        interpolation: str = "bilinear",
        generator: GeneratorLike = None,
    ):
        super().__init__(generator)
        self.size = _pair(size, "RandomResizedCrop")
        if not (0 < scale[0] <= scale[1] <= 1.0) or not (0 < ratio[0] <= ratio[1]):
            raise ValueError(f"RandomResizedCrop: need 0 < scale <= 1 and 0 < ratio, got scale={scale} ratio={ratio}")
        self.scale, self.ratio = tuple(scale), tuple(ratio)
        self.interpolation = _check_interpolation(interpolation, "RandomResizedCrop")

    def window(self, height: int, width: int) -> tuple[int, int, int, int]:
        """(top, left, h, w) of the crop window for an image of this size."""
        rng = self.rng
        area = height * width
        log_ratio = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(10):
            target_area = area * rng.uniform(self.scale[0], self.scale[1])
            aspect = math.exp(rng.uniform(*log_ratio))
            w = int(round(math.sqrt(target_area * aspect)))
            h = int(round(math.sqrt(target_area / aspect)))
            if 0 < w <= width and 0 < h <= height:
                top = int(rng.integers(0, height - h + 1))
                left = int(rng.integers(0, width - w + 1))
                return top, left, h, w
        in_ratio = width / height
        if in_ratio < self.ratio[0]:
            w, h = width, int(round(width / self.ratio[0]))
        elif in_ratio > self.ratio[1]:
            h, w = height, int(round(height * self.ratio[1]))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, img: ImageLike) -> ImageLike:
        _check_image(img, "RandomResizedCrop")
        top, left, h, w = self.window(*image_size(img))
        return _resize(_crop(img, top, left, h, w), self.size[0], self.size[1], self.interpolation)

    def __repr__(self) -> str:
        return f"RandomResizedCrop(size={self.size}, scale={self.scale}, ratio={self.ratio})"


class RandomHorizontalFlip(_RandomTransform):
    """Mirror left-right with probability ``p``."""

    def __init__(self, p: float = 0.5, generator: GeneratorLike = None):
        super().__init__(generator)
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"RandomHorizontalFlip: p must be in [0, 1], got {p}")
        self.p = float(p)

    def __call__(self, img: ImageLike) -> ImageLike:
        _check_image(img, "RandomHorizontalFlip")
        if self.rng.random() >= self.p:
            return img
        if isinstance(img, Image.Image):
            return img.transpose(Image.FLIP_LEFT_RIGHT)
        return img[:, ::-1]

    def __repr__(self) -> str:
        return f"RandomHorizontalFlip(p={self.p})"


class ToTensor:
    """(H, W, C) image -> (C, H, W) float32 array; uint8 scaled to [0, 1].

    16-bit images (uint16 arrays, PIL modes ``I;16`` and ``I``) are scaled to [0, 1] too, by
    1 / 65535 (torchvision leaves them at 0..65535); other dtypes keep their values.
    """

    def __call__(self, img: ImageLike) -> np.ndarray:
        _check_image(img, "ToTensor")
        sixteen_bit = isinstance(img, Image.Image) and img.mode in SIXTEEN_BIT_MODES
        arr = np.asarray(img)
        sixteen_bit = sixteen_bit or (arr.dtype.kind == "u" and arr.dtype.itemsize == 2)
        if arr.ndim == 2:
            arr = arr[:, :, None]  # (H, W) -> (H, W, 1)
        out = np.ascontiguousarray(arr.transpose(2, 0, 1), dtype=np.float32)  # (C, H, W)
        if arr.dtype == np.uint8:
            out *= 1.0 / 255.0
        elif sixteen_bit:
            out *= 1.0 / 65535.0
        return out

    def __repr__(self) -> str:
        return "ToTensor()"



class Normalize:
    """(x - mean) / std per channel of a (C, H, W) float array."""

    def __init__(self, mean: Sequence[float], std: Sequence[float]):
        self.mean = np.asarray(mean, dtype=np.float32).reshape(-1, 1, 1)
        self.std = np.asarray(std, dtype=np.float32).reshape(-1, 1, 1)
        if np.any(self.std == 0):
            raise ValueError(f"Normalize: std must be non-zero, got {list(std)}")

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if x.ndim != 3 or x.shape[0] != self.mean.shape[0] or x.dtype == np.uint8:
            raise ValueError(
                f"Normalize: expected a (C, H, W) array with C={self.mean.shape[0]} channels "
                f"(apply ToTensor first), got shape {x.shape} of {x.dtype}"
            )
        return ((x - self.mean) / self.std).astype(np.float32, copy=False)

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean.ravel().tolist()}, std={self.std.ravel().tolist()})"
