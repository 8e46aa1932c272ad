"""Checking a stored shard against the manifest before reading it (`skip_corrupt_shards`)."""

from __future__ import annotations

import google_crc32c
import tensorflow as tf

from tfdata_reader.manifest import ShardInfo

__all__ = ["shard_problem"]

_CHUNK = 8 << 20


def shard_problem(path: str, shard: ShardInfo) -> str | None:
    """What is wrong with the file at `path` (missing, size, CRC32C), or None when it matches.

    Reads the whole file once, through TensorFlow's file systems (local, gs://...).
    """
    if not tf.io.gfile.exists(path):
        return "missing"
    size = tf.io.gfile.stat(path).length
    if size != shard.bytes:
        return f"size is {size} bytes, manifest says {shard.bytes}"
    crc = 0
    with tf.io.gfile.GFile(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            crc = google_crc32c.extend(crc, chunk)
    if f"{crc:08x}" != shard.crc32c:
        return f"crc32c is {crc:08x}, manifest says {shard.crc32c}"
    return None
