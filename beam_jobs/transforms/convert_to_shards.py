"""The conversion pipeline: planned pieces of the inputs in, published shards and manifest out."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_jobs.config.convert import ConvertConfig
from beam_jobs.core.paths import is_local, worker_path
from beam_jobs.formats.lines.cut_counts import (
    CutCounts,
    Segment,
    count_segment,
    count_segment_in_worker,
    segments_between_cuts,
)
from beam_jobs.plan.conversion import ConversionPlan
from beam_jobs.plan.shards import cut_points
from beam_jobs.publish.publish import PublishShards, PublishSpec
from beam_jobs.sink import commits, progress
from beam_jobs.sink.join_parts import JoinParts, tasks_by_shard
from beam_jobs.sink.shard_writer import WriteShardFn, WriteSpec
from beam_jobs.sink.shuffle.shards import ShuffleShards
from beam_jobs.sink.temp_folder import RUN_MARKER, TEMP_DIR_PREFIX
from tfdata_reader.manifest import FeatureSpec, Order, RecordOrder

__all__ = ["LAUNCHER_COUNT_BYTES", "ConvertToShards", "counted_by_launcher", "cut_segments"]

LAUNCHER_COUNT_BYTES = 256 << 20


class ConvertToShards(beam.PTransform[Any, Any]):
    """Writes the shards of a `ConversionPlan` and publishes their manifest.

    Output: a PCollection with the published `Manifest` as its single element.
    """

    def __init__(
        self,
        plan: ConversionPlan,
        config: ConvertConfig,
        tool_version: str,
        run_id: str | None = None,
        cut_counts: CutCounts | None = None,
        work: str | None = None,
    ) -> None:
        """`run_id`: the run holding the output's lease (publishing checks and releases it);
        None makes a new id and publishes without a lease, like `WriteShards`. `cut_counts`:
        the counts of `cut_segments(plan)` when the caller made them (a runner that would
        compute a side input once per task that reads it). `work`: the work folder's id (the
        launcher names it after the conversion, so a rerun finds a failed run's finished
        work: `job.resume`); default the run's id."""
        super().__init__()
        self._cut_counts = cut_counts
        self._plan = plan
        self._config = config
        self._tool_version = tool_version
        self._run_id = run_id or ""
        self._output = worker_path(config.output)
        folder = work or run_id or uuid.uuid4().hex[:12]
        self.temp_dir = FileSystems.join(self._output, TEMP_DIR_PREFIX + folder)

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection[Any]:
        return (
            pbegin
            # One element per write task (`WriteTask`). Beam's Create ends with a Reshuffle,
            # which spreads them over the workers on Dataflow and the local runner; on Dask it
            # is a no-op, and `on_dask` gives each task a partition of its own instead.
            | "ListShards" >> beam.Create(self._plan.tasks)
            # Each writer streams its pieces into one temporary shard: a `WrittenShard`; with
            # splits, into one part of a shard of each split. Shuffled: into runs of buckets.
            | "WriteShards" >> self._write(pbegin)
            # Shuffled: each shard written from its buckets, each bucket's records permuted.
            # In input order: shards written in parts (splits, many files) joined in order.
            | ("Shuffle" if self._plan.shuffle else "JoinParts") >> self._to_shards()
            # Final names, dead letters, then manifest.json: the published `Manifest`.
            | "Publish" >> PublishShards(self._publish_spec())
        )

    def _write(self, pbegin: beam.pvalue.PBegin) -> beam.PTransform[Any, Any]:
        return beam.ParDo(WriteShardFn(self._write_spec()), cut_counts=self._counts(pbegin))

    def _to_shards(self) -> beam.PTransform[Any, Any]:
        plan = self._plan
        marker = self._marker()
        if plan.shuffle is not None:
            tasks = tasks_by_shard(plan.tasks)
            return ShuffleShards(
                self.temp_dir,
                plan.shuffle,
                tasks,
                plan.sharding,
                marker,
                self._run_id,
                self._note_seconds(),
            )
        if plan.writes_parts:
            return JoinParts(self.temp_dir, tasks_by_shard(plan.tasks), self._run_id)
        return beam.Map(lambda shard: shard)  # each shard written whole by one writer

    def _write_spec(self) -> WriteSpec:
        plan = self._plan
        per_row = 1 / plan.records_per_input_byte if plan.records_per_input_byte else 0.0
        return WriteSpec(
            input_format=plan.input_format,
            features=plan.features,
            read_features=plan.read_features or plan.features,
            temp_dir=self.temp_dir,
            sharding=plan.sharding,
            max_record_bytes=plan.max_record_bytes,
            splits=plan.split_rule,
            projection=plan.projection,
            text_label=_text_label(plan.features, plan.label),
            run_marker=self._marker(),
            run_id=self._run_id,
            input_bytes_per_row=per_row,
            shuffle=plan.shuffle,
            note_seconds=self._note_seconds(),
        )

    def _note_seconds(self) -> float:
        """How often a task at work says so: often enough for the stall check (a quarter of
        its limit), at most `progress.NOTE_SECONDS`."""
        return min(progress.NOTE_SECONDS, self._config.stall_seconds / 4)

    def _marker(self) -> str | None:
        """The work folder's marker, naming the run that holds it (runs with a lease: their
        tasks check it, and commit their work for a rerun)."""
        return FileSystems.join(self.temp_dir, RUN_MARKER) if self._run_id else None

    def _counts(self, pbegin: beam.pvalue.PBegin) -> Any:
        """What writers of line-based formats need beyond their piece: `CutCounts`.

        The quote bytes before each cut tell a CSV writer where its first record starts; the
        newlines give bad rows their line numbers. Given counts are used as they are; a small
        local input is counted here (one Beam stage less, which is seconds on a local run);
        otherwise (large or remote inputs) a parallel stage does, read as a side input.
        """
        if self._cut_counts is not None:
            return self._cut_counts
        segments = cut_segments(self._plan)
        if counted_by_launcher(segments):
            return CutCounts.from_counted(count_segment(s) for s in segments)
        counts = (
            pbegin
            | "ListSegments" >> beam.Create(segments)
            | "CountQuotesAndLines" >> beam.Map(count_segment_in_worker)
            | "GatherCounts" >> beam.combiners.ToList()
            | "CountsBeforeCuts" >> beam.Map(CutCounts.from_counted)
        )
        if self._run_id:  # kept beside the work: a rerun of a failed run counts no more
            keep = functools.partial(commits.keep_value, self.temp_dir, commits.COUNTS_NAME)
            counts = counts | "KeepCounts" >> beam.Map(keep)
        return beam.pvalue.AsSingleton(counts)

    def _publish_spec(self) -> PublishSpec:
        plan, config = self._plan, self._config
        sharding = plan.sharding
        return PublishSpec(
            output=self._output,
            temp_dir=self.temp_dir,
            prefixes=tuple(s.name for s in plan.splits) or (sharding.shard_prefix,),
            max_bad_fraction=sharding.max_bad_fraction,
            compression=sharding.compression,
            inputs={
                "patterns": list(config.inputs),
                "files": plan.files_json(),
                "total_bytes": plan.input_bytes,
            },
            options=config.to_json()
            | {
                "planned_shards": len(plan.shards),
                "estimated_output_bytes_per_input_byte": round(plan.output_bytes_per_input_byte, 6),
            },
            features=plan.features,
            splits=plan.splits,
            label=plan.label,
            label_vocabulary=plan.input_format.label_vocabulary,
            tool_version=self._tool_version,
            run_id=self._run_id,
            order=Order(RecordOrder.SHUFFLED, plan.shuffle.seed) if plan.shuffle else Order(),
        )


def cut_segments(plan: ConversionPlan) -> list[Segment]:
    """The stretches of input before each cut that writers of line-based formats need counted
    (none for other formats)."""
    counting = plan.input_format.counting()
    if counting is None:
        return []
    stamps = {piece.path: piece.stamp for task in plan.tasks for piece in task.pieces}
    return segments_between_cuts(cut_points(plan.tasks), counting, stamps)


def counted_by_launcher(segments: Sequence[Segment]) -> bool:
    """Local segments up to `LAUNCHER_COUNT_BYTES` (about half a second): quicker to count in
    the launcher than in a pipeline stage."""
    local = all(is_local(s.path) for s in segments)
    return local and sum(s.end - s.start for s in segments) <= LAUNCHER_COUNT_BYTES


def _text_label(features: Sequence[FeatureSpec], label: str | None) -> str | None:
    """The label feature when it holds text: its writers collect its values for a vocabulary."""
    by_name = {f.name: f for f in features}
    return label if label is not None and by_name[label].dtype == "bytes" else None
