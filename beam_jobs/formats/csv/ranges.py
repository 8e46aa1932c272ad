"""CSV input: reading one byte range of a file as Arrow batches of the feature spec, with bad
rows set aside for the dead letter (pyarrow's CSV reader parses; only a column that fails to
convert is looked at value by value)."""

from __future__ import annotations

import dataclasses
import functools
import io
import logging
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

import pyarrow as pa
import pyarrow.csv as pcsv

from beam_jobs.core.bad_rows import BadRow, as_text
from beam_jobs.core.errors import DataError
from beam_jobs.formats.base import PieceReport
from beam_jobs.formats.csv.bad_rows import place_bad_rows
from beam_jobs.formats.csv.casting import cells, typed_batch
from beam_jobs.formats.csv.notes import fits_features, rest_is_notes
from beam_jobs.formats.csv.record_starts import nonempty_record_starts
from beam_jobs.formats.csv.short_rows import ShortRows
from beam_jobs.formats.csv.source import (
    UNHANDLED_ROW,
    blank_lines_are_records,
    convert_options,
    header_not_decodable,
    name_columns,
    not_decodable,
    short_of,
)
from beam_jobs.formats.lines.layout import Dialect
from beam_jobs.formats.lines.quotes import FILE_START, QuoteScanner
from tfdata_reader.manifest import FeatureSpec

_log = logging.getLogger(__name__)

__all__ = ["CsvSource", "RangeStart", "RangeTally", "block_bytes", "read_range"]

_BLOCK_SIZE = 1 << 20
_MAX_BLOCK_SIZE = 16 << 20


_SCAN_STEP = 8 << 20


@dataclasses.dataclass(frozen=True)
class CsvSource:
    """One CSV file as its readers read it.

    Attributes:
      path: the file, for error messages and bad rows.
      features: its columns, in header order, with the dtypes to convert to.
      dialect: its layout (the delimiter known) and text encoding.
      kept: the columns to convert and yield (None: all); the others (left out by
        `--columns`) are not looked at, so their values are never bad rows.
      max_record_bytes: the longest record that must be read (`--max_record_bytes`).
    """

    path: str
    features: tuple[FeatureSpec, ...]
    dialect: Dialect = Dialect(",")
    kept: frozenset[str] | None = None
    max_record_bytes: int = _BLOCK_SIZE

    @property
    def delimiter(self) -> str:
        return self.dialect.delimiter or ","

    @property
    def blank_lines(self) -> bool:
        """Whether blank lines are records (`source.blank_lines_are_records`)."""
        return blank_lines_are_records(len(self.features))


def block_bytes(columns: int) -> int:
    """Bytes of CSV a batch is parsed from: 1 MiB, and more for rows of many columns (up to
    16 MiB at 128 or more), whose every batch pays a fixed cost per column in each step
    (casts, checks, encoding, statistics), so that a batch still holds thousands of values of
    each column."""
    return min(_MAX_BLOCK_SIZE, _BLOCK_SIZE * max(1, columns // 8))


def _endless_line(f: BinaryIO, start: int, end: int, limit: int) -> int | None:
    """Where a line longer than `limit` starts in bytes [start, end), if one does: such a
    line is a record too long to read (a record is whole lines), found in bounded memory
    before pyarrow would hold blocks of it."""
    f.seek(start)
    position, line_start = start, start
    while position < end:
        data = f.read(min(_SCAN_STEP, end - position))
        if not data:
            break
        last = data.rfind(b"\n")
        if last < 0:
            if position + len(data) - line_start > limit:
                return line_start
        else:
            first = data.find(b"\n")
            if position + first - line_start > limit:
                return line_start
            # Lines wholly inside this step are shorter than a step, which is under the limit.
            line_start = position + last + 1
        position += len(data)
    return line_start if position - line_start > limit else None


class _Window(io.RawIOBase):
    """Bytes [start, end) of a seekable binary file, as a readable stream that follows the
    quote state (`scanner.in_quotes` after `scanner.finish()`: the range ends in a quoted
    field)."""

    def __init__(self, f: BinaryIO, start: int, end: int, delimiter: str) -> None:
        f.seek(start)
        self._f = f
        self._left = end - start
        self._position = start
        # `start` is a record start: outside quotes, at the start of a field.
        self.scanner = QuoteScanner(False, FILE_START, delimiter)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._left <= 0:
            return 0
        # In steps, so that the quote scanner's arrays stay small however big pyarrow's block.
        view = memoryview(buffer)[: min(len(buffer), self._left, _SCAN_STEP)]
        if self._f.tell() != self._position:  # the file is shared: another reader moved it
            self._f.seek(self._position)
        data = self._f.read(len(view))
        view[: len(data)] = data
        self._left -= len(data)
        self.scanner.feed(data, self._position)
        self._position += len(data)
        return len(data)

    def stream(self, block_size: int, header: bool = False) -> BinaryIO | pa.BufferReader:
        """What pyarrow reads: a range of at most `block_size` read at once, which pyarrow
        parses without calling back into Python (on a small file, such calls cost more than
        parsing it, and in a threaded run each waits for the interpreter); a larger range
        through a buffer. A `header` range (a whole small file) whose last record has no line
        end and is not inside quotes gets one, which changes no row: pyarrow cannot read a
        file of column names alone (an export with no rows) without it."""
        if self._left > block_size:
            return io.BufferedReader(self, buffer_size=_BLOCK_SIZE)
        data = bytearray(self._left)
        view, got = memoryview(data), 0
        while got < len(data) and (step := self.readinto(view[got:])):
            got += step
        view.release()
        del data[got:]
        if header and data and not data.endswith((b"\n", b"\r")):
            self.scanner.finish()  # the range is read: its held-back quotes count now
            if not self.scanner.in_quotes:
                data += b"\n"
        return pa.BufferReader(pa.py_buffer(data))


def _refuse_a_swallowing_row(
    f: BinaryIO, source: CsvSource, start: int, end: int, first_line: int | None
) -> None:
    """Raises DataError when the range's last row, whose quoted field never closes, spans
    more than its own line."""
    path = source.path
    row_start = int(nonempty_record_starts(f, start, end, source.delimiter)[-1])
    f.seek(row_start)
    # Newlines after the row's first line, but not those that only end the file; read in
    # steps (the end of a compressed file is not known: `end` is sys.maxsize).
    lines = trailing = 0
    position = row_start
    while position < end and (data := f.read(min(_SCAN_STEP, end - position))):
        position += len(data)
        kept = data.rstrip(b"\r\n")
        ending = data[len(kept) :].count(b"\n")
        trailing = ending if kept else trailing + ending
        lines += data.count(b"\n")
    lines -= trailing
    if lines == 0:
        return
    f.seek(start)
    before = f.read(row_start - start).count(b"\n")
    where = (
        f"{path}:{first_line + before}" if first_line is not None else f"{path} (byte {row_start})"
    )
    raise DataError(
        f"{where}: a quoted field opens in this row and never closes, so the {lines:,} lines "
        "after it, to the end of the file, would be read as one value; fix the quoting (a "
        'field that holds a quote must be quoted, its quotes doubled: "TV 55"" screen")'
    )


@dataclasses.dataclass(frozen=True)
class RangeStart:
    """How a byte range of a CSV file begins: with the file's header line (else its columns
    are the source's features), on line `first_line` (1 = the first; None: not known)."""

    header: bool = True
    first_line: int | None = None


@dataclasses.dataclass
class RangeTally:
    """What reading ranges counted (once per row or cell, however many passes a range
    takes): by (column, marker), the cells read as missing for holding a marker; by file, the
    rows with fewer fields than the header, their missing fields read as missing
    (`short_rows`), and the lines of notes under the table (`notes.is_note`)."""

    markers: Counter[tuple[str, str]] = dataclasses.field(default_factory=Counter)
    short_rows: Counter[str] = dataclasses.field(default_factory=Counter)
    notes_lines: Counter[str] = dataclasses.field(default_factory=Counter)

    def report(self) -> PieceReport:
        by_column: Counter[str] = Counter()
        seen: dict[str, dict[str, int]] = {}
        for (column, marker), count in self.markers.items():
            by_column[column] += count
            seen.setdefault(column, {})[marker] = count
        return PieceReport(
            null_markers=dict(by_column),
            markers_seen=seen,
            short_rows=dict(self.short_rows),
            notes_lines=dict(self.notes_lines),
        )


def read_range(
    f: BinaryIO,
    source: CsvSource,
    start: int,
    end: int,
    on_bad_row: Callable[[BadRow], None],
    begins: RangeStart = RangeStart(),
    tally: RangeTally | None = None,
) -> Iterator[pa.RecordBatch]:
    """Reads the records in bytes [start, end) of a CSV file as Arrow batches.

    Rows with more columns than the header, values that are not of their column's type, and
    text that is not UTF-8 are passed to `on_bad_row` and left out; every other row is yielded,
    a row with fewer columns with its missing trailing fields missing (`short_rows`). So is
    the last row of a file when it opens a quoted field that never closes. When such a row
    spans several lines, pyarrow would swallow them all into one value: that is a `DataError`
    naming the line, not one bad row.

    pyarrow parses in blocks of 1 MiB, and a row longer than a block does not parse; such a
    range is read again in blocks of twice `max_record_bytes` (the rows already yielded are
    skipped), so every row up to that size is read (one over `max_record_bytes` then goes to
    the dead letter when encoded). A row longer still is a `DataError`.

    Args:
      f: the file, opened for binary reading and seekable.
      source: the file as its readers read it.
      start: a record start (the header line's, with `header`).
      end: a record start (or the file size) after `start`.
      on_bad_row: called once per row that is left out.
      begins: whether `start` is the header line's, and the line it is on (for messages).
      tally: counts markers and short rows (`RangeTally`).

    Raises:
      DataError: naming the file and the byte range, for a header that differs from the
        expected columns or bytes pyarrow cannot parse as CSV at all.
    """
    path, max_record_bytes = source.path, source.max_record_bytes
    yielded = 0
    base = block_bytes(len(source.features))
    for block_size in (base, max(base, 2 * max_record_bytes)):
        reader = _RangeReader(f, source, start, end, block_size, begins)
        try:
            for batch in reader.batches(skip=yielded):
                yielded += batch.num_rows
                yield batch
        except _UndecodableRow as e:
            # Set it aside and read the records before and after it on their own (the rows
            # already yielded are skipped; bad rows found so far are found again).
            bad_start, bad_end = _record_bounds(f, start, end, source, e.number)
            f.seek(bad_start)
            raw = f.read(min(bad_end - bad_start, 2 * max_record_bytes)).rstrip(b"\r\n")
            reason = f"expected {e.expected} columns, got {e.got}"
            read = functools.partial(read_range, f, source, tally=tally)
            before = read(start, bad_start, on_bad_row, begins) if bad_start > start else ()
            for batch in before:
                if yielded >= batch.num_rows:
                    yielded -= batch.num_rows
                    continue
                yield batch.slice(yielded) if yielded else batch
                yielded = 0
            on_bad_row(BadRow(path, start, end, reason, None, {"raw": as_text(raw)}, bad_start))
            if bad_end < end:
                yield from read(bad_end, end, on_bad_row, RangeStart(header=False))
            return
        except _RowTooLong as e:
            endless = _endless_line(f, start, end, 2 * max_record_bytes)
            if endless is not None:
                raise DataError(
                    f"{path}: the line starting at byte {endless:,} is longer than "
                    f"{2 * max_record_bytes:,} bytes (twice --max_record_bytes); is it CSV? "
                    "Raise --max_record_bytes to read it"
                ) from e
            if block_size >= 2 * max_record_bytes:
                raise DataError(
                    f"{path}: {_span(start, end)} hold a record too long to parse in blocks of "
                    f"{block_size:,} bytes (twice --max_record_bytes); raise --max_record_bytes "
                    f"to read it: {e}"
                ) from e
            continue
        for bad in reader.bad_rows():
            on_bad_row(bad)
        if tally is not None:
            reader.count_into(tally)
        return


def _record_bounds(
    f: BinaryIO, start: int, end: int, source: CsvSource, number: int
) -> tuple[int, int]:
    """The bytes of the range's record `number` (pyarrow's: from 1, the header included)."""
    starts = nonempty_record_starts(f, start, end, source.delimiter, source.blank_lines)
    index = number - 1
    bad_end = int(starts[index + 1]) if index + 1 < len(starts) else end
    return int(starts[index]), bad_end


def _span(start: int, end: int) -> str:
    # A compressed file is read whole, to an end not known in advance (sys.maxsize).
    return f"bytes {start:,} to the end" if end == sys.maxsize else f"bytes {start:,}-{end:,}"


class _RowTooLong(Exception):
    """pyarrow met a row longer than its block size."""


class _UndecodableRow(Exception):
    """pyarrow met a row with the wrong number of columns whose text is not UTF-8."""

    def __init__(self, number: int, expected: int, got: int) -> None:
        super().__init__(f"record {number}: expected {expected} columns, got {got}")
        self.number, self.expected, self.got = number, expected, got


class _RangeReader:
    """One pass of pyarrow's CSV reader over a byte range, collecting its bad rows."""

    def __init__(
        self,
        f: BinaryIO,
        source: CsvSource,
        start: int,
        end: int,
        block_size: int,
        begins: RangeStart,
    ) -> None:
        self._f, self._source, self._start, self._end = f, source, start, end
        self._path, self._header = source.path, begins.header
        kept = source.kept
        self._converted_features = [f for f in source.features if kept is None or f.name in kept]
        self._block_size = block_size
        self._first_line = begins.first_line
        self._rows_before = 0
        # Bad rows wait for the end of the range, when one more read places each at its offset.
        self._malformed: list[tuple[BadRow, int | None]] = []  # with pyarrow's record number
        self._typed: list[BadRow] = []
        self.markers: Counter[tuple[str, str]] = Counter()  # cells made missing, by marker
        dialect = source.dialect
        self._tokens = dialect.null_values is None and dialect.infer_null_values
        names = [feature.name for feature in source.features]
        self.short = ShortRows(names, source.delimiter, begins.header)
        self.notes = 0  # lines of notes under the table, left out
        self._well_formed = 0  # rows pyarrow gave so far

    def _on_malformed(self, row: pcsv.InvalidRow) -> str:
        missing = short_of(row)
        if row.number is not None and missing:
            # Read with its missing trailing fields missing (`short_rows`), in its place.
            self.short.add(row.number, row.text, missing, len(self._malformed))
            return "skip"
        reason = f"expected {row.expected_columns} columns, got {row.actual_columns}"
        bad = BadRow(self._path, self._start, self._end, reason, None, {"raw": as_text(row.text)})
        self._malformed.append((bad, row.number))
        return "skip"

    def _typed_rows(self, raw: pa.RecordBatch) -> pa.RecordBatch:
        batch, bad = typed_batch(raw, self._converted_features, self.markers, self._tokens)
        if bad:
            indices = sorted(bad)
            path, start, end, before = self._path, self._start, self._end, self._rows_before
            self._typed.extend(
                BadRow(path, start, end, bad[index], before + index, content)
                for index, content in zip(indices, cells(raw, indices), strict=True)
            )
        self._rows_before += raw.num_rows
        return batch

    def batches(self, skip: int = 0) -> Iterator[pa.RecordBatch]:
        """The good rows, less the first `skip` of them (yielded by an earlier pass)."""
        for batch in self._converted():
            if skip >= batch.num_rows:
                skip -= batch.num_rows
                continue
            yield batch.slice(skip) if skip else batch
            skip = 0

    def _converted(self) -> Iterator[pa.RecordBatch]:
        """The range's rows typed, batch by batch; pyarrow's errors as ours."""
        reader = None
        try:
            window, reader, header = self._opened()
            yield from self._typed_batches(window, reader, header)
        except pa.ArrowInvalid as e:
            raise self._read_error(e) from e
        except UnicodeDecodeError as e:  # pyarrow decodes the header's names (with
            # --encoding, all the bytes): where the byte is in the file, not in pyarrow's block
            raise self._not_decodable(e) from None
        finally:
            # pyarrow may read ahead on a thread of its own: it must stop before the file is
            # read again (the next pass, the bad rows' offsets).
            if reader is not None:
                reader.close()

    def _not_decodable(self, e: UnicodeDecodeError) -> DataError:
        encoding = self._source.dialect.encoding
        if encoding == "utf-8":
            return header_not_decodable(self._path, encoding, e)
        self._f.seek(self._start)
        data = self._f.read(self._end - self._start)
        return not_decodable(self._path, encoding, data, self._start, True)

    def _open(self, types: Iterable[str]) -> tuple[_Window, pcsv.CSVStreamingReader]:
        """pyarrow's reader over the range, every column of `types` read as bytes."""
        source = self._source
        names = [feature.name for feature in source.features]
        read_options = pcsv.ReadOptions(
            block_size=self._block_size,
            use_threads=False,
            column_names=None if self._header else names,
            encoding=source.dialect.encoding,
        )
        parse_options = pcsv.ParseOptions(
            delimiter=source.delimiter,
            newlines_in_values=True,
            ignore_empty_lines=not source.blank_lines,
            invalid_row_handler=self._on_malformed,
        )
        window = _Window(self._f, self._start, self._end, source.delimiter)
        reader = pcsv.open_csv(
            window.stream(self._block_size, self._header),
            read_options=read_options,
            parse_options=parse_options,
            convert_options=convert_options(dict.fromkeys(types, pa.binary())),
        )
        return window, reader

    def _opened(self) -> tuple[_Window, pcsv.CSVStreamingReader, list[str]]:
        """The reader, with the range's header (or the features' names) checked."""
        names = [feature.name for feature in self._source.features]
        # A blank header name is "" (its column's name is generated): read as text too.
        window, reader = self._open([*names, ""])
        header = reader.schema.names
        if any(t != pa.binary() for t in reader.schema.types):  # a name of spaces
            reader.close()
            window, reader = self._open(header)
        if (name_columns(header) if self._header else header) != names:
            reader.close()
            raise DataError(
                f"{self._path}: header {header} differs from the expected columns "
                f"{names}; all inputs of one conversion need the same columns"
            )
        return window, reader, header

    def _typed_batches(
        self, window: _Window, reader: pcsv.CSVStreamingReader, header: list[str]
    ) -> Iterator[pa.RecordBatch]:
        names = [feature.name for feature in self._source.features]
        pending = None  # one batch is held back: its last row may be the unterminated one
        for raw in reader:
            if header != names:
                raw = pa.RecordBatch.from_arrays(raw.columns, names)
            raw = self._with_short_rows(raw)
            if raw.num_rows:
                if pending is not None and (batch := self._typed_rows(pending)).num_rows:
                    yield batch
                pending = raw
        if self.short.held:  # after the last well-formed row (or with none)
            self._leave_out_notes()
        if self.short.held:
            rest = self.short.merged(None, self._well_formed)
            assert rest is not None
            if pending is not None and (batch := self._typed_rows(pending)).num_rows:
                yield batch
            pending = rest
        window.scanner.finish()
        if pending is not None and window.scanner.in_quotes:
            _refuse_a_swallowing_row(
                self._f, self._source, self._start, self._end, self._first_line
            )
            pending = self._unterminated_last_row(pending)
        if pending is not None and (batch := self._typed_rows(pending)).num_rows:
            yield batch

    def _leave_out_notes(self) -> None:
        """Leaves out the held rows after the range's last row that are notes, when the file
        ends with them (here, or after more notes)."""
        fits = fits_features(self._source.features, self._tokens)
        notes = self.short.trailing_notes(self._well_formed, fits)
        if not notes:
            return
        columns = len(self._source.features)
        if self._end != sys.maxsize and not rest_is_notes(
            self._f, self._end, self._source.delimiter, columns, fits
        ):
            return
        texts = self.short.drop_last(notes)
        self.notes = notes
        # Their words are in no output: the log keeps them.
        _log.warning("%s: %d line(s) after the last row taken as notes: %s", self._path,
                     notes, "; ".join(repr(t[:200]) for t in texts[:5]))  # fmt: skip

    def count_into(self, tally: RangeTally) -> None:
        """Adds what this pass counted (the range's last pass: once per row or cell)."""
        tally.markers.update(self.markers)
        if self.short.count:
            tally.short_rows[self._path] += self.short.count
        if self.notes:
            tally.notes_lines[self._path] += self.notes

    def _with_short_rows(self, raw: pa.RecordBatch) -> pa.RecordBatch:
        """`raw` with the short rows among (or right after) its rows (none held: `raw`)."""
        merged = self.short.merged(raw, self._well_formed)
        self._well_formed += raw.num_rows
        assert merged is not None
        return merged

    def _read_error(self, e: pa.ArrowInvalid) -> Exception:
        if "straddl" in str(e):
            return _RowTooLong(str(e))
        if found := UNHANDLED_ROW.search(str(e)):
            # pyarrow could not hand this row to `_on_malformed`: it decodes a row's text
            # as UTF-8 first, and this one is not (the handler's exception is ignored).
            number, expected, got = (int(g) for g in found.groups())
            return _UndecodableRow(number, expected, got)
        return DataError(f"{self._path}: {_span(self._start, self._end)}: {e}")

    def _unterminated_last_row(self, pending: pa.RecordBatch) -> pa.RecordBatch:
        """Marks the range's last record, whose quoted field never closes, as a bad row; returns
        `pending` less that row when it is among them (it may be a row already left out for its
        column count: pyarrow numbers records from 1, the header included)."""
        reason = "unterminated quoted field: it runs to the end of the file"
        records = int(self._header) + self._rows_before + pending.num_rows + len(self._malformed)
        if self._malformed and self._malformed[-1][1] == records:
            bad, number = self._malformed[-1]
            bad = dataclasses.replace(bad, reason=f"{reason} ({bad.reason})")
            self._malformed[-1] = (bad, number)
            return pending
        last = pending.num_rows - 1
        row = self._rows_before + last
        self._typed.append(
            BadRow(self._path, self._start, self._end, reason, row, cells(pending, [last])[0])
        )
        return pending.slice(0, last)

    def bad_rows(self) -> list[BadRow]:
        """The range's bad rows, placed at their offsets, in file order."""
        if not (self._malformed or self._typed):
            return []
        source = self._source
        starts = nonempty_record_starts(
            self._f, self._start, self._end, source.delimiter, source.blank_lines
        )
        return place_bad_rows(starts, self._malformed, self._typed, header=self._header)
