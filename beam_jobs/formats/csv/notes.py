"""Notes under the table: government exports end with lines of notes (a source line, a
footnotes link, a date), which read as rows would be dead letters (or rows of a text column).
The lines after the last row of a file that each hold one field, or fewer than half the
columns, and no quote (`is_note`), are notes, not rows: the range readers leave them out and
count them by file (`counts.notes_lines`, named in the summary); the sample of a whole file
leaves them out too (`notes_start`), so that they take no part in inference.
"""

from __future__ import annotations

import io
from typing import BinaryIO

__all__ = ["is_note", "notes_start", "rest_is_notes"]

_NOTES_LOOKED_AT = 64 << 10  # bytes at a file's end that may hold notes


def is_note(fields: int, columns: int, text: str | bytes) -> bool:
    """Whether a line after the last row of a table, of `fields` fields under `columns`
    names, is a note: one field, or fewer than half the columns, and no quote."""
    quoted = '"' in text if isinstance(text, str) else b'"' in text
    return columns >= 2 and (fields <= 1 or 2 * fields < columns) and not quoted


def notes_start(data: bytes, delimiter: str, columns: int) -> int:
    """Where the notes at the end of `data` (a file's last bytes, or all of them) begin: the
    offset of the first of the trailing lines that are notes (blank lines among and after them
    aside), when a line that is no note comes before them; else `len(data)`."""
    sep = delimiter.encode()
    start = end = len(data)
    while end > 0:
        begin = data.rfind(b"\n", 0, end - 1) + 1  # the line that ends at `end`
        line = data[begin:end].rstrip(b"\r\n")
        end = begin
        if not line.strip():
            continue
        if not is_note(line.count(sep) + 1, columns, line):
            return start
        start = begin
    return len(data)  # all notes, or none: no table above them


def rest_is_notes(f: BinaryIO, end: int, delimiter: str, columns: int) -> bool:
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
    return notes_start(row + rest, delimiter, columns) == len(row)
