"""Example encoding: our fixed-order encoder against tfx-bsl's (hash order), on one input file.

Reads the CSV's record batches as a conversion does, then, for each encoder, times encoding
every batch (best of 3; list columns built in both timings) and compresses the framed records
at our default GZIP level. Prints one JSON object.

    python benchmarks/encode_bench.py INPUT.csv
"""

from __future__ import annotations

import json
import sys
import time

import pyarrow as pa
import pyarrow.csv as pcsv
from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder

from beam_jobs.codec.deflate import compressor as gzip_compressor
from beam_jobs.codec.examples import ExampleEncoder, value_lists
from beam_jobs.codec.framing import frame_records
from tfdata_reader.manifest import FeatureSpec

_DTYPES = {"int64": "int64", "double": "float32", "string": "bytes"}


class _TfxBsl:
    """The encoder we used before: tfx-bsl's, on the same list columns."""

    def __init__(self, features: list[FeatureSpec]) -> None:
        self._features, self._encoder = features, RecordBatchToExamplesEncoder()

    def encode(self, batch: pa.RecordBatch) -> list[bytes]:
        columns = []
        for f in self._features:
            offsets, values = value_lists(batch.column(f.name), f.dtype)
            columns.append(pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values))
        names = [f.name for f in self._features]
        return self._encoder.encode(pa.RecordBatch.from_arrays(columns, names))


def _timed(encoder, batches: list[pa.RecordBatch]) -> tuple[float, list[bytes]]:
    best, records = float("inf"), []
    for _ in range(3):
        started = time.perf_counter()
        records = [r for b in batches for r in encoder.encode(b)]
        best = min(best, time.perf_counter() - started)
    return best, records


def _gzip_bytes(records: list[bytes]) -> int:
    compressor = gzip_compressor()
    size = 0
    for start in range(0, len(records), 4096):
        size += len(compressor.compress(frame_records(records[start : start + 4096])))
    return size + len(compressor.flush())


def main() -> None:
    batches = list(pcsv.open_csv(sys.argv[1]))
    features = [FeatureSpec(f.name, _DTYPES[str(f.type)]) for f in batches[0].schema]
    ours_s, ours = _timed(ExampleEncoder(features), batches)
    old_s, old = _timed(_TfxBsl(features), batches)
    assert sorted(map(len, ours)) == sorted(map(len, old))  # the same messages, in other orders
    raw = sum(map(len, ours))
    print(
        json.dumps(
            {
                "rows": sum(b.num_rows for b in batches),
                "batches": len(batches),
                "example_bytes": raw,
                "ours_seconds": ours_s,
                "tfx_bsl_seconds": old_s,
                "ours_gzip_bytes": _gzip_bytes(ours),
                "tfx_bsl_gzip_bytes": _gzip_bytes(old),
            }
        )
    )


if __name__ == "__main__":
    main()
