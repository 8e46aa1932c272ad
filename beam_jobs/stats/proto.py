"""Merged feature statistics as TFDV's `DatasetFeatureStatisticsList` (`statistics.pb`): what
`tfdv.load_stats_binary` reads, Facets draws, and `inspect --stats` prints.

One dataset per split (named after it), or one named "All Examples" (TFDV's name for a
dataset without slices). A feature's `num_missing` counts records without a value (a null, an
empty list): the manifest's `null_values`. TFDV, reading our shards itself, would count them
as present with no values, since a missing value is written as an empty list.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from tensorflow_metadata.proto.v0 import statistics_pb2

from beam_jobs.stats.accumulate import FeatureStats
from tfdata_reader.manifest import FeatureSpec

__all__ = [
    "ALL_EXAMPLES",
    "DISTINCT_EXACT",
    "STATISTICS_NAME",
    "TOP_VALUES_EXACT",
    "dataset_statistics",
    "equal_width",
    "equal_width_rows",
    "is_exact",
    "statistics_list",
]

STATISTICS_NAME = "statistics.pb"
ALL_EXAMPLES = "All Examples"
HISTOGRAM_BUCKETS = 10
TOP_VALUES = 10
# Custom statistics of a text or bytes feature: 1 when its distinct count (its top values'
# counts) are exact, 0 when estimates.
DISTINCT_EXACT = "tfrecord_etl.distinct_exact"
TOP_VALUES_EXACT = "tfrecord_etl.top_values_exact"
_FINE_BUCKETS = 100  # quantile buckets the equal-width histogram is estimated from
_ROWS_AT_ONCE = 1000  # features whose equal-width histograms are computed together

_TYPES = {
    "int64": statistics_pb2.FeatureNameStatistics.INT,
    "float32": statistics_pb2.FeatureNameStatistics.FLOAT,
}


def statistics_list(
    datasets: Sequence[tuple[str, int, dict[str, FeatureStats]]],
    features: Sequence[FeatureSpec],
) -> statistics_pb2.DatasetFeatureStatisticsList:
    """(name, records, feature -> stats) per dataset -> the proto, features in spec order."""
    result = statistics_pb2.DatasetFeatureStatisticsList()
    for name, records, stats in datasets:
        _dataset(result.datasets.add(), name, records, stats, features)
    return result


def dataset_statistics(
    name: str, records: int, stats: dict[str, FeatureStats], features: Sequence[FeatureSpec]
) -> statistics_pb2.DatasetFeatureStatistics:
    dataset = statistics_pb2.DatasetFeatureStatistics()
    _dataset(dataset, name, records, stats, features)
    return dataset


def _dataset(
    dataset: statistics_pb2.DatasetFeatureStatistics,
    name: str,
    records: int,
    stats: dict[str, FeatureStats],
    features: Sequence[FeatureSpec],
) -> None:
    dataset.name, dataset.num_examples = name, records
    histograms = _histograms({f.name: stats[f.name] for f in features
                              if f.dtype in _TYPES and f.name in stats})  # fmt: skip
    for feature in features:
        # Each message is filled where it lives: building one apart and copying it in took a
        # third of the proto's time for thousands of features.
        _feature(
            dataset.features.add(), feature.name, stats.get(feature.name), feature.dtype,
            histograms,
        )  # fmt: skip


_Histograms = tuple[list[float], list[tuple[float, float, float]] | None]


def _histograms(stats: dict[str, FeatureStats]) -> dict[str, _Histograms]:
    """Each number feature's quantile edges and equal-width buckets (None: its min or max is
    infinite), the buckets of all of them at once (a few NumPy calls for thousands of
    features)."""
    found: dict[str, _Histograms] = {}
    spread: dict[int, list[tuple[str, list[float], int]]] = {}  # by the count of fine edges
    for name, feature in stats.items():
        low, high = feature.low, feature.high
        if not feature.numbers or low is None or high is None:
            continue
        edges, fine = feature.quantile_edges_of(HISTOGRAM_BUCKETS, _FINE_BUCKETS)
        found[name] = (edges, None)
        if not np.isfinite([low, high]).all():
            continue
        if low == high:
            found[name] = (edges, [(low, high, float(feature.numbers))])
        else:
            spread.setdefault(len(fine), []).append((name, fine, feature.numbers))
    for same_length in spread.values():
        # _ROWS_AT_ONCE features a call: its arrays take 24 KB a feature.
        for start in range(0, len(same_length), _ROWS_AT_ONCE):
            rows = same_length[start : start + _ROWS_AT_ONCE]
            fines = np.array([fine for _, fine, _ in rows], np.float64)
            totals = np.array([total for _, _, total in rows], np.float64)
            bounds, counts = equal_width_rows(fines, totals, HISTOGRAM_BUCKETS)
            pairs = zip(rows, bounds.tolist(), counts.tolist(), strict=True)
            for (name, _, _), bound, count in pairs:
                found[name] = (found[name][0], list(zip(bound[:-1], bound[1:], count, strict=True)))
    return found


def _feature(
    result: statistics_pb2.FeatureNameStatistics,
    name: str,
    stats: FeatureStats | None,
    dtype: str,
    histograms: dict[str, _Histograms],
) -> None:
    stats = stats or FeatureStats(dtype)
    result.path.step.append(name)
    if dtype in _TYPES:
        result.type = _TYPES[dtype]
        _numbers(result.num_stats, stats, histograms.get(name))
        return
    top = stats.top_values(TOP_VALUES)
    texts = [_text(value) for value, _ in top]
    # Which counts are exact: TFDV's proto has no word for it, so custom statistics say it.
    result.custom_stats.add(name=DISTINCT_EXACT, num=float(stats.distinct_exact))
    if stats.binary or None in texts:  # binary (images, say): lengths and a distinct count
        result.type = statistics_pb2.FeatureNameStatistics.BYTES
        _bytes(result.bytes_stats, stats)
        return
    result.custom_stats.add(name=TOP_VALUES_EXACT, num=float(stats.top_exact))
    result.type = statistics_pb2.FeatureNameStatistics.STRING
    strings = result.string_stats
    _common(strings.common_stats, stats)
    strings.unique = stats.distinct_estimate()
    strings.avg_length = stats.length / stats.values if stats.values else 0.0
    for rank, (text, (_, count)) in enumerate(zip(texts, top, strict=True)):
        strings.top_values.add(value=text, frequency=count)
        strings.rank_histogram.buckets.add(
            low_rank=rank, high_rank=rank, label=text, sample_count=count
        )


def is_exact(feature: statistics_pb2.FeatureNameStatistics, name: str) -> bool:
    """Whether a custom statistic (`DISTINCT_EXACT`, `TOP_VALUES_EXACT`) says exact; a file
    written before they were is taken as estimates."""
    return any(c.name == name and c.num == 1.0 for c in feature.custom_stats)


def _text(value: bytes) -> str | None:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _common(result: statistics_pb2.CommonStatistics, stats: FeatureStats) -> None:
    result.SetInParent()  # present, if all zeros, as when it was copied in
    present = stats.records - stats.missing
    result.num_non_missing = present
    result.num_missing = stats.missing
    result.min_num_values = stats.min_values or 0
    result.max_num_values = stats.max_values
    result.avg_num_values = stats.values / present if present else 0.0
    result.tot_num_values = stats.values


def _numbers(
    result: statistics_pb2.NumericStatistics, stats: FeatureStats, histograms: _Histograms | None
) -> None:
    _common(result.common_stats, stats)
    low, high = stats.low, stats.high
    if histograms is None or low is None or high is None:  # no numbers
        if stats.nans:
            result.histograms.add(num_nan=stats.nans, type=statistics_pb2.Histogram.QUANTILES)
        return
    result.mean = stats.average
    result.std_dev = stats.std_dev
    result.num_zeros = stats.zeros
    result.min = low
    result.max = high
    edges, widths = histograms
    result.median = edges[len(edges) // 2]
    if widths is not None:
        standard = result.histograms.add(num_nan=stats.nans, type=statistics_pb2.Histogram.STANDARD)
        for low, high, count in widths:
            standard.buckets.add(low_value=low, high_value=high, sample_count=count)
    quantiles = result.histograms.add(num_nan=stats.nans, type=statistics_pb2.Histogram.QUANTILES)
    share = stats.numbers / HISTOGRAM_BUCKETS
    for low, high in itertools.pairwise(edges):
        quantiles.buckets.add(low_value=low, high_value=high, sample_count=share)


def equal_width(
    edges: Sequence[float], total: int, buckets: int
) -> list[tuple[float, float, float]]:
    """Equal-width buckets from quantile edges (each quantile bucket holds an equal share of
    `total`, spread over the equal-width buckets it overlaps in proportion): (low, high, count).
    """
    low, high = edges[0], edges[-1]
    if low == high:
        return [(low, high, float(total))]
    bounds, counts = equal_width_rows(np.array([edges], np.float64), np.array([total]), buckets)
    return list(zip(bounds[0, :-1].tolist(), bounds[0, 1:].tolist(), counts[0].tolist(),
                    strict=True))  # fmt: skip


def equal_width_rows(
    edges: np.ndarray, totals: np.ndarray, buckets: int
) -> tuple[np.ndarray, np.ndarray]:
    """`equal_width` of several features at once: a row of quantile edges each (its first below
    its last), and their totals; returns each row's `buckets + 1` bounds and its counts."""
    bounds = _bounds(edges[:, 0], edges[:, -1], buckets)
    share = np.asarray(totals, np.float64) / (edges.shape[1] - 1)
    a, b = edges[:, :-1, None], edges[:, 1:, None]  # a quantile bucket a row of each feature
    # Each quantile bucket's share by equal-width bucket, summed in order (as a loop over them
    # would add them): a spread in proportion to the overlap, or a point's whole share in the
    # bucket that holds it.
    overlap = np.clip(
        np.minimum(bounds[:, None, 1:], b) - np.maximum(bounds[:, None, :-1], a), 0, None
    )
    point = (a == b)[:, :, 0]
    width = np.where(point, 1.0, (b - a)[:, :, 0])
    rows = share[:, None, None] * overlap / width[:, :, None]
    rows[point] = 0.0
    feature, bucket = np.nonzero(point)
    at = a[feature, bucket, 0]
    # The bucket whose low bound is the last at or below the point (searchsorted "right").
    holder = np.minimum((bounds[feature] <= at[:, None]).sum(axis=1) - 1, buckets - 1)
    rows[feature, bucket, holder] = share[feature]
    return bounds, np.add.reduce(rows, axis=1)


def _bounds(low: np.ndarray, high: np.ndarray, buckets: int) -> np.ndarray:
    """Each row's `np.linspace(low, high, buckets + 1)`, as the row alone would get it: given
    arrays, linspace takes another formula for every row when one row's step is 0."""
    delta = high - low
    step = delta / buckets
    ramp = np.arange(buckets + 1, dtype=np.float64)
    tiny = step == 0  # a denormal delta: linspace divides first
    bounds = np.where(tiny[:, None], (ramp / buckets) * delta[:, None], ramp * step[:, None])
    bounds += low[:, None]
    bounds[:, -1] = high
    return bounds


def _bytes(result: statistics_pb2.BytesStatistics, stats: FeatureStats) -> None:
    _common(result.common_stats, stats)
    result.unique = stats.distinct_estimate()
    result.avg_num_bytes = stats.length / stats.values if stats.values else 0.0
    result.min_num_bytes = float(stats.min_length or 0)
    result.max_num_bytes = float(stats.max_length)
    result.max_num_bytes_int = stats.max_length
