"""Reading one shard's records while holding it to the manifest's record count.

TensorFlow's TFRecord reader reports a clean end of file for a shard cut at a record boundary,
and `ignore_errors()` silently drops the rest of a corrupt one. So every shard is read with its
expected count: records are counted a block at a time, and a shard that ends early (truncated,
corrupt, or a record that fails its checksum) or holds more records than listed raises an
`InvalidArgumentError` whose message names the file.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["READ_BUFFER_BYTES", "checked_blocks"]

READ_BUFFER_BYTES = 8 << 20


def checked_blocks(
    path: tf.Tensor,
    start: tf.Tensor,
    stop: tf.Tensor,
    shard_records: tf.Tensor,
    compression: str,
    block_length: int,
) -> tf.data.Dataset:
    """Records [start, stop) of the shard at `path`, in blocks of up to `block_length` records.

    The shard must hold exactly `shard_records` records. Blocks (string vectors) rather than
    single records leave the shard so that `interleave` moves a block per step: tf.data's
    per-element interleave costs more than reading itself. Reading stops at `stop`; when `stop`
    is the shard's end, one more record is asked for, so that extra records are noticed too.
    All arguments but `compression` and `block_length` are scalar tensors, so this can run
    inside `interleave`.
    """
    at_end = tf.equal(stop, shard_records)
    records = (
        tf.data.TFRecordDataset(path, compression_type=compression, buffer_size=READ_BUFFER_BYTES)
        # A corrupt record ends the shard early, which the count below turns into an error.
        .ignore_errors()
        .take(tf.where(at_end, stop + 1, stop))
        .skip(start)
        .batch(block_length)
    )
    # An empty block after the last one marks the end of the shard for the count check.
    end_marker = tf.data.Dataset.from_tensors(tf.zeros([0], tf.string))

    def count(seen: tf.Tensor, block: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        seen = tf.maximum(seen, start) + tf.size(block, out_type=tf.int64)
        is_end = tf.equal(tf.size(block), 0)
        too_many = seen > stop
        too_few = tf.logical_and(is_end, seen < stop)
        check = tf.debugging.Assert(
            tf.logical_not(tf.logical_or(too_many, too_few)),
            [
                "shard",
                path,
                "does not hold the",
                shard_records,
                "records its manifest lists (read",
                seen,
                "); it is truncated, corrupt or replaced: run `tfrecord-etl verify` on the dataset",
            ],
        )
        with tf.control_dependencies([check]):
            return seen, tf.identity(block)

    # The count starts at `start`: the skipped records were read too.
    return records.concatenate(end_marker).scan(tf.constant(0, tf.int64), count)
