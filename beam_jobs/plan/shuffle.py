"""Shuffled conversions: how records cross from the write tasks to the shards (pure).

Each split's shards are cut into buckets of about `BUCKET_BYTES` of framed records: shard `s`
of a split with `k` buckets a shard is its buckets `s*k .. s*k+k-1`, one after the other. Write
tasks send each record to a random bucket of its split (`sink.shuffle.runs`); the second pass
writes each bucket's records in a random order (`sink.shuffle.shards`). A bucket is the most
records one writer of the second pass holds in memory, whatever the shard size; shards of many
buckets are written by one unit each when there are enough shards to keep the workers busy,
else a unit a bucket, joined in order like other parts.

The second pass reads each bucket's stretch of every run: (framed bytes / run bytes) x
(framed bytes / bucket bytes) reads, which grows with the square of the data at fixed sizes.
So both grow to sqrt(framed bytes x `MIN_STRETCH_BYTES`) when that is larger (runs past
`RUN_BYTES`**2 / `MIN_STRETCH_BYTES` framed bytes, about 4.3 GB; buckets past about 8.6 GB),
up to `MAX_HELD_BYTES`: a stretch stays at least `MIN_STRETCH_BYTES` and the reads grow in
step with the data.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np

from beam_jobs.plan.shards import MIN_TASKS

__all__ = [
    "BUCKET_BYTES",
    "MAX_HELD_BYTES",
    "MIN_STRETCH_BYTES",
    "RUN_BYTES",
    "ShufflePlan",
    "ShuffleUnit",
    "held_bytes",
    "plan_shuffle",
]

BUCKET_BYTES = 32 << 20  # framed bytes a bucket holds, about (estimated at planning)
RUN_BYTES = 16 << 20  # framed bytes a write task holds before storing them as a run
MIN_STRETCH_BYTES = 64 << 10  # a run's share of a bucket, at least (what one read fetches)
MAX_HELD_BYTES = 512 << 20  # the largest run or bucket a worker holds, however large the data


@dataclasses.dataclass(frozen=True)
class ShuffleUnit:
    """What one writer of the second pass writes: buckets of one shard, as its part `part` of
    `num_parts` (one part: the shard whole)."""

    split: str | None
    shard: int
    num_shards: int
    part: int
    num_parts: int
    buckets: tuple[int, ...]  # of its split, in the order they are written

    @property
    def key(self) -> tuple[str, int, int]:
        return self.split or "", self.shard, self.part


@dataclasses.dataclass(frozen=True)
class ShufflePlan:
    """The buckets of every split and the units that write them.

    Attributes:
      seed: `--shuffle_seed`, the draws of buckets and orders.
      splits: per split (None without splits), its shards and its buckets a shard.
    """

    seed: int
    splits: tuple[tuple[str | None, int, int], ...]  # (split, shards, buckets a shard)
    run_bytes: int = RUN_BYTES  # framed bytes a write task holds before storing a run

    def buckets(self, split: str | None) -> int:
        """A split's buckets (all of its shards')."""
        for name, shards, per_shard in self.splits:
            if name == split:
                return shards * per_shard
        raise KeyError(f"no split {split!r} in the shuffle plan")

    def split_index(self, split: str | None) -> int:
        return [name for name, _, _ in self.splits].index(split)

    @property
    def _whole(self) -> bool:
        """Whether each shard is one unit (enough shards to keep the workers busy)."""
        return sum(shards for _, shards, _ in self.splits) >= MIN_TASKS

    def units(self) -> list[ShuffleUnit]:
        """Every unit, split by split, shard by shard, part by part."""
        whole = self._whole
        units = []
        for split, shards, k in self.splits:
            for shard in range(shards):
                buckets = tuple(range(shard * k, (shard + 1) * k))
                if whole or k == 1:
                    units.append(ShuffleUnit(split, shard, shards, 0, 1, buckets))
                else:
                    units += [
                        ShuffleUnit(split, shard, shards, part, k, (bucket,))
                        for part, bucket in enumerate(buckets)
                    ]
        return units

    def unit(self, key: tuple[str, int, int]) -> ShuffleUnit:
        """The unit of a `ShuffleUnit.key` (as `units()` lists it)."""
        split_key, shard, part = key
        for split, shards, k in self.splits:
            if (split or "") == split_key:
                if self._whole or k == 1:
                    buckets = tuple(range(shard * k, (shard + 1) * k))
                    return ShuffleUnit(split, shard, shards, 0, 1, buckets)
                return ShuffleUnit(split, shard, shards, part, k, (shard * k + part,))
        raise KeyError(f"no split {split_key!r} in the shuffle plan")

    def parts_per_shard(self, split: str | None) -> int:
        """How many units write each shard of a split."""
        k = next(per_shard for name, _, per_shard in self.splits if name == split)
        return 1 if self._whole or k == 1 else k

    def units_of(self, split: str | None, buckets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The unit each of a split's `buckets` is written by, as (shard, part) arrays."""
        k = next(per_shard for name, _, per_shard in self.splits if name == split)
        parts = self.parts_per_shard(split)
        return buckets // k, (buckets % k if parts > 1 else np.zeros_like(buckets))

    def parts_by_shard(self) -> dict[tuple[str, int], tuple[int, ...]]:
        """(split or "", shard) -> the parts that make it, in order."""
        found: dict[tuple[str, int], list[int]] = {}
        for unit in self.units():
            found.setdefault((unit.split or "", unit.shard), []).append(unit.part)
        return {key: tuple(parts) for key, parts in found.items()}


def held_bytes(framed_bytes: float) -> tuple[int, int]:
    """(run bytes, bucket bytes) for a split of `framed_bytes`: the defaults, each grown to
    sqrt(framed bytes x MIN_STRETCH_BYTES) when smaller, at most MAX_HELD_BYTES."""
    side = min(MAX_HELD_BYTES, math.ceil(math.sqrt(max(0.0, framed_bytes) * MIN_STRETCH_BYTES)))
    return max(RUN_BYTES, side), max(BUCKET_BYTES, side)


def plan_shuffle(
    shards: Mapping[str | None, int],
    framed_bytes: Mapping[str | None, float],
    seed: int,
    bucket_bytes: int | None = None,
) -> ShufflePlan:
    """Buckets for each split's shards, and the runs' size (`held_bytes` of the largest split).

    Args:
      shards: each split's planned shards (None: the only key without splits), in order.
      framed_bytes: each split's estimated framed records (uncompressed) in all.
      seed: `--shuffle_seed`.
      bucket_bytes: default `held_bytes`'s.
    """
    run_bytes, sized = held_bytes(max(framed_bytes.values(), default=0.0))
    bucket_bytes = bucket_bytes or sized
    splits = []
    for split, count in shards.items():
        per_shard = framed_bytes.get(split, 0.0) / max(1, count)
        splits.append((split, count, max(1, math.ceil(per_shard / bucket_bytes))))
    return ShufflePlan(seed, tuple(splits), run_bytes)
