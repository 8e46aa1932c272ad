"""Between the shuffle's passes: each write task's runs sent to the units that read them.

The write tasks' outputs (`WrittenRuns`) go to the units that need them (`unit_pieces`, one
GroupByKey a unit: no element holds every run's index): each unit of `plan.shuffle` gets every
run's stretches of its buckets; part 0 of each shard also gets what its planned shard's write
tasks read and set aside (their `tallies`), which its writer merges as `JoinParts` merges the
parts of a shard written in input order (the same dead letters, counts and statistics).
`unit_work` puts a unit's stretches in task and run order, so the bytes of the second pass are a
function of the inputs and options alone, whatever the runner's order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TypeAlias

import numpy as np
from apache_beam.io.filesystems import FileSystems

from beam_jobs.core.errors import DataError
from beam_jobs.core.tasks import STRETCH_COLUMNS, WrittenRuns, WrittenShard
from beam_jobs.plan.shuffle import ShufflePlan, ShuffleUnit

__all__ = ["RunStretches", "ShuffleWork", "openers", "unit_pieces", "unit_work"]


@dataclasses.dataclass(frozen=True)
class ShuffleWork:
    """One unit's work: its buckets' stretches of every run (rows of `STRETCH_COLUMNS`, a
    bucket's in task and run order, files indexing `paths`); with part 0, what the write
    tasks of its planned shard read and set aside (`tallies`, in task order)."""

    unit: ShuffleUnit
    paths: tuple[str, ...]
    stretches: np.ndarray
    split_index: int
    tallies: tuple[WrittenShard, ...] = ()

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
# planned shard's tasks' tallies; None opens a part.
UnitPiece: TypeAlias = "RunsOnWire | WrittenShard | None"


def openers(
    tasks: Mapping[tuple[str, int], Sequence[int]], plan: ShufflePlan
) -> dict[tuple[str, int], tuple[int, int]]:
    """(split or "", planned shard) -> (its first write task, the shard past the last one that
    task opens): every shard up to the next with write tasks of its own (shards of small
    ones share a task's input in a shuffled conversion: `plan.shards.first_pass_tasks`)."""
    found = {}
    for split, shards, _ in plan.splits:
        key = split or ""
        owned = sorted(shard for s, shard in tasks if s == key)
        for shard, end in zip(owned, [*owned[1:], shards], strict=True):
            found[(key, shard)] = (tasks[(key, shard)][0], end)
    return found


def unit_pieces(
    output: WrittenRuns,
    plan: ShufflePlan,
    opens: Mapping[tuple[str, int], tuple[int, int]],
    temp_dir: str,
) -> Iterator[tuple[tuple[str, int, int], UnitPiece]]:
    """A write task's output, keyed by the units that need it (`ShuffleUnit.key`): its stretches
    to the units of their buckets, its tallies to part 0 of its planned shard. The planned
    shard's first task also opens the shard's other parts and every part of the shards up
    to the next with tasks of its own (`openers`), so that a part gets written when no run
    holds a record of its buckets. No element holds the whole index of the runs.

    Raises:
      DataError: when the output's runs do not hold the records it wrote.
    """
    split = output.split or ""
    held = sum(run.records for run in output.runs)
    if held != output.records:
        raise DataError(
            f"rows in != rows out: write task {output.task} wrote {output.records:,} records "
            f"of split {split or '(all)'} but its runs hold {held:,}; nothing was published"
        )
    yield (split, output.shard, 0), output.tallies()
    parts = plan.parts_per_shard(output.split)
    first, end = opens[(split, output.shard)]
    if output.task == first:
        for shard in range(output.shard, end):
            for part in range(1 if shard == output.shard else 0, parts):
                yield (split, shard, part), None
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
        piece = RunStretches((output.task, output.shard), paths, table[lo:hi])
        yield (split, shard, part), piece.to_wire(temp_dir)


def unit_work(
    key: tuple[str, int, int],
    pieces: Iterable[UnitPiece],
    plan: ShufflePlan,
    temp_dir: str,
) -> ShuffleWork:
    """One unit's work from what the write tasks sent it (`unit_pieces`): its buckets'
    stretches, each bucket's in task and run order; with part 0, its planned shard's tallies.

    Raises:
      DataError: when the runs of one write task arrived twice (a runner that repeated
        elements); the unit's writer checks that every planned task's tallies arrived.
    """
    unit = plan.unit(key)
    runs: list[RunStretches] = []
    tallies: list[WrittenShard] = []
    for piece in pieces:
        if isinstance(piece, tuple):
            runs.append(RunStretches.from_wire(piece, temp_dir))
        elif piece is not None:
            tallies.append(piece)
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
    ordered = tuple(sorted(tallies, key=lambda t: t.part))
    return ShuffleWork(unit, paths, table, plan.split_index(unit.split), ordered)
