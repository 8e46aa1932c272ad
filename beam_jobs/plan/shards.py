"""The shard plan: which input bytes become which output shard, decided before any data is read.

Pure arithmetic on file sizes and a sampled output/input byte ratio. The inputs, in a fixed
order, are seen as one byte stream; it is cut into `num_shards` equal contiguous ranges, and each
range becomes one shard. A range may span several files or part of one; each part is a `Piece`,
whose ends the writer later moves to the next record start. Because every shard covers the same
number of input bytes, shards come out balanced without buffering or grouping any data.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
from collections.abc import Sequence

__all__ = [
    "InputFile",
    "Piece",
    "ShardSpec",
    "choose_num_shards",
    "cut_points",
    "plan_shards",
]


@dataclasses.dataclass(frozen=True)
class InputFile:
    """An input file and its size in bytes.

    `cuts` says where a shard boundary may fall inside the file: None anywhere (the writer moves
    it to the next record start), otherwise only at these offsets (Parquet row groups), and
    nowhere inside for `()` (a compressed file or an image, read whole by one writer).
    `modified` is when the file system says it last changed (seconds since the epoch): with the
    size, what tells an edited input from the one converted before.
    """

    path: str
    size: int
    cuts: tuple[int, ...] | None = None
    modified: float | None = None


@dataclasses.dataclass(frozen=True)
class Piece:
    """Bytes [start, end) of one input file; the writer owns the records that start inside."""

    path: str
    start: int
    end: int
    file_size: int


@dataclasses.dataclass(frozen=True)
class ShardSpec:
    """One output shard: its index and the input pieces it is made of, in order."""

    index: int
    num_shards: int
    pieces: tuple[Piece, ...]
    split: str | None = None  # with --splits, the split whose records this shard keeps

    @property
    def input_bytes(self) -> int:
        return sum(p.end - p.start for p in self.pieces)


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
) -> list[ShardSpec]:
    """Cuts the concatenated input bytes into `num_shards` equal contiguous ranges.

    A cut inside a file that may only be cut at some offsets moves to the nearest of them (or to
    the file's start or end); shards left empty by that are dropped, so fewer may come back.

    Args:
      files: the inputs in the order their records should appear.
      num_shards: at least 1.
      split: the split these shards write (with --splits), or None.

    Returns:
      `ShardSpec`s in index order. An empty file is a piece (0, 0) of the shard at its offset.
    """
    if num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    total = sum(f.size for f in files)
    starts = list(itertools.accumulate((f.size for f in files), initial=0))[:-1]
    bounds = [total * i // num_shards for i in range(num_shards + 1)]
    if files:
        bounds = [bounds[0], *(_snap(b, files, starts) for b in bounds[1:-1]), bounds[-1]]
        bounds = sorted(set(bounds)) if total else bounds
    count = len(bounds) - 1
    shards: list[ShardSpec] = []
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
                pieces.append(Piece(f.path, start, end, f.size))
            lo = file_base + end
            if end >= f.size:
                file_base += f.size
                file_index += 1
        shards.append(ShardSpec(index, count, tuple(pieces), split))
    return shards


def cut_points(shards: Sequence[ShardSpec]) -> dict[str, list[int]]:
    """For each file, the sorted interior offsets where a piece starts (0 and the end excluded).

    These are the offsets at which a writer needs to know how many quote bytes come before.
    """
    points: dict[str, set[int]] = {}
    for shard in shards:
        for piece in shard.pieces:
            cuts = points.setdefault(piece.path, set())
            cuts.update(o for o in (piece.start, piece.end) if 0 < o < piece.file_size)
    return {path: sorted(cuts) for path, cuts in points.items()}
