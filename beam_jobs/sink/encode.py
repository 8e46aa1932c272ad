"""Arrow record batches to serialized `tf.train.Example`s and back, vectorized with tfx-bsl.

tfx-bsl's C++ encoder does the per-record work; it needs every column as a list array of
int64, float32 or binary values. This module turns scalar columns into such lists: a value
becomes a one-element list and a null (a missing value) an empty list, so the feature is present
in the Example with no values. List columns keep their values; a null list becomes empty too.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_jobs.schema.conform import VALUE_TYPES, is_list, list_parts
from tfdata_reader.manifest import FeatureSpec

__all__ = ["ExampleEncoder", "decode_examples"]


def to_list_column(column: pa.Array, dtype: str) -> pa.ListArray:
    """A scalar column as one-element lists (empty for nulls), or a list column with null lists
    made empty, of the Example dtype.

    Args:
      column: a scalar or list Arrow array; it must hold values castable to `dtype`.
      dtype: "int64", "float32" or "bytes".
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if is_list(column.type):
        offsets, values = list_parts(column)
        return pa.ListArray.from_arrays(offsets, pc.cast(values, VALUE_TYPES[dtype], safe=False))
    # Unsafe cast: float64 -> float32 rounds, as tf.train.FloatList does.
    values = pc.cast(column, VALUE_TYPES[dtype], safe=False)
    if values.null_count == 0:
        offsets = pa.array(np.arange(len(values) + 1, dtype=np.int32))
        return pa.ListArray.from_arrays(offsets, values)
    valid = np.asarray(values.is_valid(), dtype=np.int32)
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(valid, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), values.drop_null())


class ExampleEncoder:
    """Encodes record batches whose columns are scalars of the given feature specs."""

    def __init__(self, features: Sequence[FeatureSpec]) -> None:
        # Imported here so that merely importing this module stays cheap.
        from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder

        self._features = list(features)
        self._encoder = RecordBatchToExamplesEncoder()

    def encode(self, batch: pa.RecordBatch) -> list[bytes]:
        """Returns one serialized Example per row of `batch`."""
        arrays = [to_list_column(batch.column(f.name), f.dtype) for f in self._features]
        names = [f.name for f in self._features]
        return self._encoder.encode(pa.RecordBatch.from_arrays(arrays, names))


def decode_examples(records: Sequence[bytes]) -> pa.RecordBatch:
    """Serialized Examples as one record batch of list columns (tfx-bsl's C++ decoder).

    Raises:
      RuntimeError or ValueError (tfx-bsl's): when a record is not a `tf.train.Example`.
    """
    from tfx_bsl.coders.example_coder import ExamplesToRecordBatchDecoder

    return ExamplesToRecordBatchDecoder().DecodeBatch(list(records))
