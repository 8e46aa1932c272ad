"""How several sources share an epoch: pure arithmetic on their record counts and weights.

Each source has a *quota*, its records in an epoch (`quotas`): without weights all of its
records, once each; with weights, the epoch's records (all sources' together) apportioned by
weight, so that a source under its quota repeats and one over it is sub-sampled.

The epoch's sequence interleaves the sources by `taken`: among its first `t` positions, source
`i` holds `taken(quotas, t)[i]` of them. The sources are split in two groups, which share the
first `t` positions in proportion to their quotas, rounded down for the first group; each group
shares its positions among its own two halves the same way, down to single sources. So every
count is a whole number, they add up to `t` exactly, each grows with `t` (a source's positions
among any stretch of the sequence are one run of its own sequence) and ends at its quota, and
any stretch of `n` positions holds each source's share of `n` to within one record a level of
halving.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["apportion", "quotas", "taken"]

_EXACT_BELOW = 1 << 31  # sequences shorter than this share positions in int64 arithmetic


def quotas(
    records: Sequence[int] | np.ndarray, weights: Sequence[float] | None = None
) -> np.ndarray:
    """Each source's records in an epoch: `records` without weights; with them, the sum of
    `records` apportioned by weight (`apportion`).

    Raises:
      ValueError: for negative record counts, or weights that are negative, not finite, all
        zero, or not one for each source.
    """
    counts = np.asarray(records, dtype=np.int64)
    if (counts < 0).any():
        raise ValueError(f"record counts must not be negative, got {list(records)}")
    if weights is None:
        return counts
    if len(weights) != len(counts):
        raise ValueError(f"{len(weights)} weights for {len(counts)} sources")
    return apportion(int(counts.sum()), weights)


def apportion(total: int, weights: Sequence[float] | np.ndarray) -> np.ndarray:
    """`total` shared by weight: largest remainders (ties to the earlier source), so that the
    shares add up to it exactly.

    Raises:
      ValueError: for weights that are negative, not finite or all zero.
    """
    w = np.asarray(weights, dtype=np.float64)
    if not np.isfinite(w).all() or (w < 0).any() or not w.max(initial=0) > 0:
        raise ValueError(f"weights must be finite, at least 0 and not all 0, got {list(weights)}")
    w = w / w.max()  # (weights near the largest float would overflow their sum)
    exact = w / w.sum() * total
    base = np.floor(exact).astype(np.int64)
    short = total - int(base.sum())
    # The largest remainders get one more; a stable sort gives ties to the earlier source.
    order = np.argsort(-(exact - base), kind="stable")
    base[order[:short]] += 1
    return base


def taken(quotas: Sequence[int] | np.ndarray, t: int | np.ndarray) -> np.ndarray:
    """Each source's positions among the first `t` of the epoch's sequence (`t` from 0 to the
    quotas' sum; an array of them gives a column each): shape `[sources]` or
    `[sources, len(t)]`."""
    q = np.asarray(quotas, dtype=np.int64)
    at = np.asarray(t, dtype=np.int64)
    out = np.zeros((len(q), *at.shape), dtype=np.int64)
    _share(q, 0, len(q), at, out)
    return out


def _share(q: np.ndarray, lo: int, hi: int, t: np.ndarray, out: np.ndarray) -> None:
    """Shares `t` positions among sources [lo, hi): the first half of them gets its part of `t`
    in proportion to its quotas, rounded down; the second half the rest."""
    if hi - lo == 1:
        out[lo] = t
        return
    mid = (lo + hi) // 2
    first, whole = int(q[lo:mid].sum()), int(q[lo:hi].sum())
    if not whole:
        head = np.zeros_like(t)
    elif whole < _EXACT_BELOW:  # t x first < 2**62: exact in int64
        head = t * first // whole
    else:  # past 2**31 records: Python's integers (a plan asks for thousands of t, not more)
        head = np.asarray(t.astype(object) * first // whole, dtype=np.int64)
    _share(q, lo, mid, head, out)
    _share(q, mid, hi, t - head, out)
