"""Arrow record batches to serialized `tf.train.Example`s (features in the spec's order, see
`example_wire`) and back (tfx-bsl's C++ decoder).

Every column becomes lists of int64, float32 or binary values: a scalar value a one-element
list and a null (a missing value) an empty list, so the feature is present in the Example with
no values. List columns keep their values; a null list becomes empty too.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_jobs.codec.example_wire import encode_examples
from tfdata_reader.manifest import FeatureSpec

__all__ = [
    "TOGETHER_MAX_ROWS",
    "TOGETHER_MIN_COLUMNS",
    "VALUE_TYPES",
    "ExampleEncoder",
    "cast_together",
    "decode_examples",
    "is_list",
    "number_groups",
    "value_lists",
]

# The Arrow value type each Example dtype is built from (float32 rounds like tf.train.FloatList).
VALUE_TYPES = {"int64": pa.int64(), "float32": pa.float32(), "bytes": pa.binary()}


def is_list(arrow_type: pa.DataType) -> bool:
    """Whether an Arrow type is a list (of any kind): a feature of several values per row."""
    return (
        pa.types.is_list(arrow_type)
        or pa.types.is_large_list(arrow_type)
        or pa.types.is_fixed_size_list(arrow_type)
    )


def value_lists(
    column: pa.Array, dtype: str, one_each: np.ndarray | None = None
) -> tuple[np.ndarray, pa.Array]:
    """A scalar or list column as (row offsets from 0, the values cast to the Example dtype,
    without nulls): a null row has no values. `one_each`: the offsets of one value a row
    (0, 1, ..., rows), given as the offsets of a scalar column without nulls (read-only: the
    columns of a batch share it)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if one_each is not None and not column.null_count and not is_list(column.type):
        return one_each, pc.cast(column, VALUE_TYPES[dtype], safe=False)
    if is_list(column.type):
        # list_flatten skips null lists, whatever their offsets cover.
        values = pc.list_flatten(column)
        lengths = pc.fill_null(pc.list_value_length(column), 0)
    else:
        values = column.drop_null() if column.null_count else column
        lengths = column.is_valid()
    offsets = np.zeros(len(column) + 1, dtype=np.int64)
    np.cumsum(np.asarray(lengths.to_numpy(zero_copy_only=False), dtype=np.int64), out=offsets[1:])
    # Unsafe cast: float64 -> float32 rounds, as tf.train.FloatList does.
    return offsets, pc.cast(values, VALUE_TYPES[dtype], safe=False)


# Columns are handled a group at a time when a call's cost (7 us, whatever it holds) outweighs
# copying them end to end: batches of few rows and many columns (5,000 columns of 453 rows:
# a cast a column 35 ms, together 8). With 20,000 rows of 24 floats the copy costs more (0.39
# -> 0.62 ms), as with 4 columns.
TOGETHER_MAX_ROWS = 4096
TOGETHER_MIN_COLUMNS = 8


def number_groups(
    columns: Sequence[pa.Array | pa.ChunkedArray],
    keys: Sequence[Hashable | None],
    min_columns: int = TOGETHER_MIN_COLUMNS,
    max_rows: int = TOGETHER_MAX_ROWS,
) -> list[list[int]]:
    """Positions of the columns worth handling a group at a time: scalar number columns
    without nulls (whole arrays, not chunked) of at most `max_rows` values, grouped by their
    type and their `keys` entry (None: left out), in groups of at least `min_columns`."""
    groups: dict[tuple[pa.DataType, Hashable], list[int]] = {}
    for i, (column, key) in enumerate(zip(columns, keys, strict=True)):
        kind = column.type
        number = pa.types.is_floating(kind) or pa.types.is_integer(kind)
        whole = isinstance(column, pa.Array) and len(column) <= max_rows
        if key is not None and number and whole and not column.null_count:
            groups.setdefault((kind, key), []).append(i)
    return [members for members in groups.values() if len(members) >= min_columns]


def cast_together(batch: pa.RecordBatch, features: Sequence[FeatureSpec]) -> dict[str, pa.Array]:
    """The columns of `number_groups` (by Example dtype) cast to their Example dtype a group at
    a time: joined end to end, cast in one call and cut apart again, the same values as a cast
    a column. Other columns: none (each is cast alone)."""
    columns = [batch.column(f.name) for f in features]
    dtypes = [None if f.dtype == "bytes" else f.dtype for f in features]
    rows = batch.num_rows
    cast: dict[str, pa.Array] = {}
    for members in number_groups(columns, dtypes):
        joined = pa.concat_arrays([columns[i] for i in members])
        values = pc.cast(joined, VALUE_TYPES[features[members[0]].dtype], safe=False)
        cast.update((features[i].name, values.slice(k * rows, rows)) for k, i in enumerate(members))
    return cast


class ExampleEncoder:
    """Encodes record batches whose columns hold the given feature specs, every Example's
    features in the order of `features`: the same rows give the same bytes in every process."""

    def __init__(self, features: Sequence[FeatureSpec]) -> None:
        self._features = list(features)
        self._names = [f.name for f in self._features]
        self._dtypes = [f.dtype for f in self._features]

    def encode(self, batch: pa.RecordBatch) -> list[bytes]:
        """Returns one serialized Example per row of `batch`."""
        return self.encode_columns(self.columns(batch), batch.num_rows)

    def columns(self, batch: pa.RecordBatch) -> list[tuple[np.ndarray, pa.Array]]:
        """Each feature's `value_lists`, in the features' order (statistics use them too);
        the scalar columns without nulls share one offsets array."""
        one_each = np.arange(batch.num_rows + 1, dtype=np.int64)
        one_each.flags.writeable = False
        together = cast_together(batch, self._features)
        return [
            (one_each, together[f.name])
            if f.name in together
            else value_lists(batch.column(f.name), f.dtype, one_each)
            for f in self._features
        ]

    def encode_columns(self, columns: list[tuple[np.ndarray, pa.Array]], rows: int) -> list[bytes]:
        """`encode` of a batch whose `columns` are given."""
        return encode_examples(self._names, self._dtypes, columns, rows).to_pylist()


def decode_examples(records: Sequence[bytes]) -> pa.RecordBatch:
    """Serialized Examples as one record batch of list columns (tfx-bsl's C++ decoder).

    Raises:
      RuntimeError or ValueError (tfx-bsl's): when a record is not a `tf.train.Example`.
    """
    from tfx_bsl.coders.example_coder import ExamplesToRecordBatchDecoder

    return ExamplesToRecordBatchDecoder().DecodeBatch(list(records))
