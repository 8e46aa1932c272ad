"""`--format text`: one record per line, in the bytes feature `text` (line ending removed)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Generator, Iterator, Sequence

import pyarrow as pa

from beam_jobs.core.errors import DataError
from beam_jobs.core.inputs import InputFile, Piece
from beam_jobs.formats.base import InputFormat, OnBadRow, ReadSettings, Sample
from beam_jobs.formats.lines.chunks import split_lines
from beam_jobs.formats.lines.cut_counts import CutCounts
from beam_jobs.formats.lines.pieces import piece_chunks, refuse_wide_text, sample_head
from tfdata_reader.manifest import FeatureSpec

__all__ = ["FEATURE", "TextFormat"]

_log = logging.getLogger(__name__)

FEATURE = FeatureSpec("text", "bytes", [])


@dataclasses.dataclass(frozen=True)
class TextFormat(InputFormat):
    """`encoding`: the files' (`--encoding`); lines are written as UTF-8."""

    name = "text"
    extensions = (".txt", ".text")
    reads_archives = True

    encoding: str = "utf-8"

    @classmethod
    def prepare(cls, files: Sequence[InputFile], settings: ReadSettings) -> TextFormat:
        return cls(settings.kept, settings.max_record_bytes, settings.dialect.encoding)

    def _utf8(self, chunk: bytes, path: str, offset: int) -> bytes:
        """A chunk in UTF-8 (`--encoding`): lines keep their count and order."""
        if self.encoding == "utf-8":
            return chunk
        try:
            return chunk.decode(self.encoding).encode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(
                f"{path}: byte {offset + e.start:,} is not {self.encoding} ({e.reason}); "
                "pass the file's --encoding"
            ) from None

    def sample(self, f: InputFile, sample_bytes: int) -> Sample:
        lines, input_bytes = sample_head(f, sample_bytes)
        refuse_wide_text(f.path, lines)
        text = self._utf8(lines, f.path, 0)
        if self.encoding == "utf-8":
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
        cut_counts: CutCounts | None = None,
    ) -> Generator[pa.RecordBatch, None, None]:
        for offset, chunk in piece_chunks(piece, self.max_record_bytes):
            text = self._utf8(chunk, piece.path, offset)
            yield pa.RecordBatch.from_arrays([split_lines(text)], ["text"])
