"""Shuffled conversions, second pass: each shard written from its buckets, each bucket's records
in a random order.

The write tasks' outputs (`WrittenShard`s holding runs, `sink.runs`) go to the units that need
them (`unit_pieces`, one GroupByKey a unit: no element holds every run's index): each unit of
`plan.shuffle` gets every run's stretches of its buckets; part 0 of each shard also gets what
its planned shard's write tasks read and set aside, merged (`unit_work`) as `JoinParts` merges
the parts of a shard written in input order (the same dead letters, counts and statistics).
`WriteShuffledFn` then reads a unit's buckets one at a time (at most a
bucket in memory), permutes each bucket's records with a Philox stream keyed by the seed, the
split and the bucket, and writes them through `ShardFileWriter` (already framed: no Example is
decoded or encoded again). Every run's stretches are read in task order, so the bytes are a
function of the inputs and options alone, whatever the runner's order.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Iterator
from typing import Any, TypeAlias

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

__all__ = [
    "RunStretches",
    "ShuffleShards",
    "ShuffleWork",
    "WriteShuffledFn",
    "permutation",
    "unit_pieces",
    "unit_work",
]

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


@dataclasses.dataclass(frozen=True)
class RunStretches:
    """One write task's output's stretches of one unit's buckets (rows of `STRETCH_COLUMNS`, in
    run order, files indexing `paths`), and where they come in a bucket's reading order."""

    order: tuple[int, int]  # (write task, planned shard)
    paths: tuple[str, ...]
    stretches: np.ndarray

    def to_wire(self, temp_dir: str) -> RunsOnWire:
        """As a plain tuple, its files named in `temp_dir`: Beam encodes it in some 100 bytes
        and 48 a stretch (a dataclass and its array would be pickled: about 380)."""
        names = tuple(path.removeprefix(temp_dir.rstrip("/") + "/") for path in self.paths)
        return (*self.order, names, self.stretches.tobytes())

    @classmethod
    def from_wire(cls, wire: RunsOnWire, temp_dir: str) -> RunStretches:
        task, shard, names, rows = wire
        paths = tuple(FileSystems.join(temp_dir, name) for name in names)
        table = np.frombuffer(rows, np.int64).reshape(-1, len(STRETCH_COLUMNS))
        return cls((task, shard), paths, table)


# (write task, planned shard, its runs' file names in the temporary folder, stretches' bytes)
RunsOnWire: TypeAlias = "tuple[int, int, tuple[str, ...], bytes]"
# What a unit gathers from the write tasks: their stretches of its buckets; with part 0, its
# planned shard's tasks' outputs (tallies: what they read and set aside); None opens a part.
UnitPiece: TypeAlias = "RunsOnWire | WrittenShard | None"


def unit_pieces(
    output: WrittenShard,
    plan: ShufflePlan,
    tasks: dict[tuple[str, int], tuple[int, ...]],
    temp_dir: str,
) -> Iterator[tuple[tuple[str, int, int], UnitPiece]]:
    """A write task's output, keyed by the units that need it (`ShuffleUnit.key`): its stretches
    to the units of their buckets, its tallies to part 0 of its planned shard. The planned
    shard's first task also opens the shard's other parts, so that a part gets written when
    no run holds a record of its buckets. No element holds the whole index of the runs.

    Raises:
      DataError: when the output's runs do not hold the records it wrote.
    """
    split = output.split or ""
    held = sum(run.records for run in output.runs)
    if held != output.records:
        raise DataError(
            f"rows in != rows out: write task {output.part} wrote {output.records:,} records "
            f"of split {split or '(all)'} but its runs hold {held:,}; nothing was published"
        )
    yield (split, output.index, 0), dataclasses.replace(output, runs=())
    parts = plan.parts_per_shard(output.split)
    if output.part == tasks[(split, output.index)][0]:
        for part in range(1, parts):
            yield (split, output.index, part), None
    if not output.runs:
        return
    paths = tuple(dict.fromkeys(run.path for run in output.runs))
    file_of = {path: i for i, path in enumerate(paths)}
    table = np.concatenate([run.stretches(file_of[run.path]) for run in output.runs])
    shards, parts_of = plan.units_of(output.split, table[:, 0])
    unit = shards * parts + parts_of
    table = table[np.argsort(unit, kind="stable")]  # each unit's rows, still in run order
    unit = np.sort(unit, kind="stable")
    starts = np.flatnonzero(np.diff(unit, prepend=-1))
    for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(unit)], strict=True):
        shard, part = divmod(int(unit[lo]), parts)
        piece = RunStretches((output.part, output.index), paths, table[lo:hi])
        yield (split, shard, part), piece.to_wire(temp_dir)


def unit_work(
    key: tuple[str, int, int],
    pieces: Iterable[UnitPiece],
    plan: ShufflePlan,
    tasks: dict[tuple[str, int], tuple[int, ...]],
    temp_dir: str,
) -> ShuffleWork:
    """One unit's work from what the write tasks sent it (`unit_pieces`): its buckets'
    stretches, each bucket's in task and run order; with part 0, its planned shard's tallies.

    Raises:
      DataError: when the outputs are not those of every planned write task (a runner that
        lost or repeated elements).
    """
    unit = plan.unit(key)
    runs: list[RunStretches] = []
    outputs: list[WrittenShard] = []
    for piece in pieces:
        if isinstance(piece, tuple):
            runs.append(RunStretches.from_wire(piece, temp_dir))
        elif piece is not None:
            outputs.append(piece)
    runs.sort(key=lambda piece: piece.order)
    orders = [piece.order for piece in runs]
    if len(set(orders)) != len(orders):
        raise DataError(
            f"rows in != rows out: the runs of one write task arrived twice at shard "
            f"{unit.shard} of split {key[0] or '(all)'}; nothing was published"
        )
    paths = tuple(dict.fromkeys(path for each in runs for path in each.paths))
    file_of = {path: i for i, path in enumerate(paths)}
    tables = [np.zeros((0, len(STRETCH_COLUMNS)), np.int64)]
    for each in runs:
        table = each.stretches.copy()
        table[:, 1] = np.array([file_of[p] for p in each.paths], np.int64)[table[:, 1]]
        tables.append(table)
    table = np.concatenate(tables)
    table = table[np.argsort(table[:, 0], kind="stable")]  # bucket by bucket
    carrier = None
    if unit.part == 0:
        carrier = merged_tallies(outputs, temp_dir, tasks[(key[0], unit.shard)])
    return ShuffleWork(unit, paths, table, plan.split_index(unit.split), carrier)


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


def _pieces_in_worker(
    output: WrittenShard,
    plan: ShufflePlan,
    tasks: dict[tuple[str, int], tuple[int, ...]],
    temp_dir: str,
) -> list[tuple[tuple[str, int, int], UnitPiece]]:
    with raised_for_launcher():
        return list(unit_pieces(output, plan, tasks, temp_dir))


def _work_in_worker(
    keyed: tuple[tuple[str, int, int], Iterable[UnitPiece]],
    plan: ShufflePlan,
    tasks: dict[tuple[str, int], tuple[int, ...]],
    temp_dir: str,
) -> ShuffleWork:
    with raised_for_launcher():
        return unit_work(keyed[0], keyed[1], plan, tasks, temp_dir)


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
            # Each task's stretches and tallies to the units that read them (one GroupByKey:
            # no element holds every run's index; a unit a key spreads them, on Dask too).
            | "KeyByUnit"
            >> beam.FlatMap(_pieces_in_worker, plan=plan, tasks=self._tasks, temp_dir=temp_dir)
            | "GatherUnits" >> beam.GroupByKey()
            | "PlanUnits"
            >> beam.Map(_work_in_worker, plan=plan, tasks=self._tasks, temp_dir=temp_dir)
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
