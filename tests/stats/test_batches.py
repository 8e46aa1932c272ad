"""Number features updated in step (one 2-D pass and one shared sample a batch) give the
statistics each feature's own update gives, whatever leaves the step and when."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest
from support.stats import assert_same_state

from beam_jobs.codec.examples import ExampleEncoder
from beam_jobs.stats.accumulate import RESERVOIR, FeatureStats
from beam_jobs.stats.batches import finish_all, new_stats, update_all
from tfdata_reader.manifest import FeatureSpec

_MOMENTS = ("mean", "m2")  # summed in another order: equal within rounding


def _features(count: int) -> list[FeatureSpec]:
    dtypes = ["float32", "int64", "float32", "bytes"]
    return [FeatureSpec(f"f{i}", dtypes[i % len(dtypes)]) for i in range(count)]


def _batch(features, rows: int, rng, spoil: dict[int, str]) -> pa.RecordBatch:
    """A batch of the features; `spoil`: feature index -> "null", "nan", "inf" or "list"."""
    columns = {}
    for i, feature in enumerate(features):
        kind = spoil.get(i)
        if feature.dtype == "bytes":
            columns[feature.name] = pa.array(rng.choice(["a", "b", "c"], rows), pa.binary())
            continue
        values = rng.normal(size=rows) * 10
        values[rng.random(rows) < 0.05] = 0.0  # zeros: counted
        if feature.dtype == "int64":
            values = np.round(values).astype(np.int64)
        cells = values.tolist()
        if kind == "null" and rows:
            cells[rng.integers(rows)] = None
        if kind in ("nan", "inf") and rows and feature.dtype == "float32":
            cells[rng.integers(rows)] = float(kind) * (1 if rng.random() < 0.5 else -1)
        columns[feature.name] = pa.array(cells, pa.int64() if feature.dtype == "int64" else None)
    return pa.record_batch(columns)


def _alone(stats, features, batch) -> None:
    """Each feature's own update (the path before features were updated in step)."""
    for feature, (offsets, values) in zip(
        features, ExampleEncoder(features).columns(batch), strict=True
    ):
        stats[feature.name].update(offsets, values, scalar=True)


@pytest.mark.parametrize("seed", range(6))
def test_features_in_step_give_each_features_own_statistics(seed):
    rng = np.random.default_rng(seed)
    features = _features(13)
    encoder = ExampleEncoder(features)
    together, alone = new_stats(features), new_stats(features)
    # Large and small batches (the sample cut back past 2 * RESERVOIR rows, a batch larger than
    # RESERVOIR), an empty one, and features leaving the step at random batches.
    for rows in [3000, 9000, 0, 700, 20000, 5, 4000, 12000]:
        spoil = {int(i): str(rng.choice(["null", "nan", "inf"])) for i in
                 rng.choice(len(features), rng.integers(0, 3), replace=False)}  # fmt: skip
        batch = _batch(features, rows, rng, spoil)
        update_all(together, features, encoder.columns(batch), batch)
        _alone(alone, features, batch)
    in_step = [s for s in together.values() if s.group is not None]
    assert in_step or seed != 0  # seed 0 leaves some in step to the end
    for name in together:
        assert_same_state(together[name], alone[name], close=_MOMENTS)
    # Finished together (one sort of the shared sample) or alone: the same edges.
    finished, mine = finish_all(together), finish_all(alone)
    for name in finished:
        a, b = finished[name], mine[name]
        assert a.group is None and a.sample is None
        assert (a.edges is None) == (b.edges is None)
        if a.edges is not None:
            assert np.array_equal(a.edges, b.edges), name
    again = pickle.loads(pickle.dumps(finished))
    assert [again[n].records for n in again] == [mine[n].records for n in mine]


def test_a_shard_starts_in_step_and_its_features_leave_one_by_one():
    rng = np.random.default_rng(9)
    features = _features(8)
    encoder = ExampleEncoder(features)
    stats, alone = new_stats(features), new_stats(features)
    numbers = [f.name for f in features if f.dtype != "bytes"]  # six: f0-f2, f4-f6

    def add(spoil):
        batch = _batch(features, 2 * RESERVOIR + 5, rng, spoil)
        update_all(stats, features, encoder.columns(batch), batch)
        _alone(alone, features, batch)
        return sorted(n for n in numbers if stats[n].group is not None)

    assert add({}) == numbers  # every number feature in step, the bytes one alone
    assert add({1: "null"}) == ["f0", "f2", "f4", "f5", "f6"]
    assert add({0: "nan", 6: "inf"}) == ["f2", "f4", "f5"]
    assert add({}) == ["f2", "f4", "f5"]  # one that left does not come back
    group = stats["f2"].group
    assert group.sample.width == 3 and [m.column for m in group.members] == [0, 1, 2]
    for name in stats:
        assert_same_state(stats[name], alone[name], close=_MOMENTS)


def test_a_live_feature_in_step_reads_and_pickles_as_one_alone():
    features = _features(3)[:3]  # f0 float32, f1 int64, f2 float32
    rng = np.random.default_rng(4)
    batch = _batch(features, 500, rng, {})
    stats, alone = new_stats(features), new_stats(features)
    update_all(stats, features, ExampleEncoder(features).columns(batch), batch)
    _alone(alone, features, batch)
    travelled = pickle.loads(pickle.dumps(stats["f1"]))  # leaves the step: a sample of its own
    assert travelled.group is None and stats["f1"].group is None
    assert stats["f0"].group.sample.width == 2
    assert stats["f2"].quantile_edges(10) == alone["f2"].quantile_edges(10)
    assert travelled.quantile_edges(4) == alone["f1"].quantile_edges(4)
    # A feature updated directly leaves the step first; the others go on in it.
    more = _batch(features, 300, rng, {})
    columns = ExampleEncoder(features).columns(more)
    stats["f0"].update(*columns[0], scalar=True)
    alone["f0"].update(*columns[0], scalar=True)
    assert_same_state(stats["f0"], alone["f0"], close=_MOMENTS)


def test_one_number_feature_or_none_in_step_is_updated_alone():
    features = [FeatureSpec("x", "float32"), FeatureSpec("w", "bytes")]
    batch = pa.record_batch({"x": pa.array([1.0, 2.0]), "w": pa.array([b"a", b"b"])})
    stats = new_stats(features)
    update_all(stats, features, ExampleEncoder(features).columns(batch), batch)
    assert all(s.group is None for s in stats.values())
    assert (stats["x"].records, stats["x"].low, stats["x"].high) == (2, 1.0, 2.0)
    lists = [FeatureSpec("a", "int64"), FeatureSpec("b", "int64")]
    batch = pa.record_batch({"a": pa.array([[1], [2]]), "b": pa.array([[3], [4]])})
    stats = new_stats(lists)
    update_all(stats, lists, ExampleEncoder(lists).columns(batch), batch)
    assert all(s.group is None for s in stats.values())  # list columns: each alone
    assert (stats["b"].low, stats["b"].high, stats["b"].average) == (3.0, 4.0, 3.5)
    assert isinstance(stats["a"], FeatureStats)


def _call(stats, features, values) -> None:
    pairs = zip(features, values, strict=True)
    batch = pa.record_batch({f.name: pa.array(v, pa.float64()) for f, v in pairs})
    update_all(stats, features, ExampleEncoder(features).columns(batch), batch)


def test_a_batch_of_some_features_leaves_the_others_as_they_were():
    a, b, c, d = (FeatureSpec(n, "float32") for n in "abcd")
    stats = new_stats([a, b, c])
    _call(stats, [a, b, c], [[1.0, 2.0]] * 3)
    _call(stats, [a, b], [[3.0, 4.0]] * 2)  # c is not given: it leaves the step, unchanged
    assert {n: (s.records, s.low, s.high) for n, s in stats.items()} == {
        "a": (4, 1.0, 4.0), "b": (4, 1.0, 4.0), "c": (2, 1.0, 2.0)
    }  # fmt: skip
    assert stats["c"].group is None and stats["a"].group.sample.width == 2
    # Two groups (one a batch of a and b made, one of c and d), then a batch of all four.
    stats, alone = new_stats([a, b, c, d]), new_stats([a, b, c, d])
    batches = [([a, b], [[1.0, 2.0]] * 2), ([c, d], [[100.0, 200.0]] * 2),
               ([a, b, c, d], [[10.0], [10.0], [500.0], [500.0]])]  # fmt: skip
    for features, values in batches:
        _call(stats, features, values)
        for feature, column in zip(features, values, strict=True):
            alone[feature.name].update(np.arange(len(column) + 1), pa.array(column), scalar=True)
    assert {n: (s.records, s.low, s.high) for n, s in stats.items()} == {
        "a": (3, 1.0, 10.0), "b": (3, 1.0, 10.0), "c": (3, 100.0, 500.0), "d": (3, 100.0, 500.0)
    }  # fmt: skip
    for name in stats:
        assert_same_state(stats[name], alone[name], close=_MOMENTS)


def test_zeros_of_either_sign_give_the_same_extremes_and_edges_in_step_or_alone():
    rng = np.random.default_rng(8)
    features = [FeatureSpec(f"z{i}", "float32") for i in range(3)]
    together, alone = new_stats(features), new_stats(features)
    for _ in range(40):
        values = [rng.choice([0.0, -0.0, 2.5, -1.0], 50, p=[0.4, 0.4, 0.1, 0.1]).tolist()
                  for _ in features]  # fmt: skip
        values[0] = [abs(v) if v == 0 else v for v in values[0]]  # some columns' zero extremes
        _call(together, features, values)
        pairs = zip(features, values, strict=True)
        batch = pa.record_batch({f.name: pa.array(v) for f, v in pairs})
        _alone(alone, features, batch)
    for name in together:
        assert_same_state(together[name], alone[name], close=_MOMENTS)
        assert together[name].quantile_edges(10) == alone[name].quantile_edges(10)
    finished, mine = finish_all(together), finish_all(alone)
    for name in finished:
        assert np.array_equal(np.signbit(finished[name].edges), np.signbit(mine[name].edges))
        assert not np.signbit(finished[name].edges[finished[name].edges == 0]).any()


@pytest.mark.parametrize("step", [1, 1024])
@pytest.mark.parametrize("base", [4 * 10**18, 2**53 - 5000, -(9 * 10**18), 10**9])
def test_the_spread_of_large_integers_is_that_of_exact_arithmetic(base, step):
    # Ids near 4e18 that differ by 1 or 1,024 (float64's spacing there is 512), in batches,
    # sorted or not, and merged across shards: moments from one origin a feature, integers
    # shifted by it exactly (41% off, then 4e-4, before).
    import statistics

    from beam_jobs.stats.packed import merge_all

    rng = np.random.default_rng(7)
    features = [FeatureSpec("id", "int64"), FeatureSpec("x", "float32")]
    shards = [new_stats(features), new_stats(features)]
    ids: list[int] = []
    for shard, rows, ordered in ((0, 700, False), (0, 1, False), (1, 300, False), (1, 900, True)):
        batch_ids = [base + step * int(k) for k in rng.integers(0, 1000, rows)]
        batch_ids = sorted(batch_ids) if ordered else batch_ids
        ids += batch_ids
        batch = pa.record_batch(
            {
                "id": pa.array(batch_ids, pa.int64()),
                "x": pa.array(rng.normal(size=rows), pa.float32()),
            }
        )
        update_all(shards[shard], features, ExampleEncoder(features).columns(batch), batch)
    exact = statistics.pstdev(ids)  # Python's: exact fractions, rounded once
    mean = statistics.mean(ids)  # a Fraction
    merged = merge_all([finish_all(s) for s in shards])
    for stats in (merged, shards[0]):
        part = ids if stats is merged else ids[:701]
        assert stats["id"].std_dev == pytest.approx(statistics.pstdev(part), rel=1e-12)
    assert merged["id"].std_dev == pytest.approx(exact, rel=1e-12)
    assert merged["id"].average == float(mean)


def test_far_apart_shards_of_large_integers_merge_exactly():
    # Each shard's origin is its own first id (4e18 and 4e18 + 300 round to doubles 512
    # apart): their difference is taken first, exactly (exact 150; 567 before).
    import statistics

    from beam_jobs.stats.packed import merge_all

    features = [FeatureSpec("id", "int64")]
    ids = [4 * 10**18] * 10_000 + [4 * 10**18 + 300] * 10_000
    shards = []
    for part in (ids[:10_000], ids[10_000:]):
        stats = new_stats(features)
        batch = pa.record_batch({"id": pa.array(part, pa.int64())})
        update_all(stats, features, ExampleEncoder(features).columns(batch), batch)
        shards.append(finish_all(stats))
    merged = merge_all(shards)
    assert merged["id"].std_dev == statistics.pstdev(ids) == 150.0
    assert merged["id"].average == float(4 * 10**18 + 150)


def test_moments_of_floats_far_from_zero_are_those_of_exact_arithmetic():
    from fractions import Fraction

    from beam_jobs.stats.moments import moments

    numbers = np.array([1e15 + 0.25 * k for k in range(1000)], np.float64)
    mean, m2 = moments(numbers, float(numbers[0]))
    exact = [Fraction(float(v)) for v in numbers]
    exact_mean = sum(exact) / len(exact)
    assert mean + numbers[0] == float(exact_mean)
    assert m2 == pytest.approx(float(sum((v - exact_mean) ** 2 for v in exact)), rel=1e-12)


def test_integers_at_the_ends_of_int64_have_exact_moments():
    # The double nearest 2**63 - 1 is 2**63, no int64: the shift is the int64 next to it.
    import statistics

    for ids in ([2**63 - 1, 2**63 - 808, 2**63 - 1808], [-(2**63), -(2**63) + 5, -(2**63) + 9]):
        stats = new_stats([FeatureSpec("id", "int64")])
        batch = pa.record_batch({"id": pa.array(ids, pa.int64())})
        update_all(stats, [FeatureSpec("id", "int64")], ExampleEncoder(
            [FeatureSpec("id", "int64")]).columns(batch), batch)  # fmt: skip
        assert stats["id"].std_dev == pytest.approx(statistics.pstdev(ids), rel=1e-12)
        assert stats["id"].average == float(statistics.mean(ids))
