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
from typing import Any

import numpy as np

from beam_jobs.core.inputs import Covered, Piece

__all__ = [
    "MIN_BATCH_ROWS",
    "STRETCH_COLUMNS",
    "PlannedShard",
    "Run",
    "ShardPart",
    "WriteTask",
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
    """One run of a write task's temporary file (shuffled conversions, `sink.runs`): where it
    starts, and the buckets it holds records of (ascending; none of the others, so that a
    run costs what it holds whatever the buckets), with their records and framed bytes. At
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
    holds. What a write task read (rows, input bytes, the bytes its pieces covered, ignored
    keys, label values) is told once, by its first output."""

    index: int
    temp_path: str
    name: str
    records: int
    bytes: int
    crc32c: str
    input_bytes: int
    null_counts: dict[str, int]
    bad_records: int = 0
    dead_letter_temp_path: str | None = None  # JSON lines, one per bad row, when there are any
    split: str | None = None
    num_shards: int = 0
    covered: tuple[Covered, ...] = ()  # the input bytes its pieces' records took up
    ignored_fields: dict[str, int] = dataclasses.field(default_factory=dict)  # keys not in spec
    rows_read: int = 0  # rows its writer read (WriteShards: elements received, on shard 0)
    # The distinct values of a text --label it holds (`builtins`: `bytes` is a field here).
    label_values: tuple[builtins.bytes, ...] = ()
    # Per-feature statistics of its records (`beam_jobs.stats.FeatureStats` by name).
    stats: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    part: int = 0  # with splits: the write task that wrote it, one part of its shard
    # Whole numbers float32 changed (16777217 -> 16777216), by float32 feature.
    rounded_integers: dict[str, int] = dataclasses.field(default_factory=dict)
    # Numbers below float32's range it stored as 0 (1e-50), by float32 feature.
    zeroed_numbers: dict[str, int] = dataclasses.field(default_factory=dict)
    # Cells read as missing for holding a missing-value marker (NA, NULL), by feature.
    null_markers: dict[str, int] = dataclasses.field(default_factory=dict)
    # CSV rows with fewer fields than the header (missing trailing fields), by input file.
    short_rows: dict[str, int] = dataclasses.field(default_factory=dict)
    # A GZIP part of a shard: its member's bytes up to its sync flush and their CRC32C, the
    # CRC-32 and length of its framed records (`codec.gzip_member.OpenMember`), for joining
    # parts into one member.
    member: tuple[int, int, int, int] | None = None
    # Where readers may start mid-shard: (record, framed offset), ascending, record 0 implied.
    seek: tuple[tuple[int, int], ...] = ()
    framed_bytes: int = 0  # of its framed stream (its size once decompressed); 0: not known
    # Shuffled conversions: a write task's runs (its records by bucket), not a shard yet.
    runs: tuple[Run, ...] = ()


def sum_counts(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Counts by name added up, names sorted."""
    total: dict[str, int] = {}
    for part in counts:
        for name, count in part.items():
            total[name] = total.get(name, 0) + count
    return dict(sorted(total.items()))
