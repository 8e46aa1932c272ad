"""Input formats: each turns pieces of its files into Arrow batches of Example features."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from beam_jobs.formats.base import InputFormat, Sample
from beam_jobs.formats.compressed import COMPRESSED_SUFFIXES
from beam_jobs.formats.csv.dialect import Dialect

__all__ = ["FORMAT_NAMES", "InputFormat", "Sample", "guess_format", "make_format"]

FORMAT_NAMES = ("csv", "jsonl", "parquet", "text", "images", "tfrecord")


def _classes() -> dict[str, type[InputFormat]]:
    from beam_jobs.formats.csv.format import CsvFormat
    from beam_jobs.formats.images import ImagesFormat
    from beam_jobs.formats.jsonl import JsonLinesFormat
    from beam_jobs.formats.parquet import ParquetFormat
    from beam_jobs.formats.text import TextFormat
    from beam_jobs.formats.tfrecord import TFRecordFormat

    classes = (CsvFormat, JsonLinesFormat, ParquetFormat, TextFormat, ImagesFormat, TFRecordFormat)
    return {c.name: c for c in classes}


def guess_format(patterns: Sequence[str]) -> str | None:
    """The format every pattern's extension names (compression suffixes aside), else None."""
    found = set()
    for pattern in patterns:
        name = posixpath.basename(pattern.rstrip("/")).lower()
        for suffix in COMPRESSED_SUFFIXES:
            name = name.removesuffix(suffix)
        ext = posixpath.splitext(name)[1]
        found.add(next((n for n, c in _classes().items() if ext and ext in c.extensions), None))
    return found.pop() if len(found) == 1 else None


def make_format(
    name: str,
    patterns: Sequence[str],
    labels: str | None = None,
    max_record_bytes: int = 64 << 20,
    dialect: Dialect | None = None,
) -> InputFormat:
    """The format object for a conversion (the images format needs the inputs and labels; CSV
    its dialect; line formats read lines up to twice `max_record_bytes` long)."""
    cls = _classes()[name]
    if name == "images":
        return cls(patterns, labels)
    if name == "csv":
        return cls(max_record_bytes, dialect)
    if name == "text":
        return cls(max_record_bytes, dialect.encoding if dialect else "utf-8")
    if name == "jsonl":
        return cls(max_record_bytes)
    return cls()
