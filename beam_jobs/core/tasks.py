"""What the plan hands the writers and what the writers hand publishing.

Without splits each planned shard is one write task, unless it spans many files: then a few
tasks write it in parts. With splits each split's shards are planned on their own, and a write
task is a stretch of the input between all splits' cuts: it writes one part of one shard per
split (`ShardPart`). A shard of several parts is its tasks' parts, joined in task order.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

import numpy as np

from beam_jobs.core.inputs import Covered, Piece
from tfdata_reader.manifest import Counts

__all__ = [
    "MIN_BATCH_ROWS",
    "STRETCH_COLUMNS",
    "PlannedShard",
    "Run",
    "ShardPart",
    "WriteTask",
    "Written",
    "WrittenRuns",
    "WrittenShard",
    "sum_counts",
]

# A write task's record batches are joined until they hold this many rows before encoding
# (`sink.coalesce`): the size per-column work is paid at, which planning weighs too.
MIN_BATCH_ROWS = 4096


@dataclasses.dataclass(frozen=True)
class PlannedShard:
    """One output shard: its index, the input pieces its records come from (in order), and its
    split (None without splits)."""

    index: int
    num_shards: int
    pieces: tuple[Piece, ...]
    split: str | None = None

    @property
    def input_bytes(self) -> int:
        return sum(p.end - p.start for p in self.pieces)


@dataclasses.dataclass(frozen=True)
class ShardPart:
    """Where a write task's records (of one split) go: shard `index` of `num_shards` of that
    split, whole (without splits) or as one of its parts."""

    split: str | None  # None: a conversion without splits
    index: int
    num_shards: int


@dataclasses.dataclass(frozen=True)
class WriteTask:
    """What one writer does: read `pieces` once, write its records to `parts` (one per split;
    without splits one, the whole shard unless `in_parts`)."""

    index: int
    num_tasks: int
    pieces: tuple[Piece, ...]
    parts: tuple[ShardPart, ...]
    in_parts: bool = False  # without splits: its shard is written by several tasks

    @property
    def input_bytes(self) -> int:
        return sum(p.end - p.start for p in self.pieces)

    @property
    def whole_shard(self) -> bool:
        """The task writes its shard whole (no parts to join)."""
        return len(self.parts) == 1 and self.parts[0].split is None and not self.in_parts


# A bucket's part of one run (shuffled conversions), as a row of int64: the bucket, its file
# (an index into a list of paths), its records, where their uint32 framed lengths start, where
# the framed records start, and their bytes.
STRETCH_COLUMNS = ("bucket", "file", "records", "lengths_at", "data_at", "data_bytes")


@dataclasses.dataclass(frozen=True)
class Run:
    """One run of a write task's temporary file (shuffled conversions, `sink.shuffle.runs`):
    where it starts, and the buckets it holds records of (ascending; none of the others, so that
    a run costs what it holds whatever the buckets), with their records and framed bytes. At
    `offset` come every record's uint32 framed length, bucket by bucket, then the framed
    records, bucket by bucket."""

    path: str
    offset: int
    buckets: np.ndarray  # int64, ascending: the buckets it holds records of
    counts: np.ndarray  # int64, each one's records
    sizes: np.ndarray  # int64, each one's framed bytes

    @property
    def records(self) -> int:
        return int(self.counts.sum())

    def stretches(self, file: int) -> np.ndarray:
        """Where each bucket's records are, a row a bucket it holds (`STRETCH_COLUMNS`), its
        file given as `file` (an index into a list of paths)."""
        table = np.empty((len(self.buckets), len(STRETCH_COLUMNS)), np.int64)
        table[:, 0] = self.buckets
        table[:, 1] = file
        table[:, 2] = self.counts
        table[:, 3] = self.offset + 4 * (np.cumsum(self.counts) - self.counts)
        table[:, 4] = self.offset + 4 * self.records + np.cumsum(self.sizes) - self.sizes
        table[:, 5] = self.sizes
        return table


@dataclasses.dataclass(frozen=True)
class WrittenShard:
    """A shard (or with splits, a part of one) written under its temporary path, and what it
    holds. What a write task read (rows, input bytes, ignored keys, short rows, the bytes its
    pieces covered, label values) is told once, by its first output; each output tells its own
    missing values and bad records."""

    index: int
    temp_path: str
    name: str
    records: int
    bytes: int
    crc32c: str
    # What its writer read and set aside, under the manifest's names (`Counts`).
    counts: Counts = dataclasses.field(default_factory=Counts)
    dead_letter_temp_path: str | None = None  # JSON lines, one per bad row, when there are any
    split: str | None = None
    num_shards: int = 0
    covered: tuple[Covered, ...] = ()  # the input bytes its pieces' records took up
    # The distinct values of a text --label it holds (`builtins`: `bytes` is a field here).
    label_values: tuple[builtins.bytes, ...] = ()
    # Per-feature statistics of its records (`beam_jobs.stats.FeatureStats` by name).
    stats: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    part: int = 0  # with splits: the write task that wrote it, one part of its shard
    # A GZIP part of a shard: its member's bytes up to its sync flush and their CRC32C, the
    # CRC-32 and length of its framed records (`codec.gzip_member.OpenMember`), for joining
    # parts into one member.
    member: tuple[int, int, int, int] | None = None
    # Where readers may start mid-shard: (record, framed offset), ascending, record 0 implied.
    seek: tuple[tuple[int, int], ...] = ()
    framed_bytes: int = 0  # of its framed stream (its size once decompressed); 0: not known

    @property
    def bad_records(self) -> int:
        return self.counts.bad_records

    def files(self) -> tuple[str, ...]:
        """The temporary files it holds: its own and its dead letter's."""
        return tuple(p for p in (self.temp_path, self.dead_letter_temp_path) if p)


@dataclasses.dataclass(frozen=True)
class WrittenRuns:
    """A write task's records of one split in a shuffled conversion: runs of buckets in its
    temporary file (`sink.shuffle`), not a shard yet, and what the task read and set aside,
    which goes with part 0 of its planned shard (`tallies`)."""

    task: int
    split: str | None
    shard: int  # the planned shard whose input the task read
    num_shards: int
    name: str  # that shard's name
    path: str  # the runs' file
    records: int
    bytes: int  # framed bytes the runs hold
    crc32c: str  # of the runs' file
    runs: tuple[Run, ...]
    counts: Counts = dataclasses.field(default_factory=Counts)
    dead_letter_temp_path: str | None = None
    covered: tuple[Covered, ...] = ()
    label_values: tuple[builtins.bytes, ...] = ()
    stats: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def files(self) -> tuple[str, ...]:
        """The temporary files it holds: its runs' and its dead letter's."""
        return tuple(p for p in (self.path, self.dead_letter_temp_path) if p)

    def tallies(self) -> WrittenShard:
        """What the task read and set aside, as a part of its planned shard that holds no
        file (merged with the shard's other tasks' by `sink.join_parts.merged_tallies`)."""
        return WrittenShard(
            index=self.shard,
            temp_path="",
            name=self.name,
            records=self.records,
            bytes=0,
            crc32c="",
            counts=self.counts,
            dead_letter_temp_path=self.dead_letter_temp_path,
            split=self.split,
            num_shards=self.num_shards,
            covered=self.covered,
            label_values=self.label_values,
            stats=self.stats,
            part=self.task,
        )


# What a write task hands on: shards or parts of them, or in a shuffled conversion its runs.
Written: TypeAlias = "WrittenShard | WrittenRuns"


def sum_counts(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Counts by name added up, names sorted."""
    total: dict[str, int] = {}
    for part in counts:
        for name, count in part.items():
            total[name] = total.get(name, 0) + count
    return dict(sorted(total.items()))
