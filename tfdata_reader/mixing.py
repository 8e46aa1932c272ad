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

`allot` shares positions between sources and streams within bounds on each pair (a transport
problem): weights changed within an epoch use it to keep each stream inside the records its
sources have left of a pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["allot", "apportion", "quotas", "taken"]

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


def allot(
    positions: Sequence[int] | np.ndarray,
    quotas: Sequence[int] | np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
) -> np.ndarray | None:
    """Counts `x[i, j]` of source `i` for stream `j`: each stream's `positions[j]` shared among
    the sources so that source `i` gets `quotas[i]` in all, with `low <= x <= high` (arrays
    `[sources, streams]`); near `quotas[i] * positions[j] / sum(positions)` where the bounds
    leave room. None if no such counts exist.

    The bounds' slack is first filled in proportion, rounded down, then stream by stream as
    far as sources still need records; what is left is moved along augmenting paths (a
    stream's count of one source raised, another stream's lowered), as a max flow does.
    """
    rows = np.asarray(positions, dtype=np.int64) - low.sum(axis=0)
    cols = np.asarray(quotas, dtype=np.int64) - low.sum(axis=1)
    cap = np.asarray(high, dtype=np.int64) - low
    if (rows < 0).any() or (cols < 0).any() or (cap < 0).any() or rows.sum() != cols.sum():
        return None
    total = int(rows.sum())
    if total < _EXACT_BELOW:
        flow = cols[:, None] * rows[None, :] // max(total, 1)
    else:
        product = cols.astype(object)[:, None] * rows.astype(object)[None, :] // total
        flow = np.asarray(product, dtype=np.int64)
    flow = np.minimum(flow, cap)
    for j in range(len(rows)):  # each stream's rest, from the sources still short
        short = np.minimum(cap[:, j] - flow[:, j], cols - flow.sum(axis=1))
        need = rows[j] - int(flow[:, j].sum())
        flow[:, j] += np.minimum(short, np.maximum(need - np.cumsum(short) + short, 0))
    while (need := rows - flow.sum(axis=0)).any():
        path = _augmenting(flow, cap, need, cols - flow.sum(axis=1))
        if path is None:
            return None
        _push(flow, cap, path, need, cols - flow.sum(axis=1))
    return low + flow


def _augmenting(
    flow: np.ndarray, cap: np.ndarray, rows: np.ndarray, cols: np.ndarray
) -> list[tuple[int, int]] | None:
    """A path from a stream short of positions to a source short of records, as (source,
    stream) cells taken in turn: raised, lowered, raised, ... (breadth first)."""
    came: dict[tuple[str, int], tuple[str, int] | None] = {
        ("s", int(j)): None for j in np.flatnonzero(rows > 0)
    }
    frontier = list(came)
    while frontier:
        following = []
        for kind, at in frontier:
            if kind == "s":  # raise a source's count in this stream
                nodes = [("r", int(i)) for i in np.flatnonzero(flow[:, at] < cap[:, at])]
            else:  # lower this source's count in another stream
                nodes = [("s", int(j)) for j in np.flatnonzero(flow[at, :] > 0)]
            for node in nodes:
                if node in came:
                    continue
                came[node] = (kind, at)
                if node[0] == "r" and cols[node[1]] > 0:
                    cells, here = [], node
                    while (back := came[here]) is not None:
                        pair = (here[1], back[1]) if here[0] == "r" else (back[1], here[1])
                        cells.append(pair)
                        here = back
                    return cells[::-1]
                following.append(node)
        frontier = following
    return None


def _push(
    flow: np.ndarray,
    cap: np.ndarray,
    path: list[tuple[int, int]],
    rows: np.ndarray,
    cols: np.ndarray,
) -> None:
    """Moves as much as the path allows along it: its cells raised and lowered in turn."""
    first_stream, last_source = path[0][1], path[-1][0]
    room = min(int(rows[first_stream]), int(cols[last_source]))
    for k, (i, j) in enumerate(path):
        room = min(room, int(cap[i, j] - flow[i, j]) if k % 2 == 0 else int(flow[i, j]))
    for k, (i, j) in enumerate(path):
        flow[i, j] += room if k % 2 == 0 else -room
