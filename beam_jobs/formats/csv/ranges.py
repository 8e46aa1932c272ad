"""CSV input: reading one byte range of a file as Arrow batches of the feature spec, with bad
rows set aside for the dead letter (pyarrow's CSV reader parses; only a column that fails to
convert is looked at value by value)."""

from __future__ import annotations

import dataclasses
import functools
import io
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from beam_jobs.core.bad_rows import BadRow, as_text
from beam_jobs.core.errors import DataError
from beam_jobs.formats.csv.bad_rows import place_bad_rows
from beam_jobs.formats.csv.dialect import Dialect
from beam_jobs.formats.csv.encoding_hint import not_utf8
from beam_jobs.formats.csv.inference import schema_hint
from beam_jobs.formats.csv.markers import readable_as, without_markers
from beam_jobs.formats.csv.numbers import BOOLEAN, NUMBER, reads_as
from beam_jobs.formats.csv.record_starts import FILE_START, QuoteScanner, nonempty_record_starts
from beam_jobs.formats.csv.source import (
    UNHANDLED_ROW,
    blank_lines_are_records,
    convert_options,
    header_not_decodable,
    name_columns,
)
from beam_jobs.schema.conform import check_float32_range, temporal_integers
from tfdata_reader.manifest import FeatureSpec

__all__ = ["CsvSource", "block_bytes", "read_range"]

_BLOCK_SIZE = 1 << 20
_MAX_BLOCK_SIZE = 16 << 20
# Arrow types each Example dtype is converted from. Floats are parsed as float64 and rounded to
# float32 afterwards, exactly as `float(text)` into a `tf.train.FloatList` would.
_EXACT_INTEGER = r"^\s*[+-]?(0|[1-9]\d*)\s*$"  # no leading zero, not hexadecimal
_PARSE_TYPES = {"int64": pa.int64(), "float32": pa.float64(), "bytes": pa.string()}


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


def _cells(batch: pa.RecordBatch, indices: Sequence[int]) -> list[dict]:
    """The dead-letter content of the rows at `indices`: their cells by column, as text."""
    taken = batch.take(pa.array(indices, pa.int64()))
    names = batch.schema.names
    columns = [_texts(column) for column in taken.columns]
    return [{"cells": dict(zip(names, row, strict=True))} for row in zip(*columns, strict=True)]


def _texts(column: pa.Array) -> list:
    """A binary column's values as text (`as_text`), cast whole when it is all UTF-8."""
    try:
        return column.cast(pa.string()).to_pylist()
    except pa.ArrowInvalid:
        return [as_text(value) for value in column.to_pylist()]


def _normalized(text: pa.Array, dtype: str) -> pa.Array:
    """Numbers as Arrow's casts take them: no spaces around, no `+` on integers, true/false
    as 1/0 (only reached when the plain cast failed, so clean columns pay nothing)."""
    text = pc.utf8_trim_whitespace(text)
    if dtype == "int64":
        text = pc.replace_substring_regex(text, r"^\+(\d)", r"\1")  # not '+-1'
        text = pc.replace_substring_regex(text, r"(?i)^true$", "1")
        text = pc.replace_substring_regex(text, r"(?i)^false$", "0")
    return text


_FAILED_VALUE = re.compile(r"^Failed to parse string: '(.*)' as a scalar of type", re.DOTALL)


def _may_normalize(error: pa.ArrowInvalid, dtype: str) -> bool:
    """Whether normalizing a column (trimming, `+1`, true/false) could make its cast pass: not
    when the value the cast stopped at is no number even so (`unknown`), which spares a dirty
    column four passes over its text."""
    failed = _FAILED_VALUE.match(str(error))
    return failed is None or reads_as(failed.group(1), dtype)


def _convert(column: pa.Array, feature: FeatureSpec) -> pa.Array:
    """A binary column as the Arrow type the Example dtype is built from; raises ArrowInvalid.
    With a logical type (`--schema` asks for dates as int64), ISO text becomes its integers."""
    dtype = feature.dtype
    if dtype == "bytes":
        return pc.cast(column, pa.string())  # validates UTF-8
    if feature.logical_type:
        text = pc.utf8_trim_whitespace(pc.cast(column, pa.string()))
        return temporal_integers(text, feature.logical_type)
    # Numbers need no UTF-8 check of their own: bytes that are not digits fail to parse anyway.
    text = column.view(pa.string())
    try:
        parsed = pc.cast(text, _PARSE_TYPES[dtype])
    except pa.ArrowInvalid as e:
        if not _may_normalize(e, dtype):
            raise
        parsed = pc.cast(_normalized(text, dtype), _PARSE_TYPES[dtype])
    if dtype == "int64" and pc.any(pc.match_substring_regex(text, _ALTERED_INTEGER)).as_py():
        # Arrow reads '0x1F' as 31 and '01000' as 1000: a code's zeros (or a hex value) would
        # be altered without a word, so such values are bad rows (found by `_bad_rows`).
        raise pa.ArrowInvalid("an integer with a leading zero or in hexadecimal")
    if dtype == "float32":
        check_float32_range(parsed)
    return parsed


# What Arrow's int64 cast accepts but alters: leading zeros ('007', '-01') and hexadecimal.
_ALTERED_INTEGER = r"^\s*[+-]?0[0-9xX]"


# Values each number dtype takes (what `_convert` parses), to find bad rows without a loop.
_READABLE = {"int64": f"{_EXACT_INTEGER}|{BOOLEAN}", "float32": NUMBER}


def _unreadable(feature: FeatureSpec, value: str) -> str:
    """Why a value is not of its column's number type: worded as Arrow words a failed cast, so
    every bad number reads the same, or naming the zeros a code would lose."""
    prefix = f"column {feature.name!r} ({feature.dtype})"
    if feature.dtype == "int64" and re.match(_ALTERED_INTEGER, value):
        return (
            f"{prefix}: '{value}' has a leading zero or is hexadecimal, which int64 would "
            f"alter; to keep such codes as written, {schema_hint(feature.name, 'bytes')}"
        )
    parse_type = _PARSE_TYPES[feature.dtype]
    return f"{prefix}: Failed to parse string: '{value}' as a scalar of type {parse_type}"


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@dataclasses.dataclass(frozen=True)
class _Failed:
    """A column that did not convert whole: its bad rows, and its good rows converted."""

    bad: dict[int, str]  # row index -> reason
    values: pa.Array  # the converted values of the rows not in `bad`
    good: np.ndarray  # bool by row: not in `bad`


def _bad_rows(column: pa.Array, feature: FeatureSpec) -> _Failed:
    """The values of a column that failed to convert, found in one vectorized pass when the
    column's type has a pattern, value by value otherwise (or when a value that looks right
    still fails: an integer beyond int64, a float beyond float32)."""
    pattern = None if feature.logical_type else _READABLE.get(feature.dtype)
    if pattern is not None:
        text = column.view(pa.string())
        # A missing value (null) converts to a missing value: it is good.
        good = pc.fill_null(pc.match_substring_regex(text, pattern), True)
        good = good.to_numpy(zero_copy_only=False)
        try:
            values = _convert(column.filter(good), feature)
        except pa.ArrowInvalid:
            pass  # some values that look like numbers are out of range: look at each
        else:
            indices = np.flatnonzero(~good)
            found = column.take(pa.array(indices, pa.int64())).to_pylist()
            # A dirty column repeats its bad values ('unknown', '?'): one reason for each.
            reasons = {v: _unreadable(feature, v.decode("utf-8", "replace")) for v in set(found)}
            texts = {v for v in reasons if not _is_utf8(v)}
            if texts:  # say what reads them, not only that they are no numbers
                hint = not_utf8([v for v in found if v in texts])
                reasons.update((v, f"{reasons[v]}: {hint}") for v in texts)
            bad = {i: reasons[v] for i, v in zip(indices.tolist(), found, strict=True)}
            return _Failed(bad, values, good)
    bad = {}
    undecodable: dict[int, bytes] = {}
    for index, value in enumerate(column.to_pylist()):
        if value is None:
            continue
        try:
            _convert(pa.array([value], pa.binary()), feature)
        except pa.ArrowInvalid as e:
            bad[index] = f"column {feature.name!r} ({feature.dtype}): {e}"
            if "Invalid UTF8" in str(e):
                undecodable[index] = value
    if undecodable:
        reason = (
            f"column {feature.name!r} ({feature.dtype}): {not_utf8(list(undecodable.values()))}"
        )
        bad.update(dict.fromkeys(undecodable, reason))
    good = np.ones(len(column), dtype=bool)
    good[list(bad)] = False
    return _Failed(bad, _convert(column.filter(good), feature), good)


def _part(failed: _Failed, keep: np.ndarray) -> pa.Array:
    """A failed column's converted values of the rows kept (all of them among its good rows)."""
    return failed.values.filter(keep[failed.good])


def _typed_batch(
    batch: pa.RecordBatch, features: Sequence[FeatureSpec], found: Counter[str]
) -> tuple[pa.RecordBatch, dict[int, str]]:
    """Converts a batch of binary columns; returns the good rows and {bad row index: reason}.
    Cells that hold a missing-value marker of their column become null, counted in `found`
    by column.

    The whole column is converted at once; only a column that fails is looked at again, to
    find the rows at fault, and its good rows are converted once.
    """
    bad: dict[int, str] = {}
    converted = _converted_together(batch, features)
    failed: dict[str, _Failed] = {}
    for feature in features:
        if feature.name in converted:
            continue
        column = batch.column(feature.name)
        markers = tuple(feature.null_values or ())
        first = bool(markers) and _markers_first(feature)
        if first:
            column, _ = _count_markers(column, feature, markers, found)
        try:
            converted[feature.name] = _convert(column, feature)
            continue
        except pa.ArrowInvalid:
            if markers and not first:
                # A clean column never gets here: markers are looked for only when it fails.
                column, count = _count_markers(column, feature, markers, found)
                if count:
                    try:
                        converted[feature.name] = _convert(column, feature)
                        continue
                    except pa.ArrowInvalid:
                        pass
        failed[feature.name] = _bad_rows(column, feature)
        for index, reason in failed[feature.name].bad.items():
            bad.setdefault(index, reason)
    names = [f.name for f in features]
    if not bad:
        return pa.RecordBatch.from_arrays([converted[n] for n in names], names), bad
    keep = np.ones(batch.num_rows, dtype=bool)
    keep[list(bad)] = False
    # Every column is converted once: a failed column's good rows were, and keep a part of them.
    columns = [
        converted[n].filter(keep) if n in converted else _part(failed[n], keep) for n in names
    ]
    return pa.RecordBatch.from_arrays(columns, names), bad


def _converted_together(
    batch: pa.RecordBatch, features: Sequence[FeatureSpec]
) -> dict[str, pa.Array]:
    """The number columns of a batch converted in one pass per dtype: their texts end to end,
    cast and checked once, then sliced back (each column alone pays a few Arrow calls, which
    rows of thousands of columns pay thousands of times a batch). A dtype's columns that do
    not all convert (a bad value, a marker) are left out, for `_typed_batch` to convert one
    by one and find the rows at fault."""
    converted: dict[str, pa.Array] = {}
    rows = batch.num_rows
    for dtype in ("float32", "int64"):
        group = [
            f for f in features
            if f.dtype == dtype and not f.logical_type and not _markers_first(f)
        ]  # fmt: skip
        if len(group) < 2 or not rows:
            continue
        try:
            together = pa.concat_arrays([batch.column(f.name) for f in group])
            parsed = _convert(together, group[0])
        except (pa.ArrowInvalid, pa.ArrowCapacityError):  # a bad value; texts past 2 GiB
            continue
        for i, feature in enumerate(group):
            converted[feature.name] = parsed.slice(i * rows, rows)
    return converted


def _markers_first(feature: FeatureSpec) -> bool:
    """Whether markers must be made null before converting: a text column converts them as
    text, and a marker that is a number of its column's type (`-999`) as that number."""
    markers = tuple(feature.null_values or ())
    return _markers_first_for(feature.dtype, bool(feature.logical_type), markers)


@functools.lru_cache(maxsize=4096)  # asked for every column of every batch
def _markers_first_for(dtype: str, logical: bool, markers: tuple[str, ...]) -> bool:
    if dtype == "bytes" or logical:
        return True
    return any(readable_as(m, dtype) for m in markers)


def _count_markers(
    column: pa.Array, feature: FeatureSpec, markers: tuple[str, ...], found: Counter[str]
) -> tuple[pa.Array, int]:
    """`without_markers`, the cells made null counted in `found` by column."""
    column, count = without_markers(column, markers)
    if count:
        found[feature.name] += count
    return column, count


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


def read_range(
    f: BinaryIO,
    source: CsvSource,
    start: int,
    end: int,
    on_bad_row: Callable[[BadRow], None],
    first_line: int | None = None,
    header: bool = True,
    markers: Counter[str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Reads the records in bytes [start, end) of a CSV file as Arrow batches.

    Rows with the wrong number of columns, values that are not of their column's type, and text
    that is not UTF-8 are passed to `on_bad_row` and left out; every other row is yielded. So is
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
      first_line: the line `start` is on (1 = the first), for the error message.
      header: the range begins with the file's header line (else its columns are the
        source's features).
      markers: counts, by column, the cells read as missing for holding a marker (once per
        cell, however many passes a range takes).

    Raises:
      DataError: naming the file and the byte range, for a header that differs from the
        expected columns or bytes pyarrow cannot parse as CSV at all.
    """
    path, max_record_bytes = source.path, source.max_record_bytes
    yielded = 0
    base = block_bytes(len(source.features))
    for block_size in (base, max(base, 2 * max_record_bytes)):
        reader = _RangeReader(f, source, start, end, block_size, first_line, header)
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
            read = functools.partial(read_range, f, source, markers=markers)
            before = read(start, bad_start, on_bad_row=on_bad_row, first_line=first_line,
                          header=header) if bad_start > start else ()  # fmt: skip
            for batch in before:
                if yielded >= batch.num_rows:
                    yielded -= batch.num_rows
                    continue
                yield batch.slice(yielded) if yielded else batch
                yielded = 0
            on_bad_row(BadRow(path, start, end, reason, None, {"raw": as_text(raw)}, bad_start))
            if bad_end < end:
                yield from read(bad_end, end, on_bad_row=on_bad_row, first_line=None, header=False)
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
        if markers is not None:
            markers.update(reader.markers)
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
        first_line: int | None,
        header: bool,
    ) -> None:
        self._f, self._source, self._start, self._end = f, source, start, end
        self._path, self._header = source.path, header
        kept = source.kept
        self._converted_features = [f for f in source.features if kept is None or f.name in kept]
        self._block_size = block_size
        self._first_line = first_line
        self._rows_before = 0
        # Bad rows wait for the end of the range, when one more read places each at its offset.
        self._malformed: list[tuple[BadRow, int | None]] = []  # with pyarrow's record number
        self._typed: list[BadRow] = []
        self.markers: Counter[str] = Counter()  # cells read as missing, by column

    def _on_malformed(self, row: pcsv.InvalidRow) -> str:
        reason = f"expected {row.expected_columns} columns, got {row.actual_columns}"
        bad = BadRow(self._path, self._start, self._end, reason, None, {"raw": as_text(row.text)})
        self._malformed.append((bad, row.number))
        return "skip"

    def _typed_rows(self, raw: pa.RecordBatch) -> pa.RecordBatch:
        batch, bad = _typed_batch(raw, self._converted_features, self.markers)
        if bad:
            indices = sorted(bad)
            path, start, end, before = self._path, self._start, self._end, self._rows_before
            self._typed.extend(
                BadRow(path, start, end, bad[index], before + index, content)
                for index, content in zip(indices, _cells(raw, indices), strict=True)
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
        f, path, start, end = self._f, self._path, self._start, self._end
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

        def open_reader(types: Iterable[str]) -> tuple[_Window, pcsv.CSVStreamingReader]:
            window = _Window(f, start, end, source.delimiter)
            reader = pcsv.open_csv(
                window.stream(self._block_size, self._header),
                read_options=read_options,
                parse_options=parse_options,
                convert_options=convert_options(dict.fromkeys(types, pa.binary())),
            )
            return window, reader

        reader = None
        try:
            # A blank header name is "" (its column's name is generated): read as text too.
            window, reader = open_reader([*names, ""])
            header = reader.schema.names
            if any(t != pa.binary() for t in reader.schema.types):  # a name of spaces
                reader.close()
                window, reader = open_reader(header)
            if (name_columns(header) if self._header else header) != names:
                raise DataError(
                    f"{path}: header {header} differs from the expected columns "
                    f"{names}; all inputs of one conversion need the same columns"
                )
            pending = None  # one batch is held back: its last row may be the unterminated one
            for raw in reader:
                if header != names:
                    raw = pa.RecordBatch.from_arrays(raw.columns, names)
                if raw.num_rows:
                    if pending is not None and (batch := self._typed_rows(pending)).num_rows:
                        yield batch
                    pending = raw
            window.scanner.finish()
            if pending is not None and window.scanner.in_quotes:
                _refuse_a_swallowing_row(f, source, start, end, self._first_line)
                pending = self._unterminated_last_row(pending)
            if pending is not None and (batch := self._typed_rows(pending)).num_rows:
                yield batch
        except pa.ArrowInvalid as e:
            if "straddl" in str(e):
                raise _RowTooLong(str(e)) from e
            if found := UNHANDLED_ROW.search(str(e)):
                # pyarrow could not hand this row to `_on_malformed`: it decodes a row's text
                # as UTF-8 first, and this one is not (the handler's exception is ignored).
                number, expected, got = (int(g) for g in found.groups())
                raise _UndecodableRow(number, expected, got) from e
            raise DataError(f"{path}: {_span(start, end)}: {e}") from e
        except UnicodeDecodeError as e:  # pyarrow decodes the header's names as UTF-8
            raise header_not_decodable(path, source.dialect.encoding, e) from None
        finally:
            # pyarrow may read ahead on a thread of its own: it must stop before the file is
            # read again (the next pass, the bad rows' offsets).
            if reader is not None:
                reader.close()

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
            BadRow(self._path, self._start, self._end, reason, row, _cells(pending, [last])[0])
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
