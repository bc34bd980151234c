"""The embedded default data set: a synthetic ImageNet-layout subset, generated once and cached.

``root/train/<class>/*.jpg`` and ``root/val/<class>/*.jpg``: ten classes of shapes and
textures (circle, square, triangle, star, cross, ring, crescent, stripes, checker, dots), each
drawn at a random position, scale and rotation on a noisy random gradient background with
clutter (small distractor blobs and lines). Each class has its own hue band, but neighbouring
bands overlap (an object's hue is the class's plus noise of std 0.1 on a 0..1 hue circle where
classes sit 0.1 apart), so colour gets a CNN off the ground quickly but only shape and texture
get it far: learnable in a few CPU epochs, not trivial.

Generation is deterministic (seeded per image), takes a few seconds, and writes into a
temporary folder that is renamed into place, so concurrent first runs are safe.
Cache location: $TINYFLOW_HOME/datasets, else $XDG_CACHE_HOME/tinyflow/datasets,
else ~/.cache/tinyflow/datasets.
"""
from __future__ import annotations

import colorsys
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

__all__ = ["CLASSES", "cache_dir", "default_dataset", "generate", "render"]

CLASSES = ("circle", "square", "triangle", "star", "cross", "ring", "crescent", "stripes", "checker", "dots")
VERSION = 3
SUPERSAMPLE = 2  # draw at 2x and downsample: anti-aliased edges
HUE_SPREAD = 0.1  # std of an object's hue around its class's (classes are 0.1 apart)


def cache_dir() -> Path:
    """Where tinyflow caches generated data: TINYFLOW_HOME, XDG_CACHE_HOME/tinyflow or ~/.cache/tinyflow."""
    if os.environ.get("TINYFLOW_HOME"):
        return Path(os.environ["TINYFLOW_HOME"]).expanduser() / "datasets"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tinyflow" / "datasets"


# ----------------------------------------------------------------------------- drawing


def _polygon(cx: float, cy: float, radii: np.ndarray, angle: float) -> list[tuple[float, float]]:
    """Vertices at evenly spaced angles (starting at ``angle``) and the given radii."""
    theta = angle + np.arange(len(radii)) * (2 * math.pi / len(radii))
    return list(zip((cx + radii * np.cos(theta)).tolist(), (cy + radii * np.sin(theta)).tolist()))


def _shape_mask(kind: str, size: int, cx: float, cy: float, r: float, angle: float, rng: np.random.Generator) -> np.ndarray:
    """A float mask in [0, 1] of shape (size, size) covering the object of class ``kind``."""
    mask = Image.new("L", (size, size), 0)
    draw = ImageDraw.Draw(mask)
    box = (cx - r, cy - r, cx + r, cy + r)
    if kind in ("circle", "stripes", "dots"):
        draw.ellipse(box, fill=255)
    elif kind in ("square", "checker"):
        draw.polygon(_polygon(cx, cy, np.full(4, r * 1.1), angle), fill=255)
    elif kind == "triangle":
        draw.polygon(_polygon(cx, cy, np.full(3, r * 1.15), angle), fill=255)
    elif kind == "star":
        draw.polygon(_polygon(cx, cy, np.tile([r * 1.15, r * 0.45], 5), angle), fill=255)
    elif kind == "cross":
        arm = r * 0.32
        for a in (angle, angle + math.pi / 2):
            dx, dy = math.cos(a), math.sin(a)
            px, py = -dy * arm, dx * arm
            draw.polygon(
                [(cx - dx * r + px, cy - dy * r + py), (cx + dx * r + px, cy + dy * r + py),
                 (cx + dx * r - px, cy + dy * r - py), (cx - dx * r - px, cy - dy * r - py)],
                fill=255,
            )
    elif kind == "ring":
        draw.ellipse(box, fill=255)
        inner = r * rng.uniform(0.5, 0.68)
        draw.ellipse((cx - inner, cy - inner, cx + inner, cy + inner), fill=0)
    elif kind == "crescent":
        draw.ellipse(box, fill=255)
        off = r * 0.55
        ox, oy = cx + off * math.cos(angle), cy + off * math.sin(angle)
        draw.ellipse((ox - r * 0.85, oy - r * 0.85, ox + r * 0.85, oy + r * 0.85), fill=0)
    else:  # pragma: no cover - CLASSES is closed
        raise ValueError(kind)
    return np.asarray(mask, dtype=np.float32) / 255.0


def _texture(kind: str, size: int, cx: float, cy: float, r: float, angle: float,
             fg: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The (size, size, 3) colour field that fills the object: plain for shapes, patterned otherwise."""
    if kind not in ("stripes", "checker", "dots"):
        return np.broadcast_to(fg, (size, size, 3))
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    u = (xx - cx) * math.cos(angle) + (yy - cy) * math.sin(angle)
    v = -(xx - cx) * math.sin(angle) + (yy - cy) * math.cos(angle)
    second = 255.0 - fg  # the pattern's other colour: the complement, always contrasting
    if kind == "stripes":
        period = r * rng.uniform(0.45, 0.7)
        on = np.sin(2 * math.pi * u / period) > 0
    elif kind == "checker":
        period = r * rng.uniform(0.45, 0.65)
        on = (np.floor(u / period) + np.floor(v / period)) % 2 == 0
    else:  # dots: a lattice of small discs
        period = r * rng.uniform(0.5, 0.7)
        du = u - period * np.round(u / period)
        dv = v - period * np.round(v / period)
        on = du * du + dv * dv < (period * 0.3) ** 2
        second = np.full(3, 255.0 - fg.mean(), dtype=np.float32)
    return np.where(on[..., None], fg, second)


def _background(size: int, rng: np.random.Generator) -> np.ndarray:
    """A random two-colour linear gradient, (size, size, 3) float32."""
    c0, c1 = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    a = rng.uniform(0, 2 * math.pi)
    t = np.linspace(-1, 1, size, dtype=np.float32)
    ramp = (np.cos(a) * t[None, :] + np.sin(a) * t[:, None]) / math.sqrt(2) * 0.5 + 0.5  # (size, size) in [0, 1]
    return (c0 * (1 - ramp[..., None]) + c1 * ramp[..., None]).astype(np.float32)


def _clutter(img: Image.Image, size: int, rng: np.random.Generator) -> None:
    """Small distractors: blobs and line segments in random colours."""
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(1, 4))):
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        x, y = rng.uniform(0, size, 2)
        if rng.random() < 0.5:
            s = rng.uniform(0.02, 0.06) * size
            draw.ellipse((x - s, y - s, x + s, y + s), fill=colour)
        else:
            length, a = rng.uniform(0.1, 0.3) * size, rng.uniform(0, 2 * math.pi)
            draw.line((x, y, x + length * math.cos(a), y + length * math.sin(a)), fill=colour,
                      width=max(1, int(size * 0.015)))


def _class_colour(label: int, rng: np.random.Generator, background: np.ndarray) -> np.ndarray:
    """The object's RGB colour: a hue near the class's own (bands of neighbouring classes overlap,
    so colour hints at the class without deciding it), brightness chosen to stand out."""
    hue = (label / len(CLASSES) + rng.normal(0, HUE_SPREAD)) % 1.0
    sat = rng.uniform(0.5, 1.0)
    val = rng.uniform(0.45, 1.0)
    fg = np.array(colorsys.hsv_to_rgb(hue, sat, val), dtype=np.float32) * 255
    if np.abs(fg - background).mean() < 60:  # too close to the background: go dark or bright
        val = 1.0 if background.mean() < 128 else 0.3
        fg = np.array(colorsys.hsv_to_rgb(hue, sat, val), dtype=np.float32) * 255
    return fg


def render(label: int, size: int, rng: np.random.Generator) -> Image.Image:
    """One RGB image of class ``CLASSES[label]``, size x size, drawn from ``rng``."""
    kind = CLASSES[label]
    big = size * SUPERSAMPLE
    bg = _background(big, rng)
    canvas = Image.fromarray(bg.astype(np.uint8))
    _clutter(canvas, big, rng)
    bg = np.asarray(canvas, dtype=np.float32)

    r = big * rng.uniform(0.22, 0.36)
    cx, cy = rng.uniform(r, big - r, 2)
    angle = rng.uniform(0, 2 * math.pi)
    fg = _class_colour(label, rng, bg[int(cy), int(cx)])
    mask = _shape_mask(kind, big, cx, cy, r, angle, rng)[..., None]  # (big, big, 1)
    img = bg * (1 - mask) + _texture(kind, big, cx, cy, r, angle, fg, rng) * mask
    img = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).resize((size, size), Image.BILINEAR)
    noisy = np.asarray(img, dtype=np.float32) + rng.normal(0, rng.uniform(2, 8), (size, size, 3))
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))


# ----------------------------------------------------------------------------- the data set


def generate(root: str | os.PathLike, train_per_class: int = 300, val_per_class: int = 60,
             size: int = 64, seed: int = 0, quality: int = 90, classes: Sequence[str] = CLASSES) -> Path:
    """Write the data set under ``root`` (``train/`` and ``val/`` of class folders of JPEGs).

    ``classes`` picks a subset of CLASSES (e.g. for small, quick experiments).
    """
    root = Path(root)
    unknown = [c for c in classes if c not in CLASSES]
    if unknown:
        raise ValueError(f"synthetic.generate: unknown classes {unknown}; choose from {list(CLASSES)}")
    for split_id, (split, count) in enumerate((("train", train_per_class), ("val", val_per_class))):
        for name in classes:
            label = CLASSES.index(name)
            folder = root / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                rng = np.random.default_rng([seed, split_id, label, i])
                render(label, size, rng).save(folder / f"{name}_{i:04d}.jpg", quality=quality)
    info = {"version": VERSION, "classes": list(classes), "size": size, "seed": seed,
            "train_per_class": train_per_class, "val_per_class": val_per_class}
    (root / "info.json").write_text(json.dumps(info, indent=1))
    return root


def default_dataset(train_per_class: int = 300, val_per_class: int = 60, size: int = 64, seed: int = 0,
                    root: str | os.PathLike | None = None, verbose: bool = True) -> Path:
    """The cached synthetic set (generating it the first time); returns its root folder."""
    base = Path(root) if root is not None else cache_dir()
    name = f"synthetic-shapes-v{VERSION}-{size}px-{train_per_class}x{val_per_class}-seed{seed}"
    final = base / name
    if (final / "info.json").is_file():
        return final
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=base))
    start = time.perf_counter()
    if verbose:
        total = (train_per_class + val_per_class) * len(CLASSES)
        print(f"generating the synthetic data set ({total} images, {size}x{size}) in {final} ...", flush=True)
    try:
        generate(tmp, train_per_class, val_per_class, size, seed)
        try:
            os.replace(tmp, final)
        except OSError:  # another process finished first: keep its copy
            if not (final / "info.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    if verbose:
        print(f"done in {time.perf_counter() - start:.1f} s", flush=True)
    return final
