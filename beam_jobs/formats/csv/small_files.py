"""Many small CSV files of a write task read in one parse.

pyarrow's CSV reader costs about a quarter of a millisecond to open, and each batch's typing a
few Arrow calls a column, whatever the rows: 4,000 files of 50 rows took 3.2x the time of the
same rows in one file (1.9x read this way). Whole files of a few KiB that share a header are
read as one text (the first file's header, then every file's records) and their rows dealt back
to them by count.

A file joins only when its records are surely counted as pyarrow reads them (the quote-aware
scan the cuts use; no line end that is a lone CR, no blank first line, not ending inside
quotes), and a group is kept only when it reads clean: no bad row, no error, and as many rows
as its files were counted to hold. Anything else reads the group's files one by one, as every
other file is read, so dead letters name their file and line as always.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from beam_jobs.core.errors import DataError
from beam_jobs.core.inputs import Piece, reading_input
from beam_jobs.formats.compressed import compression_of, open_input
from beam_jobs.formats.csv.ranges import CsvSource, RangeStart, RangeTally, read_range
from beam_jobs.formats.lines.layout import Dialect
from beam_jobs.formats.lines.quotes import QuoteScanner

__all__ = ["GROUP_BYTES", "SMALL_FILE_BYTES", "groups", "joinable", "read_joined"]

SMALL_FILE_BYTES = 64 << 10  # a whole file this size or less may join a group
GROUP_BYTES = 1 << 20  # the files of a group, at most (one parse block)
_BOM = b"\xef\xbb\xbf"
_UTF8 = ("utf-8", "utf-8-sig")


@dataclasses.dataclass(frozen=True)
class _File:
    """A file read for a group: its header record (no BOM), its records' bytes (ending with
    a line end), and how many non-empty records they hold."""

    piece: Piece
    header: bytes
    body: bytes
    records: int


def joinable(piece: Piece, dialect: Dialect) -> bool:
    """Whether a piece may be read in a group: a whole small uncompressed file of a dialect
    whose first line is the header and nothing is skipped."""
    return (
        piece.start == 0
        and piece.end == piece.file_size
        and piece.file_size <= SMALL_FILE_BYTES
        and compression_of(piece.path) is None
        and dialect.has_header
        and not dialect.skip_header_lines
    )


def groups(pieces: Sequence[Piece], dialect: Dialect) -> Iterator[list[Piece]]:
    """The pieces in order, consecutive joinable ones gathered (up to GROUP_BYTES); the
    others alone."""
    group: list[Piece] = []
    size = 0
    for piece in pieces:
        if not joinable(piece, dialect):
            if group:
                yield group
                group, size = [], 0
            yield [piece]
            continue
        if group and size + piece.file_size > GROUP_BYTES:
            yield group
            group, size = [], 0
        group.append(piece)
        size += piece.file_size
    if group:
        yield group


def _split(piece: Piece, data: bytes, source: CsvSource) -> _File | None:
    """The file's header and records, or None when it cannot join: its records might not be
    counted as pyarrow reads them (a line end that is a lone "\r", a blank first line, which
    pyarrow skips to take the next as the header), or it ends inside quotes.

    One scan finds where each record ends (a newline outside quotes): the first ends the
    header, and each other ends a record, which pyarrow skips when it is a blank line (unless
    the file has one column, as `record_starts.nonempty_record_starts` counts them)."""
    if source.dialect.encoding in _UTF8:
        data = data.removeprefix(_BOM)  # as pyarrow drops it; in another encoding it is text
    if data.count(b"\r") != data.count(b"\r\n"):
        return None
    if not data.endswith(b"\n"):
        data += b"\n"
    scanner = QuoteScanner(delimiter=source.delimiter)
    ends = scanner.feed(data, 0)
    scanner.finish()
    if scanner.in_quotes or not len(ends) or not data[: ends[0]].strip():
        return None
    header_end = int(ends[0])
    lengths = np.diff(ends)
    if source.blank_lines:
        records = len(lengths)
    else:
        crlf = np.frombuffer(data, np.uint8)[ends[:-1]] == ord("\r")
        blank = (lengths == 1) | ((lengths == 2) & crlf)
        records = int(np.count_nonzero(~blank))
    return _File(piece, data[:header_end], data[header_end:], records)


def read_joined(
    pieces: Sequence[Piece],
    source: Callable[[str], CsvSource],
    tally: RangeTally,
    cr_lines: bool = False,
) -> list[tuple[Piece, pa.RecordBatch]] | None:
    """Each file's rows (files without rows left out), read in one parse; None when the group
    does not read clean and must be read file by file. `source`: the CsvSource of a path;
    `cr_lines`: CR-only files read with LF (`lines.line_ends`).

    Raises:
      DataError: a file that is gone or changed since it was listed (as reading it alone).
    """
    files: list[_File] = []
    for piece in pieces:
        with (
            reading_input(piece.path, piece.stamp),
            open_input(piece.path, cr_lines=cr_lines) as stream,
        ):
            data = stream.read()
        joined = _split(piece, data, source(piece.path))
        if joined is None or joined.header != (files[0].header if files else joined.header):
            return None
        files.append(joined)
    text = files[0].header + b"".join(f.body for f in files)
    bad: list[Any] = []
    found = RangeTally()
    try:
        batches = list(read_range(io.BytesIO(text), source(pieces[0].path), 0, len(text),
                                  bad.append, RangeStart(True, 1), found))  # fmt: skip
    except (DataError, pa.ArrowException, ValueError):  # said again when read one by one
        return None
    rows = sum(b.num_rows for b in batches)
    miscounted = rows != sum(f.records for f in files)
    if bad or found.short_rows or found.notes_lines or miscounted or not batches:
        # Said again when read one by one, where short rows are counted by their file.
        return None
    table = pa.Table.from_batches(batches).combine_chunks()
    dealt, offset = [], 0
    for f in files:
        if f.records:
            dealt.append((f.piece, table.slice(offset, f.records).to_batches()[0]))
        offset += f.records
    tally.markers.update(found.markers)
    return dealt
