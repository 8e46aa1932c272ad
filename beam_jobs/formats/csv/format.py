"""`--format csv`: CSV files with a header line (see `beam_jobs.formats.csv.source`).

Uncompressed files are cut anywhere: the quote state at every cut is worked out before the
writers start (the `CutCounts` context of `read_piece`), so a writer finds its first record
exactly even when quoted fields hold newlines or unquoted fields hold stray quotes. A
compressed file is read whole by one writer, from its start.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator, Sequence

import pyarrow as pa

from beam_jobs.formats.base import InputFormat, OnBadRow, Sample
from beam_jobs.formats.compressed import compression_of, open_input
from beam_jobs.formats.compressed import read_head as read_content_head
from beam_jobs.formats.csv import ranges as csv_ranges
from beam_jobs.formats.csv import record_starts
from beam_jobs.formats.csv import source as csv_source
from beam_jobs.formats.lines.cut_counts import CutCounts
from beam_jobs.plan.shards import InputFile, Piece
from tfdata_reader.manifest import FeatureSpec

__all__ = ["CsvFormat"]


class CsvFormat(InputFormat):
    name = "csv"
    extensions = (".csv",)
    needs_cut_counts = True
    quoted_records = True

    def __init__(self, max_record_bytes: int = 64 << 20) -> None:
        self._max_record_bytes = max_record_bytes

    def sample(self, f: InputFile, sample_bytes: int) -> Sample:
        head = read_content_head(f, sample_bytes, compression_of(f.path))
        parsed = csv_source.parse_sample(f.path, head.content, head.is_whole_file)
        return Sample(f.path, parsed.table, len(parsed.data) * head.stored_per_byte, data=parsed)

    def infer_features(
        self, samples: Sequence[Sample], overrides: Sequence[FeatureSpec]
    ) -> list[FeatureSpec]:
        return csv_source.infer_features([s.data for s in samples], overrides)

    def sample_batches(
        self, sample: Sample, features: Sequence[FeatureSpec]
    ) -> Iterator[pa.RecordBatch]:
        data = sample.data.data
        yield from csv_ranges.read_range(
            io.BytesIO(data), sample.path, 0, len(data), features, lambda row: None, first_line=1
        )

    def read_piece(
        self,
        piece: Piece,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        context: CutCounts | None = None,
    ) -> Iterator[pa.RecordBatch]:
        compression = compression_of(piece.path)
        with open_input(piece.path, compression) as f:
            if compression:
                yield from csv_ranges.read_range(
                    f,
                    piece.path,
                    0,
                    sys.maxsize,
                    features,
                    on_bad_row,
                    first_line=1,
                    max_record_bytes=self._max_record_bytes,
                )
                return
            counts = context or CutCounts()
            size = piece.file_size
            start = record_starts.record_start_at_or_after(
                f, piece.start, counts.in_quotes_at(piece.path, piece.start), size
            )
            end = size
            if piece.end < size:
                end = record_starts.record_start_at_or_after(
                    f, piece.end, counts.in_quotes_at(piece.path, piece.end), size
                )
            if end > start:
                first_line = counts.newlines_before(piece.path, piece.start) + 1
                f.seek(piece.start)
                first_line += f.read(start - piece.start).count(b"\n")
                yield from csv_ranges.read_range(
                    f,
                    piece.path,
                    start,
                    end,
                    features,
                    on_bad_row,
                    first_line,
                    max_record_bytes=self._max_record_bytes,
                )
