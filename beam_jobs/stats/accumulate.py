"""Per-feature statistics accumulated over the Arrow batches a writer already holds, and merged.

Each update is a handful of NumPy/Arrow kernels over a whole column (no per-row Python): value
counts per record from the list offsets; for numbers the count, mean and squared deviations
(merged with Chan's formula, which stays exact where sums of squares would cancel), min, max,
zeros and NaNs, all exact, and a uniform sample of fixed size (bottom-k: the values with the
smallest random keys) that a finished shard turns into its quantile edges; for bytes the
lengths, every value's exact count while a feature has at most EXACT_DISTINCT distinct values
(Arrow's value_counts per batch, folded with a group-by), then a distinct-count sketch (KMV)
and a top-k sketch (Misra-Gries) seeded with those counts, the sketches from tfx-bsl: top
values and distinct counts are exact where they can be, and said to be estimates where not.
Shards' quantile edges are merged in tfx-bsl's quantile sketch at publishing. An accumulator
holds its sketches live while a writer updates it, and serialized when pickled, as it travels
from writers to publishing.

Random keys and samples are drawn by a generator each accumulator seeds alike, and merging is
in a fixed order: the same conversion publishes the same statistics bytes.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_jobs.stats.moments import moments, two_sum
from beam_jobs.stats.sample import RESERVOIR, BottomK

__all__ = ["RESERVOIR", "FeatureStats", "bounded", "pick"]

# Rank error of the quantile sketch that merges the shards' edges: 1% of the values. Half that
# made adding values ten times slower here (larger buffers to sort).
QUANTILE_EPSILON = 0.01
_MAX_ELEMENTS = 1 << 32
KMV_SLOTS = 1024  # the distinct-count sketch's size: about 3% error beyond that many values
TOP_K_BUCKETS = 100  # Misra-Gries counters: the 10 top values are exact unless the tail is heavy
# Bytes values of one batch the top-k sketch gets once the feature has many distinct ones,
# weighted to stand for all of them.
SAMPLE_SIZE = 512
# Distinct bytes values past which the top-k sketch gets a sample of each batch as well: it
# costs 70 ns a value, most of it for values seen once, and the top values of a feature that
# has this many distinct ones are what a sample shows too.
MANY_DISTINCT = 10_000
_MG_DELTA_FIELD = 4
LONG_VALUE = 256  # bytes: longer values are one placeholder in the top values
LONG_PLACEHOLDER = "__LONG_VALUE__"
FINISHED_BUCKETS = 100
SHARES_HELD = 32  # finished shards' quantile shares held before they enter the sketch (26 KB)
# Distinct bytes values counted exactly (each value's count kept, long values as the
# placeholder); past it, the Misra-Gries sketch takes over, its counts estimates. A category,
# a code, a carrier or a plane's tail number stays under it; an id or free text does not.
EXACT_DISTINCT = 10_000


@dataclasses.dataclass
class FeatureStats:
    """What is known about one feature's values so far."""

    dtype: str
    records: int = 0  # records seen
    missing: int = 0  # records without a value (a null, an empty list)
    values: int = 0  # values in all records
    min_values: int | None = None  # fewest values in a record that has some
    max_values: int = 0
    numbers: int = 0  # the numbers that are not NaN (infinities included)
    finite: int = 0  # the finite numbers, which `mean` and `m2` cover
    # Their mean is origin + mean, unrounded (`origin` a double near it, `mean` the rest):
    # moments are taken of the differences to `origin` (`moments`), exact where the values
    # are not, and two accumulators' means are compared without cancelling.
    origin: float = 0.0
    mean: float = 0.0
    m2: float = 0.0  # sum of squared deviations from origin + mean
    plus_inf: int = 0
    minus_inf: int = 0
    low: float | None = None
    high: float | None = None
    zeros: int = 0
    nans: int = 0
    length: int = 0  # total bytes of all bytes values
    binary: bool = False  # some bytes value is not UTF-8 text
    min_length: int | None = None
    max_length: int = 0
    # A uniform sample of the numbers (at most RESERVOIR), this feature's the column `column`
    # of it: while `group` is set, a sample shared with the other number features of a shard
    # that take one number a record (stats.batches), else its own.
    sample: BottomK | None = None
    column: int = 0
    group: Any = None
    quantiles: Any = None  # tfx-bsl QuantilesSketch, merging finished shards' edges
    # Finished shards' shares (middles, weights) not in `quantiles` yet: added SHARES_HELD at a
    # time, as one call costs about as much as ten (50 us), whatever it holds.
    shares: list[Any] = dataclasses.field(default_factory=list[Any])
    distinct: Any = None  # tfx-bsl KmvSketch
    top: Any = None  # tfx-bsl MisraGriesSketch
    top_weight: float = 0.0  # 0: `top` got every value; else the largest weight of a sampled one
    # While `exact`: every value's count (a table of `values`, `counts`), and the value counts of
    # batches not folded into it yet; `top` stays None until the values are too many.
    exact: bool = True
    counts: Any = None
    pending: list[Any] = dataclasses.field(default_factory=list[Any])
    pending_rows: int = 0
    sampler: Any = None  # np.random.Generator for bytes samples, seeded alike in every accumulator
    edges: Any = None  # after `finish`: np.ndarray of the quantile sketch's 101 edges

    def __getstate__(self) -> dict[str, Any]:
        self._fold_counts()
        self._leave_group()
        self._add_held_shares()
        state = dict(self.__dict__)
        state["pending"], state["shares"] = [], []  # empty now: new lists, not this one's
        for name in ("distinct", "top"):
            if state[name] is not None:
                state[name] = state[name].Serialize()
        if self.quantiles is not None:
            # About 4x smaller to send (values may still be added); a no-op after the first.
            self.quantiles.Compact()
        return state  # the quantile sketch pickles itself

    def __setstate__(self, state: dict[str, Any]) -> None:
        from tfx_bsl import sketches

        for name, kind in (("distinct", sketches.KmvSketch), ("top", sketches.MisraGriesSketch)):
            if state[name] is not None:
                state[name] = kind.Deserialize(state[name])
        self.__dict__.update(state)

    def __deepcopy__(self, memo: dict[str, Any]) -> FeatureStats:
        copied = FeatureStats(self.dtype)
        copied.__setstate__(self.__getstate__())
        if self.quantiles is not None:
            copied.quantiles = pickle.loads(pickle.dumps(self.quantiles))
        if self.sample is not None:
            copied.sample = copy.deepcopy(self.sample)
        if self.sampler is not None:  # a bytes feature's: the copy draws on its own
            copied.sampler = copy.deepcopy(self.sampler)
        return copied

    def update(self, offsets: np.ndarray, values: pa.Array, scalar: bool = False) -> None:
        """Adds one batch: each record's values are `values[offsets[i]:offsets[i + 1]]`.
        `scalar`: a feature of one value a record (or none, a null): its counts are known
        without looking at the offsets."""
        self._leave_group()
        if scalar:
            rows, present_count = len(offsets) - 1, len(values)
            self.records += rows
            self.missing += rows - present_count
            self.values += present_count
            if present_count:
                self.min_values = pick(min, self.min_values, 1)
                self.max_values = max(self.max_values, 1)
        else:
            counts = np.diff(offsets)
            present = counts[counts > 0]
            self.records += len(counts)
            self.missing += len(counts) - len(present)
            self.values += int(offsets[-1] - offsets[0]) if len(offsets) else 0
            if len(present):
                self.min_values = pick(min, self.min_values, int(present.min()))
                self.max_values = max(self.max_values, int(present.max()))
        if len(values) == 0:
            return
        if self.dtype == "bytes":
            self._update_bytes(values)
        else:
            self._update_numbers(values)

    def _update_numbers(self, values: pa.Array) -> None:
        # NumPy on Arrow's buffer (no copy: the values have no nulls): a few microseconds a
        # call, where a conversion makes thousands of calls.
        numbers = values.to_numpy()
        low, high = numbers.min(), numbers.max()
        if numbers.dtype.kind == "f" and np.isnan(low):  # min and max are NaN with a NaN
            nan = np.isnan(numbers)
            self.nans += int(np.count_nonzero(nan))
            numbers = numbers[~nan]
            if len(numbers) == 0:
                return
            low, high = numbers.min(), numbers.max()
        self.numbers += len(numbers)
        # + 0.0: a zero extreme is +0.0, whichever zero min() met first (the order of a
        # reduction's comparisons differs between 1-D and 2-D, float32 and float64).
        self.low = pick(min, self.low, float(low) + 0.0)
        self.high = pick(max, self.high, float(high) + 0.0)
        if low <= 0 <= high:  # else no zero among them: no pass to count
            self.zeros += int(np.count_nonzero(numbers == 0))
        finite = numbers
        if numbers.dtype.kind == "f" and not np.isfinite([self.low, self.high]).all():
            # Infinities are counted apart: in the moments they would make the merged mean
            # inf or NaN depending on which shard held them.
            self.plus_inf += int(np.count_nonzero(numbers == np.inf))
            self.minus_inf += int(np.count_nonzero(numbers == -np.inf))
            finite = numbers[np.isfinite(numbers)]
        if len(finite):
            origin = self.origin if self.finite else float(finite[0])
            self._merge_moments(len(finite), *moments(finite, origin), origin)
        self._add_to_sample(numbers)

    def _add_to_sample(self, numbers: np.ndarray) -> None:
        if self.quantiles is not None or self.edges is not None or self.shares:
            raise RuntimeError("finished or merged statistics take no more values")
        if self.sample is None:
            self.sample = BottomK()
        self.sample.add(numbers)

    def _leave_group(self) -> None:
        """Takes this feature's column out of a shared sample (stats.batches) into its own."""
        if self.group is not None:
            self.group.release([self])

    def _merge_moments(self, n: int, mean: float, m2: float, origin: float) -> None:
        """Chan's merge of the finite numbers' count, mean (less `origin`) and squared
        deviations; the merged mean is taken from this one's origin."""
        if not self.finite:
            self.origin = origin
        total = self.finite + n
        # Python floats (a NumPy scalar would warn where float32's range squared passes
        # float64's; a Python float turns inf silently, as the merged m2 should). The
        # origins' difference first: exact for near ones, where the means' may not be.
        delta = (float(origin) - self.origin) + (float(mean) - self.mean)
        self.mean += delta * n / total
        self.m2 += float(m2) + delta * delta * self.finite * n / total
        self.finite = total
        self.origin, self.mean = two_sum(self.origin, self.mean)

    def _update_bytes(self, values: pa.Array) -> None:
        from tfx_bsl import sketches

        lengths = pc.binary_length(values)
        extremes = pc.min_max(lengths)
        self.length += int(pc.sum(lengths).as_py())
        if not self.binary:
            self.binary = not _is_utf8(values)
        self.min_length = pick(min, self.min_length, extremes["min"].as_py())
        self.max_length = max(self.max_length, extremes["max"].as_py())
        if self.distinct is None:
            self.distinct = sketches.KmvSketch(KMV_SLOTS)
            self.sampler = np.random.default_rng(0)
        self.distinct.AddValues(values)
        if self.exact:
            self._count(values)
            return
        if not self.top_weight and self.distinct.Estimate() > MANY_DISTINCT:
            self.top_weight = 1.0  # from now on, a sample (the same batches decide it alike)
        if self.top_weight:
            sample, weight = _sample(values, self.sampler)
            self.top_weight = max(self.top_weight, weight)
            self.top.AddValues(sample, pa.array(np.full(len(sample), weight, np.float32)))
        else:
            self.top.AddValues(values)

    def _count(self, values: pa.Array) -> None:
        """Adds a batch's value counts (values past LONG_VALUE bytes as the placeholder: the
        counts keep whole values, and long ones would make every shard's statistics large)."""
        values = values.cast(pa.large_binary())
        if self.max_length > LONG_VALUE:
            long = pc.greater(pc.binary_length(values), LONG_VALUE)
            values = pc.if_else(long, pa.scalar(LONG_PLACEHOLDER.encode(), pa.large_binary()),
                                values)  # fmt: skip
        found = pc.value_counts(values)
        self.pending.append(pa.table({"values": found.field(0), "counts": found.field(1)}))
        self.pending_rows += len(found)
        if self.pending_rows > EXACT_DISTINCT:
            self._fold_counts()

    def _fold_counts(self) -> None:
        """Folds the pending batches' counts into `counts`; past EXACT_DISTINCT values, the
        counts seed the sketches instead."""
        if not self.pending:
            return
        parts = list(self.pending)
        if self.counts is not None:
            parts.insert(0, self.counts)
        if len(parts) == 1:  # one batch's value counts: each value once already
            self.counts = parts[0]
        else:  # a group-by costs a millisecond or more however small its table
            # One thread: the rows in first-seen order (threads give them in any order, and
            # the pickled statistics would differ from run to run).
            merged = (
                pa.concat_tables(parts)
                .group_by("values", use_threads=False)
                .aggregate([("counts", "sum")])
            )
            self.counts = merged.rename_columns({"counts_sum": "counts"})
        self.pending, self.pending_rows = [], 0
        if self.counts.num_rows > EXACT_DISTINCT:
            self._to_sketch()

    def _to_sketch(self) -> None:
        """From exact counts to the top-k sketch, seeded with them (in value order: the same
        counts give the same sketch)."""
        from tfx_bsl import sketches

        self._fold_counts()
        counts = self.counts
        self.exact, self.counts = False, None
        # Values past 256 bytes are counted as one placeholder: the sketch keeps whole
        # values, and long ones (documents, images) would make every shard's sketch large.
        self.top = sketches.MisraGriesSketch(
            TOP_K_BUCKETS,
            large_string_threshold=LONG_VALUE,
            large_string_placeholder=LONG_PLACEHOLDER,
        )
        if counts is not None and counts.num_rows:
            counts = counts.sort_by("values")
            weights = pc.cast(counts.column("counts"), pa.float32()).combine_chunks()
            values = counts.column("values").combine_chunks().cast(pa.binary())
            self.top.AddValues(values, weights)

    def finish(self) -> None:
        """Ends a shard's updates: its sample (at most 256 KiB with its keys) becomes the 101
        edges of 100 equal shares (808 bytes), which is what publishing merges. Every shard's
        statistics are held at once while publishing: a terabyte makes thousands of shards."""
        self._leave_group()
        if self.sample is not None:
            filled = self.sample.filled
            self.edges = np.array(self.quantile_edges(FINISHED_BUCKETS)) if filled else None
            self.sample = None
        # It draws no more; pickling a generator costs more than the rest of a finished feature
        # (5,000 features' statistics cross between stages with every shard).
        self.sampler = None

    def merge(self, other: FeatureStats) -> None:
        """Adds another accumulator of the same feature (another shard's); `other` is spent
        (its sketches may become this one's). Both are finished first: a merged accumulator
        holds its quantiles in the sketch and takes no more values."""
        self._fold_into_sketch()
        other._fold_into_sketch()
        self.records += other.records
        self.missing += other.missing
        self.values += other.values
        self.max_values = max(self.max_values, other.max_values)
        self.min_values = pick(min, self.min_values, other.min_values)
        self.numbers += other.numbers
        if other.finite:
            self._merge_moments(other.finite, other.mean, other.m2, other.origin)
        self.plus_inf += other.plus_inf
        self.minus_inf += other.minus_inf
        self.binary = self.binary or other.binary
        self.low = pick(min, self.low, other.low)
        self.high = pick(max, self.high, other.high)
        self.zeros += other.zeros
        self.nans += other.nans
        self.length += other.length
        self.min_length = pick(min, self.min_length, other.min_length)
        self.max_length = max(self.max_length, other.max_length)
        self.top_weight = max(self.top_weight, other.top_weight)
        if self.dtype == "bytes":
            self._merge_counts(other)
        self._merge_shares(other)
        for name in ("distinct", "top"):
            theirs = getattr(other, name)
            if theirs is None:
                continue
            if getattr(self, name) is None:
                setattr(self, name, theirs)
            else:
                getattr(self, name).Merge(theirs)

    def _merge_counts(self, other: FeatureStats) -> None:
        """Exact counts add up while both are exact and few enough; else both are sketches,
        which the caller merges."""
        if self.exact and other.exact:
            other._fold_counts()
            if other.counts is not None:
                self.pending.append(other.counts)
                self.pending_rows += other.counts.num_rows
            # Folded (a group-by) only when the values could be too many to count exactly: the
            # same merge turns to the sketch as when every merge folded.
            held = self.counts.num_rows if self.counts is not None else 0
            if held + self.pending_rows > EXACT_DISTINCT:
                self._fold_counts()
            return
        if self.exact:
            self._to_sketch()
        if other.exact:
            other._to_sketch()

    def _fold_into_sketch(self) -> None:
        """Its sample (finished into edges first) or its edges, as shares of the sketch."""
        self.finish()
        if self.edges is not None:
            self._add_shares(self.edges, self.numbers)
            self.edges = None

    def _add_shares(self, edges: np.ndarray, numbers: int) -> None:
        """Adds a finished shard's numbers to the quantile sketch as its shares: each of the
        100 holds `numbers / 100` values, added at its middle (one more percent of rank error
        at most). Held until SHARES_HELD shards' are, then added in one call (the sketch is
        the same as when added one shard at a time: it takes the values in order)."""
        middles = (edges[:-1] + edges[1:]) / 2
        self.shares.append((middles, np.full(len(middles), numbers / len(middles), np.float32)))
        if len(self.shares) >= SHARES_HELD:
            self._add_held_shares()

    def _add_held_shares(self) -> None:
        if self.shares:
            self.quantiles = self._sketch_with_shares(self.quantiles)
            self.shares = []

    def _sketch_with_shares(self, sketch: Any) -> Any:
        """`sketch` (None: a new one) with the held shares added."""
        if sketch is None:
            from tfx_bsl import sketches

            sketch = sketches.QuantilesSketch(QUANTILE_EPSILON, _MAX_ELEMENTS, 1)
        middles, weights = zip(*self.shares, strict=True)
        sketch.AddValues(pa.array(np.concatenate(middles)), pa.array(np.concatenate(weights)))
        return sketch

    def _merge_shares(self, other: FeatureStats) -> None:
        """Takes `other`'s quantiles: its held shares after this one's, or its sketch."""
        if other.quantiles is None:
            self.shares.extend(other.shares)
            if len(self.shares) >= SHARES_HELD:
                self._add_held_shares()
            return
        self._add_held_shares()
        other._add_held_shares()
        if self.quantiles is None:
            self.quantiles = other.quantiles
        else:
            self.quantiles.Merge(other.quantiles)

    @property
    def average(self) -> float:
        """The mean of the numbers: +-inf when infinities of one sign are among them, NaN
        when of both (as NumPy's mean of the same numbers)."""
        if self.plus_inf or self.minus_inf:
            if self.plus_inf and self.minus_inf:
                return math.nan
            return math.inf if self.plus_inf else -math.inf
        return self.origin + self.mean if self.finite else 0.0

    @property
    def std_dev(self) -> float:
        """The population standard deviation of the numbers (TFDV's); NaN with infinities
        among them (as NumPy's)."""
        if self.plus_inf or self.minus_inf:
            return math.nan
        return math.sqrt(max(self.m2, 0.0) / self.finite) if self.finite else 0.0

    def quantile_edges(self, buckets: int) -> list[float]:
        """`buckets + 1` edges that cut the numbers into equal shares ([]: no numbers)."""
        return self.quantile_edges_of(buckets)[0]

    def quantile_edges_of(self, *buckets: int) -> list[list[float]]:
        """`quantile_edges` for each bucket count, from one look at the sample (sorted once)
        or the sketch (copied once: publishing asks two counts of thousands of features)."""
        low, high = self.low, self.high
        if low is None or high is None:
            return [[] for _ in buckets]
        self._leave_group()
        if self.sample is not None and self.sample.filled:
            found = [ranked[:, 0] for ranked in self.sample.ranked(*buckets)]
        elif self.edges is not None:  # finished: its 101 edges hold 100 equal shares
            found = [np.quantile(self.edges, np.linspace(0, 1, count + 1)) for count in buckets]
        elif self.quantiles is not None or self.shares:
            if self.quantiles is None:  # held shares alone: a sketch of them, asked and let go
                sketch = self._sketch_with_shares(None)
            else:
                # Asking finalizes a sketch (no values may be added after): ask a copy, which
                # answers every count as a fresh copy would (checked on 3,000 random sketches).
                self._add_held_shares()
                sketch = pickle.loads(pickle.dumps(self.quantiles))
            # One fixed-size list, made for the call: its values are the list's.
            found = [
                sketch.GetQuantiles(count).values.to_numpy(zero_copy_only=False)
                for count in buckets
            ]
        else:
            return [[] for _ in buckets]
        return [bounded(np.asarray(values, np.float64), low, high).tolist() for values in found]

    def top_values(self, k: int) -> list[tuple[bytes, int]]:
        """The `k` most frequent bytes values with a count each surely reached: exact while
        the feature has at most 100 distinct values, else at most the true count by the
        sketch's error (values not surely seen more often than that error are left out).
        Exact (`top_exact`) while the feature has at most EXACT_DISTINCT distinct values; past
        them, counts estimated by the sketch (from a sample of each batch, for values the
        sample holds more than once, once there are many)."""
        if self.exact:
            self._fold_counts()
            if self.counts is None:
                return []
            pairs = zip(self.counts.column("values").to_pylist(),
                        self.counts.column("counts").to_pylist(), strict=True)  # fmt: skip
            ranked = sorted(((count, value) for value, count in pairs), key=_by_count)
            return [(value, count) for count, value in ranked[:k]]
        if self.top is None:
            return []
        estimate = self.top.Estimate()  # upper bounds: lower bound + the sketch's delta
        delta = _misra_gries_delta(self.top)
        pairs = zip(estimate.field(0).to_pylist(), estimate.field(1).to_pylist(), strict=True)
        ranked = sorted(
            # More than one sampled value's weight: seen more than once in the sample.
            ((round(count - delta), value) for value, count in pairs
             if count - delta > self.top_weight),
            key=_by_count,
        )  # fmt: skip
        return [(value, count) for count, value in ranked[:k]]

    @property
    def top_exact(self) -> bool:
        """Whether `top_values` counted every value exactly (else the sketch's estimates)."""
        return self.exact

    def distinct_estimate(self) -> int:
        """The distinct values: exact while they are counted (`distinct_exact`), else KMV's
        estimate (exact below KMV_SLOTS as well)."""
        if self.exact:
            self._fold_counts()
            return self.counts.num_rows if self.counts is not None else 0
        return int(self.distinct.Estimate()) if self.distinct is not None else 0

    @property
    def distinct_exact(self) -> bool:
        """Whether `distinct_estimate` is exact."""
        return self.exact or (self.distinct is not None and self.distinct.Estimate() < KMV_SLOTS)


def _sample(values: Any, sampler: np.random.Generator) -> tuple[Any, float]:
    """At most SAMPLE_SIZE of a batch's values (a NumPy or Arrow array), drawn by the
    accumulator's own generator (seeded alike: the same batches give the same sample), and
    the weight each stands for."""
    if len(values) <= SAMPLE_SIZE:
        return values, 1.0
    picked = sampler.integers(0, len(values), SAMPLE_SIZE)
    sample = values.take(pa.array(picked)) if isinstance(values, pa.Array) else values[picked]
    return sample, len(values) / SAMPLE_SIZE


def _is_utf8(values: pa.Array) -> bool:
    """Whether every value is UTF-8 text (Arrow checks as it casts binary to string)."""
    text = pa.large_string() if pa.types.is_large_binary(values.type) else pa.string()
    try:
        values.cast(text)
    except pa.ArrowInvalid:
        return False
    return True


def _misra_gries_delta(sketch: Any) -> float:
    """How much the sketch's counts were decremented (`Estimate()` adds it to every count).

    tfx-bsl keeps it but does not expose it to Python; it is field 4 (a double) of the
    sketch's serialized `tfx_bsl.sketches.MisraGries` proto, read here as an unknown field.
    """
    from google.protobuf import empty_pb2
    from google.protobuf.unknown_fields import UnknownFieldSet

    message = empty_pb2.Empty()
    message.ParseFromString(sketch.Serialize())
    for field in UnknownFieldSet(message):
        if field.field_number == _MG_DELTA_FIELD:
            return struct.unpack("<d", struct.pack("<Q", field.data))[0]
    return 0.0  # proto3 leaves a zero out


def bounded(edges: Any, low: Any, high: Any) -> Any:
    """Quantile edges (a column each, or one) with their ends the exact minimum and maximum,
    whatever was sampled, and the inner edges within them."""
    # np.clip's checks cost more than the clipping of 101 edges (publishing asks twice a
    # feature); + 0.0 gives zeros as +0.0, whichever the sample held.
    edges = np.minimum(np.maximum(edges, low), high) + 0.0
    edges[0], edges[-1] = low, high
    return edges


def _by_count(pair: tuple[int, bytes]) -> tuple[int, bytes]:
    return -pair[0], pair[1]


def pick(choose: Any, ours: Any, theirs: Any) -> Any:
    """min/max of two values where None means none seen yet."""
    if theirs is None:
        return ours
    return theirs if ours is None else choose(ours, theirs)
