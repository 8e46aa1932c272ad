"""What every input format provides to the planner and the shard writers.

A format is a frozen dataclass: planning makes it (`prepare`: from the flags and, where a format
needs them, the listed files: the CSV delimiter detected, the images' labels CSV read, GZIP
TFRecord files found by their magic bytes), and from then on it is a value that the conversion
plan carries to every writer. The planner asks it where files may be cut, for a sample of a
few files and for the feature spec; a shard writer asks it for the records of one planned piece
of a file, as Arrow batches already conformed to that spec. Bad records go to `on_bad_row`,
never to a shard.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any, ClassVar, TypeVar

import pyarrow as pa

from beam_jobs.core.bad_rows import BadRow
from beam_jobs.core.inputs import Covered, InputFile, Piece, reading_input
from beam_jobs.formats.compressed import compression_of
from beam_jobs.formats.lines.cut_counts import Counting, CutCounts
from beam_jobs.formats.lines.layout import Dialect
from tfdata_reader.manifest import FeatureSpec

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "InputFormat",
    "OnBadRow",
    "PieceReport",
    "ReadSettings",
    "Sample",
]

OnBadRow = Callable[[BadRow], None]
DEFAULT_MAX_RECORD_BYTES = 64 << 20
_F = TypeVar("_F", bound="InputFormat")


@dataclasses.dataclass(frozen=True)
class ReadSettings:
    """What the flags say about reading a conversion's inputs, before any file is read.

    Attributes:
      patterns: the `--input` patterns (the images format finds its root folder by them).
      dialect: the CSV layout and the text encoding (`--delimiter`, `--encoding`, ...).
      image_labels: the images' labels CSV (`--image_labels`).
      kept: the input columns the output keeps (`--columns`); None: all.
      max_record_bytes: `--max_record_bytes` (line readers hold lines up to twice it).
      sample_bytes: `--sample_bytes`, the head of a file planning reads.
    """

    patterns: tuple[str, ...] = ()
    dialect: Dialect = Dialect()
    image_labels: str | None = None
    kept: frozenset[str] | None = None
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    sample_bytes: int = 1 << 20


@dataclasses.dataclass(frozen=True)
class PieceReport:
    """What a format's `read_piece` tells beyond the records: the bytes its records covered
    (when it can tell), the values of keys the spec lacks that it left out, by key, and the
    whole numbers float32 rounded and the numbers it stored as 0 when its values were
    conformed, by feature, and the cells read as missing for holding a missing-value marker
    (CSV), by column and by column and marker, and the rows with fewer fields than the
    header (CSV), by file, and the lines of notes under the table (CSV), by file."""

    covered: Covered | None = None
    ignored_fields: dict[str, int] = dataclasses.field(default_factory=dict)
    rounded_integers: dict[str, int] = dataclasses.field(default_factory=dict)
    zeroed_numbers: dict[str, int] = dataclasses.field(default_factory=dict)
    null_markers: dict[str, int] = dataclasses.field(default_factory=dict)
    markers_seen: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    short_rows: dict[str, int] = dataclasses.field(default_factory=dict)  # CSV: by file
    notes_lines: dict[str, int] = dataclasses.field(default_factory=dict)  # CSV: by file


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


@dataclasses.dataclass(frozen=True)
class InputFormat(abc.ABC):
    """One input format, as planning prepared it; subclasses are frozen dataclasses that set
    `name` and `extensions` and implement the abstract methods.

    Attributes:
      kept: the input columns the output keeps (`--columns`), None for all: the others are
        not converted, so a value in a column the output drops is never a bad row, and its
        type across files does not matter.
      max_record_bytes: `--max_record_bytes`.
    """

    name: ClassVar[str] = ""
    extensions: ClassVar[tuple[str, ...]] = ()
    # Whether a ZIP archive's members are inputs of this format (formats read as streams).
    reads_archives: ClassVar[bool] = False

    kept: frozenset[str] | None = None
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES

    @classmethod
    def select(cls, files: Sequence[InputFile]) -> list[InputFile]:
        """The files of this format among the listed ones (default: all of them)."""
        return list(files)

    @classmethod
    def prepare(cls: type[_F], files: Sequence[InputFile], settings: ReadSettings) -> _F:
        """The format for a conversion of `files` (default: from the settings alone)."""
        return cls(kept=settings.kept, max_record_bytes=settings.max_record_bytes)

    def describe(self) -> str:
        """The format as `--dry_run` and `inspect --input` show it (CSV: with its dialect)."""
        return self.name

    def counting(self) -> Counting | None:
        """For line-based formats, what must be counted before each cut point (their writers
        get the counts as `read_piece`'s `cut_counts`: CSV finds its first record by the quotes,
        and every bad row gets its line number from the newlines); None for the others."""
        return None

    @property
    def label_vocabulary(self) -> tuple[str, ...]:
        """Label names by id, for formats that make the labels (images); else ()."""
        return ()

    def with_cuts(self, files: Sequence[InputFile], target_shard_bytes: int) -> list[InputFile]:
        """The files with where each may be cut (default: compressed files nowhere inside)."""
        return [dataclasses.replace(f, cuts=() if compression_of(f.path) else None) for f in files]

    def converted(self, features: Sequence[FeatureSpec]) -> list[FeatureSpec]:
        """The features a writer converts: those the output keeps."""
        return [f for f in features if self.kept is None or f.name in self.kept]

    @abc.abstractmethod
    def sample(self, f: InputFile, sample_bytes: int) -> Sample:
        """The head of one file, for inference and size measurement."""

    @abc.abstractmethod
    def infer_features(
        self, samples: Sequence[Sample], overrides: Sequence[FeatureSpec]
    ) -> list[FeatureSpec]:
        """The feature spec of the samples; `overrides` (from `--schema`) win."""

    @abc.abstractmethod
    def sample_batches(
        self,
        sample: Sample,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """The sample's records as the writers would produce them (to measure output size);
        formats that can say which rows failed pass them to `on_bad_row`."""

    def read_pieces(
        self,
        pieces: Sequence[Piece],
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        cut_counts: CutCounts | None,
        reports: list[PieceReport],
    ) -> Iterator[tuple[Piece, pa.RecordBatch]]:
        """`read_piece` of each piece in turn, each batch with its piece, each piece read
        between checks that its file is still the one listed (`reading_input`); reports go
        to `reports`. A format may read several pieces at once (CSV: small files)."""
        for piece in pieces:
            with reading_input(piece.path, piece.stamp):
                read = self.read_piece(piece, features, on_bad_row, cut_counts)
                while True:
                    try:
                        batch = next(read)
                    except StopIteration as done:
                        if done.value is not None:
                            reports.append(done.value)
                        break
                    yield piece, batch

    @abc.abstractmethod
    def read_piece(
        self,
        piece: Piece,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        cut_counts: CutCounts | None = None,
    ) -> Generator[pa.RecordBatch, None, PieceReport | None]:
        """The records that start inside `piece`, as batches conformed to `features`; bad
        records go to `on_bad_row`. A piece of a compressed file is always the whole file.
        A format may return (as the generator's value) a `PieceReport`."""
