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
    # The size check is free; the checksum costs a read, so it only runs when the size matches.
    wrong = shard.mismatches(size=tf.io.gfile.stat(path).length)
    if not wrong:
        crc = 0
        with tf.io.gfile.GFile(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                crc = google_crc32c.extend(crc, chunk)
        wrong = shard.mismatches(crc32c=crc)
    return "; ".join(wrong) or None
