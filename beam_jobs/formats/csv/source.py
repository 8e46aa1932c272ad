"""CSV input: sampling a file's head and inferring feature types (`ranges` reads byte ranges).

pyarrow's CSV reader does the parsing (quoted fields with commas, doubled quotes and newlines,
UTF-8 checks); this module only decides what bytes it sees and which types it converts to.
An empty cell is a missing value (null), and nothing else is: "NA" or "null" stay strings.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

from beam_jobs.core.errors import DataError
from beam_jobs.formats.csv import unraisable
from beam_jobs.formats.csv.dialect import Dialect, looks_like_data, skip_lines
from beam_jobs.formats.csv.inference import infer_column
from beam_jobs.formats.csv.record_starts import record_starts
from beam_jobs.formats.lines.pieces import refuse_wide_text
from tfdata_reader.manifest import FeatureSpec

__all__ = [
    "UNHANDLED_ROW",
    "CsvSample",
    "blank_lines_are_records",
    "convert_options",
    "header_not_decodable",
    "infer_features",
    "parse_sample",
]

unraisable.install()  # pyarrow's message about rows the readers handle themselves

_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CsvSample:
    """The head of one CSV file, cut at a record boundary."""

    path: str
    column_names: list[str]
    table: pa.Table  # the sampled rows, with pyarrow's own type inference
    data: bytes  # the sampled bytes past any skipped lines, ending at a record boundary
    dialect: Dialect
    texts: pa.Table  # the sampled rows as written: every column as text, null when empty


def _skip_malformed(row: pcsv.InvalidRow) -> str:
    # Malformed rows in a sample are left out of inference; the writers dead-letter them.
    return "skip"


def _parse_options(delimiter: str, one_column: bool = False) -> pcsv.ParseOptions:
    return pcsv.ParseOptions(
        delimiter=delimiter,
        newlines_in_values=True,
        invalid_row_handler=_skip_malformed,
        ignore_empty_lines=not one_column,  # see `blank_lines_are_records`
    )


def blank_lines_are_records(columns: int) -> bool:
    """In a file of one column, a blank line is a record whose value is empty (missing), as
    `cut -f1` writes one; with more columns it is no record at all (as pandas and Python's
    csv module read it): it could hold no field of each column."""
    return columns == 1


def _read_options(dialect: Dialect) -> pcsv.ReadOptions:
    return pcsv.ReadOptions(
        use_threads=False,
        column_names=list(dialect.column_names) or None,
        encoding=dialect.encoding,
    )


def header_not_decodable(path: str, encoding: str, e: UnicodeDecodeError) -> DataError:
    """The error for a header pyarrow cannot decode: it names the flag that reads it."""
    return DataError(
        f"{path}: the header is not {encoding} ({e.reason} at byte {e.start}); "
        "pass --encoding (e.g. latin-1 or cp1252)"
    )


def convert_options(column_types: dict[str, pa.DataType] | None = None) -> pcsv.ConvertOptions:
    return pcsv.ConvertOptions(
        column_types=column_types or {},
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
        check_utf8=False,  # checked per value when converting, so bad rows can be set aside
    )


def parse_sample(path: str, head: bytes, is_whole_file: bool, dialect: Dialect) -> CsvSample:
    """Parses the first bytes of a CSV file: its header and the complete records among them.

    Args:
      path: the file's path, for error messages.
      head: the file's first bytes (before `dialect.skip_header_lines` are skipped).
      is_whole_file: True when `head` is the entire file (so its last record is complete).
      dialect: the layout, its delimiter known.
    """
    if not head.strip():
        raise DataError(f"{path}: the file is empty; a CSV input needs at least a header line")
    refuse_wide_text(path, head)
    skipped = skip_lines(head, dialect.skip_header_lines)
    if skipped is None:
        raise DataError(
            f"{path}: fewer than --skip_header_lines {dialect.skip_header_lines} lines in its "
            f"first {len(head):,} bytes"
        )
    head = head[skipped:]
    starts = record_starts(head, delimiter=dialect.delimiter or ",")
    if starts.size == 0 and not is_whole_file:
        raise DataError(
            f"{path}: no complete header line in the first {len(head)} bytes; is it a CSV file?"
        )
    end = len(head) if is_whole_file else int(starts[-1])
    parsed = _without_undecodable_rows(head[:end], starts, dialect)
    try:
        table = pcsv.read_csv(
            io.BytesIO(parsed),
            read_options=_read_options(dialect),
            parse_options=_parse_options(dialect.delimiter or ","),
            convert_options=convert_options(),
        )
        one_column = blank_lines_are_records(table.num_columns)
        parse_options = _parse_options(dialect.delimiter or ",", one_column)
        if one_column:
            table = pcsv.read_csv(
                io.BytesIO(parsed),
                read_options=_read_options(dialect),
                parse_options=parse_options,
                convert_options=convert_options(),
            )
        texts = pcsv.read_csv(
            io.BytesIO(parsed),
            read_options=_read_options(dialect),
            parse_options=parse_options,
            convert_options=convert_options(dict.fromkeys(table.column_names, pa.string())),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise DataError(f"{path}: bytes 0-{end}: {e}") from e
    except UnicodeDecodeError as e:  # pyarrow decodes the header's names as UTF-8
        raise header_not_decodable(path, dialect.encoding, e) from None
    return CsvSample(path, table.column_names, table, head[:end], dialect, texts)


# pyarrow's error for a malformed row it could not hand to the invalid-row handler (it decodes
# the row's text as UTF-8 first): the record number, the columns expected and found.
UNHANDLED_ROW = re.compile(r"Row #(\d+): Expected (\d+) columns, got (\d+)")


def _without_undecodable_rows(data: bytes, starts: np.ndarray, dialect: Dialect) -> bytes:
    """The sampled records less those with the wrong number of columns whose text is not
    UTF-8: pyarrow cannot hand such a row to the handler that skips malformed rows (it
    decodes the text first), so it stops instead. The writers dead-letter them."""
    # `starts` are the offsets past each record's newline: the first record starts at 0.
    offsets = [0, *(int(s) for s in starts if int(s) < len(data))]
    records = [s for s in offsets if data[s : s + 1] not in (b"\n", b"\r")]
    dropped: set[int] = set()
    for _ in range(_MAX_UNDECODABLE):
        kept = b"".join(
            data[start : records[i + 1] if i + 1 < len(records) else len(data)]
            for i, start in enumerate(records)
            if i not in dropped
        )
        try:
            pcsv.read_csv(
                io.BytesIO(kept),
                read_options=_read_options(dialect),
                parse_options=_parse_options(dialect.delimiter or ","),
                convert_options=convert_options(),
            )
            return kept
        except pa.ArrowInvalid as e:
            found = UNHANDLED_ROW.search(str(e))
            if not found:
                return kept  # another problem: reported by the caller's own read
            alive = [i for i in range(len(records)) if i not in dropped]
            dropped.add(alive[int(found.group(1)) - 1])
        except UnicodeDecodeError:
            return kept  # the header: reported by the caller
    return data


_MAX_UNDECODABLE = 100  # such rows left out of one sample before giving up


def _check_names(sample: CsvSample) -> None:
    """Column names must be distinct and not empty: a DataError naming the file otherwise."""
    names = sample.column_names
    where = "--column_names" if sample.dialect.column_names else f"{sample.path}: the header"
    empty = [i + 1 for i, n in enumerate(names) if not n.strip()]
    if empty:
        raise DataError(
            f"{where} has empty column names (column {', '.join(map(str, empty))}); name them, "
            "or pass --column_names (and --skip_header_lines 1 to skip the header)"
        )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise DataError(
            f"{where} names columns more than once: {', '.join(repr(n) for n in twice)}; "
            "rename them, or pass --column_names (and --skip_header_lines 1 to skip the header)"
        )
    given = sample.dialect.column_names
    if (
        given
        and sample.texts.num_rows
        and _first_row(sample.texts) == [n.strip().lower() for n in given]
    ):
        given_line = (sample.dialect.delimiter or ",").join(sample.dialect.column_names)
        raise DataError(
            f"{sample.path}: the first line ({given_line}) is the column names "
            "given by --column_names: the file has a header line, which would be read as a "
            "record; pass --skip_header_lines 1"
        )
    if sample.dialect.has_header and looks_like_data(names):
        _log.warning(
            "%s: the first line (%s) looks like data, not column names; if the files have no "
            "header line, pass --column_names",
            sample.path,
            (sample.dialect.delimiter or ",").join(names),
        )


def _first_row(texts: pa.Table) -> list[str]:
    return [str(texts.column(i)[0].as_py() or "").strip().lower() for i in range(texts.num_columns)]


def infer_features(
    samples: Sequence[CsvSample], overrides: Sequence[FeatureSpec] = ()
) -> list[FeatureSpec]:
    """Feature specs for the columns of the first sample, typed from all samples.

    Each column's type comes from its sampled values as written (`inference.infer_column`:
    numbers, codes with leading zeros, true/false), and what a user should know about it is
    logged as a warning. `overrides` (from a `--schema` file) win, column by column.

    Raises:
      DataError: when samples disagree on the header or an override names no column.
    """
    _check_names(samples[0])
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
    features: list[FeatureSpec] = []
    warned: list[str] = []
    for name in names:
        if name in by_name:
            features.append(dataclasses.replace(by_name[name], shape=[]))
            continue
        columns = [s.texts.column(name) for s in samples]
        nullable = any(c.null_count for c in columns)
        chunks = [chunk for column in columns for chunk in column.chunks]
        texts = pa.chunked_array(chunks, type=pa.string()).combine_chunks().drop_null()
        guess = infer_column(name, texts)
        warned.extend(w for w in guess.warnings if w not in warned)
        features.append(FeatureSpec(name, guess.dtype, [], nullable))
    for warning in warned[:_WARNINGS_SHOWN]:
        _log.warning("%s", warning)
    if len(warned) > _WARNINGS_SHOWN:
        _log.warning(
            "... and %d more warnings about column types (`tfrecord-etl inspect --input` "
            "shows the types chosen)",
            len(warned) - _WARNINGS_SHOWN,
        )
    return features


_WARNINGS_SHOWN = 5  # inference warnings logged one by one; a wide file would print dozens
