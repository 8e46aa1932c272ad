"""The one-process library loop: pyarrow CSV -> tfx-bsl encoder -> TF's TFRecordWriter.

python benchmarks/library_loop.py OUTPUT_FILE INPUT_FILE...
"""

from __future__ import annotations

import sys

import pyarrow as pa
import pyarrow.csv as pcsv
import tensorflow as tf
from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder

_TYPES = {"int64": pa.int64(), "double": pa.float32(), "string": pa.binary()}


def _as_lists(batch: pa.RecordBatch) -> pa.RecordBatch:
    offsets = pa.array(range(batch.num_rows + 1), pa.int32())
    columns = [
        pa.ListArray.from_arrays(offsets, column.cast(_TYPES[str(column.type)], safe=False))
        for column in batch.columns
    ]
    return pa.RecordBatch.from_arrays(columns, batch.schema.names)


def main() -> None:
    output, *inputs = sys.argv[1:]
    encoder = RecordBatchToExamplesEncoder()
    with tf.io.TFRecordWriter(output) as writer:
        for path in inputs:
            for batch in pcsv.open_csv(path):
                for record in encoder.encode(_as_lists(batch)):
                    writer.write(record)


if __name__ == "__main__":
    main()
