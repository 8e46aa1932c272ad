"""The Beam step that writes one shard, or with splits the parts of one shard per split.

It is a deterministic function of the plan: a retried bundle writes the same records, in the
same order, as the same bytes (every Example's features in the spec's order). A shard is
written in one streaming pass (input -> Arrow batches -> Examples -> framed records -> file)
under a temporary name unique to the attempt; only the publish step gives it its final name.
With splits, a write task reads its pieces once, assigns each batch's rows to splits, and
writes each split's rows to its own file: a part of that split's shard (`join_parts`).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems

from beam_jobs.codec.examples import ExampleEncoder
from beam_jobs.codec.shard_file import ShardFileWriter
from beam_jobs.core.bad_rows import BadRow, as_text
from beam_jobs.core.errors import DataError, raised_for_launcher
from beam_jobs.core.inputs import Piece
from beam_jobs.core.sharding import ShardingOptions
from beam_jobs.core.tasks import (
    ShardPart,
    WriteTask,
    Written,
)
from beam_jobs.formats.base import InputFormat, PieceReport
from beam_jobs.formats.lines.cut_counts import CutCounts
from beam_jobs.formats.lines.line_numbers import with_line_numbers
from beam_jobs.plan.shuffle import ShufflePlan
from beam_jobs.schema.precision import float32_changes_of
from beam_jobs.schema.projection import Projection
from beam_jobs.schema.split_hash import SplitRule
from beam_jobs.sink import commits, progress
from beam_jobs.sink.coalesce import Coalescer, Joined, piece_of_row
from beam_jobs.sink.counters import counter
from beam_jobs.sink.run_files import create_run_file, make_run_folder
from beam_jobs.sink.shuffle.runs import RunSink, RunWriter
from beam_jobs.sink.task_outputs import Read, RowTally, TaskOutput, counted, handed_on
from beam_jobs.sink.temp_folder import stop_if_abandoned
from beam_jobs.stats.batches import new_stats, update_all
from tfdata_reader.manifest import FeatureSpec, shard_name

__all__ = ["MAX_LABELS", "WriteShardFn", "WriteSpec"]


@dataclasses.dataclass(frozen=True)
class WriteSpec:
    """What every write task of a conversion shares.

    Attributes:
      input_format: the format, as planning prepared it.
      features: the output's feature spec.
      read_features: the inputs' columns, as the format reads them (before the projection).
      temp_dir: the run's temporary folder, where the files go.
      sharding: the shards' prefix and compression.
      max_record_bytes: a larger encoded record goes to the dead letter (None: no limit).
      splits: with --splits, which split each record goes to.
      projection: the columns kept and their names.
      text_label: the label feature when it holds text (its values are collected).
      run_marker: the work folder's marker, which names the run that holds the folder (a
        task of a run that no longer does stops); None for runs without a launcher, which
        neither check it nor commit their tasks for a rerun.
      run_id: the run this task is of (`run_marker` must name it).
      input_bytes_per_row: the plan's estimate, for the progress notes of a task still
        running (0: unknown).
      shuffle: in a shuffled conversion, the buckets each split's records go to: a task
        writes runs (`sink.shuffle.runs`) instead of shards, and `sink.shuffle` writes the
        shards.
      note_seconds: how often a running task rewrites its progress note (a quarter of the
        stall limit when that is less than `progress.NOTE_SECONDS`, so that a task at work
        is never taken for a stalled one).
    """

    input_format: InputFormat
    features: tuple[FeatureSpec, ...]
    read_features: tuple[FeatureSpec, ...]
    temp_dir: str
    sharding: ShardingOptions = ShardingOptions()
    max_record_bytes: int | None = None
    splits: SplitRule | None = None
    projection: Projection = Projection()
    text_label: str | None = None
    run_marker: str | None = None
    run_id: str = ""
    input_bytes_per_row: float = 0.0
    shuffle: ShufflePlan | None = None
    note_seconds: float | None = None  # None: `progress.NOTE_SECONDS`

    @property
    def resumable(self) -> bool:
        """Whether tasks commit their work for a rerun and reuse a failed run's (runs of the
        launcher, which names the work folder after the conversion)."""
        return self.run_marker is not None


class WriteShardFn(beam.DoFn):
    """Writes one `WriteTask`: its shard, or with splits a part of each split's shard, under
    temporary names."""

    def __init__(self, spec: WriteSpec) -> None:
        self._spec = spec
        self._records = counter("records_written")
        self._bytes = counter("bytes_written")
        self._input_bytes = counter("input_bytes_read")
        self._shards = counter("shards_written")
        self._bad = counter("records_dead_lettered")
        self._rows_read = counter("records_read")

    def setup(self) -> None:
        if self._spec.run_marker is None:  # no launcher made the folder
            make_run_folder(self._spec.temp_dir)
        self._encoder = ExampleEncoder(self._spec.features)
        self._floats = [f.name for f in self._spec.features if f.dtype == "float32"]

    def process(self, task: WriteTask, cut_counts: CutCounts | None = None) -> Iterator[Written]:
        with raised_for_launcher():
            yield from self._write(task, cut_counts)

    def _write(self, task: WriteTask, cut_counts: CutCounts | None) -> list[Written]:
        """The task's outputs: a failed run's, checked and reused, or written now (and
        committed, for a rerun)."""
        spec = self._spec
        key = commits.write_task_key(task.index)
        self._check_alive([])
        if spec.resumable:
            kept = commits.reuse(spec.temp_dir, key, spec.run_id)
            if kept is not None:
                name, stored = self._task_name(task), sum(w.bytes for w in kept)
                records = sum(w.records for w in kept)
                progress.write_note(
                    spec.temp_dir, name, records, stored, task.input_bytes, reused=True
                )
                return counted(kept, reused=True)
        attempt = commits.new_attempt()
        written, files = self._write_task(task, cut_counts, attempt)
        note = progress.note_path(spec.temp_dir, self._task_name(task))
        self._check_alive([*(f.path for f in files), note])
        written = counted(written, reused=False)
        if spec.resumable:
            commits.commit(spec.temp_dir, key, attempt, written, files)
        return written

    def _check_alive(self, written: list[str | None]) -> None:
        spec = self._spec
        stop_if_abandoned(spec.run_marker, spec.temp_dir, written, spec.run_id)

    def _task_name(self, task: WriteTask) -> str:
        """The name progress notes and errors give a task: its shard's, or with splits its own."""
        return progress.task_note_name(task, self._spec.sharding)

    def _shard_name(self, target: ShardPart) -> str:
        sharding = self._spec.sharding
        prefix = target.split or sharding.shard_prefix
        return shard_name(prefix, target.index, target.num_shards, sharding.compression)

    def _open(self, target: ShardPart, task: WriteTask, attempt: str) -> TaskOutput:
        spec = self._spec
        name = self._shard_name(target)
        if spec.shuffle is not None:  # records to buckets, the shards written after
            output = task.parts.index(target)
            buckets = spec.shuffle.buckets(target.split)
            draws = (spec.shuffle.seed, task.index, output)
            path = FileSystems.join(spec.temp_dir, commits.attempt_name(f"{name}.runs", attempt))
            runs = RunSink(RunWriter(path, buckets, draws, spec.shuffle.run_bytes))
            return TaskOutput(target, name, runs.path, runs, new_stats(spec.features))
        # The task's index keeps the temporary names of one shard's parts apart.
        stem = f"{name}.{task.index}"
        temp_path = FileSystems.join(spec.temp_dir, commits.attempt_name(stem, attempt))
        raw = create_run_file(temp_path)
        sharding = spec.sharding
        # A part of a shard ends so that it joins the others into one gzip member.
        joinable = not task.whole_shard
        writer = ShardFileWriter(raw, sharding.compression, sharding.gzip_level, joinable)
        return TaskOutput(target, name, temp_path, writer, new_stats(spec.features))

    def _write_task(
        self, task: WriteTask, cut_counts: CutCounts | None, attempt: str
    ) -> tuple[list[Written], list[commits.KeptFile]]:
        """Writes the task's records: one shard, or with splits a part of each split's shard.
        Returns them and the files they are in."""
        spec = self._spec
        outputs = [self._open(target, task, attempt) for target in task.parts]
        labels: set[bytes] = set()
        tally = RowTally()
        reports: list[PieceReport] = []
        coalescer = Coalescer()
        note = progress.RunningNote(spec.temp_dir, self._task_name(task), spec.note_seconds)
        # Input bytes of the pieces before each one (read to their end when it is read).
        sizes = [p.end - p.start for p in task.pieces]
        before = dict(zip(task.pieces, _running_sums(sizes), strict=True))
        current, rows_before = None, 0
        read_all = spec.input_format.read_pieces(
            task.pieces, spec.read_features, tally.bad_row, cut_counts, reports
        )
        try:
            for piece, read in read_all:
                if piece is not current:
                    current, rows_before = piece, tally.rows_read
                batch = spec.projection.batch(read)
                tally.read += batch.num_rows
                if spec.text_label:
                    labels.update(pc.unique(batch.column(spec.text_label).drop_null()).to_pylist())
                    _check_label_count(len(labels))
                for joined in coalescer.add(batch, piece):
                    self._write_joined(outputs, joined, tally)
                # The piece's share read so far, estimated from its rows (the plan's bytes a
                # row): what the launcher's share of the input and ETA add up.
                rows = tally.rows_read - rows_before
                guess = min(piece.end - piece.start, int(rows * spec.input_bytes_per_row))
                note.update(*self._written_so_far(outputs), before[piece] + guess)
            for joined in coalescer.flush():
                self._write_joined(outputs, joined, tally)
        finally:
            for output in outputs:
                output.writer.close()
        tally.check(sum(o.writer.records for o in outputs), self._task_name(task))
        bad_rows = tally.bad_rows
        counting = spec.input_format.counting()
        if bad_rows and counting:
            bad_rows = with_line_numbers(bad_rows, task.pieces, cut_counts, counting.cr_lines)
        outputs[0].bad_rows[:0] = bad_rows  # the format's bad rows: with the first output's
        records = sum(o.writer.records for o in outputs)
        stored = sum(o.writer.bytes for o in outputs)
        name = self._task_name(task)
        progress.write_note(spec.temp_dir, name, records, stored, task.input_bytes)
        self._bad.inc(len(bad_rows) + tally.oversized)
        self._records.inc(records)
        self._rows_read.inc(tally.rows_read)
        self._bytes.inc(stored)
        self._input_bytes.inc(task.input_bytes)
        self._shards.inc()
        read = Read(reports, labels, dict(spec.projection.renames), tally)
        where = (spec.temp_dir, spec.shuffle)
        written: list[Written] = []
        files: list[commits.KeptFile] = []
        for i, output in enumerate(outputs):
            made, kept = handed_on(output, task, i == 0, read, where, attempt)
            written.append(made)
            files += kept
        return written, files

    @staticmethod
    def _written_so_far(outputs: list[TaskOutput]) -> tuple[int, int]:
        """Records and bytes the task's outputs hold so far."""
        return sum(o.writer.records for o in outputs), sum(o.writer.bytes for o in outputs)

    def _write_joined(self, outputs: list[TaskOutput], joined: Joined, tally: RowTally) -> None:
        """Writes a (joined) batch's rows: all to the one output, or each to its split's."""
        batch, sources = joined
        if not self._spec.splits:
            self._write_batch(outputs[0], batch, sources, None, tally)
            return
        which = self._spec.splits.which(batch)
        for i, output in enumerate(outputs):
            mine = which == i
            rows = np.flatnonzero(mine)  # the split's rows, as rows of `batch`
            self._write_batch(output, batch.filter(pa.array(mine)), sources, rows, tally)

    def _write_batch(
        self,
        output: TaskOutput,
        batch: pa.RecordBatch,
        sources: tuple[tuple[Piece, int], ...],
        origin: np.ndarray | None,
        tally: RowTally,
    ) -> None:
        """Encodes and writes a batch; `origin`: each row's row in the joined batch `sources`
        describe (None: the same)."""
        columns = self._encoder.columns(batch)
        examples = self._encoder.encode_columns(columns, batch.num_rows)
        limit = self._spec.max_record_bytes
        if limit:

            def piece(row: int) -> Piece:
                return piece_of_row(sources, row if origin is None else int(origin[row]))

            kept, examples = self._set_aside_oversized(
                batch, examples, piece, lambda row: tally.oversized_row(output, row), limit
            )
            if kept is not batch:
                batch, columns = kept, self._encoder.columns(kept)
        output.writer.write_records(examples)
        update_all(output.stats, self._spec.features, columns, batch)
        floats = [batch.column(feature) for feature in self._floats]
        for feature, (rounded, zeroed) in zip(
            self._floats, float32_changes_of(floats), strict=True
        ):
            output.changes.rounded[feature] += rounded
            output.changes.zeroed[feature] += zeroed

    def _set_aside_oversized(
        self,
        batch: pa.RecordBatch,
        examples: list[bytes],
        piece_of: Callable[[int], Piece],
        on_bad_row: Callable[[BadRow], None],
        limit: int,
    ) -> tuple[pa.RecordBatch, list[bytes]]:
        """Moves records longer than `limit` (--max_record_bytes) to the dead letter
        (`piece_of`: the piece a row of `batch` came from)."""
        sizes = np.fromiter(map(len, examples), dtype=np.int64, count=len(examples))
        oversized = np.flatnonzero(sizes > limit)
        if not oversized.size:
            return batch, examples
        for index in oversized.tolist():
            reason = f"the encoded record has {sizes[index]} bytes, over --max_record_bytes {limit}"
            cells = {k: _short(v) for k, v in batch.slice(index, 1).to_pylist()[0].items()}
            piece = piece_of(index)
            on_bad_row(BadRow(piece.path, piece.start, piece.end, reason, None, {"cells": cells}))
        keep = sizes <= limit
        return batch.filter(pa.array(keep)), [e for e, k in zip(examples, keep, strict=True) if k]


def _running_sums(values: Iterable[int]) -> list[int]:
    """0, then each value added: the sum of those before each."""
    return list(itertools.accumulate(values, initial=0))[:-1]


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
