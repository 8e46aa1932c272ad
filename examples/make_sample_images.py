"""Writes a small labelled image folder: ROOT/<class>/<n>.png|jpg, generated, no downloads.

Each class has its own colour pattern so a model could learn it; sizes vary so the reader's
`image_size` resizing is exercised.
"""

from __future__ import annotations

import argparse
import pathlib

import numpy as np

CLASSES = ("circle", "square", "stripes")


def _pixels(kind: str, height: int, width: int, rng: np.random.Generator) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    image = rng.integers(0, 40, size=(height, width, 3), dtype=np.uint8)
    if kind == "circle":
        mask = (y - height / 2) ** 2 + (x - width / 2) ** 2 < (min(height, width) / 3) ** 2
    elif kind == "square":
        mask = (abs(y - height / 2) < height / 4) & (abs(x - width / 2) < width / 4)
    else:
        mask = (x // 4) % 2 == 0
    image[mask] = (220, 180, 40)
    return image


def write_sample_images(root: pathlib.Path, per_class: int, seed: int = 0) -> list[pathlib.Path]:
    """Writes `per_class` images for each class; returns their paths."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    paths = []
    for kind in CLASSES:
        (root / kind).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            height, width = int(rng.integers(24, 64)), int(rng.integers(24, 64))
            path = root / kind / f"{i:04d}.{'png' if i % 2 else 'jpg'}"
            Image.fromarray(_pixels(kind, height, width, rng)).save(path)
            paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=pathlib.Path, required=True)
    parser.add_argument("--per_class", type=int, default=100)
    args = parser.parse_args()
    paths = write_sample_images(args.output, args.per_class)
    print(f"wrote {len(paths)} images in {len(CLASSES)} class folders under {args.output}")


if __name__ == "__main__":
    main()
