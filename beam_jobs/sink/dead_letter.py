"""A row that is not converted goes to the dead letter with where it came from and why.

Each shard's bad rows are written beside it, as JSON lines under a temporary name, by
`write_dead_letter`; publishing moves them to `OUT/dead_letter/<shard name>.jsonl`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Sequence

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

__all__ = [
    "DEAD_LETTER_DIR",
    "BadRow",
    "as_text",
    "dead_letter_name",
    "first_bad_rows",
    "row_location",
    "write_dead_letter",
]

DEAD_LETTER_DIR = "dead_letter"  # in the output folder: one JSON-lines file per shard


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
    content: dict
    offset: int | None = None  # where the row starts in the file, when known
    line: int | None = None  # the line it starts on (1 = the first), for line-based formats

    def to_json(self) -> dict:
        return {
            "file": self.path,
            "line": self.line,
            "byte_offset": self.offset,
            "byte_range": [self.range_start, self.range_end],
            "row_in_range": self.row,
            "reason": self.reason,
            **self.content,
        }


def as_text(value: bytes | str | None) -> str | dict | None:
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


def write_dead_letter(temp_dir: str, shard_name: str, rows: Sequence[dict]) -> str:
    """Writes bad rows (their `BadRow.to_json()` objects) as JSON lines into `temp_dir`, under a
    name unique to this attempt (a retried bundle writes its own); returns the path."""
    path = FileSystems.join(temp_dir, f"{shard_name}.{uuid.uuid4().hex}.dead_letter.jsonl")
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(lines.encode("utf-8"))
    return path


def row_location(row: dict) -> str:
    """Where a dead-letter row was: `file:line`, else the file and its byte offset (TFRecord
    records), else the file alone (oversized records, Parquet rows)."""
    where = str(row.get("file", "?"))
    if row.get("line") is not None:
        return f"{where}:{row['line']}"
    if row.get("byte_offset") is not None:
        return f"{where} (byte {row['byte_offset']})"
    return where


def first_bad_rows(paths: Sequence[str], limit: int = 5) -> list[str]:
    """The first `limit` bad rows in dead-letter files, one line each: `file:line: reason`
    (see `row_location`)."""
    found: list[str] = []
    for path in paths:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            for raw in f:
                if len(found) == limit:
                    return found
                row = json.loads(raw)
                found.append(f"{row_location(row)}: {row['reason']}")
    return found
