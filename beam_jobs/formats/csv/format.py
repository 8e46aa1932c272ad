"""`--format csv`: delimited text files, with a header line or `--column_names` (see
`beam_jobs.formats.csv.source` and `dialect`).

Uncompressed files are cut anywhere: the quote state at every cut is worked out before the
writers start (the `CutCounts` of `read_piece`), so a writer finds its first record
exactly even when quoted fields hold newlines or unquoted fields hold stray quotes. A
compressed file is read whole by one writer, from its start.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import sys
from collections.abc import Generator, Iterator, Sequence
from typing import BinaryIO

import pyarrow as pa

from beam_jobs.core.errors import DataError
from beam_jobs.core.inputs import InputFile, Piece
from beam_jobs.formats.base import InputFormat, OnBadRow, PieceReport, ReadSettings, Sample
from beam_jobs.formats.compressed import Head, compression_of, open_input, read_head
from beam_jobs.formats.csv import record_starts, small_files
from beam_jobs.formats.csv.dialect import detect_delimiter, skip_lines
from beam_jobs.formats.csv.header_fit import CompletedHeader, complete_header
from beam_jobs.formats.csv.ranges import CsvSource, RangeStart, RangeTally, read_range
from beam_jobs.formats.csv.source import (
    CsvSample,
    infer_features,
    parse_sample,
    parse_stretch,
)
from beam_jobs.formats.csv.titles import CountLine, title_lines
from beam_jobs.formats.csv.units_row import UnitsRow, find_units_rows, line_of, may_be_units
from beam_jobs.formats.lines.cut_counts import Counting, CutCounts
from beam_jobs.formats.lines.layout import Dialect
from beam_jobs.formats.lines.line_ends import cr_only, with_lf
from tfdata_reader.manifest import FeatureSpec

__all__ = ["CsvFormat"]


_log = logging.getLogger(__name__)
_STRETCHES = 4  # stretches of a large file sampled besides its head


def _stretches(
    f: InputFile, sample: CsvSample, sample_bytes: int, size: int, cr_lines: bool
) -> list[pa.Table]:
    """The records of stretches of `size` bytes spread evenly through the file past its head
    (an eighth of --sample_bytes, at least 64 KiB), as written."""
    found = []
    with open_input(f.path, cr_lines=cr_lines) as stream:
        for k in range(1, _STRETCHES + 1):
            stream.seek(sample_bytes + (f.size - sample_bytes - size) * k // _STRETCHES)
            table = parse_stretch(stream.read(size), sample)
            if table is not None:
                found.append(table)
    return found


def _without_titles(path: str, head: bytes, dialect: Dialect, files: int) -> Dialect:
    """`dialect` skipping the title lines above the first file's header (`title_lines`) when
    the flags skip none; in every file (whose header must then be the first's). A count line
    above rows without a header is skipped, the columns named `column_1`, ..., in a
    conversion of that one file (a file without the line would lose a row unseen)."""
    if dialect.skip_header_lines:
        return dialect  # the flags decide: a title below them is refused (`parse_sample`)
    try:
        lines, why = title_lines(path, head, dialect)
    except CountLine as e:
        if files > 1:
            raise
        _log.warning(
            "%s: line %d is a count line above rows without a header: skipped, and the columns "
            "named %s, ... (--column_names names them)",
            path,
            e.lines,
            e.names[0],
        )
        return dataclasses.replace(dialect, column_names=e.names, skip_header_lines=e.lines)
    if not lines:
        return dialect
    _log.warning(
        "%s: a title above the header, taken out of every file as --skip_header_lines %d "
        "would (give --skip_header_lines to choose otherwise)",
        why,
        lines,
    )
    return dataclasses.replace(dialect, skip_header_lines=lines)


def _units_row(first: InputFile, read: Head, given: Dialect, dialect: Dialect) -> UnitsRow | None:
    """The units line under the first file's header (`units_row`), or None. `given`: the
    dialect as the flags gave it; `dialect`: as planning made it (the header's names given
    when it was completed)."""
    lines, head = given.skip_header_lines, read.content
    encoding = dialect.encoding
    header, line = line_of(head, lines + 1, encoding), line_of(head, lines + 2, encoding)
    if header is None or not may_be_units(line, dialect.delimiter or ",", encoding):
        return None
    try:
        sample = parse_sample(first.path, head, read.is_whole_file, dialect)
    except DataError:
        return None  # said when the file is sampled
    found = find_units_rows(sample)
    texts = [line_of(head, lines + 2 + k, encoding) for k in range(len(found))]
    if not found or any(t is None for t in texts):
        return None
    units: dict[str, list[str]] = {}
    for each in found:
        for name, unit in each.items():
            units.setdefault(name, []).append(unit)
    joined = {name: " / ".join(cells) for name, cells in units.items()}
    return UnitsRow(
        first.path,
        lines + 1 + len(found),
        header,
        tuple(t for t in texts if t is not None),
        joined,
        tuple(sample.column_names),
    )


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


@dataclasses.dataclass(frozen=True)
class CsvFormat(InputFormat):
    """`dialect` has its delimiter: given, or detected from the first sampled file's head
    (`detected`); `completed`: the header the first file's head showed one name short of
    its rows (`header_fit`), which `dialect` then names as its columns."""

    name = "csv"
    extensions = (".csv", ".tsv")
    reads_archives = True

    dialect: Dialect = Dialect(",")
    detected: bool = False
    completed: CompletedHeader | None = None
    units: UnitsRow | None = None  # the units line under the header, skipped in every file
    cr_lines: bool = False  # the first file's lines end in CR alone: read all as LF

    @classmethod
    def prepare(cls, files: Sequence[InputFile], settings: ReadSettings) -> CsvFormat:
        if not files:
            return cls(settings.kept, settings.max_record_bytes, settings.dialect, False)
        # The first file decides, for all (it is always sampled): its head read once.
        first = files[0]
        read = read_head(first, settings.sample_bytes, compression_of(first.path))
        cr_lines = cr_only(read.content)
        if cr_lines:
            read = dataclasses.replace(read, content=with_lf(read.content))
        dialect, detected = settings.dialect, settings.dialect.delimiter is None
        if detected:
            body = read.content[skip_lines(read.content, dialect.skip_header_lines) or 0 :]
            dialect = dataclasses.replace(dialect, delimiter=detect_delimiter(first.path, body))
        completed = units = None
        if dialect.has_header:
            dialect = _without_titles(first.path, read.content, dialect, len(files))
        if dialect.has_header:
            titled = dialect
            body = read.content[skip_lines(read.content, dialect.skip_header_lines) or 0 :]
            completed = complete_header(first.path, body, dialect.delimiter or ",",
                                        dialect.encoding)  # fmt: skip
            if completed is not None:
                _log.warning("%s", completed.note)
                dialect = dataclasses.replace(
                    dialect,
                    column_names=completed.names,
                    skip_header_lines=dialect.skip_header_lines + 1,
                )
            if dialect.units_row:
                units = _units_row(first, read, titled, dialect)
        if units is not None:
            _log.warning(
                "%s: %s, under the header, holds the columns' units: %s; taken out of the data "
                "(in every file) and kept as the features' units (--units_row false reads it "
                "as data)",
                units.path,
                units.where(),
                units.describe(),
            )
            dialect = dataclasses.replace(
                dialect,
                column_names=tuple(units.names),
                skip_header_lines=units.number,
            )
        return cls(
            settings.kept,
            settings.max_record_bytes,
            dialect,
            detected,
            completed,
            units,
            cr_lines,
        )

    def describe(self) -> str:
        if self.units is not None and self.completed is None:
            # As the flags gave it: a header line, with its units line taken out.
            given = dataclasses.replace(
                self.dialect, column_names=(), skip_header_lines=self.units.header_number - 1
            )
            return f"csv: {given.describe(self.detected)}, units {self.units.where()} taken out"
        if self.completed is not None:
            names = ",".join(self.completed.names)
            return f"csv: {self.dialect.describe(self.detected)}: {names} (header completed)"
        return f"csv: {self.dialect.describe(self.detected)}"

    def counting(self) -> Counting:
        dialect = self.dialect
        return Counting(True, dialect.delimiter or ",", dialect.skip_header_lines, self.cr_lines)

    def _source(self, path: str, features: Sequence[FeatureSpec]) -> CsvSource:
        return CsvSource(path, tuple(features), self.dialect, self.kept, self.max_record_bytes)

    def sample(self, f: InputFile, sample_bytes: int) -> Sample:
        compression = compression_of(f.path)
        head = read_head(f, sample_bytes, compression, self.cr_lines)
        self._check_heading(f.path, head.content)
        parsed = parse_sample(f.path, head.content, head.is_whole_file, self.dialect)
        stretch = max(64 << 10, sample_bytes // 8)
        if (
            compression is None
            and f.size > 2 * (sample_bytes + stretch)
            and parsed.lines_are_records
        ):
            # Types from the whole file, not its head alone: stretches spread through it.
            stretches = [parsed.texts, *_stretches(f, parsed, sample_bytes, stretch, self.cr_lines)]
            parsed = dataclasses.replace(parsed, texts=pa.concat_tables(stretches))
        return Sample(f.path, parsed.table, len(parsed.data) * head.stored_per_byte, data=parsed)

    def _check_heading(self, path: str, head: bytes) -> None:
        """Raises DataError when the lines a file skips as its heading are not the first
        file's: the header whose names the conversion completed, the header and units line."""
        if self.units is not None:
            self.units.check(path, head, self.dialect.encoding, self.dialect.delimiter or ",")
        if self.completed is not None:
            self._check_header(path, head)

    def _check_header(self, path: str, head: bytes) -> None:
        """Raises DataError when a file's header line (skipped, as the dialect has names) is not
        the first file's, whose names the conversion completed."""
        assert self.completed is not None
        lines = self.dialect.skip_header_lines - (len(self.units.lines) if self.units else 0)
        line = line_of(head, lines, self.dialect.encoding) or b""
        if line != self.completed.line:
            raise DataError(
                f"{path}: header {line[:200]!r} differs from the first file's "
                f"{self.completed.line[:200]!r}; all inputs of one conversion need the same "
                "columns"
            )

    def infer_features(
        self, samples: Sequence[Sample], overrides: Sequence[FeatureSpec]
    ) -> list[FeatureSpec]:
        features = infer_features([s.data for s in samples], overrides)
        if self.units is None:
            return features
        units = self.units.units
        return [
            f
            if f.unit is not None or f.name not in units
            else dataclasses.replace(f, unit=units[f.name])
            for f in features
        ]

    def sample_batches(
        self,
        sample: Sample,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow | None = None,
    ) -> Iterator[pa.RecordBatch]:
        data = sample.data.data
        source = dataclasses.replace(self._source(sample.path, features), max_record_bytes=1 << 20)
        yield from read_range(
            io.BytesIO(data),
            source,
            0,
            len(data),
            on_bad_row or (lambda row: None),
            RangeStart(self.dialect.has_header, 1 + self.dialect.skip_header_lines),
        )

    def read_pieces(
        self,
        pieces: Sequence[Piece],
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        cut_counts: CutCounts | None,
        reports: list[PieceReport],
    ) -> Iterator[tuple[Piece, pa.RecordBatch]]:
        """Runs of small whole files in one parse each (`small_files`); the rest, and a run
        that does not read clean, piece by piece."""
        tally = RangeTally()
        for group in small_files.groups(pieces, self.dialect):
            read = None
            if len(group) > 1:
                read = small_files.read_joined(
                    group, lambda p: self._source(p, features), tally, self.cr_lines
                )
            if read is None:
                yield from super().read_pieces(group, features, on_bad_row, cut_counts, reports)
            else:
                yield from read
        if tally.markers or tally.short_rows or tally.notes_lines:
            reports.append(tally.report())

    def read_piece(
        self,
        piece: Piece,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        cut_counts: CutCounts | None = None,
    ) -> Generator[pa.RecordBatch, None, PieceReport]:
        tally = RangeTally()
        yield from self._read_piece(piece, features, on_bad_row, cut_counts, tally)
        return tally.report()

    def _read_piece(
        self,
        piece: Piece,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        cut_counts: CutCounts | None,
        tally: RangeTally,
    ) -> Iterator[pa.RecordBatch]:
        compression = compression_of(piece.path)
        lines = self.dialect.skip_header_lines
        source = self._source(piece.path, features)
        delimiter = source.delimiter
        with open_input(piece.path, compression, self.cr_lines) as f:
            data_start = _data_start(f, piece.path, lines)
            if self.completed is not None or self.units is not None:
                f.seek(0)  # every file, sampled or not: its header (and units) are skipped
                self._check_heading(piece.path, f.read(data_start))
            if compression:
                begins = RangeStart(self.dialect.has_header, 1 + lines)
                yield from read_range(f, source, data_start, sys.maxsize, on_bad_row, begins, tally)
                return
            counts = cut_counts or CutCounts()
            size = piece.file_size
            start, end = data_start, size
            if piece.start > data_start:
                start = record_starts.record_start_at_or_after(
                    f, piece.start, counts.in_quotes_at(piece.path, piece.start), size, delimiter
                )
            if piece.end < size:
                in_quotes = counts.in_quotes_at(piece.path, piece.end)
                found = record_starts.record_start_at_or_after(f, piece.end, in_quotes, size,
                                                               delimiter)  # fmt: skip
                end = max(data_start, found)
            if end > start:
                first_line = counts.newlines_before(piece.path, piece.start) + 1
                f.seek(piece.start)
                first_line += f.read(start - piece.start).count(b"\n")
                begins = RangeStart(start == data_start and self.dialect.has_header, first_line)
                yield from read_range(f, source, start, end, on_bad_row, begins, tally)
