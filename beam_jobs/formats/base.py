"""What every input format provides to the planner and the shard writers.

The planner asks a format where files may be cut, for a sample of a few files, and for the
feature spec; a shard writer asks it for the records of one planned piece of a file, as Arrow
batches already conformed to that spec. Bad records go to `on_bad_row`, never to a shard.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from beam_jobs.formats.compressed import compression_of
from beam_jobs.plan.shards import InputFile, Piece
from beam_jobs.sink.dead_letter import BadRow
from tfdata_reader.manifest import FeatureSpec

__all__ = ["Covered", "InputFormat", "OnBadRow", "PieceReport", "Sample"]

OnBadRow = Callable[[BadRow], None]


@dataclasses.dataclass(frozen=True)
class Covered:
    """The bytes [start, end) of a file that one piece's records took up, as its reader found
    them (`read_piece` returns it when the format can tell). The pieces of a file must cover it
    end to end, each starting where the one before ended."""

    path: str
    start: int
    end: int
    file_size: int


@dataclasses.dataclass(frozen=True)
class PieceReport:
    """What a format's `read_piece` tells beyond the records: the bytes its records covered
    (when it can tell) and the values of keys the spec lacks that it left out, by key."""

    covered: Covered | None = None
    ignored_fields: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Sample:
    """The head of one input file, read at planning time.

    `table` holds the sampled records with the format's own type inference; `input_bytes` is
    how many stored input bytes they stand for (to scale sizes up to the whole input).
    """

    path: str
    table: pa.Table
    input_bytes: float
    data: Any = None  # format-specific: e.g. the raw bytes a CSV sample was parsed from


class InputFormat:
    """One input format. Subclasses set `name` and `extensions` and implement the methods."""

    name = ""
    extensions: tuple[str, ...] = ()
    # Line-based formats with bad rows: their writers get `cut_counts.CutCounts` (quote and
    # newline bytes before each cut) as `read_piece`'s context; CSV finds its first record by
    # the quotes, and every bad row gets its line number from the newlines.
    needs_cut_counts = False
    # CSV: the cut counts follow the quote state too (quoted fields may hold newlines), with
    # this field delimiter, past this many lines at a file's start.
    quoted_records = False
    delimiter = ","

    def leading_lines(self) -> int:
        """Lines at a file's start that are not records and not the header (CSV's
        --skip_header_lines): the quote state starts after them."""
        return 0

    def describe(self) -> str:
        """The format as `--dry_run` and `inspect --input` show it (CSV: with its dialect)."""
        return self.name

    def list_files(self, files: Sequence[InputFile]) -> list[InputFile]:
        """The files of this format among the listed ones (default: all of them)."""
        return list(files)

    def with_cuts(self, files: Sequence[InputFile], target_shard_bytes: int) -> list[InputFile]:
        """The files with where each may be cut (default: compressed files nowhere inside)."""
        return [dataclasses.replace(f, cuts=() if compression_of(f.path) else None) for f in files]

    def sample(self, f: InputFile, sample_bytes: int) -> Sample:
        raise NotImplementedError

    def infer_features(
        self, samples: Sequence[Sample], overrides: Sequence[FeatureSpec]
    ) -> list[FeatureSpec]:
        raise NotImplementedError

    _kept: frozenset[str] | None = None  # `keep_columns`; None: every column

    def keep_columns(self, names: Sequence[str]) -> None:
        """The columns the output keeps (`--columns`, by their input names), told before
        inference: the others are not converted, so a value in a column the output drops is
        never a bad row, and its type across files does not matter."""
        self._kept = frozenset(names)

    def converted(self, features: Sequence[FeatureSpec]) -> list[FeatureSpec]:
        """The features a writer converts: those the output keeps."""
        return [f for f in features if self._kept is None or f.name in self._kept]

    def sample_batches(
        self,
        sample: Sample,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """The sample's records as the writers would produce them (to measure output size);
        formats that can say which rows failed pass them to `on_bad_row`."""
        raise NotImplementedError

    def read_piece(
        self,
        piece: Piece,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        context: Any = None,
    ) -> Iterator[pa.RecordBatch]:
        """The records that start inside `piece`, as batches conformed to `features`; bad
        records go to `on_bad_row`. A piece of a compressed file is always the whole file.
        A format may return (as the generator's value) a `PieceReport`."""
        raise NotImplementedError

    def manifest_extras(self) -> dict[str, Any]:
        """Format-specific manifest entries (e.g. the image label vocabulary)."""
        return {}
