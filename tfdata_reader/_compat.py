"""The private TensorFlow APIs the reader uses, each behind a fallback.

`Dataset.map` always runs its function through tf.data's inter-op thread pool, a hop per op.
TF's own `_MapDataset` has a switch (`use_inter_op_parallelism=False`) that runs a small
function inline on the calling thread instead: for the reader's per-block count check that
was a third of its CPU time (see `records`). Should a TensorFlow release drop or change the
class, `inline_map` falls back to `Dataset.map`: slower, same results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

__all__ = ["HAS_BYTE_OFFSETS", "HAS_INLINE_MAP", "inline_map", "records_at"]

try:
    from tensorflow.python.data.ops.map_op import _MapDataset
except ImportError:  # pragma: no cover - exercised by the fallback test with it hidden
    _MapDataset = None

HAS_INLINE_MAP = _MapDataset is not None


def inline_map(dataset: tf.data.Dataset, fn: Callable[..., Any]) -> tf.data.Dataset:
    """`dataset.map(fn)`, run inline (single-threaded executor) where this TensorFlow allows."""
    if _MapDataset is None:
        return dataset.map(fn)
    try:
        return _MapDataset(dataset, fn, use_inter_op_parallelism=False, preserve_cardinality=True)
    except TypeError:  # the private signature changed
        return dataset.map(fn)


# `TFRecordDatasetV2` takes a byte offset per file to start reading at (after decompression
# for GZIP); `tf.data.TFRecordDataset` does not expose it. Its dataset cannot be serialized
# (checkpointing the iterator, tf.data service), which the reader does not do. Without it,
# reading starts at the shard's start and skips: slower, same records.
try:
    from tensorflow.python.data.ops import dataset_ops as _dataset_ops
    from tensorflow.python.framework import dtypes as _dtypes
    from tensorflow.python.framework import tensor_spec as _tensor_spec
    from tensorflow.python.ops import gen_dataset_ops as _gen

    HAS_BYTE_OFFSETS = hasattr(_gen, "tf_record_dataset_v2")
except ImportError:  # pragma: no cover
    HAS_BYTE_OFFSETS = False


def records_at(
    path: tf.Tensor,
    offset: tf.Tensor,
    compression: str,
    buffer: int,
    then: Callable[[tf.data.Dataset], tf.data.Dataset] = lambda records: records,
) -> tf.data.Dataset:
    """The TFRecords of one file from byte `offset` of its framed stream on, as `then` makes
    them (inside the function that opens the file: a `then` that batches them leaves it a
    batch at a time, not a record, which tf.data's per-element overhead makes dearer)."""

    class _RecordsAt(_dataset_ops.DatasetSource):
        @tf.autograph.experimental.do_not_convert
        def __init__(self, path: tf.Tensor, offset: tf.Tensor) -> None:
            self._name = None
            variant = _gen.tf_record_dataset_v2(
                path,
                compression,
                tf.constant(buffer, tf.int64),
                tf.cast(offset, tf.int64),
                metadata=self._metadata.SerializeToString(),
            )
            super(_RecordsAt, self).__init__(variant)  # noqa: UP008 (autograph: no cell)

        @property
        def element_spec(self) -> tf.TensorSpec:
            return _tensor_spec.TensorSpec([], _dtypes.string)

    # Made inside a dataset function: TensorFlow cannot write this op into a dataset's graph
    # (its serializer leaves out the offsets), which a dataset made at the top level needs.
    start = tf.data.Dataset.from_tensors((path, tf.cast(offset, tf.int64)))
    return start.flat_map(
        tf.autograph.experimental.do_not_convert(lambda p, o: then(_RecordsAt(p, o)))
    )
