"""Notes under the table: government exports end with lines of notes (a source line, a
footnotes link, a date), which read as rows would be dead letters and could refuse the run.

The rule (`is_note`): the lines after the last row of a file, blank lines among them aside,
that each hold one field or fewer than half the columns, no quote, and a value that cannot
be its column's (text in a column of numbers: `Source: ...` under `Year`), are notes, not
rows. A line that could be a row stays one (a short row): a writer that leaves out trailing
empty fields may end its file with `d29999` under four names, and a row is never dropped. The
range readers leave notes out and count them by file (`counts.notes_lines`, named in the
summary), judged by the features' types (`fits_features`); the sample of a whole file leaves
them out too (`notes_start`), judged by the columns as the rows above them write them, so that
they take no part in inference.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from typing import BinaryIO

from beam_jobs.formats.csv.markers import TOKEN
from beam_jobs.formats.csv.numbers import reads_as
from tfdata_reader.manifest import FeatureSpec

__all__ = [
    "Fits",
    "fits_features",
    "is_note",
    "notes_start",
    "number_columns_fit",
    "rest_is_notes",
]

_NOTES_LOOKED_AT = 64 << 10  # bytes at a file's end that may hold notes

Fits = Callable[[int, str], bool]  # whether a text may be the value of the column at a position


def is_note(line: str, delimiter: str, columns: int, fits: Fits) -> bool:
    """Whether a line after the last row of a table of `columns` columns is a note: one
    field or fewer than half the columns, no quote, and a value that does not `fit`."""
    if '"' in line or columns < 2:
        return False
    fields = line.split(delimiter)
    if len(fields) > 1 and 2 * len(fields) >= columns:
        return False
    return not all(fits(i, value) for i, value in enumerate(fields) if value.strip())


def fits_features(features: Sequence[FeatureSpec], tokens: bool) -> Fits:
    """`Fits` by the features' types: any text fits a text column; a number column takes its
    numbers, its markers and (with `tokens`) one-token markers."""

    def fits(position: int, value: str) -> bool:
        if position >= len(features):
            return False
        feature, text = features[position], value.strip()
        if feature.dtype == "bytes" or feature.logical_type:
            return True
        return (
            reads_as(text, feature.dtype)
            or text in (feature.null_values or ())
            or (tokens and re.match(TOKEN, text) is not None)
        )

    return fits


def notes_start(data: bytes, delimiter: str, columns: int, fits: Fits) -> int:
    """Where the notes at the end of `data` (a file's last bytes, or all of them) begin: the
    offset of the first of the trailing lines that are notes (blank lines among and after them
    aside), when a line that is no note comes before them; else `len(data)`."""
    start = end = len(data)
    while end > 0:
        begin = data.rfind(b"\n", 0, end - 1) + 1  # the line that ends at `end`
        line = data[begin:end].rstrip(b"\r\n")
        end = begin
        if not line.strip():
            continue
        if not is_note(line.decode("utf-8", "replace"), delimiter, columns, fits):
            return start
        start = begin
    return len(data)  # all notes, or none: no table above them


def rest_is_notes(f: BinaryIO, end: int, delimiter: str, columns: int, fits: Fits) -> bool:
    """Whether a file holds nothing but notes (or nothing) from `end` on: read when it is
    short (notes are a few lines)."""
    f.seek(0, io.SEEK_END)
    size = f.tell()
    if size - end > _NOTES_LOOKED_AT:
        return False
    if size <= end:
        return True
    f.seek(end)
    rest = f.read()
    if not rest.strip():
        return True
    # The rest is notes when they start at its start, as `notes_start` sees them after a row.
    row = delimiter.encode() * columns + b"\n"
    return notes_start(row + rest, delimiter, columns, fits) == len(row)


def number_columns_fit(numeric: set[int], markers: Sequence[str]) -> Fits:
    """`Fits` for the sample, before types are known: in the columns whose values above are
    numbers (`numeric`), a number, a marker or a one-token marker; elsewhere anything."""
    known = set(markers)

    def fits(position: int, value: str) -> bool:
        text = value.strip()
        if position not in numeric:
            return True
        return reads_as(text, "float32") or text in known or re.match(TOKEN, text) is not None

    return fits
