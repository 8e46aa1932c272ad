"""`--format text`: one record per line, in the bytes feature `text` (line ending removed)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from beam_jobs.errors import DataError
from beam_jobs.formats.base import InputFormat, OnBadRow, Sample
from beam_jobs.formats.compressed import compression_of, open_input
from beam_jobs.formats.compressed import read_head as read_content_head
from beam_jobs.formats.csv.source import refuse_wide_text
from beam_jobs.formats.lines.chunks import LineTooLong, line_chunks, split_lines
from beam_jobs.plan.shards import InputFile, Piece
from tfdata_reader.manifest import FeatureSpec

__all__ = ["TextFormat", "piece_chunks"]

_log = logging.getLogger(__name__)

FEATURE = FeatureSpec("text", "bytes", [])


def complete_lines(head: bytes, is_whole_file: bool) -> bytes:
    """The whole lines at the start of a file's head."""
    return head if is_whole_file else head[: head.rfind(b"\n") + 1]


def sample_head(f: InputFile, sample_bytes: int) -> tuple[bytes, float]:
    """A file's first whole lines and the stored input bytes they stand for."""
    head = read_content_head(f, sample_bytes, compression_of(f.path))
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


class TextFormat(InputFormat):
    name = "text"
    extensions = (".txt", ".text")

    def __init__(self, max_record_bytes: int = 64 << 20, encoding: str = "utf-8") -> None:
        self._max_record_bytes = max_record_bytes
        self._encoding = encoding

    def _utf8(self, chunk: bytes, path: str, offset: int) -> bytes:
        """A chunk in UTF-8 (`--encoding`): lines keep their count and order."""
        if self._encoding == "utf-8":
            return chunk
        try:
            return chunk.decode(self._encoding).encode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(
                f"{path}: byte {offset + e.start:,} is not {self._encoding} ({e.reason}); "
                "pass the file's --encoding"
            ) from None

    def sample(self, f: InputFile, sample_bytes: int) -> Sample:
        lines, input_bytes = sample_head(f, sample_bytes)
        refuse_wide_text(f.path, lines)
        text = self._utf8(lines, f.path, 0)
        if self._encoding == "utf-8":
            try:
                text.decode("utf-8")
            except UnicodeDecodeError as e:
                # Written as they are (a bytes feature holds any bytes), but tf.strings and most
                # readers expect UTF-8: a latin-1 file most likely wants --encoding.
                _log.warning(
                    "%s: byte %s is not UTF-8 (%s): lines are written as their bytes; if the "
                    "file is in another encoding, pass --encoding (e.g. latin-1 or cp1252)",
                    f.path,
                    f"{e.start:,}",
                    e.reason,
                )
        return Sample(f.path, pa.table({"text": split_lines(text)}), input_bytes)

    def infer_features(
        self, samples: Sequence[Sample], overrides: Sequence[FeatureSpec]
    ) -> list[FeatureSpec]:
        return [FEATURE]

    def sample_batches(
        self,
        sample: Sample,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow | None = None,
    ) -> Iterator[pa.RecordBatch]:
        yield from sample.table.to_batches()

    def read_piece(
        self,
        piece: Piece,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        context: Any = None,
    ) -> Iterator[pa.RecordBatch]:
        for offset, chunk in piece_chunks(piece, self._max_record_bytes):
            text = self._utf8(chunk, piece.path, offset)
            yield pa.RecordBatch.from_arrays([split_lines(text)], ["text"])
