"""What a write task hands on: each of its outputs (a shard, a part of one, or in a shuffled
conversion its runs) as a `WrittenShard` or `WrittenRuns` with its `Counts` under the manifest's
names, and the files it is in (`commits.KeptFile`s, for its record). What the task read (rows,
input bytes, ignored keys, short rows, what its pieces covered, label values) is told once, by
its first output; each output tells its own missing values and bad records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from beam_jobs.codec.shard_file import ShardFileWriter
from beam_jobs.core.bad_rows import BadRow
from beam_jobs.core.errors import DataError
from beam_jobs.core.tasks import (
    ShardPart,
    WriteTask,
    Written,
    WrittenRuns,
    WrittenShard,
    sum_counts,
)
from beam_jobs.formats.base import PieceReport
from beam_jobs.plan.shuffle import ShufflePlan
from beam_jobs.schema.precision import Float32Changes
from beam_jobs.sink import commits
from beam_jobs.sink.dead_letter import write_dead_letter
from beam_jobs.sink.shuffle.runs import RunSink
from beam_jobs.stats.batches import finish_all
from tfdata_reader.manifest import Counts

__all__ = ["Read", "RowTally", "TaskOutput", "counted", "handed_on"]


@dataclasses.dataclass
class TaskOutput:
    """One file a write task writes: a shard, a part of one split's shard, or runs."""

    target: ShardPart
    name: str
    temp_path: str
    writer: ShardFileWriter | RunSink
    stats: dict[str, Any]
    bad_rows: list[BadRow] = dataclasses.field(default_factory=list)
    changes: Float32Changes = dataclasses.field(default_factory=Float32Changes)


class RowTally:
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

    def oversized_row(self, output: TaskOutput, row: BadRow) -> None:
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


@dataclasses.dataclass(frozen=True)
class Read:
    """What a write task read besides its rows: the formats' reports, the text label's values,
    and the renames (`--rename`) its counts by column go through."""

    reports: Sequence[PieceReport]
    labels: set[bytes]
    renames: Mapping[str, str]
    rows: RowTally


def handed_on(
    output: TaskOutput,
    task: WriteTask,
    first: bool,
    read: Read,
    where: tuple[str, ShufflePlan | None],
    attempt: str,
) -> tuple[Written, list[commits.KeptFile]]:
    """One output as the task hands it on, and the files it is in (`where`: the work folder,
    and the shuffle's plan in a shuffled conversion). Its dead letter is written here, named
    by the task's `attempt`."""
    temp_dir, shuffle = where
    writer, target = output.writer, output.target
    # What its shard's join consumes (appends, or deletes after): a part of a shard, and its
    # dead letter, or in a shuffled conversion the dead letter, when units join.
    joined = shuffle.parts_per_shard(target.split) > 1 if shuffle else not task.whole_shard
    consumer = commits.join_key(target.split, target.index) if joined else ""
    if isinstance(writer, RunSink):  # read by the units, never consumed
        files = [commits.KeptFile(output.temp_path, writer.file_bytes, writer.crc32c)]
    else:
        member = writer.member
        files = [commits.part_file(output.temp_path, writer.bytes, writer.crc32c, consumer, member)]
    dead_letter = None
    if output.bad_rows:
        rows = [r.to_json() for r in output.bad_rows]
        stored = write_dead_letter(temp_dir, output.name, rows, attempt)
        dead_letter = stored.path
        files.append(commits.KeptFile(*stored, consumer))
    counts = _counts(output, task, first, read)
    covered = tuple(r.covered for r in read.reports if r.covered) if first else ()
    label_values = tuple(sorted(read.labels)) if first else ()
    if isinstance(writer, RunSink):
        runs = WrittenRuns(
            task=task.index,
            split=target.split,
            shard=target.index,
            num_shards=target.num_shards,
            name=output.name,
            path=output.temp_path,
            records=writer.records,
            bytes=writer.file_bytes,
            crc32c=writer.crc32c,
            runs=writer.runs,
            counts=counts,
            dead_letter_temp_path=dead_letter,
            covered=covered,
            label_values=label_values,
            stats=finish_all(output.stats),
        )
        return runs, files
    shard = WrittenShard(
        index=target.index,
        temp_path=output.temp_path,
        name=output.name,
        records=writer.records,
        bytes=writer.bytes,
        crc32c=writer.crc32c,
        counts=counts,
        dead_letter_temp_path=dead_letter,
        split=target.split,
        num_shards=target.num_shards,
        covered=covered,
        label_values=label_values,
        stats=finish_all(output.stats),
        part=task.index,
        member=writer.member,
    )
    return shard, files


def _counts(output: TaskOutput, task: WriteTask, first: bool, read: Read) -> Counts:
    """An output's counts; what the task read, with its first output."""
    reports = read.reports if first else ()
    counts = Counts(
        bad_records=len(output.bad_rows),
        missing_values={name: feature.missing for name, feature in output.stats.items()},
        float32_rounded_integers=_changed(
            output.changes.rounded, (r.rounded_integers for r in reports), read.renames
        ),
        float32_stored_as_zero=_changed(
            output.changes.zeroed, (r.zeroed_numbers for r in reports), read.renames
        ),
    )
    if not first:
        return counts
    return dataclasses.replace(
        counts,
        records_read=read.rows.rows_read,
        input_bytes_read=task.input_bytes,
        ignored_fields=sum_counts(r.ignored_fields for r in reports),
        null_markers=_renamed((r.null_markers for r in reports), read.renames),
        markers_seen=Counts.total(
            Counts(markers_seen={read.renames.get(k, k): v for k, v in r.markers_seen.items()})
            for r in reports
        ).markers_seen,
        short_rows=sum_counts(r.short_rows for r in reports),
        notes_lines=sum_counts(r.notes_lines for r in reports),
    )


def _renamed(counts: Iterable[Mapping[str, int]], renames: Mapping[str, str]) -> dict[str, int]:
    """Counts by input column, added up by output feature (`--rename`)."""
    return sum_counts({renames.get(k, k): n for k, n in c.items()} for c in counts)


def _changed(
    here: Mapping[str, int], by_formats: Iterable[Mapping[str, int]], renames: Mapping[str, str]
) -> dict[str, int]:
    """Values float32 changed: counted by the writer for columns read as doubles (CSV), and by
    the formats that conform their values themselves (under their input names)."""
    found = sum_counts([here, _renamed(by_formats, renames)])
    return {name: count for name, count in found.items() if count}


def counted(outputs: list[Written], reused: bool) -> list[Written]:
    """The outputs with the task counted once, on the first (`Counts.tasks`), as reused from a
    failed run's work or run now."""
    first = outputs[0]
    counts = dataclasses.replace(first.counts, tasks=1, tasks_reused=int(reused))
    return [dataclasses.replace(first, counts=counts), *outputs[1:]]
