"""Reads an image dataset converted with `--format images`, decoded and resized, and prints
what one batch holds."""

from __future__ import annotations

import argparse

import numpy as np

from tfdata_reader.quiet import import_tensorflow_quietly

import_tensorflow_quietly()  # TensorFlow without its C++ start-up notices (oneDNN, CUDA)

from tfdata_reader import make_dataset, read_manifest  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--split", default=None, help="e.g. train, for a dataset with --splits")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--size", type=int, nargs=2, default=(32, 32), metavar=("H", "W"))
    args = parser.parse_args()
    vocabulary = read_manifest(args.dataset).label_vocabulary
    ds = make_dataset(
        args.dataset,
        args.batch_size,
        seed=1,
        split=args.split,
        decode_images=True,
        image_size=tuple(args.size),
    )
    batch = next(iter(ds))
    images, labels = batch["image"].numpy(), batch["label"].numpy()
    counts = np.bincount(labels, minlength=len(vocabulary))
    print(f"images {images.shape} {images.dtype}, pixel mean {images.mean():.1f}")
    print(
        "labels in this batch: "
        + ", ".join(f"{n}={c}" for n, c in zip(vocabulary, counts, strict=True))
    )
    sizes = sorted({(int(h), int(w)) for h, w in zip(batch["height"], batch["width"], strict=True)})
    print(f"original sizes: {len(sizes)} distinct, from {sizes[0]} to {sizes[-1]}")


if __name__ == "__main__":
    main()
