"""`--format jsonl`: one JSON object per line.

Nested objects are flattened into dotted names (`{"a": {"b": 1}}` -> `a.b`), lists of numbers or
strings become variable-length features, and a missing key is a missing value. pyarrow's JSON
reader parses each chunk of lines in C++; only a chunk it rejects is looked at line by line, to
dead-letter exactly the lines at fault (not JSON, not an object, invalid UTF-8, a value of
another type than the feature's).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.json as pj

from beam_jobs.errors import DataError
from beam_jobs.formats.base import InputFormat, OnBadRow, Sample
from beam_jobs.formats.lines.chunks import line_offsets
from beam_jobs.formats.text import piece_chunks, sample_head
from beam_jobs.plan.shards import InputFile, Piece
from beam_jobs.schema import conform as arrow_conform
from beam_jobs.schema.rows import flatten_object, infer_from_rows
from beam_jobs.sink.dead_letter import BadRow, as_text
from tfdata_reader.manifest import FeatureSpec

__all__ = ["JsonLinesFormat"]


def _parse_fast(chunk: bytes) -> pa.Table:
    options = pj.ReadOptions(use_threads=False, block_size=max(1 << 20, len(chunk) + 1))
    return arrow_conform.flatten_structs(pj.read_json(io.BytesIO(chunk), read_options=options))


def _lines(chunk: bytes, offset: int) -> list[tuple[int, int, bytes]]:
    """(start, end, text) of each non-blank line, which is each row pyarrow makes."""
    starts, ends = line_offsets(chunk)
    found = []
    for start, end in zip(starts.tolist(), ends.tolist()):
        line = chunk[start:end]
        if line.strip():
            found.append((offset + start, offset + end, line))
    return found


def _bad(path: str, line: tuple[int, int, bytes], reason: str) -> BadRow:
    raw = {"raw": as_text(line[2].rstrip(b"\r"))}
    return BadRow(path, line[0], line[1], reason, None, raw, offset=line[0])


def _parse_line(text: bytes) -> tuple[dict | None, str]:
    """A line as a flat dict, or None and why not."""
    try:
        value = json.loads(text.decode("utf-8"))
    except UnicodeDecodeError as e:
        return None, f"invalid UTF-8: {e}"
    except ValueError as e:
        return None, f"invalid JSON: {e}"
    if not isinstance(value, dict):
        return None, f"not a JSON object: a JSON {type(value).__name__}"
    return flatten_object(value), ""


def _conform_rows(
    table: pa.Table,
    lines: Callable[[], list],
    features: Sequence[FeatureSpec],
    path: str,
    on_bad_row: OnBadRow,
) -> pa.RecordBatch:
    """Conforms parsed rows; `lines` (each row's line) is only worked out when one is bad."""
    batch, bad = arrow_conform.conform(table, features)
    if bad:
        found = lines()
        for index, reason in sorted(bad.items()):
            on_bad_row(_bad(path, found[index], reason))
    return batch


def read_chunk(
    chunk: bytes, offset: int, path: str, features: Sequence[FeatureSpec], on_bad_row: OnBadRow
) -> pa.RecordBatch | None:
    """The good rows of a chunk of whole lines, conformed to `features` (None: no rows)."""
    try:
        table = _parse_fast(chunk)
    except (pa.ArrowInvalid, UnicodeDecodeError):
        table = None
    if table is not None:
        if not table.num_rows:
            return None
        return _conform_rows(table, lambda: _lines(chunk, offset), features, path, on_bad_row)
    # The slow path, for a chunk pyarrow rejected: find the lines at fault one by one.
    good_lines = []
    for line in _lines(chunk, offset):
        row, reason = _parse_line(line[2])
        if row is None:
            on_bad_row(_bad(path, line, reason))
        else:
            good_lines.append(line)
    if not good_lines:
        return None
    try:
        table = _parse_fast(b"\n".join(line[2] for line in good_lines))
        return _conform_rows(table, lambda: good_lines, features, path, on_bad_row)
    except (pa.ArrowInvalid, UnicodeDecodeError):
        pass  # values of different types in one key across lines: row by row
    batches = []
    for line in good_lines:
        table = _parse_fast(line[2])
        batch = _conform_rows(table, lambda line=line: [line], features, path, on_bad_row)
        if batch.num_rows:
            batches.append(batch)
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0] if batches else None


class JsonLinesFormat(InputFormat):
    name = "jsonl"
    extensions = (".jsonl", ".ndjson", ".json")
    needs_cut_counts = True  # for the line numbers of bad lines

    def sample(self, f: InputFile, sample_bytes: int) -> Sample:
        lines, input_bytes = sample_head(f, sample_bytes)
        if f.size and not lines.strip():
            raise DataError(
                f"{f.path}: no complete line in the first {sample_bytes} bytes; is it JSON lines?"
            )
        rows = [row for _, _, text in _lines(lines, 0) if (row := _parse_line(text)[0])]
        return Sample(f.path, pa.table({}), input_bytes, data=(lines, rows))

    def infer_features(
        self, samples: Sequence[Sample], overrides: Sequence[FeatureSpec]
    ) -> list[FeatureSpec]:
        per_sample = [infer_from_rows(s.data[1], s.path) for s in samples if s.data[1]]
        if not per_sample and not overrides:
            raise DataError(f"{samples[0].path}: no JSON object among the sampled lines")
        return arrow_conform.merge_features(per_sample, overrides)

    def sample_batches(
        self, sample: Sample, features: Sequence[FeatureSpec]
    ) -> Iterator[pa.RecordBatch]:
        batch = read_chunk(sample.data[0], 0, sample.path, features, lambda row: None)
        if batch is not None:
            yield batch

    def read_piece(
        self,
        piece: Piece,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        context: Any = None,
    ) -> Iterator[pa.RecordBatch]:
        for offset, chunk in piece_chunks(piece):
            batch = read_chunk(chunk, offset, piece.path, features, on_bad_row)
            if batch is not None and batch.num_rows:
                yield batch
