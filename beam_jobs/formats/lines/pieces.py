"""The whole lines a line-based format reads: of a planned piece (a compressed file is read
whole by its one piece), and of a sampled head."""

from __future__ import annotations

import sys
from collections.abc import Iterator

from beam_jobs.core.errors import DataError
from beam_jobs.core.inputs import InputFile, Piece
from beam_jobs.formats.compressed import compression_of, open_input, read_head
from beam_jobs.formats.lines.chunks import LineTooLong, line_chunks

__all__ = ["complete_lines", "piece_chunks", "refuse_wide_text", "sample_head"]

_WIDE_TEXT_BYTES = 4096  # of a file's head, looked at for NUL bytes


def complete_lines(head: bytes, is_whole_file: bool) -> bytes:
    """The whole lines at the start of a file's head."""
    return head if is_whole_file else head[: head.rfind(b"\n") + 1]


def sample_head(f: InputFile, sample_bytes: int) -> tuple[bytes, float]:
    """A file's first whole lines and the stored input bytes they stand for."""
    head = read_head(f, sample_bytes, compression_of(f.path))
    lines = complete_lines(head.content, head.is_whole_file)
    return lines, len(lines) * head.stored_per_byte


def piece_chunks(piece: Piece, max_record_bytes: int) -> Iterator[tuple[int, bytes]]:
    """The line chunks a piece owns; a compressed file is read whole by its one piece.

    Raises:
      DataError: for a line over twice `max_record_bytes` (a shorter one over it is a dead
        letter when encoded), before more of it is held in memory.
    """
    compression = compression_of(piece.path)
    start, end = (0, sys.maxsize) if compression else (piece.start, piece.end)
    with open_input(piece.path, compression) as f:  # damage: DataError from the decompressor
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
