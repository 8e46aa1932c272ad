"""The Beam step that writes one shard.

It is a deterministic function of the plan: a retried bundle writes the same records in the
same order (tfx-bsl orders each Example's feature map arbitrarily, so not always the same
bytes; the manifest records the checksum of the attempt that was published). A shard
is written in one streaming pass (input -> Arrow batches -> Examples -> framed records -> file)
under a temporary name unique to the attempt; only the publish step gives it its final name.
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
from beam_jobs.plan.shards import Piece, ShardSpec
from beam_jobs.schema.projection import Projection
from beam_jobs.schema.splits import assign_splits
from beam_jobs.sink import progress
from beam_jobs.sink.dead_letter import BadRow, as_text, write_dead_letter
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
    """Which records a shard of one split keeps: `--splits` weights and the split's index."""

    weights: tuple[int, ...]
    names: tuple[str, ...]
    key: str | None

    def keep(self, batch: pa.RecordBatch, split: str) -> pa.RecordBatch:
        chosen = assign_splits(batch, self.weights, self.key) == self.names.index(split)
        return batch if chosen.all() else batch.filter(pa.array(chosen))

    def reports_bad_rows(self, split: str) -> bool:
        # Every split's writers read all input; bad rows are reported by the first split only.
        return split == self.names[0]


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
    ) -> None:
        """`run_marker`: the file that says the run is alive (its launcher removes it, with the
        temporary folder, when the run is interrupted); None for runs without one."""
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
            yield self._write(shard, context)

    def _write(self, shard: ShardSpec, context: Any) -> WrittenShard:
        self._check_alive([])
        written = self._write_shard(shard, context)
        self._check_alive(
            [written.temp_path, written.dead_letter_temp_path,
             progress.note_path(self._temp_dir, written.name)]
        )  # fmt: skip
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

    def _write_shard(self, shard: ShardSpec, context: Any) -> WrittenShard:
        prefix = shard.split or self._prefix
        name = shard_name(prefix, shard.index, shard.num_shards, self._compression)
        temp_path = FileSystems.join(self._temp_dir, f"{name}.{uuid.uuid4().hex}")
        stats = new_stats(self._features)
        labels: set[bytes] = set()
        primary = shard.split is None or self._splits.reports_bad_rows(shard.split)
        tally = _Tally(primary)
        reports: list[PieceReport] = []
        raw = FileSystems.create(temp_path, compression_type=CompressionTypes.UNCOMPRESSED)
        with ShardFileWriter(raw, self._compression) as writer:
            for piece in shard.pieces:
                for read in self._read(piece, tally.bad_row, context, reports):
                    batch = self._projection.batch(read)
                    tally.read += batch.num_rows
                    if self._text_label:
                        labels.update(
                            pc.unique(batch.column(self._text_label).drop_null()).to_pylist()
                        )
                        _check_label_count(len(labels))
                    if shard.split is not None:
                        kept = self._splits.keep(batch, shard.split)
                        tally.elsewhere += batch.num_rows - kept.num_rows
                        batch = kept
                    columns = self._encoder.columns(batch)
                    examples = self._encoder.encode_columns(columns, batch.num_rows)
                    if self._max_record_bytes:
                        kept, examples = self._set_aside_oversized(
                            batch, examples, piece, tally.oversized_row
                        )
                        if kept is not batch:
                            batch, columns = kept, self._encoder.columns(kept)
                    writer.write_records(examples)
                    update_all(stats, self._features, columns)
        tally.check(writer.records, name)
        bad_rows = tally.bad_rows
        if bad_rows and self._format.needs_cut_counts:
            bad_rows = with_line_numbers(bad_rows, shard.pieces, context)
        input_bytes = shard.input_bytes if primary else 0
        dead_letter = None
        if bad_rows:
            dead_letter = write_dead_letter(self._temp_dir, name, [r.to_json() for r in bad_rows])
        progress.write_note(self._temp_dir, name, writer.records, writer.bytes, input_bytes)
        self._bad.inc(len(bad_rows))
        self._records.inc(writer.records)
        self._rows_read.inc(tally.rows_read if primary else 0)
        self._bytes.inc(writer.bytes)
        self._input_bytes.inc(input_bytes)
        self._shards.inc()
        return WrittenShard(
            index=shard.index,
            temp_path=temp_path,
            name=name,
            records=writer.records,
            bytes=writer.bytes,
            crc32c=writer.crc32c,
            input_bytes=input_bytes,
            null_counts={name: feature.missing for name, feature in stats.items()},
            bad_records=len(bad_rows),
            dead_letter_temp_path=dead_letter,
            split=shard.split,
            num_shards=shard.num_shards,
            covered=tuple(r.covered for r in reports if r.covered) if primary else (),
            ignored_fields=_sum_ignored(reports) if primary else {},
            rows_read=tally.rows_read,
            label_values=tuple(sorted(labels)),
            stats=finish_all(stats),
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
    """A writer's own count of rows in and out: every row read from its pieces is written, kept
    by another split's writers, or set aside as bad (the format's bad rows reported here when
    `primary`; oversized records always)."""

    def __init__(self, primary: bool) -> None:
        self.primary = primary
        self.read = 0  # good rows the format yielded
        self.bad = 0  # rows the format set aside
        self.oversized = 0  # good rows set aside when encoded
        self.elsewhere = 0  # rows of other splits
        self.bad_rows: list[BadRow] = []

    @property
    def rows_read(self) -> int:
        return self.read + self.bad

    def bad_row(self, row: BadRow) -> None:
        self.bad += 1
        if self.primary:
            self.bad_rows.append(row)

    def oversized_row(self, row: BadRow) -> None:
        # Reported by every split's writer: a row is in one split only, and it is found
        # oversized after the split filter, so only its own split's writer sees it.
        self.oversized += 1
        self.bad_rows.append(row)

    def check(self, written: int, shard: str) -> None:
        """Raises DataError unless read = written + elsewhere + set aside."""
        accounted = written + self.elsewhere + self.bad + self.oversized
        if accounted != self.rows_read:
            raise DataError(
                f"rows in != rows out while writing {shard}: {self.rows_read:,} rows were read "
                f"but {written:,} written, {self.elsewhere:,} kept for other splits and "
                f"{self.bad + self.oversized:,} set aside; {self.rows_read - accounted:,} rows "
                "were lost between reading and writing (stage WriteShards); nothing was "
                "published"
            )


def _sum_ignored(reports: list[PieceReport]) -> dict[str, int]:
    total: dict[str, int] = {}
    for report in reports:
        for name, count in report.ignored_fields.items():
            total[name] = total.get(name, 0) + count
    return total


def _ignore(row: BadRow) -> None:
    """Bad rows seen by the writers of every split but the first, which reports them."""


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
