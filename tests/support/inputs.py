"""Small valid input files of every format, for tests that then damage or remove them."""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np

ROWS = 200


def example(i: int) -> bytes:
    import tensorflow as tf

    feature = {
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"n{i}".encode()])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def png(pixels: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def write_input(folder: pathlib.Path, fmt: str, rows: int = ROWS) -> tuple[pathlib.Path, list[str]]:
    """One valid input file of `fmt` in `folder` (a folder of images for "images"); returns the
    path to give as --input, and the extra flags the conversion needs."""
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        path = folder / "a.csv"
        path.write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in range(rows)))
    elif fmt == "jsonl":
        path = folder / "a.jsonl"
        path.write_text("".join(json.dumps({"id": i, "name": f"n{i}"}) + "\n" for i in range(rows)))
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = folder / "a.parquet"
        table = pa.table({"id": list(range(rows)), "name": [f"n{i}" for i in range(rows)]})
        pq.write_table(table, path, row_group_size=max(1, rows // 4))
    elif fmt == "text":
        path = folder / "a.txt"
        path.write_text("".join(f"line {i}\n" for i in range(rows)))
    elif fmt == "tfrecord":
        import tensorflow as tf

        path = folder / "a.tfrecord"
        with tf.io.TFRecordWriter(str(path)) as writer:
            for i in range(rows):
                writer.write(example(i))
    elif fmt == "images":
        rng = np.random.default_rng(0)
        for i in range(rows // 20):
            (folder / "imgs" / f"c{i % 2}").mkdir(parents=True, exist_ok=True)
            pixels = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
            (folder / "imgs" / f"c{i % 2}" / f"{i:03d}.png").write_bytes(png(pixels))
        return folder / "imgs", ["--format=images"]
    else:
        raise ValueError(fmt)
    return path, []
