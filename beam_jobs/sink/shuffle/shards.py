"""Shuffled conversions, second pass: each shard written from its buckets, each bucket's records
in a random order.

`ShuffleShards` is the shuffle after the first pass (`runs`): the write tasks' runs go to the
units that read them (`units`), and `WriteShuffledFn` reads a unit's buckets one at a time (at
most a bucket in memory), permutes each bucket's records (`draws.permutation`: keyed by the
seed, the split and the bucket), and writes them through `ShardFileWriter` (already framed: no
Example is decoded or encoded again). Part 0 of each shard also carries what its planned
shard's write tasks read and set aside, merged (`join_parts.merged_tallies`).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_jobs.codec.shard_file import ShardFileWriter, seek_stride
from beam_jobs.core.errors import DataError, raised_for_launcher
from beam_jobs.core.sharding import ShardingOptions
from beam_jobs.core.tasks import WrittenRuns, WrittenShard
from beam_jobs.plan.shuffle import ShufflePlan
from beam_jobs.sink import progress
from beam_jobs.sink.counters import counter
from beam_jobs.sink.join_parts import JoinParts, merged_tallies
from beam_jobs.sink.run_files import create_run_file
from beam_jobs.sink.shuffle.draws import permutation
from beam_jobs.sink.shuffle.runs import gather, read_bucket
from beam_jobs.sink.shuffle.units import ShuffleWork, UnitPiece, unit_pieces, unit_work
from beam_jobs.sink.temp_folder import stop_if_abandoned
from tfdata_reader.manifest import shard_name

__all__ = ["ShuffleShards", "WriteShuffledFn"]


class WriteShuffledFn(beam.DoFn):
    """A unit of the shuffle (`ShuffleWork`) -> its part of a shard (`WrittenShard`)."""

    def __init__(
        self,
        temp_dir: str,
        sharding: ShardingOptions,
        seed: int,
        tasks: dict[tuple[str, int], tuple[int, ...]],
        run_marker: str | None = None,
    ) -> None:
        """`tasks`: (split or "", planned shard) -> the write tasks of its input, whose
        tallies part 0 merges."""
        self._temp_dir = temp_dir
        self._sharding = sharding
        self._seed = seed
        self._tasks = tasks
        self._run_marker = run_marker  # gone once the run was interrupted
        self._records = counter("records_shuffled")

    def process(self, work: ShuffleWork) -> Iterator[WrittenShard]:
        with raised_for_launcher():
            yield self._write(work)

    def _write(self, work: ShuffleWork) -> WrittenShard:
        stop_if_abandoned(self._run_marker, self._temp_dir, [])
        unit, sharding = work.unit, self._sharding
        prefix = unit.split or sharding.shard_prefix
        name = shard_name(prefix, unit.shard, unit.num_shards, sharding.compression)
        path = FileSystems.join(self._temp_dir, f"{name}.part{unit.part}.{uuid.uuid4().hex}")
        raw = create_run_file(path)
        joinable = unit.num_parts > 1
        framed = int(work.stretches[:, 5].sum())
        writer = ShardFileWriter(
            raw,
            sharding.compression,
            sharding.gzip_level,
            joinable,
            seek_every=seek_stride(framed * unit.num_parts),
        )
        try:
            for bucket in unit.buckets:
                data, lengths = read_bucket(work.paths, work.bucket(bucket))
                order = permutation(self._seed, work.split_index, bucket, len(lengths))
                for taken, sizes in gather(data, lengths, order):
                    writer.write_framed(taken, sizes)
        finally:
            writer.close()
        if writer.records != work.records:
            raise DataError(
                f"rows in != rows out: {name} (part {unit.part}) holds {writer.records:,} "
                f"records of the {work.records:,} its runs list; nothing was published"
            )
        stop_if_abandoned(self._run_marker, self._temp_dir, [path])
        self._records.inc(writer.records)
        note = f"{progress.SHUFFLE_NOTES}/{name}.part{unit.part}"
        progress.write_note(self._temp_dir, note, writer.records, writer.bytes, 0)
        base = WrittenShard(
            index=unit.shard, temp_path="", name=name, records=0, bytes=0, crc32c="",
            split=unit.split, num_shards=unit.num_shards,
        )  # fmt: skip
        if unit.part == 0:  # what the planned shard's write tasks read and set aside
            base = merged_tallies(work.tallies, self._temp_dir, self._tasks[unit.key[:2]])
        return dataclasses.replace(
            base,
            temp_path=path,
            name=name,
            records=writer.records,
            bytes=writer.bytes,
            crc32c=writer.crc32c,
            part=unit.part,
            member=writer.member,
            seek=tuple(writer.seek),
            framed_bytes=writer.framed_bytes,
        )


def _pieces_in_worker(
    output: WrittenRuns,
    plan: ShufflePlan,
    tasks: dict[tuple[str, int], tuple[int, ...]],
    temp_dir: str,
) -> list[tuple[tuple[str, int, int], UnitPiece]]:
    with raised_for_launcher():
        return list(unit_pieces(output, plan, tasks, temp_dir))


def _work_in_worker(
    keyed: tuple[tuple[str, int, int], Iterable[UnitPiece]], plan: ShufflePlan, temp_dir: str
) -> ShuffleWork:
    with raised_for_launcher():
        return unit_work(keyed[0], keyed[1], plan, temp_dir)


class ShuffleShards(beam.PTransform[Any, Any]):
    """The write tasks' runs (`WrittenRuns`) -> one `WrittenShard` per shard,
    its records in a random order.

    Args:
      temp_dir: the run's temporary folder.
      plan: the buckets and the units that write them.
      tasks: (split or "", planned shard) -> the write tasks of its input (`tasks_by_shard`).
      sharding: the shards' names and compression.
      run_marker: the launcher's run marker (gone once the run is interrupted), or None.
    """

    def __init__(
        self,
        temp_dir: str,
        plan: ShufflePlan,
        tasks: dict[tuple[str, int], tuple[int, ...]],
        sharding: ShardingOptions,
        run_marker: str | None = None,
    ) -> None:
        super().__init__()
        self._temp_dir, self._plan, self._tasks, self._sharding = temp_dir, plan, tasks, sharding
        self._run_marker = run_marker

    def expand(self, written: beam.PCollection[Any]) -> beam.PCollection[Any]:
        plan, temp_dir = self._plan, self._temp_dir
        return (
            written
            # Each task's stretches and tallies to the units that read them (one GroupByKey:
            # no element holds every run's index; a unit a key spreads them, on Dask too).
            | "KeyByUnit"
            >> beam.FlatMap(_pieces_in_worker, plan=plan, tasks=self._tasks, temp_dir=temp_dir)
            | "GatherUnits" >> beam.GroupByKey()
            | "PlanUnits" >> beam.Map(_work_in_worker, plan=plan, temp_dir=temp_dir)
            # Each unit's buckets, permuted, into its part of a shard.
            | "WriteShuffled" >> beam.ParDo(self._writer())
            # A shard of several units: its parts in order (none when each unit is a shard).
            | "JoinParts" >> self._join()
        )

    def _writer(self) -> WriteShuffledFn:
        plan = self._plan
        return WriteShuffledFn(
            self._temp_dir, self._sharding, plan.seed, self._tasks, self._run_marker
        )

    def _join(self) -> beam.PTransform[Any, Any]:
        parts = self._plan.parts_by_shard()
        if all(len(p) == 1 for p in parts.values()):
            return beam.Map(lambda shard: shard)
        return JoinParts(self._temp_dir, parts)
