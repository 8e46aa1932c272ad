"""The shard plan: which input bytes become which output shard, decided before any data is read.

Pure arithmetic on file sizes and a sampled output/input byte ratio. The inputs, in a fixed
order, are seen as one byte stream; it is cut into `num_shards` equal contiguous ranges, and each
range becomes one shard. A range may span several files or part of one; each part is a `Piece`,
whose ends the writer later moves to the next record start. Because every shard covers the same
number of input bytes, shards come out balanced without buffering or grouping any data.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence

from beam_jobs.core.inputs import InputFile, Piece
from beam_jobs.core.tasks import PlannedShard, ShardPart, WriteTask

__all__ = [
    "choose_num_shards",
    "cut_points",
    "first_pass_tasks",
    "plan_shards",
    "plan_split_tasks",
    "plan_tasks",
    "shard_tasks",
]

# Files one write task reads at most (without splits). Opening a file costs a writer about
# 1.5 ms whatever its size, so a shard of thousands of small files would keep one core busy
# for seconds while the others idle: its files are shared among several tasks (a few
# hundred milliseconds each), whose parts are joined in order into the same shard.
FILES_PER_TASK = 250
# A plan of fewer ranges (shards, or with splits the stretches between their cuts) than
# MIN_TASKS has each range longer than TASK_BYTES written in parts by several tasks of at most
# that much input (joined in order), so that a few large shards (GZIP's are few: their
# estimated output is small) still keep several workers busy. Beam's own file reads split at
# 64 MiB. Plans of more ranges keep a task per range: joining copies a shard once more
# (on a remote file system, all of it), which parallelism no longer pays for.
MIN_TASKS = 8
TASK_BYTES = 64 << 20


def choose_num_shards(
    estimated_output_bytes: float,
    target_shard_bytes: int,
    estimated_records: float,
    num_shards: int | None = None,
) -> int:
    """How many shards to write.

    Args:
      estimated_output_bytes: expected total size on disk of all shards.
      target_shard_bytes: wanted size of one shard on disk.
      estimated_records: expected number of records; no more shards than records are made.
      num_shards: a count forced by the user, returned as is.

    Returns:
      The smallest count whose average shard is at most the target, at least 1.
    """
    if num_shards is not None:
        return num_shards
    count = math.ceil(estimated_output_bytes / target_shard_bytes)
    return max(1, min(count, math.floor(estimated_records)))


def _snap(bound: int, files: Sequence[InputFile], starts: list[int]) -> int:
    """Moves a stream offset to the nearest place where the file it falls in may be cut."""
    i = bisect.bisect_right(starts, bound) - 1
    f = files[i]
    if f.cuts is None or bound == starts[i]:
        return bound
    allowed = [0, *f.cuts, f.size]
    offset = bound - starts[i]
    j = bisect.bisect_left(allowed, offset)
    if allowed[j] == offset:
        return bound
    lower, upper = allowed[j - 1], allowed[j]
    return starts[i] + (lower if offset - lower <= upper - offset else upper)


def plan_shards(
    files: Sequence[InputFile], num_shards: int, split: str | None = None
) -> list[PlannedShard]:
    """Cuts the concatenated input bytes into `num_shards` equal contiguous ranges.

    A cut inside a file that may only be cut at some offsets moves to the nearest of them (or to
    the file's start or end); shards left empty by that are dropped, so fewer may come back.

    Args:
      files: the inputs in the order their records should appear.
      num_shards: at least 1.
      split: the split these shards write (with --splits), or None.

    Returns:
      `PlannedShard`s in index order. An empty file is a piece (0, 0) of the shard at its
      offset.
    """
    return _shards(files, _bounds(files, num_shards), split)


def plan_tasks(
    files: Sequence[InputFile],
    num_shards: int,
    files_per_task: int | None = None,
    task_bytes: int | None = None,
) -> tuple[list[PlannedShard], list[WriteTask]]:
    """Without splits: the shards (`plan_shards`) and the write tasks that make them.

    A task reads at most `files_per_task` (default `FILES_PER_TASK`) files and, in a plan of
    fewer than MIN_TASKS shards, at most `task_bytes` (default `TASK_BYTES`) of the input, cut
    where its files may be cut; a shard of more is written in parts by consecutive tasks,
    joined in order (without GZIP, the same bytes).
    """
    bounds = _bounds(files, num_shards)
    shards = _shards(files, bounds)
    if not sum(f.size for f in files):
        return shards, shard_tasks(shards, files_per_task)
    cuts = _task_bounds(files, bounds, task_bytes or TASK_BYTES)
    ranges = [
        (bisect.bisect_right(bounds, lo) - 1, pieces)
        for lo, pieces in zip(cuts[:-1], _pieces(files, cuts), strict=True)
    ]
    return shards, _write_tasks(ranges, len(shards), files_per_task)


def shard_tasks(
    shards: Sequence[PlannedShard], files_per_task: int | None = None
) -> list[WriteTask]:
    """Without splits: the write tasks of the shards, in order. A shard of at most
    `files_per_task` pieces is one task writing it whole; a larger one is written in parts by
    tasks of `files_per_task` (default `FILES_PER_TASK`) consecutive pieces each (the last
    may have fewer)."""
    return _write_tasks([(s.index, s.pieces) for s in shards], len(shards), files_per_task)


def _write_tasks(
    ranges: Sequence[tuple[int, tuple[Piece, ...]]], num_shards: int, files_per_task: int | None
) -> list[WriteTask]:
    """Without splits: a task per `files_per_task` pieces of each (shard index, pieces) range,
    in order; a shard of several tasks is written in parts."""
    per_task = files_per_task or FILES_PER_TASK
    groups = [
        (shard, pieces[i : i + per_task])
        for shard, pieces in ranges
        for i in range(0, max(1, len(pieces)), per_task)
    ]
    tasks_of = collections.Counter(shard for shard, _ in groups)
    return [
        WriteTask(
            index, len(groups), pieces, (ShardPart(None, shard, num_shards),), tasks_of[shard] > 1
        )
        for index, (shard, pieces) in enumerate(groups)
    ]


def plan_split_tasks(
    files: Sequence[InputFile],
    shards_per_split: Sequence[tuple[str, int]],
    task_bytes: int | None = None,
) -> tuple[list[PlannedShard], list[WriteTask]]:
    """Shards of every split, and the write tasks that make them reading each byte once.

    Each split's shards are `plan_shards` of its count, the byte ranges they always had. The
    tasks are the ranges between all splits' cuts together: each lies inside one shard of
    every split, and writes its records of each split as a part of that shard (a shard is
    its tasks' parts, in order). So a shard keeps the records it would have held, in the same
    order, and each input byte is parsed once instead of once per split. With fewer than
    MIN_TASKS stretches, those longer than `task_bytes` (default `TASK_BYTES`) are cut further.

    Returns:
      (every split's shards, in split order; the tasks, in input order).
    """
    bounds = {split: _bounds(files, count) for split, count in shards_per_split}
    shards = [shard for split, b in bounds.items() for shard in _shards(files, b, split)]
    if not sum(f.size for f in files):
        # No input bytes: ranges cannot tell shards apart. A task per shard of the split with
        # the most, each of the others' shards made by the next task (their last by the rest).
        most = max(len(b) - 1 for b in bounds.values())
        cuts = [0] * (most + 1)
        where = {split: [min(i, len(b) - 2) for i in range(most)] for split, b in bounds.items()}
    else:
        every = sorted({c for b in bounds.values() for c in b})
        cuts = _task_bounds(files, every, task_bytes or TASK_BYTES)
        where = {
            split: [bisect.bisect_right(b, start) - 1 for start in cuts[:-1]]
            for split, b in bounds.items()
        }
    tasks = [
        WriteTask(
            index,
            len(cuts) - 1,
            pieces,
            tuple(ShardPart(s, where[s][index], len(b) - 1) for s, b in bounds.items()),
        )
        for index, pieces in enumerate(_pieces(files, cuts))
    ]
    return shards, tasks


def first_pass_tasks(
    files: Sequence[InputFile],
    counts: Mapping[str | None, int],
    tasks: Sequence[WriteTask],
    task_bytes: int | None = None,
) -> list[WriteTask]:
    """A shuffled conversion's write tasks, given each split's planned shards (None: the only
    key without splits) and the tasks of input order.

    Its records go to random buckets whatever task reads them, so a task need not read one
    shard's input: with more shards than max(MIN_TASKS, input / `task_bytes`) (small shards),
    the input is cut into that many ranges instead, planned as shards are (`plan_tasks`,
    `plan_split_tasks`), and each range's write tasks count as tasks of shard r x shards //
    ranges of their split (which carries what they read and set aside). With fewer shards
    the tasks are those of input order. (A task a shard cost a task, a run file and its reads
    by some 20 units for each shard: 2,000 shards of 20 records took 1.39x input order,
    now 0.33x.)"""
    total = sum(f.size for f in files)
    most = max(MIN_TASKS, math.ceil(total / (task_bytes or TASK_BYTES)))
    ranges = {split: min(count, most) for split, count in counts.items()}
    if not total or ranges == counts:
        return list(tasks)
    if None in counts:
        _, planned = plan_tasks(files, ranges[None], task_bytes=task_bytes)
    else:
        named = [(split or "", count) for split, count in ranges.items()]
        _, planned = plan_split_tasks(files, named, task_bytes)
    return [
        dataclasses.replace(
            task,
            parts=tuple(
                ShardPart(p.split, p.index * counts[p.split] // p.num_shards, counts[p.split])
                for p in task.parts
            ),
            in_parts=True,  # not one shard's input: named by its index (`progress`)
        )
        for task in planned
    ]


def _bounds(files: Sequence[InputFile], num_shards: int) -> list[int]:
    """The stream offsets where `num_shards` equal ranges start, and the end; cuts moved to
    where their files may be cut, ranges left empty by that dropped."""
    if num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    total = sum(f.size for f in files)
    starts = _starts(files)
    bounds = [total * i // num_shards for i in range(num_shards + 1)]
    if files:
        bounds = [bounds[0], *(_snap(b, files, starts) for b in bounds[1:-1]), bounds[-1]]
        bounds = sorted(set(bounds)) if total else bounds
    return bounds


def _starts(files: Sequence[InputFile]) -> list[int]:
    """Each file's offset in the input stream."""
    return list(itertools.accumulate((f.size for f in files), initial=0))[:-1]


def _shards(
    files: Sequence[InputFile], bounds: Sequence[int], split: str | None = None
) -> list[PlannedShard]:
    """The shards of the ranges between consecutive `bounds`."""
    ranges = _pieces(files, bounds)
    return [PlannedShard(i, len(ranges), pieces, split) for i, pieces in enumerate(ranges)]


def _task_bounds(files: Sequence[InputFile], bounds: Sequence[int], task_bytes: int) -> list[int]:
    """`bounds` with each range longer than `task_bytes` cut into equal ones where its files
    may be cut (a cut moved to a range's end is dropped), if they are fewer than MIN_TASKS."""
    if len(bounds) - 1 >= MIN_TASKS:
        return list(bounds)
    starts = _starts(files)
    cuts = set(bounds)
    for lo, hi in itertools.pairwise(bounds):
        count = math.ceil((hi - lo) / task_bytes)
        cuts.update(_snap(lo + (hi - lo) * i // count, files, starts) for i in range(1, count))
    return sorted(cuts)


def _pieces(files: Sequence[InputFile], bounds: Sequence[int]) -> list[tuple[Piece, ...]]:
    """The pieces of the files in each range between consecutive `bounds`."""
    total = sum(f.size for f in files)
    count = len(bounds) - 1
    ranges: list[tuple[Piece, ...]] = []
    file_index, file_base = 0, 0  # file_base: offset of files[file_index] in the stream
    for index in range(count):
        lo, hi = bounds[index], bounds[index + 1]
        pieces: list[Piece] = []
        # An empty file gets a piece of its own too, so its format can report it (an empty
        # image is a bad record); the last shard takes the empty files at the end.
        last = index == count - 1
        while file_index < len(files) and (
            lo < hi or (files[file_index].size == 0 and (lo < total or last))
        ):
            f = files[file_index]
            start, end = lo - file_base, min(hi - file_base, f.size)
            if end > start or f.size == 0:
                pieces.append(Piece(f.path, start, end, f.size, f.stamp))
            lo = file_base + end
            if end >= f.size:
                file_base += f.size
                file_index += 1
        ranges.append(tuple(pieces))
    return ranges


def cut_points(tasks: Sequence[WriteTask | PlannedShard]) -> dict[str, list[int]]:
    """For each file, the sorted interior offsets where a piece starts (0 and the end excluded).

    These are the offsets at which a writer needs to know how many quote bytes come before.
    """
    points: dict[str, set[int]] = {}
    for task in tasks:
        for piece in task.pieces:
            cuts = points.setdefault(piece.path, set())
            cuts.update(o for o in (piece.start, piece.end) if 0 < o < piece.file_size)
    return {path: sorted(cuts) for path, cuts in points.items()}
