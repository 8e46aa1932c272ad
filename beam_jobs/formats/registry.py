"""Every input format, by the name `--format` takes: the one place a new format is added."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from beam_jobs.formats.base import InputFormat
from beam_jobs.formats.compressed import CONTAINER_SUFFIXES
from beam_jobs.formats.csv.format import CsvFormat
from beam_jobs.formats.images import ImagesFormat
from beam_jobs.formats.jsonl.format import JsonLinesFormat
from beam_jobs.formats.parquet import ParquetFormat
from beam_jobs.formats.text import TextFormat
from beam_jobs.formats.tfrecord import TFRecordFormat
from beam_jobs.formats.zip_members import is_archive, member_names

__all__ = ["FORMATS", "guess_format"]

FORMATS: dict[str, type[InputFormat]] = {
    f.name: f
    for f in (CsvFormat, JsonLinesFormat, ParquetFormat, TextFormat, ImagesFormat, TFRecordFormat)
}


def _named(name: str) -> str | None:
    name = posixpath.basename(name.rstrip("/")).lower()
    for suffix in CONTAINER_SUFFIXES:
        name = name.removesuffix(suffix)
    ext = posixpath.splitext(name)[1]
    return next((n for n, f in FORMATS.items() if ext and ext in f.extensions), None)


def guess_format(patterns: Sequence[str]) -> str | None:
    """The format every pattern's extension names (compression suffixes aside), else None; a
    ZIP archive named without its members' extension (`data.zip`) by its members' names."""
    found = set()
    for pattern in patterns:
        named = _named(pattern)
        if named is None and is_archive(pattern) and not set("*?[") & set(pattern):
            inside = {_named(m) for m in member_names(pattern)}
            named = inside.pop() if len(inside) == 1 else None
        found.add(named)
    return found.pop() if len(found) == 1 else None
