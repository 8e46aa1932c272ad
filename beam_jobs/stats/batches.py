"""A shard's statistics, batch by batch: the accumulators of its features, updated together.

Number features that take one number a record in every batch (no null, no NaN, no infinity)
are updated in step: the batch's columns of them as one 2-D array, reduced along its rows in a
few NumPy calls (min, max, mean, squared deviations, zeros), and one sample (`BottomK`) shared
by all of them, with one key drawn a row. Each feature's own update would do the same work a
column at a time, each a dozen NumPy calls of a few microseconds: 5,000 features of 450 rows
spent 1 s a batch there, and in two threads every call also waits for the other's hold of the
interpreter lock. The statistics are those of the features' own updates (the same counts,
extremes and sample; mean and squared deviations summed in another order); a feature whose
column has a null, NaN or infinity leaves the group with its column of the sample and goes on
alone, sampling as if it had never shared.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa

from beam_jobs.codec.examples import is_list
from beam_jobs.stats.accumulate import FINISHED_BUCKETS, FeatureStats, bounded
from beam_jobs.stats.packed import PackedStats
from beam_jobs.stats.sample import BottomK
from tfdata_reader.manifest import FeatureSpec

__all__ = ["finish_all", "new_stats", "update_all"]

Column = tuple[np.ndarray, pa.Array]  # a feature's value lists: record offsets, values
# Fewer features than this in step are each updated alone: one 2-D pass only pays for itself
# over several columns.
MIN_GROUP = 2


def new_stats(features: Sequence[FeatureSpec]) -> dict[str, FeatureStats]:
    return {f.name: FeatureStats(f.dtype) for f in features}


def update_all(
    stats: dict[str, FeatureStats],
    features: Sequence[FeatureSpec],
    columns: Sequence[Column],
    batch: pa.RecordBatch | None = None,
) -> None:
    """Adds a batch: each feature's `value_lists`, as the encoder made them from `batch`.
    A column of the batch that is no list holds one value a record (or a null), which spares
    its offsets a look (without the batch each is looked at, and each feature is updated
    alone). A batch may give some of the features only: the others are left as they were."""
    rows = len(columns[0][0]) - 1 if columns else 0
    alone: list[tuple[FeatureStats, Column, bool]] = []
    in_step: dict[int, list[tuple[FeatureStats, Column, bool]]] = {}  # by group
    joining: list[tuple[FeatureStats, Column, bool]] = []
    # The schema's types at once: a column looked up by name costs microseconds, thousands a
    # batch with thousands of features.
    schema = batch.schema if batch is not None else pa.schema([])
    types = dict(zip(schema.names, schema.types, strict=True))
    for feature, column in zip(features, columns, strict=True):
        own = stats[feature.name]
        scalar = batch is not None and not is_list(types[feature.name])
        full = scalar and len(column[1]) == rows  # one value a record: no null
        if own.group is not None:
            in_step.setdefault(id(own.group), []).append((own, column, scalar))
        elif full and own.dtype != "bytes" and own.records == 0 < rows:
            joining.append((own, column, scalar))  # the shard's first batch: all may start
        else:
            alone.append((own, column, scalar))
    for candidates in in_step.values():
        alone.extend(_update_in_step(candidates, rows))
    if len(joining) >= MIN_GROUP:
        _Group([own for own, _, _ in joining])
        alone.extend(_update_in_step(joining, rows))
    else:
        alone.extend(joining)
    for own, column, scalar in alone:
        own.update(*column, scalar=scalar)


def finish_all(stats: dict[str, FeatureStats]) -> PackedStats:
    """`finish` for every feature (a group's sample at once); returns them packed
    (`PackedStats`), not to change again."""
    groups = {id(s.group): s.group for s in stats.values() if s.group is not None}
    for group in groups.values():
        group.finish()
    for feature_stats in stats.values():
        feature_stats.finish()
    return PackedStats(stats)


def _update_in_step(
    candidates: list[tuple[FeatureStats, Column, bool]], rows: int
) -> list[tuple[FeatureStats, Column, bool]]:
    """Updates the features of a group with their columns of one batch (and whether each is
    scalar); returns those that are not (or no longer) in step, to update alone. Members the
    batch does not give leave the step (they draw no keys for it)."""
    group = candidates[0][0].group
    given = {id(own) for own, _, _ in candidates}
    group.release([m for m in group.members if id(m) not in given])
    # A member's numbers a row: each column's copy and reductions run over contiguous memory.
    numbers = np.empty((len(group.members), rows), np.float64)
    fit = np.zeros(len(group.members), bool)
    ints = np.zeros(len(group.members), bool)
    for own, (_, values), scalar in candidates:
        if scalar and len(values) == rows:  # one value a record: no null
            numbers[own.column] = values.to_numpy()
            fit[own.column] = True
            ints[own.column] = pa.types.is_integer(values.type)
    if rows:
        # NaN for a column with one; + 0.0 makes a zero extreme +0.0, whichever zero the
        # reduction met first (FeatureStats.update does the same).
        low, high = numbers.min(axis=1) + 0.0, numbers.max(axis=1) + 0.0
        fit &= np.isfinite(low) & np.isfinite(high)
        # Integers past float64's exact ones (2**53) go alone, where their moments are exact.
        fit &= ~ints | (np.maximum(np.abs(low), np.abs(high)) < 2.0**53)
    if not fit.all():
        kept = np.flatnonzero(fit)
        group.release([own for own, _, _ in candidates if not fit[own.column]])
        numbers = numbers[kept]
        if rows:
            low, high = low[kept], high[kept]
    if rows and group.members:
        group.update(numbers, low, high)
    return [candidate for candidate in candidates if candidate[0].group is None]


class _Group:
    """Number features of one shard in step: the sample they share (a column each, the
    feature's `column`) and their updates with a batch's columns at once."""

    def __init__(self, members: Iterable[FeatureStats]) -> None:
        self.members = list(members)
        self.sample = BottomK(len(self.members))
        for index, member in enumerate(self.members):
            member.group, member.sample, member.column = self, self.sample, index

    def update(self, numbers: np.ndarray, low: np.ndarray, high: np.ndarray) -> None:
        """Adds a batch: `numbers` holds a row of each member's numbers, none NaN or infinite;
        `low` and `high` are the rows' extremes."""
        rows = numbers.shape[1]
        zeros = np.zeros(len(self.members), np.int64)
        spans = np.flatnonzero((low <= 0) & (high >= 0))  # only they can hold a zero
        if len(spans):
            zeros[spans] = np.count_nonzero(numbers[spans] == 0, axis=1)
        # From the differences to each member's origin (as `moments.moments`): large
        # values would cancel in their mean's sum.
        origins = numbers[:, 0].copy()
        for index, member in enumerate(self.members):
            if member.finite:
                origins[index] = member.origin
        shifted = numbers - origins[:, None]
        means = shifted.mean(axis=1)
        deviations = shifted - means[:, None]
        with np.errstate(over="ignore"):  # float32's range squared can pass float64's
            squares = np.einsum("ij,ij->i", deviations, deviations)
        self.sample.add(numbers.T)
        for member, least, most, zero, mean, m2, origin in zip(
            self.members, low.tolist(), high.tolist(), zeros.tolist(), means.tolist(),
            squares.tolist(), origins.tolist(), strict=True,
        ):  # fmt: skip
            member.records += rows
            member.values += rows
            member.numbers += rows
            member.max_values = 1
            member.min_values = 1
            member.low = least if member.low is None else min(member.low, least)
            member.high = most if member.high is None else max(member.high, most)
            member.zeros += zero
            member._merge_moments(rows, mean, m2, origin)

    def release(self, leaving: Sequence[FeatureStats]) -> None:
        """Gives each of `leaving` its column of the sample as a sample of its own; the rest go
        on sharing the others."""
        if not leaving:
            return
        for member in leaving:
            member.sample, member.column, member.group = self.sample.column(member.column), 0, None
        self.members = [m for m in self.members if m.group is self]
        self.sample = self.sample.select([m.column for m in self.members])
        for index, member in enumerate(self.members):
            member.sample, member.column = self.sample, index

    def finish(self) -> None:
        """Every member's `finish`, from one sort of the shared sample: its edges."""
        if self.sample.filled:
            ranked = self.sample.ranked(FINISHED_BUCKETS)[0]
            low = np.array([m.low for m in self.members], np.float64)
            high = np.array([m.high for m in self.members], np.float64)
            edges = bounded(ranked, low, high).T.copy()  # a member's edges: a row, contiguous
        for member in self.members:
            member.edges = edges[member.column] if self.sample.filled else None
            member.sample, member.column, member.group = None, 0, None
        self.members = []
