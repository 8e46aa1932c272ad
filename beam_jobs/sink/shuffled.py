"""Shuffled conversions, second pass: each shard written from its buckets, each bucket's records
in a random order.

The write tasks' outputs (`WrittenShard`s holding runs, `sink.runs`) come together in one place
(`shuffle_work`): what each task read and set aside is merged per planned shard, as `JoinParts`
merges the parts of a shard written in input order (the same dead letters, counts and
statistics), and becomes part 0 of that shard; each unit of `plan.shuffle` gets the stretches
of every run it reads. `WriteShuffledFn` then reads a unit's buckets one at a time (at most a
bucket in memory), permutes each bucket's records with a Philox stream keyed by the seed, the
split and the bucket, and writes them through `ShardFileWriter` (already framed: no Example is
decoded or encoded again). Every run's stretches are read in task order, so the bytes are a
function of the inputs and options alone, whatever the runner's order.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems

from beam_jobs.codec.shard_file import ShardFileWriter, seek_stride
from beam_jobs.core.errors import DataError, raised_for_launcher
from beam_jobs.core.sharding import ShardingOptions
from beam_jobs.core.tasks import STRETCH_COLUMNS, WrittenShard
from beam_jobs.plan.shuffle import ShufflePlan, ShuffleUnit
from beam_jobs.sink import progress
from beam_jobs.sink.counters import counter
from beam_jobs.sink.join_parts import JoinParts, merged_tallies
from beam_jobs.sink.run_files import create_run_file
from beam_jobs.sink.runs import gather, read_bucket
from beam_jobs.sink.shard_writer import stop_if_abandoned
from tfdata_reader.manifest import shard_name

__all__ = ["ShuffleShards", "ShuffleWork", "WriteShuffledFn", "permutation", "shuffle_work"]

_ORDER_TAG = 0x6F7264  # "ord": a bucket's permutation, apart from its records' bucket draws


def permutation(seed: int, split: int, bucket: int, count: int) -> np.ndarray:
    """The order a bucket's `count` records are written in (a Philox stream keyed by the seed,
    the split's position and the bucket, sorted)."""
    key = np.array([seed, (_ORDER_TAG << 40) | (split << 32) | bucket], dtype=np.uint64)
    return np.argsort(np.random.Philox(key=key).random_raw(count), kind="stable")


@dataclasses.dataclass(frozen=True)
class ShuffleWork:
    """One unit's work: its buckets' stretches of every run (rows of `STRETCH_COLUMNS`, a
    bucket's in task and run order, files indexing `paths`); with part 0, what the write
    tasks of its planned shard read and set aside (`carrier`)."""

    unit: ShuffleUnit
    paths: tuple[str, ...]
    stretches: np.ndarray
    split_index: int
    carrier: WrittenShard | None = None

    @property
    def records(self) -> int:
        return int(self.stretches[:, 2].sum())

    def bucket(self, bucket: int) -> np.ndarray:
        """The stretches of one of its buckets."""
        return self.stretches[self.stretches[:, 0] == bucket]


def shuffle_work(
    written: Iterable[WrittenShard],
    plan: ShufflePlan,
    tasks: dict[tuple[str, int], tuple[int, ...]],
    temp_dir: str,
) -> list[ShuffleWork]:
    """Every unit's work, from every write task's outputs.

    Raises:
      DataError: when the outputs are not those of every planned write task, or their runs
        do not hold the records they wrote (a runner that lost or repeated elements).
    """
    by_shard: dict[tuple[str, int], list[WrittenShard]] = {}
    for part in written:
        by_shard.setdefault((part.split or "", part.index), []).append(part)
    carriers = {
        key: merged_tallies(by_shard.get(key, []), temp_dir, expected)
        for key, expected in tasks.items()
    }
    work = []
    for split, _, _ in plan.splits:
        outputs = sorted(
            (p for key, parts in by_shard.items() if key[0] == (split or "") for p in parts),
            key=lambda p: (p.part, p.index),  # a task, then its planned shard: one order
        )
        runs = [run for output in outputs for run in output.runs]
        held = sum(run.records for run in runs)
        paths = tuple(dict.fromkeys(run.path for run in runs))
        file_of = {path: i for i, path in enumerate(paths)}
        # Every bucket's stretches, sorted by bucket, each bucket's in task and run order.
        table = np.concatenate(
            [run.stretches(file_of[run.path]) for run in runs]
            or [np.zeros((0, len(STRETCH_COLUMNS)), np.int64)]
        )
        table = table[np.argsort(table[:, 0], kind="stable")]
        if held != sum(o.records for o in outputs):
            raise DataError(
                f"rows in != rows out: the write tasks of split {split or '(all)'} wrote "
                f"{sum(o.records for o in outputs):,} records but their runs hold {held:,}; "
                "nothing was published"
            )
        for unit in plan.units():
            if unit.split != split:
                continue
            lo, hi = np.searchsorted(table[:, 0], [unit.buckets[0], unit.buckets[-1] + 1])
            mine = table[lo:hi].copy()
            used = np.unique(mine[:, 1])  # its stretches' files, numbered among themselves
            mine[:, 1] = np.searchsorted(used, mine[:, 1])
            carrier = carriers[(split or "", unit.shard)] if unit.part == 0 else None
            unit_paths = tuple(paths[i] for i in used.tolist())
            work.append(ShuffleWork(unit, unit_paths, mine, plan.split_index(split), carrier))
    return work


class WriteShuffledFn(beam.DoFn):
    """A unit of the shuffle (`ShuffleWork`) -> its part of a shard (`WrittenShard`)."""

    def __init__(
        self, temp_dir: str, sharding: ShardingOptions, seed: int, run_marker: str | None = None
    ) -> None:
        self._temp_dir = temp_dir
        self._sharding = sharding
        self._seed = seed
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
            sharding.compression_level,
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
        base = work.carrier or WrittenShard(
            index=unit.shard, temp_path="", name=name, records=0, bytes=0, crc32c="",
            input_bytes=0, null_counts={}, split=unit.split, num_shards=unit.num_shards,
        )  # fmt: skip
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
            runs=(),
        )


def _work_in_worker(
    keyed: tuple[int, Iterable[WrittenShard]],
    plan: ShufflePlan,
    tasks: dict[tuple[str, int], tuple[int, ...]],
    temp_dir: str,
) -> list[ShuffleWork]:
    with raised_for_launcher():
        return shuffle_work(keyed[1], plan, tasks, temp_dir)


class ShuffleShards(beam.PTransform[Any, Any]):
    """The write tasks' runs (`WrittenShard`s with `runs`) -> one `WrittenShard` per shard,
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
            # Every task's runs in one place, where each unit learns what to read.
            | "KeyAsOne" >> beam.Map(lambda part: (0, part))
            | "GatherRuns" >> beam.GroupByKey()
            | "PlanUnits"
            >> beam.FlatMap(_work_in_worker, plan=plan, tasks=self._tasks, temp_dir=temp_dir)
            # One unit a key: spread over the workers (Dask included, where Reshuffle is not).
            | "KeyByUnit" >> beam.Map(lambda work: (work.unit.key, work))
            | "SpreadUnits" >> beam.GroupByKey()
            | "Unkey" >> beam.FlatMap(lambda keyed: keyed[1])
            # Each unit's buckets, permuted, into its part of a shard.
            | "WriteShuffled"
            >> beam.ParDo(WriteShuffledFn(temp_dir, self._sharding, plan.seed, self._run_marker))
            # A shard of several units: its parts in order (none when each unit is a shard).
            | "JoinParts" >> self._join()
        )

    def _join(self) -> beam.PTransform[Any, Any]:
        parts = self._plan.parts_by_shard()
        if all(len(p) == 1 for p in parts.values()):
            return beam.Map(lambda shard: shard)
        return JoinParts(self._temp_dir, parts)
