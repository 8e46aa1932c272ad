"""CSV input: sampling a file's head and inferring feature types (`ranges` reads byte ranges).

pyarrow's CSV reader does the parsing (quoted fields with commas, doubled quotes and newlines,
UTF-8 checks); this module only decides what bytes it sees and which types it converts to.
An empty cell is a missing value (null), and so is a missing-value marker of its column
(`markers`: `NA`, `NULL`, ... in number columns, or those `--null_values` names).
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
from beam_jobs.formats.csv.dialect import looks_like_data, skip_lines
from beam_jobs.formats.csv.inference import (
    infer_column,
    number_columns,
    plain_number_columns,
    plain_text_columns,
)
from beam_jobs.formats.csv.markers import DEFAULT_MARKERS, column_markers
from beam_jobs.formats.csv.notes import notes_start, number_columns_fit
from beam_jobs.formats.csv.titles import refuse_title_lines
from beam_jobs.formats.lines.layout import Dialect
from beam_jobs.formats.lines.line_ends import cr_only
from beam_jobs.formats.lines.pieces import refuse_wide_text
from beam_jobs.formats.lines.quotes import QuoteScanner, record_starts
from beam_jobs.schema.type_notes import TypeNote, log_notes
from tfdata_reader.manifest import FeatureSpec

__all__ = [
    "UNHANDLED_ROW",
    "CsvSample",
    "blank_lines_are_records",
    "convert_options",
    "first_row",
    "header_not_decodable",
    "infer_features",
    "name_columns",
    "not_decodable",
    "parse_sample",
    "parse_stretch",
    "read_filled",
    "short_of",
]

unraisable.install()  # pyarrow's message about rows the readers handle themselves

_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CsvSample:
    """The head of one CSV file, cut at a record boundary."""

    path: str
    column_names: list[str]  # as the features are named (`name_columns`)
    table: pa.Table  # the sampled rows, with pyarrow's own type inference
    data: bytes  # the sampled bytes past any skipped lines, ending at a record boundary
    dialect: Dialect
    texts: pa.Table  # the sampled rows as written: every column as text, null when empty
    header: tuple[str, ...] = ()  # the names as the header line writes them
    # Every record is one line (no quoted field holds a line break): then a stretch cut at line
    # ends elsewhere in the file is cut at records.
    lines_are_records: bool = False


def name_columns(header: Sequence[str]) -> list[str]:
    """The column names of a header line as features take them: a blank name (R's row names,
    a spreadsheet's unnamed column) becomes `column_N` (N from 1), and a name seen before
    gets `_2`, `_3`... (pandas calls them `Unnamed: 0` and `a.1`), never a name the header
    already has."""
    taken = set(header)
    names: list[str] = []
    seen: dict[str, int] = {}
    for position, name in enumerate(header, start=1):
        if not name.strip():
            candidate = f"column_{position}"
        else:
            seen[name] = seen.get(name, 0) + 1
            candidate = name if seen[name] == 1 else f"{name}_{seen[name]}"
        if candidate != name:
            while candidate in taken:
                candidate += "_"
        taken.add(candidate)
        names.append(candidate)
    return names


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


def not_decodable(path: str, encoding: str, data: bytes, at: int, given: bool) -> DataError:
    """The error for bytes of a file that its --encoding does not decode: where the first
    undecodable byte is (`data` starts at byte `at` of the file, line counting from there
    when `at` is 0) and what to do. A flag that was given is not advised again."""
    try:
        data.decode(encoding)
    except UnicodeDecodeError as e:
        offset, byte = at + e.start, data[e.start : e.start + 1].hex().upper()
        before = data[: e.start]
        line = before.count(b"\n") + 1
        where = f"byte {offset:,}" + (f" (line {line})" if at == 0 else "")
        header = at == 0 and line == 1
    else:  # the codec failed on a block pyarrow cut, not on the bytes themselves
        return DataError(f"{path}: not {encoding} (pyarrow's reading failed to decode it)")
    what = (
        f"the header is not {encoding}: 0x{byte} at {where}"
        if header
        else (f"{where} is not {encoding}: 0x{byte}")
    )
    if not given:
        return DataError(f"{path}: {what}; pass --encoding (e.g. latin-1 or cp1252)")
    return DataError(
        f"{path}: {what} has no character in it; remove or fix that byte (iconv -f {encoding} "
        "-t utf-8 -c drops such bytes), or pass the file's true --encoding"
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
    """Parses the first bytes of a CSV file: its header and the complete records among them;
    of a whole file, less the notes under the table (`notes`: the writers leave them out).

    Args:
      path: the file's path, for error messages.
      head: the file's first bytes (before `dialect.skip_header_lines` are skipped).
      is_whole_file: True when `head` is the entire file (so its last record is complete).
      dialect: the layout, its delimiter known.
    """
    sample = _parse_head(path, head, is_whole_file, dialect)
    columns, delimiter = len(sample.column_names), dialect.delimiter or ","
    if not is_whole_file or columns < 2:
        return sample
    # The lines at the end that may be notes; whether they are, by the columns above them.
    lines = notes_start(sample.data, delimiter, columns, lambda _, __: False)
    if lines == len(sample.data):
        return sample
    skipped = len(head) - len(sample.data)
    above = _parse_head(path, head[: skipped + lines], True, dialect).texts
    markers = (*DEFAULT_MARKERS, *(dialect.null_values or ()))
    numeric = number_columns(above.columns, markers)
    cut = notes_start(sample.data, delimiter, columns, number_columns_fit(set(numeric), markers))
    if cut == len(sample.data):
        return sample
    return _parse_head(path, head[: skipped + cut], True, dialect)


def _no_header_line(path: str, head: bytes) -> DataError:
    """The error for a head of a file with no line end in it."""
    if cr_only(head):
        return DataError(
            f"{path}: its lines end in CR alone (old Mac line ends) and the conversion's first "
            "file's (by name) do not: convert the files with CR line ends apart (a conversion "
            "whose first file ends its lines so reads every such file)"
        )
    return DataError(
        f"{path}: no complete header line in the first {len(head)} bytes; is it a CSV file?"
    )


def _parse_head(path: str, head: bytes, is_whole_file: bool, dialect: Dialect) -> CsvSample:
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
        raise _no_header_line(path, head)
    end = len(head) if is_whole_file else int(starts[-1])
    parsed, table = _without_undecodable_rows(head[:end], starts, dialect)
    if is_whole_file and parsed and not parsed.endswith((b"\n", b"\r")):
        scanner = QuoteScanner(delimiter=dialect.delimiter or ",")
        scanner.feed(parsed, 0)
        scanner.finish()
        if not scanner.in_quotes:  # no row changes; names alone cannot be read without it
            parsed, table = parsed + b"\n", None
    try:
        if table is None:
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
        texts = _texts(parsed, dialect, parse_options, table.column_names)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise DataError(f"{path}: bytes 0-{end}: {e}") from e
    except UnicodeDecodeError:  # pyarrow decodes the header's names (and with --encoding all)
        raise not_decodable(
            path, dialect.encoding, head[:end], skipped, dialect.encoding != "utf-8"
        ) from None
    if dialect.has_header:
        refuse_title_lines(path, parsed, dialect)
    header = tuple(table.column_names)
    names = name_columns(header) if dialect.has_header else list(header)
    if names != list(header):
        table, texts = table.rename_columns(names), texts.rename_columns(names)
    records = int(np.count_nonzero(starts <= end))
    one_line_each = records == head[:end].count(b"\n")
    return CsvSample(path, names, table, head[:end], dialect, texts, header, one_line_each)


def short_of(row: pcsv.InvalidRow) -> int:
    """The trailing fields a row that pyarrow set aside lacks, when it is a short row (read with
    them missing, `short_rows`); 0 for others: no fields, more than the header, or a quote left
    open to the end of the file."""
    if 0 < row.actual_columns < row.expected_columns and row.text.count('"') % 2 == 0:
        return row.expected_columns - row.actual_columns
    return 0


def read_filled(
    rows: Sequence[tuple[str, int]], names: Sequence[str], delimiter: str, dtype: pa.DataType
) -> pa.Table:
    """Short rows (their text as pyarrow decoded it, and the fields each lacks) read with their
    missing fields added as empty ones, each column of `dtype`."""
    text = "".join(f"{row}{delimiter * missing}\n" for row, missing in rows)
    return pcsv.read_csv(
        io.BytesIO(text.encode()),
        read_options=pcsv.ReadOptions(use_threads=False, column_names=list(names)),
        parse_options=pcsv.ParseOptions(
            delimiter=delimiter, newlines_in_values=True, ignore_empty_lines=False
        ),
        convert_options=convert_options(dict.fromkeys(names, dtype)),
    )


def _texts(
    parsed: bytes, dialect: Dialect, parse_options: pcsv.ParseOptions, names: list[str]
) -> pa.Table:
    """The sample's cells as text, short rows included with their missing trailing fields
    missing (`short_rows`: the writers read them so, so inference must see their cells: a
    word in a short row's first column makes that column text)."""
    short: list[tuple[str, int]] = []

    def keep_short(row: pcsv.InvalidRow) -> str:
        if missing := short_of(row):
            short.append((row.text, missing))
        return "skip"

    parse_options.invalid_row_handler = keep_short
    texts = pcsv.read_csv(
        io.BytesIO(parsed),
        read_options=_read_options(dialect),
        parse_options=parse_options,
        convert_options=convert_options(dict.fromkeys(names, pa.string())),
    )
    if not short:
        return texts
    filled = read_filled(short, texts.column_names, dialect.delimiter or ",", pa.string())
    return pa.concat_tables([texts, filled.cast(texts.schema)])


def parse_stretch(data: bytes, sample: CsvSample) -> pa.Table | None:
    """The records as written (text, null when empty) of bytes from the middle of a file whose
    records are lines (`CsvSample.lines_are_records`): cut to whole lines, read with the sample's
    columns; None when pyarrow cannot read them (rows with the wrong number of fields are left
    out, as in the head: the writers dead-letter them)."""
    start, end = data.find(b"\n") + 1, data.rfind(b"\n") + 1
    if not 0 < start < end:
        return None
    dialect = sample.dialect
    names = list(sample.header) or sample.column_names
    try:
        table = pcsv.read_csv(
            io.BytesIO(data[start:end]),
            read_options=pcsv.ReadOptions(
                use_threads=False, column_names=names, encoding=dialect.encoding
            ),
            parse_options=_parse_options(dialect.delimiter or ",", len(names) == 1),
            convert_options=convert_options(dict.fromkeys(names, pa.string())),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError):
        return None
    return table.rename_columns(sample.column_names)


# pyarrow's error for a malformed row it could not hand to the invalid-row handler (it decodes
# the row's text as UTF-8 first): the record number, the columns expected and found.
UNHANDLED_ROW = re.compile(r"Row #(\d+): Expected (\d+) columns, got (\d+)")


def _without_undecodable_rows(
    data: bytes, starts: np.ndarray, dialect: Dialect
) -> tuple[bytes, pa.Table | None]:
    """The sampled records less those with the wrong number of columns whose text is not
    UTF-8: pyarrow cannot hand such a row to the handler that skips malformed rows (it
    decodes the text first), so it stops instead. The writers dead-letter them. With them,
    the records read with the sample's typed options, when they could be (a sample of
    thousands of columns takes a tenth of a second a read)."""
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
            table = pcsv.read_csv(
                io.BytesIO(kept),
                read_options=_read_options(dialect),
                parse_options=_parse_options(dialect.delimiter or ","),
                convert_options=convert_options(),
            )
            return kept, table
        except pa.ArrowInvalid as e:
            found = UNHANDLED_ROW.search(str(e))
            if not found:
                return kept, None  # another problem: reported by the caller's own read
            alive = [i for i in range(len(records)) if i not in dropped]
            dropped.add(alive[int(found.group(1)) - 1])
        except UnicodeDecodeError:
            return kept, None  # the header: reported by the caller
    return data, None


_MAX_UNDECODABLE = 100  # such rows left out of one sample before giving up


def _check_names(sample: CsvSample) -> None:
    """Column names must be distinct and not empty: a DataError naming the file otherwise."""
    names = sample.column_names
    given = sample.dialect.column_names
    empty = [i + 1 for i, n in enumerate(given) if not n.strip()]
    twice = sorted({n for n in given if given.count(n) > 1})
    if empty or twice:
        raise DataError(
            f"--column_names has {'empty names' if empty else 'names given more than once'} "
            f"({', '.join(map(str, empty)) if empty else ', '.join(map(repr, twice))}); "
            "name every column once"
        )
    renamed = [
        f"column {i} ({'no name' if not raw.strip() else repr(raw) + ' again'}) is {name!r}"
        for i, (raw, name) in enumerate(zip(sample.header, names, strict=True), start=1)
        if raw != name
    ]
    if renamed:
        _log.warning(
            "%s: the header's %s: the names --columns, --rename and --schema take",
            sample.path,
            "; ".join(renamed),
        )
    given = sample.dialect.column_names
    if (
        given
        and sample.texts.num_rows
        and first_row(sample.texts) == [n.strip().lower() for n in given]
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


def _overridden(feature: FeatureSpec, given: tuple[str, ...] | None) -> FeatureSpec:
    """A `--schema` feature of a CSV column: one value per record; without markers of its
    own, those of a column of its type (`markers.column_markers`)."""
    markers = feature.null_values
    if markers is None:
        found = column_markers(feature.dtype, given)
        markers = list(found) if found or given is not None else None
    return dataclasses.replace(feature, shape=[], null_values=markers)


def first_row(texts: pa.Table) -> list[str]:
    """The first sampled row's cells, stripped and lowercased (empty: "")."""
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
                f"{sample.path}: header {list(sample.header)} differs from "
                f"{list(samples[0].header)} in {samples[0].path}; all inputs of one conversion "
                "need the same columns"
            )
    by_name = {f.name: f for f in overrides}
    unknown = sorted(set(by_name) - set(names))
    if unknown:
        raise DataError(f"--schema names columns {unknown} that the CSV header {names} lacks")
    features: list[FeatureSpec] = []
    notes: list[TypeNote] = []
    given = samples[0].dialect.null_values
    by_position = [[s.texts.column(i) for s in samples] for i in range(len(names))]
    plain = plain_number_columns(by_position, given)
    rest = [i for i in range(len(names)) if i not in plain]  # text columns looked at once too
    texts = plain_text_columns([by_position[i] for i in rest], given)
    plain |= {rest[k]: guess for k, guess in texts.items()}
    for position, name in enumerate(names):
        if name in by_name:
            features.append(_overridden(by_name[name], given))
            continue
        columns = by_position[position]
        nullable = any(c.null_count for c in columns)
        guess = plain.get(position)
        if guess is None:
            chunks = [chunk for column in columns for chunk in column.chunks]
            texts = pa.chunked_array(chunks, type=pa.string()).combine_chunks().drop_null()
            guess = infer_column(name, texts, given, samples[0].dialect.infer_null_values)
        notes.extend(guess.notes)
        markers = None if guess.null_values is None else list(guess.null_values)
        nullable = nullable or guess.markers_seen > 0
        features.append(FeatureSpec(name, guess.dtype, [], nullable, null_values=markers))
    log_notes(notes, _log)
    return features
