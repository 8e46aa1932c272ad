"""Several sources' epoch order (pure): every record once without weights, each source's quota
with them, the same steps on any number of pipelines, resumable, each step holding each source
in its share as a random sample does, and weights changed at a step going on from where each
source stood: no record read twice or left out."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tfdata_reader import mixing
from tfdata_reader.mixed import MixedPlan, mixed_plan
from tfdata_reader.order import Sharing, epoch_steps, stream_count
from tfdata_reader.sequence import EpochSequence

SOURCES = [[3000, 17], [517, 1, 0, 900], [4000], [60, 60]]  # four sources of unlike sizes
RECORDS = [sum(s) for s in SOURCES]
TOTAL = sum(RECORDS)


def _expand(pieces):
    return [(p.shard, r) for p in pieces for r in range(p.start, p.stop)]


def _permuted(records: list, key: int, window: int) -> list:
    """A window permuted by a function of the part's key and the window's index (the reader
    uses TensorFlow's stateless shuffle; any such function gives the same steps)."""
    return [records[i] for i in np.random.default_rng([key, window]).permutation(len(records))]


def pipeline_steps(plan: MixedPlan) -> list[list[tuple[int, int]]]:
    """Each step's records as the reader assembles them: each part's windows permuted, the
    records before the start step left out, each position of a stream its source's next
    record, each step's chunk (and the final step's records) cut to this pipeline's part."""
    steps: list[list[tuple[int, int]]] = [[] for _ in range(plan.full_steps + plan.has_final)]
    for read in plan.streams:
        own = []
        for source in read.sources:
            records = _expand(source.pieces)
            assert len(records) == sum(source.windows)
            starts = np.cumsum([0, *source.windows])
            permuted = [r for w, size in enumerate(source.windows)
                        for r in _permuted(records[starts[w] : starts[w] + size], source.key,
                                           source.first_window + w)]  # fmt: skip
            own.append(iter(permuted[source.skip :]))
            assert len(permuted) - source.skip >= source.records
        records = [next(own[t]) for t in read.tags]
        lo, hi = read.full_slice
        for k in range(plan.full_steps):
            steps[k] += records[k * plan.chunk : (k + 1) * plan.chunk][lo:hi]
        if plan.has_final:
            a, b = read.final_slice
            steps[-1] += records[plan.full_steps * plan.chunk :][a:b]
    return steps


def global_steps(global_batch, pipelines, *, weights=None, start=0, **kw):
    """Each global step's records (sorted), read by `pipelines` input pipelines (`kw`: seed,
    epoch, window, segments, drop_remainder, sources)."""
    seed, epoch, window = kw.get("seed", 1), kw.get("epoch", 0), kw.get("window", 4)
    segments, drop_remainder = kw.get("segments", ()), kw.get("drop_remainder", False)
    sources = kw.get("sources", SOURCES)
    sequence = EpochSequence(tuple(map(tuple, sources)), seed, epoch, weights)
    streams = stream_count(global_batch)
    per = []
    for i in range(pipelines):
        sharing = Sharing(global_batch, streams, pipelines, i, drop_remainder)
        plan = mixed_plan(sequence, sharing, start_step=start, window=window, segments=segments)
        per.append(pipeline_steps(plan))
    count = max(len(p) for p in per)
    return [sorted(r for p in per if s < len(p) for r in p[s]) for s in range(count)]


def _source_of(unit: int) -> int:
    return int(np.searchsorted(np.cumsum([len(s) for s in SOURCES]), unit, side="right"))


EVERY = sorted((u, r) for u, n in enumerate([n for s in SOURCES for n in s]) for r in range(n))


@pytest.mark.parametrize("window", [1, 4, 1000])
@pytest.mark.parametrize("global_batch", [64, 96, 256])
def test_sources_read_every_record_once_in_the_same_steps_on_every_pipeline_count(
    window, global_batch
):
    reference = global_steps(global_batch, 1, window=window)
    assert len(reference) == epoch_steps(TOTAL, global_batch)
    assert sorted(r for step in reference for r in step) == EVERY
    assert all(len(step) == global_batch for step in reference[:-1])
    for pipelines in (2, 3, 4, 8):
        if global_batch % pipelines == 0:
            assert global_steps(global_batch, pipelines, window=window) == reference
    for step in (1, 9, len(reference) - 1, len(reference)):  # resuming on another count
        after = global_steps(global_batch, 4, window=window, start=step)
        assert reference[:step] + after == reference


def test_drop_remainder_leaves_out_the_partial_step_only():
    steps = global_steps(64, 2, drop_remainder=True)
    assert len(steps) == TOTAL // 64 and all(len(s) == 64 for s in steps)


@pytest.mark.parametrize("weights", [(0.1, 0.2, 0.3, 0.4), (1, 0, 0, 9), (0, 0, 0, 1)])
def test_weights_give_each_source_its_quota_repeating_or_sampling_it_anew_each_epoch(weights):
    quotas = [int(q) for q in mixing.quotas(RECORDS, weights)]
    if weights[0] == 0.1:
        assert quotas == [856, 1711, 2566, 3422]  # 8,555 records by weight (ties: the earlier)
    seen = []
    for epoch in (0, 1):
        steps = global_steps(64, 1, weights=weights, epoch=epoch)
        assert steps == global_steps(64, 4, weights=weights, epoch=epoch)
        read = [r for step in steps for r in step]
        assert len(read) == TOTAL and len(steps) == epoch_steps(TOTAL, 64)
        by_source = [[r for r in read if _source_of(r[0]) == i] for i in range(len(SOURCES))]
        assert [len(b) for b in by_source] == quotas
        for own, n, quota in zip(by_source, RECORDS, quotas, strict=True):
            times = set(Counter(own).values())
            if quota >= n:  # whole passes and part of one
                assert times <= {quota // n, quota // n + 1}
                assert len(set(own)) == n
            else:  # sampled: no record twice
                assert times <= {1}
        seen.append([set(b) for b in by_source])
    for i, (quota, n) in enumerate(zip(quotas, RECORDS, strict=True)):
        if 0 < quota < n:  # another sample each epoch
            assert seen[0][i] != seen[1][i]


@pytest.mark.parametrize("window, low", [(64, 0.8), (4, 0.8)])
def test_each_step_holds_each_source_in_its_share_spread_as_random_sampling_spreads_it(window, low):
    """A step's count of a source spreads about its share as a random sample's does
    (binomial: sqrt(p (1 - p) / G)): each stream's positions hold each source's exact share,
    drawn at random among its steps."""
    sources = [[40_000], [10_000, 10_000], [20_000]]
    weights = (0.5, 0.2, 0.3)
    steps = global_steps(256, 1, weights=weights, window=window, sources=sources)
    full = [s for s in steps if len(s) == 256]
    firsts = np.cumsum([0, 1, 2])
    for i, p in enumerate(weights):
        share = [sum(firsts[i] <= u < firsts[i] + len(sources[i]) for u, _ in s) / 256
                 for s in full]  # fmt: skip
        assert abs(np.mean(share) - p) < 0.002, (i, np.mean(share))
        ratio = np.std(share) / np.sqrt(p * (1 - p) / 256)
        assert low <= ratio <= 1.15, (i, ratio)


@pytest.mark.parametrize("at", [1, 30, 61, 89])
@pytest.mark.parametrize(
    "before, after", [(None, (0.1, 0.1, 0.1, 0.7)), ((0.7, 0.1, 0.1, 0.1), (0, 1, 1, 0))]
)
def test_weights_changed_at_a_step_go_on_from_where_each_source_stood(at, before, after):
    """The steps before the change are those of the weights before; after it, the rest of the
    epoch is shared by the new weights, each source going on with its next records: a record
    read before is not read again (unless its source must repeat), and none is left out
    between two read (each part's records come out in one fixed order)."""
    reference = global_steps(96, 1, weights=before)
    changed = global_steps(96, 1, weights=before, segments=((at, after),))
    assert changed[:at] == reference[:at]
    assert len(changed) == len(reference) and all(len(s) == 96 for s in changed[:-1])
    for pipelines in (2, 4):
        assert global_steps(96, pipelines, weights=before, segments=((at, after),)) == changed
    for resume in (at, at + 3):  # resumed after the change, on another pipeline count
        if resume < len(changed):
            later = global_steps(96, 2, weights=before, segments=((at, after),), start=resume)
            assert changed[:resume] + later == changed
    read = [r for step in changed for r in step]
    shares = mixing.apportion(TOTAL - at * 96, after)
    quotas = mixing.quotas(RECORDS, before)
    for i, n in enumerate(RECORDS):
        own = [r for r in read if _source_of(r[0]) == i]
        after_change = [r for step in changed[at:] for r in step if _source_of(r[0]) == i]
        assert abs(len(after_change) - shares[i]) <= len(SOURCES) * 8  # streams' roundings
        if quotas[i] <= n and len(own) <= 0.9 * n:  # all in the source's first pass
            assert max(Counter(own).values(), default=1) == 1, i  # never twice


def test_a_source_read_alone_reads_the_order_of_one_dataset():
    """Two sources, one of weight 0: the other's records come in its own epoch order."""
    sequence = EpochSequence(((500, 300), (100,)), 3, 0, (1.0, 0.0))
    plan = mixed_plan(sequence, Sharing(64, 2), window=2)
    assert all(read.sources[1].records == 0 for read in plan.streams)
    assert sum(read.sources[0].records for read in plan.streams) == 900


@pytest.mark.parametrize("before, after, at", [((1, 1), (1, 0), 100), ((0, 1), (1, 0), 40),
                                               ((1, 1), (0.8, 0.2), 100)])  # fmt: skip
def test_a_weight_raised_mid_epoch_reads_no_record_twice_while_its_source_has_more(
    before, after, at
):
    """Read past its part, a stream goes on with blocks of the rest of its source, each its
    own windows: records of the source's next pass are not drawn before this pass's."""
    sources = [[50_000], [3_000]]
    steps = global_steps(256, 1, weights=before, segments=((at, after),), sources=sources,
                         window=1000)  # fmt: skip
    big = [r for step in steps for r in step if r[0] == 0]
    assert len(big) < 50_000 and len(set(big)) == len(big)


def test_weights_in_proportion_or_changed_back_at_the_same_step_change_nothing():
    from tfdata_reader.history import WeightHistory

    names = ("a", "b")
    start = WeightHistory.starting(0, names, (50.0, 3.0))
    assert start.reading(0, 30, names, (100.0, 6.0)) == start
    changed = start.reading(0, 30, names, (49.0, 3.0))
    assert changed.segments == ((0, (50.0, 3.0)), (30, (49.0, 3.0)))
    assert changed.reading(0, 30, names, (50.0, 3.0)) == start  # back, at the same step
    assert changed.reading(0, 40, names, (98.0, 6.0)) == changed
    assert start.reading(0, 5, names, (1e308, 6e306)) == start


def _times_read(steps, sources) -> list[tuple[int, int]]:
    """Each source's fewest and most reads of one of its records."""
    firsts = np.cumsum([0, *map(len, sources)])
    counts = Counter(r for step in steps for r in step)
    found = []
    for i, units in enumerate(sources):
        own = [counts[(firsts[i] + u, r)] for u, n in enumerate(units) for r in range(n)]
        found.append((min(own), max(own)))
    return found


@pytest.mark.parametrize(
    "sources, before, after, at, expected",
    [  # a raised source whose quota was its records, or near them: this pass first, then the next
        ([[50_000], [3_000], [5_000]], (50, 3, 5), (49, 3, 5), 100, [(0, 1), (1, 2), (1, 2)]),
        ([[50_000], [3_000], [5_000]], (49, 3, 6), (49.5, 3, 5.5), 100, [(0, 1), (0, 1), (1, 2)]),
        ([[6_000, 2_000], [4_000]], None, (0.9, 0.1), 10, [(1, 2), (0, 1)]),
        ([[6_000, 2_000], [4_000]], None, (0.1, 0.9), 10, [(0, 1), (2, 3)]),
        # an up-sampled source lowered, or raised further: each pass read by all streams in turn
        ([[5_000], [1_500]], (1, 1), (1, 0.1), 6, [(1, 2), (0, 1)]),
        ([[5_000], [1_500]], (1, 1), (1, 0.01), 9, [(1, 2), (0, 1)]),
        ([[5_000], [1_500]], (1, 1), (0.2, 1), 12, [(0, 1), (2, 3)]),
        # a source up-sampled past 64 passes has no such bounds; the others keep theirs
        ([[60], [6_000], [1_500]], (0.7, 0.3, 0), (0.35, 0.3, 0.5), 1, [(33, 43), (0, 1), (2, 3)]),
    ],
)
def test_weights_changed_at_a_step_read_no_record_twice_while_one_of_its_source_is_left_out(
    sources, before, after, at, expected
):
    """However the weights change, each source's records are read a number of times that
    differ by at most one: a stream does not go on to a source's next pass while another
    leaves records of this one, nor stop short of the pass the source ends in."""
    steps = global_steps(256, 1, weights=before, segments=((at, after),), sources=sources,
                         window=1000)  # fmt: skip
    assert _times_read(steps, sources) == expected
    assert global_steps(256, 4, weights=before, segments=((at, after),), sources=sources,
                        window=1000, start=at + 1) == steps[at + 1 :]  # fmt: skip
