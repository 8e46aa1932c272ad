"""A header line one name short of its rows: R's `write.table` with row names writes no name
for them (`"Weight","Feed"` over `"1",26.5,NA`), and a writer that ends every row with a
delimiter leaves the last field nameless. Every row would be a dead letter.

The rule (the first file's head decides, like the delimiter): when the header holds N names,
none blank, and at least 90% of the sampled rows after it hold N + 1 fields, the missing name
is added, as `name_columns` names a blank one: at the end when that last field is empty in
every such row (a trailing delimiter), else at the start (row names, as pandas reads them:
its index, here a feature). The files are then read as headerless with those names, their
header line skipped; every file's header must be the first file's (checked as it is
sampled and as it is read).
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import io

from beam_jobs.formats.csv.dialect import looks_like_data
from beam_jobs.formats.csv.source import name_columns

__all__ = ["CompletedHeader", "complete_header", "without_bom"]

_BOM = b"\xef\xbb\xbf"
_LINES_SEEN = 200  # lines of the head whose fields are counted
_AGREEING = 0.9  # the share of the rows that must hold one field more than the header


def without_bom(head: bytes, encoding: str) -> bytes:
    """A file's first bytes less a UTF-8 BOM, as pyarrow drops it when it reads UTF-8 (in
    another encoding it is text of the first name)."""
    if encoding.lower().replace("_", "-") in ("utf-8", "utf8"):
        return head.removeprefix(_BOM)
    return head


@dataclasses.dataclass(frozen=True)
class CompletedHeader:
    """The header's names with the missing one added, and what was done, for the log."""

    names: tuple[str, ...]
    line: bytes  # the header line as written (no line end): every file's must be this one
    note: str


def complete_header(
    path: str, body: bytes, delimiter: str, encoding: str
) -> CompletedHeader | None:
    """The completed header of a file whose head (`body`, from its header line) shows a header
    one name short of its rows, by the rule in this module's doc; None otherwise."""
    lines = without_bom(body, encoding).split(b"\n", _LINES_SEEN)
    text = b"\n".join(lines[:_LINES_SEEN]).decode(encoding, "replace")
    try:
        rows = [row for row in csv.reader(io.StringIO(text), delimiter=delimiter) if row]
    except csv.Error:
        return None
    if len(rows) < 2:
        return None
    header, data = rows[0], rows[1 : _LINES_SEEN - 1]  # the last may be cut short
    if any(not name.strip() for name in header) or looks_like_data(header):
        return None
    fields, seen = collections.Counter(len(row) for row in data).most_common(1)[0]
    if fields != len(header) + 1 or seen < _AGREEING * len(data):
        return None
    longer = [row for row in data if len(row) == fields]
    line = lines[0].rstrip(b"\r")
    if all(not row[-1].strip() for row in longer):
        names = name_columns([*header, ""])
        note = (
            f"{path}: its rows end with a delimiter, one field more than the header's "
            f"{len(header)} names: the last field is the column {names[-1]!r} (empty)"
        )
    else:
        names = name_columns(["", *header])
        note = (
            f"{path}: its header holds {len(header)} names and its rows {fields} fields (R's "
            f"write.table with row names): the first field is the column {names[0]!r}"
        )
    return CompletedHeader(tuple(names), line, note)
