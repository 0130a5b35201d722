"""Input pipeline: the host time to decode and augment one training image, as an ImageNet loader does.

Published training throughputs include data loading. A loader decodes a JPEG, crops a random box of 8-100% of
the area, resizes it to the model's input, flips it and normalises it (torchvision's RandomResizedCrop +
RandomHorizontalFlip + ToTensor + Normalize, done here with Pillow and NumPy so no torchvision is needed).
`IMAGES` synthetic JPEGs of ImageNet's typical size (500 x 375, quality 90, smooth gradients plus noise so
they compress like photographs) are made once; one timed call processes all of them on one thread, so
time / IMAGES is the core-seconds per sample (calibrate.input_fit). Workers spread this over the node's cores.
"""
from __future__ import annotations

import io

import numpy as np

from profiler.cases import BenchCase

IMAGES = 16
SOURCE_SIZE = (500, 375)  # width, height: a typical ImageNet photograph
CROPS = (224,)
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def _pillow():
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow comes with matplotlib
        return None
    return Image


def synthetic_jpegs(count: int, size: tuple[int, int], seed: int = 0) -> list[bytes]:
    Image = _pillow()
    rng = np.random.default_rng(seed)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w]
    out = []
    for _ in range(count):
        base = np.stack([(np.sin(xx / rng.uniform(20, 80) + c) * np.cos(yy / rng.uniform(20, 80)) + 1) * 110
                         for c in rng.uniform(0, 3, 3)], axis=-1)
        pixels = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def decode_augment(blob: bytes, crop: int, rng: np.random.Generator) -> np.ndarray:
    """One sample as a loader makes it: decode, random-resized crop, flip, scale to [0, 1], normalise (CHW)."""
    Image = _pillow()
    image = Image.open(io.BytesIO(blob)).convert("RGB")
    w, h = image.size
    area = w * h * rng.uniform(0.08, 1.0)
    ratio = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
    cw, ch = min(w, int(round(np.sqrt(area * ratio)))), min(h, int(round(np.sqrt(area / ratio))))
    x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
    image = image.resize((crop, crop), Image.BILINEAR, box=(x0, y0, x0 + cw, y0 + ch))
    if rng.random() < 0.5:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    array = np.asarray(image, dtype=np.float32) / 255.0
    return ((array - MEAN) / STD).transpose(2, 0, 1)


def input_cases(quick: bool) -> list[BenchCase]:
    """One case per crop size ([] without Pillow: the profile then has no input-pipeline coefficient)."""
    if _pillow() is None:
        return []

    def case(crop: int) -> BenchCase:
        def build():
            blobs = synthetic_jpegs(IMAGES, SOURCE_SIZE)
            rng = np.random.default_rng(1)
            return lambda: [decode_augment(b, crop, rng) for b in blobs]
        params = {"images": IMAGES, "width": SOURCE_SIZE[0], "height": SOURCE_SIZE[1], "crop": crop}
        return BenchCase("input", "decode_augment", params, "uint8", None, None, build)

    return [case(c) for c in CROPS]

