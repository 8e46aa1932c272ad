"""The shuffle's seeded draws: every random choice of a shuffled conversion comes from a Philox
stream keyed by the seed and what is drawn for, so that the same inputs and options give the
same bytes on every run, runner and worker count.

A key is two 64-bit words: the seed, and a tag (what the draws are for, in the top 24 bits)
with the ids of who draws (the low 40 bits). Two streams with different tags or ids are
independent.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BUCKETS", "ORDER", "bucket_stream", "permutation", "stream", "uniform_below"]

BUCKETS = 0x62756B  # "buk": a write task's records dealt out to buckets (`runs.RunWriter`)
ORDER = 0x6F7264  # "ord": the order a bucket's records are written in (`permutation`)


def stream(seed: int, tag: int, ids: int) -> np.random.Philox:
    """The Philox stream of `seed` for `tag` and `ids` (< 2**40)."""
    key = np.array([seed, (tag << 40) | ids], dtype=np.uint64)
    return np.random.Philox(key=key)


def bucket_stream(seed: int, task: int, output: int) -> np.random.Philox:
    """Where a write task's records of one of its outputs (a split) go."""
    return stream(seed, BUCKETS, (task << 8) | output)


def permutation(seed: int, split: int, bucket: int, count: int) -> np.ndarray:
    """The order a bucket's `count` records are written in (the stream of the seed, the
    split's position and the bucket, sorted)."""
    draws = stream(seed, ORDER, (split << 32) | bucket).random_raw(count)
    return np.argsort(draws, kind="stable")


def uniform_below(draws: np.ndarray, bound: int) -> np.ndarray:
    """Raw 64-bit draws as integers in [0, bound) (the high 32 bits scaled; bound < 2**32)."""
    return ((draws >> np.uint64(32)) * np.uint64(bound)) >> np.uint64(32)
