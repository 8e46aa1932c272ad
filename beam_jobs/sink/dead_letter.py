"""Writing and reading dead-letter files: a shard's bad rows as JSON lines (`BadRow.to_json()`
objects), written beside it under a temporary name that publishing moves to
`OUT/dead_letter/<shard name>.jsonl`."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

import google_crc32c
import orjson
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.bad_rows import row_location
from beam_jobs.sink.run_files import create_run_file

__all__ = ["Stored", "dead_letter_temp_path", "first_bad_rows", "write_dead_letter"]


class Stored(NamedTuple):
    """A file as written: its path, size and CRC32C (8 hex digits)."""

    path: str
    bytes: int
    crc32c: str


def dead_letter_temp_path(temp_dir: str, shard_name: str, attempt: str = "") -> str:
    """A name for a shard's bad rows in the run's temporary folder, unique to the task's
    attempt (`sink.commits`; a retried bundle writes its own)."""
    attempt = attempt or uuid.uuid4().hex[:16]
    return FileSystems.join(temp_dir, f"{shard_name}~{attempt}.dead_letter.jsonl")


def write_dead_letter(
    temp_dir: str, shard_name: str, rows: Sequence[dict[str, Any]], attempt: str = ""
) -> Stored:
    """Writes bad rows (their `BadRow.to_json()` objects) as JSON lines into `temp_dir`."""
    path = dead_letter_temp_path(temp_dir, shard_name, attempt)
    lines = b"".join(_json_line(row) for row in rows)
    with create_run_file(path) as f:
        f.write(lines)
    return Stored(path, len(lines), f"{google_crc32c.value(lines):08x}")


def _json_line(row: dict[str, Any]) -> bytes:
    """One compact JSON line: by orjson (a dirty file's bad rows are tens of thousands, and
    json.dumps took 10 us each), by json where orjson refuses (an integer past 64 bits)."""
    try:
        return orjson.dumps(row) + b"\n"
    except TypeError:
        text = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-8") + b"\n"


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
