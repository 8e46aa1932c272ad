"""Every input format, by the name `--format` takes: the one place a new format is added."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from beam_jobs.formats.base import InputFormat
from beam_jobs.formats.compressed import COMPRESSED_SUFFIXES
from beam_jobs.formats.csv.format import CsvFormat
from beam_jobs.formats.images import ImagesFormat
from beam_jobs.formats.jsonl.format import JsonLinesFormat
from beam_jobs.formats.parquet import ParquetFormat
from beam_jobs.formats.text import TextFormat
from beam_jobs.formats.tfrecord import TFRecordFormat

__all__ = ["FORMATS", "guess_format"]

FORMATS: dict[str, type[InputFormat]] = {
    f.name: f
    for f in (CsvFormat, JsonLinesFormat, ParquetFormat, TextFormat, ImagesFormat, TFRecordFormat)
}


def guess_format(patterns: Sequence[str]) -> str | None:
    """The format every pattern's extension names (compression suffixes aside), else None."""
    found = set()
    for pattern in patterns:
        name = posixpath.basename(pattern.rstrip("/")).lower()
        for suffix in COMPRESSED_SUFFIXES:
            name = name.removesuffix(suffix)
        ext = posixpath.splitext(name)[1]
        found.add(next((n for n, f in FORMATS.items() if ext and ext in f.extensions), None))
    return found.pop() if len(found) == 1 else None
