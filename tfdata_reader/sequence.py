"""An epoch's sequence of records: every source's records in their epoch order, interleaved by
quota. Pure arithmetic on the units' record counts; `order` shares it out among steps.

A source (a dataset, or one partition of several read as one) holds its records in a seeded
random order across its units (shards, or stretches of them), so any run of them is a random
sample. Its *own sequence* for an epoch takes its units in an order drawn from the seed, the
epoch and the source, end to end, rotated by a number of records drawn the same way; a source
read past its records (a quota above them) goes on with another pass in another order, and
one read short of them (a quota below) stops where its quota ends, so each epoch samples
another stretch.

The epoch's sequence interleaves the sources' own sequences by `mixing.taken`: among its first
`t` positions, source `i` holds `taken(quotas, t)[i]`, always the next records of its own
sequence. Any stretch of the epoch's sequence thus holds each source's share of it to within a
few records, and every record of a source whose quota is its record count exactly once.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import numpy as np

from tfdata_reader.mixing import quotas as apportioned
from tfdata_reader.mixing import taken

__all__ = ["EpochSequence", "Piece", "draws", "pieces_of", "rotated_shards"]

_ORDER_KEY = 0x6F72646572  # "order": the draws of epoch orders, apart from other uses of a seed


def draws(
    seed: int, epoch: int, count: int, purpose: int = _ORDER_KEY, stream: int = 0
) -> np.ndarray:
    """`count` raw 64-bit words of the Philox stream keyed by (seed, epoch, purpose), from the
    counter's block `stream` (another source or pass: other words, the same key)."""
    key = np.array([seed & (2**64 - 1), (purpose << 24) ^ epoch], dtype=np.uint64)
    counter = np.array([0, 0, stream & (2**64 - 1), stream >> 64], dtype=np.uint64)
    return np.random.Philox(key=key, counter=counter).random_raw(count).astype(np.uint64)


def rotated_shards(
    shard_records: Sequence[int], seed: int, epoch: int, stream: int = 0
) -> tuple[np.ndarray, int]:
    """The epoch's order of the shards (indices) and its rotation (records, in [0, N)); another
    `stream` (a source's pass) draws another order."""
    n = len(shard_records)
    words = draws(seed, epoch, n + 1, stream=stream)
    order = np.argsort(words[:n], kind="stable")
    total = int(sum(shard_records))
    rotation = int(words[n] % np.uint64(total)) if total else 0
    return order, rotation


@dataclasses.dataclass(frozen=True)
class Piece:
    """Records [start, stop) of shard (or unit) `shard`."""

    shard: int
    start: int
    stop: int


def pieces_of(
    shard_records: Sequence[int], order: np.ndarray, rotation: int, lo: int, hi: int
) -> list[Piece]:
    """The shards' records at positions [lo, hi) of a pass (`order` rotated)."""
    total = int(sum(shard_records))
    if hi <= lo or not total:
        return []
    counts = np.asarray(shard_records, dtype=np.int64)[order]
    starts = np.concatenate([[0], np.cumsum(counts)])
    found: list[Piece] = []
    a, b = lo + rotation, hi + rotation
    # The rotated range, in positions of the unrotated sequence: one stretch, or two (wrapped).
    for u0, u1 in ((a, min(b, total)), (max(a, total) - total, b - total)):
        if u1 <= u0:
            continue
        k = int(np.searchsorted(starts, u0, side="right")) - 1
        while u0 < u1:
            end = min(u1, int(starts[k + 1]))
            if end > u0:
                found.append(Piece(int(order[k]), u0 - int(starts[k]), end - int(starts[k])))
            u0 = end
            k += 1
    return found


@dataclasses.dataclass(frozen=True)
class EpochSequence:
    """One epoch's sequence of the sources' records.

    Attributes:
      units: each source's units' record counts (its units are numbered on from the previous
        source's: the `shard` of a `Piece`).
      seed: the order's seed.
      epoch: the epoch.
      weights: each source's weight (None: every record of every source once).
    """

    units: tuple[tuple[int, ...], ...]
    seed: int
    epoch: int
    weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        for source, (records, quota) in enumerate(zip(self.records, self.quotas, strict=True)):
            if quota and not records:
                raise ValueError(f"source {source} has a quota of {quota} records but none")

    @classmethod
    def of(cls, shard_records: Sequence[int], seed: int, epoch: int) -> EpochSequence:
        """One source's sequence."""
        return cls((tuple(int(n) for n in shard_records),), seed, epoch)

    @functools.cached_property
    def records(self) -> np.ndarray:
        """Each source's records."""
        return np.array([sum(u) for u in self.units], dtype=np.int64)

    @functools.cached_property
    def quotas(self) -> np.ndarray:
        """Each source's positions in the epoch (`mixing.quotas`); they add up to the records."""
        return apportioned(self.records, self.weights)

    @property
    def length(self) -> int:
        return int(self.records.sum())

    @functools.cached_property
    def _first_unit(self) -> list[int]:
        return np.concatenate([[0], np.cumsum([len(u) for u in self.units])]).tolist()

    def counts(self, t: int | np.ndarray) -> np.ndarray:
        """Each source's positions among the first `t` of the sequence (`mixing.taken`)."""
        if len(self.units) == 1:  # one source holds every position
            return np.asarray(t, dtype=np.int64)[None]
        return taken(self.quotas, t)

    def pieces(self, source: int, lo: int, hi: int) -> list[Piece]:
        """Positions [lo, hi) of a source's own sequence, as pieces of units: pass after pass
        (a pass holds every record of the source once, in its own order)."""
        records = int(self.records[source])
        found: list[Piece] = []
        while lo < hi:
            turn, at = divmod(lo, records)
            end = min(hi, (turn + 1) * records)
            order, rotation = self._pass(source, turn)
            shift = self._first_unit[source]
            found += [
                Piece(p.shard + shift, p.start, p.stop)
                for p in pieces_of(self.units[source], order, rotation, at, at + end - lo)
            ]
            lo = end
        return found

    def _pass(self, source: int, turn: int) -> tuple[np.ndarray, int]:
        """A pass's order of the source's units and its rotation (source 0's first pass draws
        what a dataset read alone draws: its order is the same)."""
        key = (source, turn)
        if key not in self._passes:
            stream = (source << 32) | turn
            self._passes[key] = rotated_shards(self.units[source], self.seed, self.epoch, stream)
        return self._passes[key]

    @functools.cached_property
    def _passes(self) -> dict[tuple[int, int], tuple[np.ndarray, int]]:
        return {}
