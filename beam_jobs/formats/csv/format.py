"""`--format csv`: delimited text files, with a header line or `--column_names` (see
`beam_jobs.formats.csv.source` and `dialect`).

Uncompressed files are cut anywhere: the quote state at every cut is worked out before the
writers start (the `CutCounts` context of `read_piece`), so a writer finds its first record
exactly even when quoted fields hold newlines or unquoted fields hold stray quotes. A
compressed file is read whole by one writer, from its start.
"""

from __future__ import annotations

import dataclasses
import io
import sys
from collections.abc import Iterator, Sequence
from typing import BinaryIO

import pyarrow as pa

from beam_jobs.errors import DataError
from beam_jobs.formats.base import InputFormat, OnBadRow, Sample
from beam_jobs.formats.compressed import compression_of, open_input
from beam_jobs.formats.compressed import read_head as read_content_head
from beam_jobs.formats.csv import ranges as csv_ranges
from beam_jobs.formats.csv import record_starts
from beam_jobs.formats.csv import source as csv_source
from beam_jobs.formats.csv.dialect import Dialect, detect_delimiter, skip_lines
from beam_jobs.formats.lines.cut_counts import CutCounts
from beam_jobs.plan.shards import InputFile, Piece
from tfdata_reader.manifest import FeatureSpec

__all__ = ["CsvFormat"]


def _data_start(f: BinaryIO, path: str, lines: int) -> int:
    """Where a file's header (or data) starts: past its first `lines` lines."""
    if not lines:
        return 0
    f.seek(0)
    head = b""
    while (offset := skip_lines(head, lines)) is None:
        chunk = f.read(1 << 20)
        if not chunk:
            raise DataError(f"{path}: fewer than --skip_header_lines {lines} lines")
        head += chunk
    return offset


class CsvFormat(InputFormat):
    name = "csv"
    extensions = (".csv", ".tsv")
    needs_cut_counts = True
    quoted_records = True

    def __init__(self, max_record_bytes: int = 64 << 20, dialect: Dialect | None = None) -> None:
        self._max_record_bytes = max_record_bytes
        self.dialect = dialect or Dialect()
        self._detected = self.dialect.delimiter is None

    @property
    def delimiter(self) -> str:
        return self.dialect.delimiter or ","

    def describe(self) -> str:
        return f"csv: {self.dialect.describe(self._detected)}"

    def leading_lines(self) -> int:
        return self.dialect.skip_lines

    def sample(self, f: InputFile, sample_bytes: int) -> Sample:
        head = read_content_head(f, sample_bytes, compression_of(f.path))
        if self.dialect.delimiter is None:  # the first sampled file decides, for all
            body = head.content[skip_lines(head.content, self.dialect.skip_lines) or 0 :]
            delimiter = detect_delimiter(f.path, body)
            self.dialect = dataclasses.replace(self.dialect, delimiter=delimiter)
        parsed = csv_source.parse_sample(f.path, head.content, head.is_whole_file, self.dialect)
        return Sample(f.path, parsed.table, len(parsed.data) * head.stored_per_byte, data=parsed)

    def infer_features(
        self, samples: Sequence[Sample], overrides: Sequence[FeatureSpec]
    ) -> list[FeatureSpec]:
        return csv_source.infer_features([s.data for s in samples], overrides)

    def sample_batches(
        self,
        sample: Sample,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow | None = None,
    ) -> Iterator[pa.RecordBatch]:
        data = sample.data.data
        yield from csv_ranges.read_range(
            io.BytesIO(data),
            sample.path,
            0,
            len(data),
            features,
            on_bad_row or (lambda row: None),
            first_line=1 + self.dialect.skip_lines,
            header=self.dialect.has_header,
            delimiter=self.delimiter,
            encoding=self.dialect.encoding,
            typed=self._kept,
        )

    def _read(
        self,
        f: BinaryIO,
        path: str,
        start: int,
        end: int,
        data_start: int,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        first_line: int,
    ) -> Iterator[pa.RecordBatch]:
        yield from csv_ranges.read_range(
            f,
            path,
            start,
            end,
            features,
            on_bad_row,
            first_line,
            max_record_bytes=self._max_record_bytes,
            header=start == data_start and self.dialect.has_header,
            delimiter=self.delimiter,
            encoding=self.dialect.encoding,
            typed=self._kept,
        )

    def read_piece(
        self,
        piece: Piece,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        context: CutCounts | None = None,
    ) -> Iterator[pa.RecordBatch]:
        compression = compression_of(piece.path)
        lines = self.dialect.skip_lines
        with open_input(piece.path, compression) as f:
            data_start = _data_start(f, piece.path, lines)
            if compression:
                yield from self._read(
                    f, piece.path, data_start, sys.maxsize, data_start, features, on_bad_row,
                    1 + lines,
                )  # fmt: skip
                return
            counts = context or CutCounts()
            size = piece.file_size
            start, end = data_start, size
            if piece.start > data_start:
                start = record_starts.record_start_at_or_after(
                    f, piece.start, counts.in_quotes_at(piece.path, piece.start), size,
                    self.delimiter,
                )  # fmt: skip
            if piece.end < size:
                end = max(data_start, record_starts.record_start_at_or_after(
                    f, piece.end, counts.in_quotes_at(piece.path, piece.end), size,
                    self.delimiter,
                ))  # fmt: skip
            if end > start:
                first_line = counts.newlines_before(piece.path, piece.start) + 1
                f.seek(piece.start)
                first_line += f.read(start - piece.start).count(b"\n")
                yield from self._read(
                    f, piece.path, start, end, data_start, features, on_bad_row, first_line
                )
