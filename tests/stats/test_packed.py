"""Shards' statistics packed as columns and merged a field at a time (`stats.packed`): the same
accumulators, and the same `statistics.pb` bytes, as merging one accumulator at a time."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest
from support.stats import assert_same_state

from beam_jobs.stats.accumulate import FeatureStats
from beam_jobs.stats.batches import finish_all, new_stats, update_all
from beam_jobs.stats.packed import PackedStats, merge_all
from beam_jobs.stats.proto import statistics_list
from tfdata_reader.manifest import FeatureSpec


def _column(rng: np.random.Generator, dtype: str, rows: int) -> pa.Array:
    if dtype == "bytes":
        return pa.array(
            [None if rng.random() < 0.1 else f"v{rng.integers(9)}" for _ in range(rows)]
        )
    kind = rng.integers(5)
    if dtype == "int64":
        values = rng.integers(-(2**40), 2**40, rows) if kind else rng.integers(0, 3, rows)
        return pa.array(values, mask=rng.random(rows) < (0.2 if kind == 1 else 0))
    values = rng.normal(1e3 * kind, 10.0 ** rng.integers(-3, 30), rows)
    if kind == 2:  # NaN and infinities
        values[rng.random(rows) < 0.05] = np.nan
        values[rng.random(rows) < 0.02] = np.inf
    if kind == 3:
        values[rng.random(rows) < 0.3] = rng.choice([0.0, -0.0])
    return pa.array(values, mask=rng.random(rows) < (0.1 if kind == 4 else 0))


def _shards(
    seed: int, count: int, missing: float = 0.1
) -> tuple[list[FeatureSpec], list[PackedStats]]:
    """`count` shards' finished statistics, each travelled (pickled): features missing from
    a shard at random (`missing`), a bytes feature, batches of 0 to 400 rows."""
    rng = np.random.default_rng(seed)
    dtypes = ["float32"] * 6 + ["int64"] * 3 + ["bytes"]
    features = [FeatureSpec(f"f{i}", dtype) for i, dtype in enumerate(dtypes)]
    shards = []
    for _ in range(count):
        present = [f for f in features if rng.random() >= missing]
        stats = new_stats(present)
        for _ in range(int(rng.integers(1, 4))):
            rows = int(rng.integers(0, 400))
            batch = pa.RecordBatch.from_arrays(
                [_column(rng, f.dtype, rows) for f in present], [f.name for f in present]
            )
            one = np.arange(rows + 1)
            columns = []
            for f in present:
                column = batch.column(f.name)
                values = column.drop_null().cast(
                    pa.binary() if f.dtype == "bytes" else pa.float64()
                )
                offsets = np.concatenate([[0], np.cumsum(column.is_valid().to_numpy(False))])
                columns.append((one if not column.null_count else offsets, values))
            update_all(stats, present, columns, batch)
        shards.append(pickle.loads(pickle.dumps(finish_all(stats))))
    return features, shards


def _one_at_a_time(parts) -> dict[str, FeatureStats]:
    merged: dict[str, FeatureStats] = {}
    for part in parts:
        for name, stats in part.fresh().items():
            merged.setdefault(name, FeatureStats(stats.dtype)).merge(stats)
    return merged


def _assert_same(a: dict[str, FeatureStats], b: dict[str, FeatureStats]) -> None:
    assert list(a) == list(b)
    for name in a:
        x, y = a[name], b[name]
        sketches = x.quantiles, y.quantiles
        assert (sketches[0] is None) == (sketches[1] is None), name
        if sketches[0] is not None:
            assert pickle.dumps(sketches[0]) == pickle.dumps(sketches[1]), name
        x.quantiles = y.quantiles = None
        assert len(x.shares) == len(y.shares), name
        for (m1, w1), (m2, w2) in zip(x.shares, y.shares, strict=True):
            assert m1.tobytes() == m2.tobytes() and w1.tobytes() == w2.tobytes(), name
        x.shares = y.shares = []
        assert_same_state(x, y)  # mean and squared deviations to the bit, as the rest
        x.quantiles, y.quantiles = sketches


@pytest.mark.parametrize(("seed", "count"), [(0, 1), (1, 3), (2, 31), (3, 32), (4, 70)])
def test_merging_a_field_at_a_time_equals_one_accumulator_at_a_time(seed, count):
    features, shards = _shards(seed, count)
    fast, slow = merge_all(shards), _one_at_a_time(shards)
    records = sum(s["f0"].records for s in shards if "f0" in s)
    proto = [
        statistics_list([("all", records, m)], features).SerializeToString() for m in (fast, slow)
    ]
    assert proto[0] == proto[1]
    _assert_same(fast, slow)


def test_parts_plain_in_some_shards_and_not_others_merge_one_at_a_time():
    # A shard joined from parts (splits, many files) carries merged accumulators (shares, a
    # sketch): its features are not plain, and merge with the plain ones of other shards.
    _features, shards = _shards(5, 40)
    joined = pickle.loads(pickle.dumps(PackedStats(merge_all(shards[:35]))))
    parts = [joined, *shards[35:]]
    _assert_same(merge_all(parts), _one_at_a_time(parts))


def test_packing_keeps_every_accumulator():
    _, shards = _shards(6, 2)
    for shard in shards:
        again = pickle.loads(pickle.dumps(shard))
        assert list(again) == list(shard)
        for name in shard:
            assert_same_state(again[name], shard[name])
    # Live accumulators (never pickled) merge as packed ones do.
    live = [PackedStats(s.fresh()) for s in shards]
    _assert_same(merge_all(live), merge_all(shards))
    _assert_same(merge_all([dict(s) for s in shards]), merge_all(shards))


def test_number_features_in_every_shard_merge_without_an_accumulator_each(monkeypatch):
    _features, shards = _shards(7, 3, missing=0.0)
    slow = _one_at_a_time(shards)
    alone = []
    merge = FeatureStats.merge

    def counted(self, other):
        alone.append(other.dtype)
        merge(self, other)

    monkeypatch.setattr(FeatureStats, "merge", counted)
    _assert_same(merge_all(shards), slow)
    assert alone == ["bytes"] * 3  # the text feature's sketches merge as accumulators
