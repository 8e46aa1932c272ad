"""The whole lines a line-based format reads: of a planned piece (a compressed file is read
whole by its one piece), and of a sampled head."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import BinaryIO

from beam_jobs.core.errors import DataError
from beam_jobs.core.inputs import InputFile, Piece
from beam_jobs.formats.compressed import compression_of, open_input, read_head
from beam_jobs.formats.lines.chunks import LineTooLong, line_chunks

__all__ = ["complete_lines", "piece_chunks", "refuse_wide_text", "sample_head"]

_WIDE_TEXT_BYTES = 4096  # of a file's head, looked at for NUL bytes


def complete_lines(head: bytes, is_whole_file: bool) -> bytes:
    """The whole lines at the start of a file's head."""
    return head if is_whole_file else head[: head.rfind(b"\n") + 1]


def sample_head(
    f: InputFile, sample_bytes: int, as_lines: Callable[[bytes], bytes] | None = None
) -> tuple[bytes, float]:
    """A file's first whole lines and the stored input bytes they stand for; `as_lines` turns
    the head's content into lines first (a JSON array's elements)."""
    head = read_head(f, sample_bytes, compression_of(f.path))
    content = as_lines(head.content) if as_lines else head.content
    lines = complete_lines(content, head.is_whole_file)
    share = len(head.content) / max(1, len(content))  # content bytes per line byte
    return lines, len(lines) * share * head.stored_per_byte


def piece_chunks(
    piece: Piece,
    max_record_bytes: int,
    as_lines: Callable[[BinaryIO], BinaryIO] | None = None,
) -> Iterator[tuple[int, bytes]]:
    """The line chunks a piece owns; a compressed file is read whole by its one piece, and so
    is one read through `as_lines` (a stream of its lines: a JSON array's elements).

    Raises:
      DataError: for a line over twice `max_record_bytes` (a shorter one over it is a dead
        letter when encoded), before more of it is held in memory.
    """
    compression = compression_of(piece.path)
    whole = compression or as_lines
    start, end = (0, sys.maxsize) if whole else (piece.start, piece.end)
    with open_input(piece.path, compression) as stored:  # damage: DataError, decompressing
        f = as_lines(stored) if as_lines else stored
        try:
            yield from line_chunks(f, start, end, max_line_bytes=2 * max_record_bytes)
        except LineTooLong as e:
            raise DataError(
                f"{piece.path}: {e} (twice --max_record_bytes); is it line-delimited? "
                "Raise --max_record_bytes to read it"
            ) from None


# Files that are no text, by their first bytes (a NUL byte would call them UTF-16).
_BINARY_MAGIC = {
    b"PK\x03\x04": "a ZIP archive: unzip it first (unzip FILE) and convert what it holds",
    b"PK\x05\x06": "an empty ZIP archive",
    b"\x1f\x8b": "GZIP-compressed without a .gz name: name it FILE.gz, or gunzip it",
    b"BZh": "bzip2-compressed without a .bz2 name: name it FILE.bz2, or bunzip2 it",
    b"\x28\xb5\x2f\xfd": "zstd-compressed without a .zst name: name it FILE.zst",
    b"PAR1": "a Parquet file: pass --format parquet (or name it FILE.parquet)",
    b"%PDF": "a PDF document, not text",
    b"\x7fELF": "a program, not text",
}


def refuse_wide_text(path: str, head: bytes) -> None:
    """A DataError for a file whose head is no text (an archive, compressed data, Parquet: told
    what it is), or UTF-16 or UTF-32 (a byte order mark, NUL bytes): its newlines, quotes and
    delimiters are not single bytes, so no --encoding helps."""
    for magic, what in _BINARY_MAGIC.items():
        if head.startswith(magic):
            raise DataError(f"{path}: the file is {what}")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in head[:_WIDE_TEXT_BYTES]:
        raise DataError(
            f"{path}: the file starts with a UTF-16 or UTF-32 byte order mark or holds NUL "
            "bytes (UTF-16/32 text, or not text); convert it to UTF-8 first, e.g. "
            "iconv -f UTF-16 -t UTF-8"
        )
