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
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_jobs.codec.shard_file import ShardFileWriter, seek_stride
from beam_jobs.core.errors import DataError, raised_for_launcher
from beam_jobs.core.sharding import ShardingOptions
from beam_jobs.core.tasks import WrittenRuns, WrittenShard
from beam_jobs.plan.shuffle import ShufflePlan
from beam_jobs.sink import commits, progress
from beam_jobs.sink.counters import counter
from beam_jobs.sink.join_parts import JoinParts, merged_tallies
from beam_jobs.sink.run_files import create_run_file
from beam_jobs.sink.shuffle.draws import permutation
from beam_jobs.sink.shuffle.runs import gather, read_bucket
from beam_jobs.sink.shuffle.units import ShuffleWork, UnitPiece, openers, unit_pieces, unit_work
from beam_jobs.sink.temp_folder import stop_if_abandoned
from tfdata_reader.manifest import Counts, shard_name

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
        run_id: str = "",
        note_seconds: float | None = None,
    ) -> None:
        """`tasks`: (split or "", planned shard) -> the write tasks whose tallies part 0
        merges (a shard without: none; `plan.shards.first_pass_tasks`). `run_marker`: the
        work folder's marker, which must name `run_id` (None: a run without a launcher,
        which neither checks nor commits).
        `note_seconds`: how often a unit at work says so (`WriteSpec.note_seconds`)."""
        self._temp_dir = temp_dir
        self._sharding = sharding
        self._seed = seed
        self._tasks = tasks
        self._run_marker = run_marker
        self._run_id = run_id
        self._note_seconds = note_seconds
        self._records = counter("records_shuffled")

    def process(self, work: ShuffleWork) -> Iterator[WrittenShard]:
        with raised_for_launcher():
            yield self._write(work)

    def _write(self, work: ShuffleWork) -> WrittenShard:
        """The unit's part of its shard: a failed run's, checked and reused, or written now
        (and committed, for a rerun)."""
        unit, folder = work.unit, self._temp_dir
        self._check_alive([])
        name = self._name(work)
        note = progress.unit_note_name(name, unit.part)
        key = commits.unit_key(unit.split, unit.shard, unit.part)
        if self._run_marker is not None:
            kept = commits.reuse(folder, key, self._run_id)
            if kept is not None:
                progress.write_note(folder, note, kept.records, kept.bytes, 0, reused=True)
                return _counted(kept, work, reused=True)
        attempt = commits.new_attempt()
        shard, files, own = self._shuffle(work, name, attempt)
        self._check_alive(own)
        self._records.inc(shard.records)
        progress.write_note(folder, note, shard.records, shard.bytes, 0)
        shard = _counted(shard, work, reused=False)
        if self._run_marker is not None:
            commits.commit(folder, key, attempt, shard, files)
        return shard

    def _check_alive(self, written: list[str]) -> None:
        stop_if_abandoned(self._run_marker, self._temp_dir, [*written], self._run_id)

    def _name(self, work: ShuffleWork) -> str:
        unit, sharding = work.unit, self._sharding
        prefix = unit.split or sharding.shard_prefix
        return shard_name(prefix, unit.shard, unit.num_shards, sharding.compression)

    def _shuffle(
        self, work: ShuffleWork, name: str, attempt: str
    ) -> tuple[WrittenShard, list[commits.KeptFile], list[str]]:
        """Writes the unit's buckets, each's records permuted; part 0 merges what the planned
        shard's write tasks read and set aside. Returns the part, its files, and those of them
        this attempt made."""
        unit, sharding = work.unit, self._sharding
        path = FileSystems.join(
            self._temp_dir, commits.attempt_name(f"{name}.part{unit.part}", attempt)
        )
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
        running = progress.RunningNote(
            self._temp_dir, progress.unit_running_name(name, unit.part), self._note_seconds
        )
        try:
            for bucket in unit.buckets:
                running.update(writer.records, writer.bytes, 0)
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
        base = WrittenShard(
            index=unit.shard, temp_path="", name=name, records=0, bytes=0, crc32c="",
            split=unit.split, num_shards=unit.num_shards,
        )  # fmt: skip
        tasks = self._tasks.get(unit.key[:2], ())  # none: a shard between ranges' first
        if unit.part == 0 and (tasks or work.tallies):  # what its write tasks read, set aside
            base = merged_tallies(work.tallies, self._temp_dir, tasks, attempt)
        # A shard of several units joins them: the join consumes each unit's file and dead
        # letter (`JoinParts`).
        consumer = commits.join_key(unit.split, unit.shard) if joinable else ""
        files = [commits.part_file(path, writer.bytes, writer.crc32c, consumer, writer.member)]
        own = [path]
        dead_letter = base.dead_letter_temp_path
        if dead_letter:
            if commits.attempt_of(dead_letter) == attempt:  # merged here: read back once
                own.append(dead_letter)
            files.append(commits.KeptFile(dead_letter, *commits.file_crc32c(dead_letter), consumer))
        shard = dataclasses.replace(
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
        return shard, files, own


def _counted(shard: WrittenShard, work: ShuffleWork, reused: bool) -> WrittenShard:
    """A unit's part with its tasks counted: the write tasks whose tallies part 0 carries, as
    this run's first pass counted them, and the unit itself."""
    first = Counts.total(t.counts for t in work.tallies)
    counts = dataclasses.replace(
        shard.counts, tasks=first.tasks + 1, tasks_reused=first.tasks_reused + int(reused)
    )
    return dataclasses.replace(shard, counts=counts)


def _pieces_in_worker(
    output: WrittenRuns,
    plan: ShufflePlan,
    opens: dict[tuple[str, int], tuple[int, int]],
    temp_dir: str,
) -> list[tuple[tuple[str, int, int], UnitPiece]]:
    with raised_for_launcher():
        return list(unit_pieces(output, plan, opens, temp_dir))


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
      run_marker: the work folder's marker, which names the run that holds it (None: a run
        without a launcher, which neither checks it nor commits its tasks for a rerun).
      run_id: the run's id.
    """

    def __init__(
        self,
        temp_dir: str,
        plan: ShufflePlan,
        tasks: dict[tuple[str, int], tuple[int, ...]],
        sharding: ShardingOptions,
        run_marker: str | None = None,
        run_id: str = "",
        note_seconds: float | None = None,
    ) -> None:
        super().__init__()
        self._temp_dir, self._plan, self._tasks, self._sharding = temp_dir, plan, tasks, sharding
        self._run_marker, self._run_id = run_marker, run_id
        self._note_seconds = note_seconds

    def expand(self, written: beam.PCollection[Any]) -> beam.PCollection[Any]:
        plan, temp_dir = self._plan, self._temp_dir
        return (
            written
            # Each task's stretches and tallies to the units that read them (one GroupByKey:
            # no element holds every run's index; a unit a key spreads them, on Dask too).
            | "KeyByUnit"
            >> beam.FlatMap(
                _pieces_in_worker, plan=plan, opens=openers(self._tasks, plan), temp_dir=temp_dir
            )
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
            self._temp_dir,
            self._sharding,
            plan.seed,
            self._tasks,
            self._run_marker,
            self._run_id,
            self._note_seconds,
        )

    def _join(self) -> beam.PTransform[Any, Any]:
        parts = self._plan.parts_by_shard()
        if all(len(p) == 1 for p in parts.values()):
            return beam.Map(lambda shard: shard)
        return JoinParts(self._temp_dir, parts, self._run_id if self._run_marker else "")
