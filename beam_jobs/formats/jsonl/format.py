"""`--format jsonl`: one JSON object per line, or a `.json` file holding one JSON array of
objects (read as if each element were a line: `arrays`).

Nested objects are flattened into dotted names (`{"a": {"b": 1}}` -> `a.b`), lists of numbers or
strings become variable-length features, and a missing key is a missing value. Chunks of lines
are parsed by `chunks`, which dead-letters exactly the lines at fault; keys the spec lacks
are counted in the piece's report.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import functools
import json
import re
from collections.abc import Generator, Iterator, Sequence
from typing import Any

import pyarrow as pa

from beam_jobs.codec.examples import is_list
from beam_jobs.core.bad_rows import BadRow
from beam_jobs.core.errors import DataError
from beam_jobs.core.inputs import InputFile, Piece
from beam_jobs.formats.base import InputFormat, OnBadRow, PieceReport, Sample
from beam_jobs.formats.compressed import compression_of, open_input, read_head
from beam_jobs.formats.jsonl.arrays import array_lines, open_as_lines, starts_an_array
from beam_jobs.formats.jsonl.chunks import line_problem, parse_chunk, read_chunk
from beam_jobs.formats.lines.cut_counts import Counting, CutCounts
from beam_jobs.formats.lines.pieces import piece_chunks, refuse_wide_text, sample_head
from beam_jobs.schema.conform import logical_type_of, merge_features
from beam_jobs.schema.precision import Float32Changes, warn_float32_rounding
from beam_jobs.schema.rows import flatten_object, infer_from_rows
from tfdata_reader.manifest import FeatureSpec

__all__ = ["JsonLinesFormat"]


def _sample_rows(lines: bytes) -> list[dict[str, Any]]:
    """The sampled lines that are records, as flat dicts (the others are left to the writers)."""
    rows = []
    for line in lines.split(b"\n"):
        if line.strip(b" \t\r") and line_problem(line) is None:
            value = json.loads(line)
            rows.append(flatten_object(value))
    return rows


_PEEK_BYTES = 4096  # of a file's content, to tell a JSON array from JSON lines
_PEEK_THREADS = 16  # files peeked at once (there may be many, on GCS)


def _is_array(path: str) -> bool:
    """Whether the file is one JSON array (`arrays`): its content starts with `[`."""
    with open_input(path, compression_of(path)) as f:
        return starts_an_array(f.read(_PEEK_BYTES))


class _ElementLines:
    """Dead letters of a JSON array with their element's position as `line` (the stream's
    line), found from the chunk each came from."""

    def __init__(self, on_bad_row: OnBadRow) -> None:
        self._on_bad_row = on_bad_row
        self.chunk, self.offset, self.lines_before = b"", 0, 0
        self._counted = (0, 0)  # (position in the chunk, its newlines before it): bad rows come
        # in order, so each counts on from the one before, not from the chunk's start

    def next_chunk(self, offset: int, chunk: bytes) -> None:
        self.lines_before += self.chunk.count(b"\n")
        self.chunk, self.offset = chunk, offset
        self._counted = (0, 0)

    def __call__(self, row: BadRow) -> None:
        if row.offset is not None:
            position, newlines = self._counted
            at = row.offset - self.offset
            if at < position:
                position, newlines = 0, 0
            newlines += self.chunk.count(b"\n", position, at)
            self._counted = (at, newlines)
            row = row.placed(None, self.lines_before + newlines + 1)
        self._on_bad_row(row)


_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _date_only(name: str, rows: Sequence[dict[str, Any]]) -> bool:
    """Every sampled value of `name` is a calendar date (`2026-01-31`), no time of day."""
    values = [row.get(name) for row in rows if row.get(name) is not None]
    values = [v for value in values for v in (value if isinstance(value, list) else [value])]
    return bool(values) and all(isinstance(v, str) and _DATE_ONLY.fullmatch(v) for v in values)


def _with_dates(
    features: list[FeatureSpec], lines: bytes, rows: Sequence[dict[str, Any]]
) -> list[FeatureSpec]:
    """Text features pyarrow reads as ISO 8601 dates or timestamps become int64: days since
    the epoch for dates alone, microseconds for timestamps (recorded as their logical type),
    as the writers read them."""
    try:
        types = {f.name: f.type for f in parse_chunk(lines).schema}
    except ValueError:
        return features  # not one clean chunk: keep what Python's json module saw
    found = []
    for feature in features:
        arrow_type = types.get(feature.name)
        if arrow_type is not None and is_list(arrow_type):
            arrow_type = arrow_type.value_type
        logical = logical_type_of(arrow_type) if arrow_type is not None else None
        if feature.dtype == "bytes" and logical is not None:
            if _date_only(feature.name, rows):
                logical = str(pa.date32())
            feature = dataclasses.replace(feature, dtype="int64", logical_type=logical)
        found.append(feature)
    return found


@dataclasses.dataclass(frozen=True)
class JsonLinesFormat(InputFormat):
    name = "jsonl"
    extensions = (".jsonl", ".ndjson", ".json")
    reads_archives = True

    def counting(self) -> Counting:
        return Counting(quotes=False)  # newlines only: the line numbers of bad lines

    def with_cuts(self, files: Sequence[InputFile], target_shard_bytes: int) -> list[InputFile]:
        """A JSON array is read whole, from its start, like a compressed file."""
        files = super().with_cuts(files, target_shard_bytes)
        cut = [f for f in files if f.cuts is None]
        with concurrent.futures.ThreadPoolExecutor(_PEEK_THREADS) as pool:
            arrays = {f.path for f, array in zip(cut, pool.map(_is_array, [f.path for f in cut]),
                                                 strict=True) if array}  # fmt: skip
        return [dataclasses.replace(f, cuts=()) if f.path in arrays else f for f in files]

    def sample(self, f: InputFile, sample_bytes: int) -> Sample:
        peek = read_head(f, _PEEK_BYTES, compression_of(f.path)).content
        refuse_wide_text(f.path, peek)
        array = starts_an_array(peek)
        elements = functools.partial(array_lines, path=f.path) if array else None
        lines, input_bytes = sample_head(f, sample_bytes, elements)
        if f.size and not lines.strip():
            what = "element of its JSON array" if array else "line"
            raise DataError(
                f"{f.path}: no complete {what} in the first {sample_bytes:,} bytes; is it "
                f"{'a JSON array of objects' if array else 'JSON lines'}? (--sample_bytes "
                "reads more)"
            )
        rows = _sample_rows(lines)
        return Sample(f.path, pa.table({}), input_bytes, data=(lines, rows))

    def infer_features(
        self, samples: Sequence[Sample], overrides: Sequence[FeatureSpec]
    ) -> list[FeatureSpec]:
        sampled = [(s, self._kept_keys(s.data[1])) for s in samples if s.data[1]]
        per_sample = [
            _with_dates(infer_from_rows(rows, s.path), s.data[0], rows) for s, rows in sampled
        ]
        if not per_sample and not overrides:
            raise DataError(f"{samples[0].path}: no JSON object among the sampled lines")
        features = merge_features(per_sample, overrides)
        rows = [row for _, kept in sampled for row in kept]
        warn_float32_rounding(features, {f.name: [r.get(f.name) for r in rows] for f in features})
        return features

    def _kept_keys(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows with only the keys `--columns` keeps (all without it): a key the output drops
        has no say in the spec, even when it could not be a feature (a list of lists)."""
        if self.kept is None:
            return rows
        return [{k: v for k, v in row.items() if k in self.kept} for row in rows]

    def sample_batches(
        self,
        sample: Sample,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow | None = None,
    ) -> Iterator[pa.RecordBatch]:
        yield from read_chunk(
            sample.data[0], 0, sample.path, features, on_bad_row or (lambda row: None)
        )

    def read_piece(
        self,
        piece: Piece,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        cut_counts: CutCounts | None = None,
    ) -> Generator[pa.RecordBatch, None, PieceReport]:
        ignored: collections.Counter[str] = collections.Counter()
        changes = Float32Changes()
        converted = self.converted(features)
        array = piece.start == 0 and piece.end >= piece.file_size and _is_array(piece.path)
        elements = _ElementLines(on_bad_row) if array else None
        as_lines = functools.partial(open_as_lines, path=piece.path) if array else None
        chunks = piece_chunks(piece, self.max_record_bytes, as_lines)
        for offset, chunk in chunks:
            if elements is not None:
                elements.next_chunk(offset, chunk)
            yield from read_chunk(
                chunk, offset, piece.path, converted, elements or on_bad_row, ignored, changes
            )
        # Keys --columns leaves out are no surprise: only the others are reported.
        kept = {k: n for k, n in ignored.items() if self.kept is None or k in self.kept}
        return PieceReport(
            ignored_fields=kept,
            rounded_integers=dict(changes.rounded),
            zeroed_numbers=dict(changes.zeroed),
        )
