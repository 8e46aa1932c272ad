"""CSV input: sampling a file's head, inferring feature types, reading one byte range as Arrow.

pyarrow's CSV reader does the parsing (quoted fields with commas, doubled quotes and newlines,
UTF-8 checks); this module only decides what bytes it sees and which types it converts to.
An empty cell is a missing value (null), and nothing else is: "NA" or "null" stay strings.
"""

from __future__ import annotations

import dataclasses
import io
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from beam_jobs.errors import DataError
from beam_jobs.formats.csv.bad_rows import place_bad_rows
from beam_jobs.formats.csv.record_starts import (
    FILE_START,
    QuoteScanner,
    nonempty_record_starts,
    record_starts,
)
from beam_jobs.schema.conform import check_float32_range
from beam_jobs.sink.dead_letter import BadRow, as_text
from tfdata_reader.manifest import FeatureSpec

__all__ = ["BadRow", "CsvSample", "infer_features", "parse_sample", "read_range"]

_BLOCK_SIZE = 1 << 20
# Arrow types each Example dtype is converted from. Floats are parsed as float64 and rounded to
# float32 afterwards, exactly as `float(text)` into a `tf.train.FloatList` would.
_log = logging.getLogger(__name__)
_PARSE_TYPES = {"int64": pa.int64(), "float32": pa.float64(), "bytes": pa.string()}


@dataclasses.dataclass(frozen=True)
class CsvSample:
    """The head of one CSV file, cut at a record boundary."""

    path: str
    column_names: list[str]
    table: pa.Table  # the sampled rows, with pyarrow's own type inference
    data: bytes  # the sampled bytes, header included, ending at a record boundary


def _parse_options() -> pcsv.ParseOptions:
    # Malformed rows in a sample are left out of inference; the writers dead-letter them.
    return pcsv.ParseOptions(newlines_in_values=True, invalid_row_handler=lambda row: "skip")


def _convert_options(column_types: dict[str, pa.DataType] | None = None) -> pcsv.ConvertOptions:
    return pcsv.ConvertOptions(
        column_types=column_types or {},
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
        check_utf8=False,  # checked per value when converting, so bad rows can be set aside
    )


def parse_sample(path: str, head: bytes, is_whole_file: bool) -> CsvSample:
    """Parses the first bytes of a CSV file: its header and the complete records among them.

    Args:
      path: the file's path, for error messages.
      head: the file's first bytes.
      is_whole_file: True when `head` is the entire file (so its last record is complete).
    """
    if not head.strip():
        raise DataError(f"{path}: the file is empty; a CSV input needs at least a header line")
    starts = record_starts(head)
    if starts.size == 0 and not is_whole_file:
        raise DataError(
            f"{path}: no complete header line in the first {len(head)} bytes; is it a CSV file?"
        )
    end = len(head) if is_whole_file else int(starts[-1])
    try:
        table = pcsv.read_csv(
            io.BytesIO(head[:end]),
            read_options=pcsv.ReadOptions(use_threads=False),
            parse_options=_parse_options(),
            convert_options=_convert_options(),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise DataError(f"{path}: bytes 0-{end}: {e}") from e
    return CsvSample(path, table.column_names, table, head[:end])


def infer_features(
    samples: Sequence[CsvSample], overrides: Sequence[FeatureSpec] = ()
) -> list[FeatureSpec]:
    """Feature specs for the columns of the first sample, typed from all samples.

    A column is int64 when pyarrow reads every sampled value as an integer, float32 when as a
    number, and bytes otherwise (also when all sampled values are missing). `overrides` (from a
    `--schema` file) win over inference, column by column.

    Raises:
      DataError: when samples disagree on the header or an override names no column.
    """
    names = samples[0].column_names
    for sample in samples[1:]:
        if sample.column_names != names:
            raise DataError(
                f"{sample.path}: header {sample.column_names} differs from {names} in "
                f"{samples[0].path}; all inputs of one conversion need the same columns"
            )
    by_name = {f.name: f for f in overrides}
    unknown = sorted(set(by_name) - set(names))
    if unknown:
        raise DataError(f"--schema names columns {unknown} that the CSV header {names} lacks")
    features = []
    for name in names:
        if name in by_name:
            features.append(dataclasses.replace(by_name[name], shape=[]))
            continue
        types = [s.table.schema.field(name).type for s in samples]
        nullable = any(s.table.column(name).null_count for s in samples)
        known = [t for t in types if not pa.types.is_null(t)]
        if known and all(pa.types.is_integer(t) for t in known):
            dtype = "int64"
        elif known and all(pa.types.is_integer(t) or pa.types.is_floating(t) for t in known):
            dtype = "float32"
            if all(_integer_texts(s, name) for s in samples):
                # pyarrow reads integers beyond int64 (20-digit ids) as doubles; as float32
                # they would silently become other numbers.
                _log.warning(
                    "column %r holds integers beyond the int64 range (e.g. in %s): it is read "
                    "as text (bytes), as no Example number type holds them exactly",
                    name,
                    samples[0].path,
                )
                dtype = "bytes"
        else:
            dtype = "bytes"
        features.append(FeatureSpec(name, dtype, [], nullable))
    return features


def _integer_texts(sample: CsvSample, name: str) -> bool:
    """Whether every sampled value of a column is written as an integer (digits, a sign)."""
    table = pcsv.read_csv(
        io.BytesIO(sample.data),
        read_options=pcsv.ReadOptions(use_threads=False),
        parse_options=_parse_options(),
        convert_options=pcsv.ConvertOptions(
            column_types={name: pa.string()}, include_columns=[name], null_values=[""]
        ),
    )
    values = table.column(name).drop_null()
    return len(values) > 0 and bool(
        pc.all(pc.match_substring_regex(values, r"^\s*[+-]?\d+\s*$")).as_py()
    )


class _Window(io.RawIOBase):
    """Bytes [start, end) of a seekable binary file, as a readable stream that follows the
    quote state (`scanner.in_quotes` after `scanner.finish()`: the range ends in a quoted
    field)."""

    def __init__(self, f: BinaryIO, start: int, end: int) -> None:
        f.seek(start)
        self._f = f
        self._left = end - start
        self._position = start
        # `start` is a record start: outside quotes, at the start of a field.
        self.scanner = QuoteScanner(False, FILE_START)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(buffer)[: min(len(buffer), self._left)]
        data = self._f.read(len(view))
        view[: len(data)] = data
        self._left -= len(data)
        self.scanner.feed(data, self._position)
        self._position += len(data)
        return len(data)


def _cells(batch: pa.RecordBatch, index: int) -> dict:
    return {
        "cells": {name: as_text(batch.column(name)[index].as_py()) for name in batch.schema.names}
    }


def _convert(column: pa.Array, dtype: str) -> pa.Array:
    """A binary column as the Arrow type the Example dtype is built from; raises ArrowInvalid."""
    if dtype == "bytes":
        return pc.cast(column, pa.string())  # validates UTF-8
    # Numbers need no UTF-8 check of their own: bytes that are not digits fail to parse anyway.
    parsed = pc.cast(column.view(pa.string()), _PARSE_TYPES[dtype])
    if dtype == "float32":
        check_float32_range(parsed)
    return parsed


def _typed_batch(
    batch: pa.RecordBatch, features: Sequence[FeatureSpec]
) -> tuple[pa.RecordBatch, dict[int, str]]:
    """Converts a batch of binary columns; returns the good rows and {bad row index: reason}.

    The whole column is converted at once; only a column that fails is looked at value by
    value, to find the rows at fault.
    """
    bad: dict[int, str] = {}
    converted: dict[str, pa.Array] = {}
    for feature in features:
        column = batch.column(feature.name)
        try:
            converted[feature.name] = _convert(column, feature.dtype)
        except pa.ArrowInvalid:
            for index, value in enumerate(column.to_pylist()):
                if value is None or index in bad:
                    continue
                try:
                    _convert(pa.array([value], pa.binary()), feature.dtype)
                except pa.ArrowInvalid as e:
                    bad[index] = f"column {feature.name!r} ({feature.dtype}): {e}"
    names = [f.name for f in features]
    if not bad:
        return pa.RecordBatch.from_arrays([converted[n] for n in names], names), bad
    good = batch.filter(pa.array([i not in bad for i in range(batch.num_rows)]))
    columns = [_convert(good.column(f.name), f.dtype) for f in features]
    return pa.RecordBatch.from_arrays(columns, names), bad


def _refuse_a_swallowing_row(
    f: BinaryIO, path: str, start: int, end: int, first_line: int | None
) -> None:
    """Raises DataError when the range's last row, whose quoted field never closes, spans
    more than its own line."""
    row_start = int(nonempty_record_starts(f, start, end)[-1])
    f.seek(row_start)
    text = f.read(end - row_start)
    lines = text.rstrip(b"\r\n").count(b"\n")
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
    path: str,
    start: int,
    end: int,
    features: Sequence[FeatureSpec],
    on_bad_row: Callable[[BadRow], None],
    first_line: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """Reads the records in bytes [start, end) of a CSV file as Arrow batches.

    Rows with the wrong number of columns, values that are not of their column's type, and text
    that is not UTF-8 are passed to `on_bad_row` and left out; every other row is yielded. So is
    the last row of a file when it opens a quoted field that never closes. When such a row
    spans several lines, pyarrow would swallow them all into one value: that is a `DataError`
    naming the line, not one bad row.

    Args:
      f: the file, opened for binary reading and seekable.
      path: its path, for error messages.
      start: a record start; 0 means the range begins with the file's header line.
      end: a record start (or the file size) after `start`.
      features: the columns, in header order, with the dtypes to convert to.
      on_bad_row: called once per row that is left out.
      first_line: the line `start` is on (1 = the first), for the error message.

    Raises:
      DataError: naming the file and the byte range, for a header that differs from the
        expected columns or bytes pyarrow cannot parse as CSV at all.
    """
    names = [feature.name for feature in features]
    read_options = pcsv.ReadOptions(
        block_size=_BLOCK_SIZE,
        use_threads=False,
        column_names=None if start == 0 else names,
    )
    rows_before = 0
    # Bad rows wait for the end of the range, when one more read places each at its offset.
    malformed_rows: list[tuple[BadRow, int | None]] = []  # with pyarrow's record number
    typed_rows: list[BadRow] = []

    def malformed(row: pcsv.InvalidRow) -> str:
        reason = f"expected {row.expected_columns} columns, got {row.actual_columns}"
        bad = BadRow(path, start, end, reason, None, {"raw": as_text(row.text)})
        malformed_rows.append((bad, row.number))
        return "skip"

    def typed(raw: pa.RecordBatch) -> pa.RecordBatch:
        nonlocal rows_before
        batch, bad = _typed_batch(raw, features)
        for index, reason in sorted(bad.items()):
            typed_rows.append(
                BadRow(path, start, end, reason, rows_before + index, _cells(raw, index))
            )
        rows_before += raw.num_rows
        return batch

    parse_options = pcsv.ParseOptions(newlines_in_values=True, invalid_row_handler=malformed)
    window = _Window(f, start, end)
    try:
        reader = pcsv.open_csv(
            io.BufferedReader(window, buffer_size=_BLOCK_SIZE),
            read_options=read_options,
            parse_options=parse_options,
            convert_options=_convert_options({name: pa.binary() for name in names}),
        )
        if reader.schema.names != names:
            raise DataError(
                f"{path}: header {reader.schema.names} differs from the expected columns {names}; "
                "all inputs of one conversion need the same columns"
            )
        pending = None  # one batch is held back: its last row may be the unterminated one
        for raw in reader:
            if raw.num_rows:
                if pending is not None and (batch := typed(pending)).num_rows:
                    yield batch
                pending = raw
        window.scanner.finish()
        if pending is not None and window.scanner.in_quotes:
            _refuse_a_swallowing_row(f, path, start, end, first_line)
            last = pending.num_rows - 1
            reason = "unterminated quoted field: it runs to the end of the file"
            typed_rows.append(
                BadRow(path, start, end, reason, rows_before + last, _cells(pending, last))
            )
            pending = pending.slice(0, last)
        if pending is not None and (batch := typed(pending)).num_rows:
            yield batch
    except pa.ArrowInvalid as e:
        raise DataError(f"{path}: bytes {start}-{end}: {e}") from e
    if malformed_rows or typed_rows:
        starts = nonempty_record_starts(f, start, end)
        for bad in place_bad_rows(starts, malformed_rows, typed_rows, header=start == 0):
            on_bad_row(bad)
