"""How several sources share an epoch: quotas and the interleave of their positions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tfdata_reader.mixing import allot, quotas, taken


def test_without_weights_every_record_once():
    assert quotas([700, 300, 1100]).tolist() == [700, 300, 1100]


def test_weights_apportion_the_epoch_exactly_by_largest_remainder():
    # 2,100 records: 0.5 -> 1050, 0.3 -> 630, 0.2 -> 420.
    assert quotas([700, 300, 1100], [0.5, 0.3, 0.2]).tolist() == [1050, 630, 420]
    assert quotas([5, 5], [1, 1]).tolist() == [5, 5]
    # 10 records in thirds: 3.33 each; the one left over goes to the earliest of the ties.
    assert quotas([3, 3, 4], [1, 1, 1]).tolist() == [4, 3, 3]
    assert quotas([1, 0, 0, 0], [1, 1, 1, 1]).tolist() == [1, 0, 0, 0]
    assert quotas([9, 1], [0, 1]).tolist() == [0, 10]


@pytest.mark.parametrize(
    "weights, message",
    [
        ([0.5], "1 weights for 2 sources"),
        ([0.0, 0.0], "not all 0"),
        ([-1.0, 2.0], "at least 0"),
        ([float("nan"), 1.0], "finite"),
    ],
)
def test_weights_that_share_nothing_are_refused(weights, message):
    with pytest.raises(ValueError, match=message):
        quotas([3, 4], weights)


def test_the_interleave_of_three_sources_in_a_sequence_of_ten():
    # Sources of 5, 3 and 2: the first against the other two, t * 5 // 10 rounded down; those
    # two share the rest x as x * 3 // 5 and the remainder.
    counts = taken([5, 3, 2], np.arange(11))
    assert counts.tolist() == [
        [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5],
        [0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3],
        [0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2],
    ]


@pytest.mark.parametrize("q", [[1], [7, 0, 3], [1000, 1, 999, 37, 5000], [3] * 9, [2**40, 3]])
def test_counts_add_up_grow_by_one_at_most_and_end_at_the_quotas(q):
    total = sum(q)
    t = np.unique(np.linspace(0, total, 4001).astype(np.int64))
    counts = taken(q, t)
    assert (counts.sum(axis=0) == t).all()
    assert counts[:, 0].tolist() == [0] * len(q) and counts[:, -1].tolist() == q
    steps = np.diff(counts, axis=1)
    assert (steps >= 0).all() and (steps <= np.diff(t)).all()
    assert taken(q, int(t[len(t) // 2])).tolist() == counts[:, len(t) // 2].tolist()  # a scalar t


def test_any_stretch_holds_each_sources_share_to_within_a_record_a_level():
    q = np.array([1000, 1, 999, 37, 5000, 250, 250, 64])  # 8 sources: 3 levels of halving
    total = int(q.sum())
    starts = np.arange(0, total - 256, 97)
    counts = taken(q, starts + 256) - taken(q, starts)
    share = 256 * q[:, None] / total
    assert np.abs(counts - share).max() < 3


def test_allot_shares_positions_within_bounds_near_proportion():
    low = np.array([[0, 0, 0], [2, 0, 0]])
    high = np.array([[9, 9, 1], [9, 9, 9]])
    counts = allot([4, 4, 4], [5, 7], low, high)
    assert counts.tolist() == [[2, 2, 1], [2, 2, 3]]
    assert allot([4, 4, 4], [6, 6], low, high).tolist() == [[2, 3, 1], [2, 1, 3]]
    unbounded = np.full((2, 3), 100)
    assert allot([4, 4, 4], [6, 6], 0 * low, unbounded).tolist() == [[2, 2, 2]] * 2


@pytest.mark.parametrize("seed", range(4))
def test_allot_finds_counts_whenever_any_exist(seed):
    """Against every choice of counts of 2 sources x 2 streams within small bounds."""
    rng = np.random.default_rng(seed)
    for _ in range(50):
        low = rng.integers(0, 3, (2, 2))
        high = low + rng.integers(0, 3, (2, 2))
        positions = rng.integers(0, 7, 2)
        for first in range(int(positions.sum()) + 1):
            quota = [first, int(positions.sum()) - first]
            exists = any(
                (np.array(c).reshape(2, 2).sum(0) == positions).all()
                and (np.array(c).reshape(2, 2).sum(1) == quota).all()
                for c in itertools.product(*(range(a, b + 1) for a, b in
                                             zip(low.flat, high.flat, strict=True)))
            )  # fmt: skip
            counts = allot(positions, quota, low, high)
            assert (counts is not None) == exists
            if counts is not None:
                assert counts.sum(0).tolist() == positions.tolist()
                assert counts.sum(1).tolist() == quota
                assert (low <= counts).all() and (counts <= high).all()
