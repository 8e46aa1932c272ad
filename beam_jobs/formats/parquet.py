"""`--format parquet`: Arrow types map to Example types; row groups are the unit of the plan.

A Parquet file may be cut only where a row group starts; a piece owns the row groups that start
inside it. For the plan, a file's size is where its last row group ends (the footer is left
out). Footers are read at planning time only for files bigger than one shard (smaller files are
whole units), so planning stays cheap for many small files.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Generator, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from beam_jobs.core.bad_rows import BadRow
from beam_jobs.core.errors import DataError
from beam_jobs.core.inputs import InputFile, Piece
from beam_jobs.formats.base import InputFormat, OnBadRow, PieceReport, ReadSettings, Sample
from beam_jobs.formats.compressed import open_input
from beam_jobs.formats.lines.cut_counts import CutCounts
from beam_jobs.schema.conform import conform, flatten_structs, infer_from_table, merge_features
from beam_jobs.schema.precision import LOOKED_AT, Float32Changes, warn_float32_rounding
from tfdata_reader.manifest import FeatureSpec

__all__ = [
    "ParquetFormat",
    "data_end",
    "row_group_starts",
]

SAMPLE_ROWS = 4096
_BATCH_ROWS = 65536
_FOOTER_THREADS = 16


def row_group_starts(metadata: pq.FileMetaData) -> list[int]:
    """The byte offset where each row group's first column chunk starts."""
    starts = []
    for i in range(metadata.num_row_groups):
        column = metadata.row_group(i).column(0)
        offset = column.data_page_offset
        if column.has_dictionary_page and column.dictionary_page_offset:
            offset = min(offset, column.dictionary_page_offset)
        starts.append(offset)
    return starts


def data_end(metadata: pq.FileMetaData, file_size: int) -> int:
    """Where the last row group ends: the footer after it holds no records, and with many row
    groups it can be a large part of the file, so the plan leaves it out."""
    if metadata.num_row_groups == 0:
        return file_size
    last = metadata.row_group(metadata.num_row_groups - 1)
    size = sum(last.column(i).total_compressed_size for i in range(last.num_columns))
    return min(file_size, row_group_starts(metadata)[-1] + size)


def _open(path: str):
    try:
        return pq.ParquetFile(open_input(path))
    except pa.ArrowInvalid as e:
        raise DataError(f"{path}: not a Parquet file: {e}") from e


def _bad_cells(batch: pa.RecordBatch, index: int) -> dict[str, Any]:
    return {"cells": {k: repr(v) for k, v in batch.slice(index, 1).to_pylist()[0].items()}}


def _batches(parquet: pq.ParquetFile, groups: list[int], path: str) -> Iterator[pa.RecordBatch]:
    """The row groups' rows; damaged data in a row group is a DataError naming the file."""
    batches = parquet.iter_batches(batch_size=_BATCH_ROWS, row_groups=groups)
    while True:
        try:
            batch = next(batches, None)
        except (OSError, pa.ArrowException) as e:
            raise DataError(
                f"{path}: cannot read row groups {groups[0]}-{groups[-1]}: {e}; the file is "
                "damaged: fix or remove it"
            ) from e
        if batch is None:
            return
        yield batch


@dataclasses.dataclass(frozen=True)
class _Schema:
    """One schema among the inputs' footers, as features: how many files have it, the first
    of them, and each column's kind ("text" or "numbers"; none for a column of nulls)."""

    features: tuple[FeatureSpec, ...]
    files: int
    first: str
    kinds: tuple[tuple[str, str], ...]


def _footer(path: str) -> pa.Schema:
    return _open(path).schema_arrow


def _schemas(files: Sequence[InputFile]) -> tuple[_Schema, ...]:
    """Every input's schema, read from its footer (a few KB each; read in parallel, as there
    may be many files on GCS), grouped: most inputs share one."""
    with concurrent.futures.ThreadPoolExecutor(_FOOTER_THREADS) as pool:
        footers = list(pool.map(_footer, [f.path for f in files]))
    groups: dict[str, list[str]] = {}
    typed: dict[str, pa.Schema] = {}
    for f, schema in zip(files, footers, strict=True):
        key = schema.remove_metadata().to_string()
        groups.setdefault(key, []).append(f.path)
        typed.setdefault(key, schema)
    found = []
    for key, paths in groups.items():
        table = flatten_structs(typed[key].empty_table())
        try:
            features = infer_from_table(table)
        except DataError as e:
            raise DataError(f"{paths[0]}: {e}") from None
        kinds = tuple(
            (f.name, "text" if f.dtype == "bytes" else "numbers")
            for f, field in zip(features, table.schema, strict=True)
            if not pa.types.is_null(field.type)
        )
        found.append(_Schema(tuple(features), len(paths), paths[0], kinds))
    return tuple(found)


def _refuse_text_beside_numbers(
    samples: Sequence[Sample],
    per_sample: Sequence[Sequence[FeatureSpec]],
    schemas: Sequence[_Schema],
    chosen: set[str],
) -> None:
    """A column a file stores as text where other files store numbers: widening it to text
    would make every number a bad row, so the user chooses (`--schema`), told which files.
    Sampled files say by their values (a column of nulls has no say), the others by their
    footer's types."""
    kinds: dict[str, dict[str, list[str]]] = {}
    for sample, specs in zip(samples, per_sample, strict=True):
        for spec in specs:
            column = (
                sample.table.column(spec.name) if spec.name in sample.table.column_names else None
            )
            if column is None or column.null_count == len(column):
                continue  # no values: no say in the type
            kind = "text" if spec.dtype == "bytes" else "numbers"
            kinds.setdefault(spec.name, {}).setdefault(kind, []).append(sample.path)
    sampled = {sample.path for sample in samples}
    for schema in schemas:
        if schema.first in sampled and schema.files == 1:
            continue  # its values have spoken
        for name, kind in schema.kinds:
            kinds.setdefault(name, {}).setdefault(kind, []).append(schema.first)
    for name, found in kinds.items():
        if len(found) == 2 and name not in chosen:
            raise DataError(
                f"column {name!r} is text in {', '.join(found['text'][:3])} but numbers in "
                f"{', '.join(found['numbers'][:3])}; choose its type with --schema (the values "
                "of the other type are then bad rows)"
            )


def _sampled_values(
    samples: Sequence[Sample], features: Sequence[FeatureSpec]
) -> dict[str, list[object]]:
    """The first sampled values of each double column (float32 columns hold no more)."""
    values: dict[str, list[object]] = {}
    for sample in samples:
        for feature in features:
            if feature.name in sample.table.column_names:
                column = sample.table.column(feature.name).slice(0, LOOKED_AT)
                if pa.types.is_float64(column.type) or (
                    pa.types.is_list(column.type) and pa.types.is_float64(column.type.value_type)
                ):
                    values.setdefault(feature.name, []).extend(column.to_pylist())
    return values


@dataclasses.dataclass(frozen=True)
class ParquetFormat(InputFormat):
    """`schemas`: every input's schema (from its footer), grouped, so that a column in a file
    the plan did not sample is a feature all the same."""

    name = "parquet"
    extensions = (".parquet", ".pq")

    schemas: tuple[_Schema, ...] = ()

    @classmethod
    def prepare(cls, files: Sequence[InputFile], settings: ReadSettings) -> ParquetFormat:
        return cls(settings.kept, settings.max_record_bytes, _schemas(files))

    def with_cuts(self, files: Sequence[InputFile], target_shard_bytes: int) -> list[InputFile]:
        planned = []
        for f in files:
            if f.size > target_shard_bytes:
                metadata = _open(f.path).metadata
                cuts = tuple(row_group_starts(metadata)[1:])
                f = dataclasses.replace(f, size=data_end(metadata, f.size), cuts=cuts)
            planned.append(dataclasses.replace(f, cuts=f.cuts or ()))
        return planned

    def sample(self, f: InputFile, sample_bytes: int) -> Sample:
        parquet = _open(f.path)
        rows = parquet.metadata.num_rows
        size = min(f.size, data_end(parquet.metadata, f.size))
        batch = next(parquet.iter_batches(batch_size=SAMPLE_ROWS), None)
        table = (
            pa.Table.from_batches([batch])
            if batch is not None
            else parquet.schema_arrow.empty_table()
        )
        input_bytes = size * (table.num_rows / rows) if rows else size
        return Sample(f.path, flatten_structs(table), input_bytes)

    def infer_features(
        self, samples: Sequence[Sample], overrides: Sequence[FeatureSpec]
    ) -> list[FeatureSpec]:
        per_sample = []
        for sample in samples:
            try:
                per_sample.append(infer_from_table(sample.table))
            except DataError as e:
                raise DataError(f"{sample.path}: {e}") from None
        footers = [list(schema.features) for schema in self.schemas]
        chosen = {f.name for f in overrides}  # typed by --schema, or left out by --columns
        every = [*per_sample, *footers]
        chosen |= {f.name for specs in every for f in specs} - {
            f.name for specs in every for f in self.converted(specs)
        }
        _refuse_text_beside_numbers(samples, per_sample, self.schemas, chosen)
        # The samples type the columns from their values; the footers add the columns of
        # files not sampled, and make a column some files lack nullable.
        features = merge_features(every, overrides)
        warn_float32_rounding(features, _sampled_values(samples, features))
        return features

    def sample_batches(
        self,
        sample: Sample,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow | None = None,
    ) -> Iterator[pa.RecordBatch]:
        yield conform(sample.table, features)[0]

    def read_piece(
        self,
        piece: Piece,
        features: Sequence[FeatureSpec],
        on_bad_row: OnBadRow,
        cut_counts: CutCounts | None = None,
    ) -> Generator[pa.RecordBatch, None, PieceReport]:
        parquet = _open(piece.path)
        starts = row_group_starts(parquet.metadata)
        groups = [i for i, s in enumerate(starts) if piece.start <= s < piece.end]
        if piece.start == 0 and piece.end >= piece.file_size:
            groups = list(range(len(starts)))  # the whole file, also one without row groups
        if not groups:
            return PieceReport()
        rows_before = 0
        converted = self.converted(features)
        changes = Float32Changes()
        for raw in _batches(parquet, groups, piece.path):
            batch, bad = conform(raw, converted, changes)
            for index, reason in sorted(bad.items()):
                on_bad_row(
                    BadRow(
                        piece.path,
                        piece.start,
                        piece.end,
                        reason,
                        rows_before + index,
                        _bad_cells(raw, index),
                    )
                )
            rows_before += raw.num_rows
            if batch.num_rows:
                yield batch
        return PieceReport(
            rounded_integers=dict(changes.rounded), zeroed_numbers=dict(changes.zeroed)
        )
