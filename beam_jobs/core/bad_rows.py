"""A row that is not converted goes to the dead letter with where it came from and why.

Each shard's bad rows are published as JSON lines in `OUT/dead_letter/<shard name>.jsonl`; a
row's object holds its file, line, byte offset, reason and content (`BadRow.to_json`).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import re
from typing import Any

__all__ = [
    "DEAD_LETTER_DIR",
    "LONG_WORD",
    "BadRow",
    "as_text",
    "dead_letter_name",
    "row_location",
    "short_reason",
]

DEAD_LETTER_DIR = "dead_letter"  # in the output folder: one JSON-lines file per shard
LONG_WORD = 60  # characters of a word a reason shows whole


@dataclasses.dataclass(frozen=True)
class BadRow:
    """A row that was not converted, and why; it goes to the dead letter, not to a shard.

    `row` counts the well-formed rows of the byte range before it (None for a row with the
    wrong number of columns, which has no such place). `content` is the row as text: `raw` for
    a malformed row, else `cells` by column; bytes that are not UTF-8 are given as base64.
    """

    path: str
    range_start: int
    range_end: int
    reason: str
    row: int | None
    content: dict[str, Any]
    offset: int | None = None  # where the row starts in the file, when known
    line: int | None = None  # the line it starts on (1 = the first), for line-based formats

    def __post_init__(self) -> None:
        # A reason quotes the value at fault; the content holds it whole.
        object.__setattr__(self, "reason", short_reason(self.reason))

    def placed(self, offset: int | None = None, line: int | None = None) -> BadRow:
        """This row with its `offset` and `line` set (the reason is already short): a copy made
        without `dataclasses.replace`, whose field-by-field rebuild costs a dirty file's
        thousands of bad rows more than reading them."""
        row = object.__new__(BadRow)
        row.__dict__.update(self.__dict__, offset=offset, line=line)
        return row

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.path,
            "line": self.line,
            "byte_offset": self.offset,
            "byte_range": [self.range_start, self.range_end],
            "row_in_range": self.row,
            "reason": self.reason,
            **self.content,
        }


_LONG_WORD = re.compile(rf"\S{{{LONG_WORD + 1},}}")


@functools.lru_cache(maxsize=1024)  # a dirty column's bad rows repeat a few reasons
def short_reason(reason: str) -> str:
    """A reason with every word longer than LONG_WORD characters (a 300-digit number, a long
    value quoted) cut short, its length said."""
    return _LONG_WORD.sub(
        lambda m: f"{m.group()[: LONG_WORD // 2]}... ({len(m.group()):,} characters)", reason
    )


def as_text(value: bytes | str | None) -> str | dict[str, Any] | None:
    """Text as is; bytes decoded as UTF-8, or given as {"base64": ...} when they are not."""
    if value is None or isinstance(value, str):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(value).decode("ascii")}


def dead_letter_name(shard_name: str) -> str:
    """Where a shard's bad rows are published, relative to the output folder."""
    return f"{DEAD_LETTER_DIR}/{shard_name}.jsonl"


def row_location(row: dict[str, Any]) -> str:
    """Where a dead-letter row was: `file:line`, else the file and its byte offset (TFRecord
    records), else the file alone (oversized records, Parquet rows)."""
    where = str(row.get("file", "?"))
    if row.get("line") is not None:
        return f"{where}:{row['line']}"
    if row.get("byte_offset") is not None:
        return f"{where} (byte {row['byte_offset']})"
    return where
