"""Reading one shard's records while holding it to the manifest's record count.

TensorFlow's TFRecord reader reports a clean end of file for a shard cut at a record boundary,
and `ignore_errors()` silently drops the rest of a corrupt one. So every shard is read with its
expected count: each block of records must hold exactly as many records as the count says it
should, and a shard that ends early (truncated, corrupt, or a record that fails its checksum) or
holds more records than listed raises an `InvalidArgumentError` whose message names the file.

The check costs one small function call per block. Run by tf.data's default executor (each op
a hop through the inter-op thread pool) that call took about 100 us, a third of the reader's
CPU time at 64 records per block; run inline by the single-threaded executor it is cheap.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tfdata_reader._compat import HAS_BYTE_OFFSETS, inline_map, records_at

__all__ = ["BlockReading", "checked_blocks"]

READ_BUFFER_BYTES = 8 << 20


@dataclasses.dataclass(frozen=True)
class BlockReading:
    """How shards are read: TensorFlow's compression name, records a block, read buffer."""

    compression: str
    block_length: int
    buffer_bytes: int = READ_BUFFER_BYTES


def checked_blocks(
    path: tf.Tensor,
    start: tf.Tensor,
    stop: tf.Tensor,
    shard_records: tf.Tensor,
    reading: BlockReading,
    seek: tuple[tf.Tensor, tf.Tensor] | None = None,
) -> tf.data.Dataset:
    """Records [start, stop) of the shard at `path`, in blocks of up to `block_length` records.

    `seek`: a seek point at or before `start` (its record, and its frame's offset in the
    shard's framed stream, after decompression): reading starts there instead of at the
    shard's start (a GZIP shard is still decompressed from its start up to it).

    The shard must hold exactly `shard_records` records. Blocks (string vectors) rather than
    single records leave the shard so that `interleave` moves a block per step: tf.data's
    per-element interleave costs more than reading itself. Reading stops at `stop`; when `stop`
    is the shard's end, one more record is asked for, so that extra records are noticed too.
    The last element is an empty block. All arguments but `reading` are scalar tensors, so this
    can run inside `interleave`.
    """
    at_end = tf.equal(stop, shard_records)
    # Records this range must yield: one more than it holds at the shard's end would be an extra.
    wanted = stop - start
    with tf.control_dependencies([_assert_exists(path)]):
        count = tf.where(at_end, stop + 1, stop)
    block_length = reading.block_length
    if seek is not None and HAS_BYTE_OFFSETS:
        first, offset = seek
        read = records_at(
            path,
            offset,
            reading.compression,
            reading.buffer_bytes,
            lambda records: records.take(count - first).skip(start - first).batch(block_length),
        )
    else:
        read = (
            tf.data.TFRecordDataset(
                path, compression_type=reading.compression, buffer_size=reading.buffer_bytes
            )
            .take(count)
            .skip(start)
            .batch(block_length)
        )
    blocks = (
        read
        # A read error (a corrupt record) fails its block, and TF's reader moves past the file:
        # the check below then sees the range end early and names the file.
        .ignore_errors()
        # An empty block after the last one marks the end of the shard for the check.
        .concatenate(tf.data.Dataset.from_tensors(tf.zeros([0], tf.string)))
        .enumerate()
    )
    length = tf.constant(block_length, tf.int64)

    def check(index: tf.Tensor, block: tf.Tensor) -> tf.Tensor:
        size = tf.size(block, out_type=tf.int64)
        before = index * length
        expected = tf.clip_by_value(wanted - before, 0, length)
        # The plain Assert op: tf.debugging.Assert wraps it in a cond, which the inline
        # executor cannot run.
        assertion = tf.raw_ops.Assert(
            condition=tf.equal(size, expected),
            data=[
                "shard",
                path,
                "does not hold the",
                shard_records,
                "records its manifest lists (read",
                start + before + size,
                "); it is truncated, corrupt or replaced (or a GZIP file of several members, as "
                "earlier versions joined parts, which TensorFlow reads short): run "
                "`tfrecord-etl verify` on the dataset",
            ],
            summarize=1,
        )
        with tf.control_dependencies([assertion]):
            return tf.identity(block)

    return inline_map(blocks, check)


def _assert_exists(path: tf.Tensor) -> tf.Operation:
    """Fails naming the shard when it is missing: TF's reader, and `ignore_errors()` after it,
    would retry opening it forever. The path is looked up as a glob pattern with its glob
    characters escaped (a dataset folder may be named `runs[1]`)."""
    pattern = tf.strings.regex_replace(path, r"([\[\]*?\\])", r"\\\1")
    found = tf.size(tf.raw_ops.MatchingFiles(pattern=pattern)) > 0
    return tf.raw_ops.Assert(
        condition=found,
        data=[
            "shard",
            path,
            "is missing: its dataset was replaced or damaged; run `tfrecord-etl verify` on it",
        ],
    )
