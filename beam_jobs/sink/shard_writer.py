"""The Beam step that writes one shard, or with splits the parts of one shard per split.

It is a deterministic function of the plan: a retried bundle writes the same records in the
same order (tfx-bsl orders each Example's feature map arbitrarily, so not always the same
bytes; the manifest records the checksum of the attempt that was published). A shard
is written in one streaming pass (input -> Arrow batches -> Examples -> framed records -> file)
under a temporary name unique to the attempt; only the publish step gives it its final name.
With splits, a write task reads its pieces once, assigns each batch's rows to splits, and
writes each split's rows to its own file: a part of that split's shard (`join_parts`).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from beam_jobs.errors import DataError, raised_for_launcher
from beam_jobs.formats import InputFormat
from beam_jobs.formats.base import OnBadRow, PieceReport
from beam_jobs.formats.lines.line_numbers import with_line_numbers
from beam_jobs.plan.shards import Piece, ShardSpec, SplitPart
from beam_jobs.schema.projection import Projection
from beam_jobs.schema.splits import assign_splits
from beam_jobs.sink import progress
from beam_jobs.sink.dead_letter import BadRow, as_text, write_dead_letter
from beam_jobs.sink.deflate import DEFAULT_LEVEL
from beam_jobs.sink.encode import ExampleEncoder
from beam_jobs.sink.output_dir import remove_empty_folders
from beam_jobs.sink.publish import WrittenShard
from beam_jobs.sink.tfrecord import ShardFileWriter
from beam_jobs.stats.accumulate import finish_all, new_stats, update_all
from tfdata_reader.manifest import FeatureSpec, shard_name

__all__ = [
    "METRICS_NAMESPACE",
    "SplitRule",
    "WriteShardFn",
    "WrittenShard",
]

METRICS_NAMESPACE = "tfrecord_etl"


class RunAbandoned(RuntimeError):
    """A task of a run whose launcher is gone (interrupted): it writes nothing more."""


@dataclasses.dataclass(frozen=True)
class SplitRule:
    """Which split each record goes to: `--splits` weights, names and `--split_key`."""

    weights: tuple[int, ...]
    names: tuple[str, ...]
    key: str | None

    def divide(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        """The batch's rows of each split, in the names' order (one hash per row)."""
        which = assign_splits(batch, self.weights, self.key)
        return [batch.filter(pa.array(which == i)) for i in range(len(self.names))]


@dataclasses.dataclass
class _Output:
    """One file a write task writes: a shard, or a part of one split's shard."""

    target: SplitPart
    name: str
    temp_path: str
    writer: ShardFileWriter
    stats: dict
    bad_rows: list[BadRow] = dataclasses.field(default_factory=list)


class WriteShardFn(beam.DoFn):
    """Writes one `ShardSpec` as one TFRecord file under a temporary name."""

    def __init__(
        self,
        input_format: InputFormat,
        features: Sequence[FeatureSpec],
        temp_dir: str,
        prefix: str,
        compression: str,
        max_record_bytes: int | None = None,
        splits: SplitRule | None = None,
        read_features: Sequence[FeatureSpec] | None = None,
        projection: Projection | None = None,
        text_label: str | None = None,
        run_marker: str | None = None,
        compression_level: int = DEFAULT_LEVEL,
    ) -> None:
        """`run_marker`: the file that says the run is alive (its launcher removes it, with the
        temporary folder, when the run is interrupted); None for runs without one."""
        self._compression_level = compression_level
        self._run_marker = run_marker
        self._format = input_format
        self._features = tuple(features)  # the output's
        self._read_features = tuple(read_features or features)  # the inputs' columns
        self._projection = projection or Projection()
        self._text_label = text_label
        self._max_record_bytes = max_record_bytes
        self._temp_dir = temp_dir
        self._prefix = prefix
        self._compression = compression
        self._splits = splits
        self._records = Metrics.counter(METRICS_NAMESPACE, "records_written")
        self._bytes = Metrics.counter(METRICS_NAMESPACE, "bytes_written")
        self._input_bytes = Metrics.counter(METRICS_NAMESPACE, "input_bytes_read")
        self._shards = Metrics.counter(METRICS_NAMESPACE, "shards_written")
        self._bad = Metrics.counter(METRICS_NAMESPACE, "records_dead_lettered")
        self._rows_read = Metrics.counter(METRICS_NAMESPACE, "records_read")

    def setup(self) -> None:
        self._encoder = ExampleEncoder(self._features)

    def process(self, shard: ShardSpec, context: Any = None) -> Iterator[WrittenShard]:
        with raised_for_launcher():
            yield from self._write(shard, context)

    def _write(self, shard: ShardSpec, context: Any) -> list[WrittenShard]:
        self._check_alive([])
        written = self._write_task(shard, context)
        paths = [p for w in written for p in (w.temp_path, w.dead_letter_temp_path)]
        self._check_alive([*paths, progress.note_path(self._temp_dir, self._task_name(shard))])
        return written

    def _check_alive(self, written: list[str | None]) -> None:
        """Stops a task of a run that was interrupted (its temporary folder is gone), and
        deletes what it wrote: a cluster may go on running tasks after the launcher ended,
        and they would leave files in the output that no run owns."""
        if self._run_marker is None or FileSystems.exists(self._run_marker):
            return
        paths = [p for p in written if p and FileSystems.exists(p)]
        if paths:
            FileSystems.delete(paths)
        remove_empty_folders(self._temp_dir)
        raise RunAbandoned(f"{self._temp_dir}: the run was interrupted; this task stopped")

    def _task_name(self, task: ShardSpec) -> str:
        """The name progress notes and errors give a task: its shard's, or with splits its own."""
        if task.parts:
            return f"task-{task.index:05d}-of-{task.num_shards:05d}"
        return shard_name(self._prefix, task.index, task.num_shards, self._compression)

    def _open(self, target: SplitPart, task: ShardSpec) -> _Output:
        prefix = target.split or self._prefix
        name = shard_name(prefix, target.index, target.num_shards, self._compression)
        # The task's index keeps the temporary names of one shard's parts apart.
        temp_path = FileSystems.join(self._temp_dir, f"{name}.{task.index}.{uuid.uuid4().hex}")
        raw = FileSystems.create(temp_path, compression_type=CompressionTypes.UNCOMPRESSED)
        writer = ShardFileWriter(raw, self._compression, self._compression_level)
        return _Output(target, name, temp_path, writer, new_stats(self._features))

    def _write_task(self, task: ShardSpec, context: Any) -> list[WrittenShard]:
        """Writes the task's records: one shard, or with splits a part of each split's shard."""
        targets = task.parts or (SplitPart(None, task.index, task.num_shards),)
        outputs = [self._open(target, task) for target in targets]
        labels: set[bytes] = set()
        tally = _Tally()
        reports: list[PieceReport] = []
        try:
            for piece in task.pieces:
                for read in self._read(piece, tally.bad_row, context, reports):
                    batch = self._projection.batch(read)
                    tally.read += batch.num_rows
                    if self._text_label:
                        labels.update(
                            pc.unique(batch.column(self._text_label).drop_null()).to_pylist()
                        )
                        _check_label_count(len(labels))
                    divided = self._splits.divide(batch) if task.parts else [batch]
                    for output, rows in zip(outputs, divided, strict=True):
                        self._write_batch(output, rows, piece, tally)
        finally:
            for output in outputs:
                output.writer.close()
        tally.check(sum(o.writer.records for o in outputs), self._task_name(task))
        bad_rows = tally.bad_rows
        if bad_rows and self._format.needs_cut_counts:
            bad_rows = with_line_numbers(bad_rows, task.pieces, context)
        outputs[0].bad_rows[:0] = bad_rows  # the format's bad rows: with the first output's
        records = sum(o.writer.records for o in outputs)
        stored = sum(o.writer.bytes for o in outputs)
        name = self._task_name(task)
        progress.write_note(self._temp_dir, name, records, stored, task.input_bytes)
        self._bad.inc(len(bad_rows) + tally.oversized)
        self._records.inc(records)
        self._rows_read.inc(tally.rows_read)
        self._bytes.inc(stored)
        self._input_bytes.inc(task.input_bytes)
        self._shards.inc()
        return [
            self._written(output, task, i == 0, tally, reports, labels)
            for i, output in enumerate(outputs)
        ]

    def _write_batch(
        self, output: _Output, batch: pa.RecordBatch, piece: Piece, tally: _Tally
    ) -> None:
        columns = self._encoder.columns(batch)
        examples = self._encoder.encode_columns(columns, batch.num_rows)
        if self._max_record_bytes:
            kept, examples = self._set_aside_oversized(
                batch, examples, piece, lambda row: tally.oversized_row(output, row)
            )
            if kept is not batch:
                batch, columns = kept, self._encoder.columns(kept)
        output.writer.write_records(examples)
        update_all(output.stats, self._features, columns)

    def _written(
        self,
        output: _Output,
        task: ShardSpec,
        first: bool,
        tally: _Tally,
        reports: list[PieceReport],
        labels: set[bytes],
    ) -> WrittenShard:
        """What one output holds; what the task read (rows, input bytes, what its pieces
        covered, ignored fields, label values) is told once, with the first output."""
        dead_letter = None
        if output.bad_rows:
            rows = [r.to_json() for r in output.bad_rows]
            dead_letter = write_dead_letter(self._temp_dir, output.name, rows)
        writer = output.writer
        return WrittenShard(
            index=output.target.index,
            temp_path=output.temp_path,
            name=output.name,
            records=writer.records,
            bytes=writer.bytes,
            crc32c=writer.crc32c,
            input_bytes=task.input_bytes if first else 0,
            null_counts={name: feature.missing for name, feature in output.stats.items()},
            bad_records=len(output.bad_rows),
            dead_letter_temp_path=dead_letter,
            split=output.target.split,
            num_shards=output.target.num_shards,
            covered=tuple(r.covered for r in reports if r.covered) if first else (),
            ignored_fields=_sum_ignored(reports) if first else {},
            rows_read=tally.rows_read if first else 0,
            label_values=tuple(sorted(labels)) if first else (),
            stats=finish_all(output.stats),
            part=task.index,
        )

    def _read(
        self, piece: Piece, on_bad_row: OnBadRow, context: Any, reports: list[PieceReport]
    ) -> Iterator[pa.RecordBatch]:
        """The piece's batches; an input that vanished since planning is a data error."""
        try:
            report = yield from self._format.read_piece(
                piece, self._read_features, on_bad_row, context
            )
            if report is not None:
                reports.append(report)
        except OSError as e:
            if FileSystems.exists(piece.path):
                raise  # a storage error, for the runner to retry
            raise DataError(
                f"{piece.path}: the input file is gone: it was listed when the conversion was "
                f"planned and deleted or moved while it ran ({e})"
            ) from e

    def _set_aside_oversized(
        self,
        batch: pa.RecordBatch,
        examples: list[bytes],
        piece: Piece,
        on_bad_row: Callable[[BadRow], None],
    ) -> tuple[pa.RecordBatch, list[bytes]]:
        """Moves records longer than --max_record_bytes to the dead letter."""
        limit = self._max_record_bytes
        sizes = np.fromiter(map(len, examples), dtype=np.int64, count=len(examples))
        oversized = np.flatnonzero(sizes > limit)
        if not oversized.size:
            return batch, examples
        for index in oversized.tolist():
            reason = f"the encoded record has {sizes[index]} bytes, over --max_record_bytes {limit}"
            cells = {k: _short(v) for k, v in batch.slice(index, 1).to_pylist()[0].items()}
            on_bad_row(BadRow(piece.path, piece.start, piece.end, reason, None, {"cells": cells}))
        keep = sizes <= limit
        return batch.filter(pa.array(keep)), [e for e, k in zip(examples, keep) if k]


class _Tally:
    """A write task's own count of rows in and out: every row read from its pieces is written
    (to one of its outputs) or set aside as bad (by the format, or oversized when encoded)."""

    def __init__(self) -> None:
        self.read = 0  # good rows the format yielded
        self.oversized = 0  # good rows set aside when encoded
        self.bad_rows: list[BadRow] = []  # the format's

    @property
    def rows_read(self) -> int:
        return self.read + len(self.bad_rows)

    def bad_row(self, row: BadRow) -> None:
        self.bad_rows.append(row)

    def oversized_row(self, output: _Output, row: BadRow) -> None:
        self.oversized += 1
        output.bad_rows.append(row)

    def check(self, written: int, task: str) -> None:
        """Raises DataError unless read = written + set aside."""
        accounted = written + len(self.bad_rows) + self.oversized
        if accounted != self.rows_read:
            raise DataError(
                f"rows in != rows out while writing {task}: {self.rows_read:,} rows were read "
                f"but {written:,} written and {len(self.bad_rows) + self.oversized:,} set "
                f"aside; {self.rows_read - accounted:,} rows were lost between reading and "
                "writing (stage WriteShards); nothing was published"
            )


def _sum_ignored(reports: list[PieceReport]) -> dict[str, int]:
    total: dict[str, int] = {}
    for report in reports:
        for name, count in report.ignored_fields.items():
            total[name] = total.get(name, 0) + count
    return total


def _short(value: Any) -> Any:
    """A cell for the dead letter: text as is, other bytes and long values summarized."""
    if isinstance(value, bytes):
        text = as_text(value)
        return text if isinstance(text, str) and len(text) <= 1024 else f"<{len(value)} bytes>"
    return value


MAX_LABELS = 10_000  # distinct values of a text label: more is not a class label


def _check_label_count(count: int) -> None:
    if count > MAX_LABELS:
        raise DataError(
            f"--label has more than {MAX_LABELS:,} distinct values: not a class label; "
            "convert without --label and map the values yourself"
        )
