"""A row that is not converted goes to the dead letter with where it came from and why."""

from __future__ import annotations

import base64
import dataclasses
import json

__all__ = ["BadRow", "as_text", "first_bad_rows"]


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


def first_bad_rows(dead_letter_dir: str, limit: int = 5) -> list[str]:
    """The first `limit` bad rows of a run's dead letter, one line each: `file:line: reason`.

    The file's byte offset stands in for the line where there is none (TFRecord records), and
    the file alone for rows without either (oversized records, Parquet rows).
    """
    from apache_beam.io.filesystems import FileSystems

    matched = FileSystems.match([FileSystems.join(dead_letter_dir, "*.jsonl")])[0]
    found: list[str] = []
    for path in sorted(m.path for m in matched.metadata_list):
        with FileSystems.open(path) as f:
            for raw in f:
                if len(found) == limit:
                    return found
                row = json.loads(raw)
                where = row["file"]
                if row.get("line") is not None:
                    where += f":{row['line']}"
                elif row.get("byte_offset") is not None:
                    where += f" (byte {row['byte_offset']})"
                found.append(f"{where}: {row['reason']}")
    return found
