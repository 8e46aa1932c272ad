"""Moments of numbers that stay exact where a naive sum would not: taken from differences
to an origin (a feature's first number; integers shifted by it exactly in int64), and a
running mean kept as a double and the rounding error of the last sum (`two_sum`), so that
ids near 4e18 that differ by 1 give the spread of exact arithmetic across batches and
shards (`accumulate.FeatureStats`, `packed`, `batches`)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["moments", "two_sum"]


def moments(numbers: np.ndarray, origin: float) -> tuple[float, float]:
    """The mean less `origin` and the sum of squared deviations of finite numbers (1-D),
    computed from their differences to `origin` (a feature's first number, as a double):
    integers are shifted by it exactly in int64 while their differences fit (ids near 4e18
    that differ by 1 lose nothing to float64's spacing of 512 there), and no sum of large
    values cancels."""
    base, fraction = origin, 0.0
    if numbers.dtype.kind in "iu":
        whole = int(origin)  # exact, as is the fraction a double holds past it
        # An int64 near it (2**63, the double nearest 2**63 - 1, is none), and what it is off.
        shift = min(max(whole, -(2**63)), 2**63 - 1)
        if max(abs(int(numbers.max()) - shift), abs(int(numbers.min()) - shift)) < 2**62:
            shifted = (numbers.astype(np.int64) - np.int64(shift)).astype(np.float64)
            base, fraction = shift, (origin - whole) + float(whole - shift)
        else:  # too far apart for int64: as floats
            shifted = numbers.astype(np.float64) - origin
    else:
        shifted = numbers.astype(np.float64) - np.float64(base)
    mean = float(shifted.mean())
    deviations = shifted - mean
    with np.errstate(over="ignore"):  # float32's range squared can pass float64's
        m2 = float(np.dot(deviations, deviations))
    return mean - fraction, m2


def two_sum(a: Any, b: Any) -> tuple[Any, Any]:
    """a + b as the double nearest it and what that rounding left out, exactly (Knuth's
    TwoSum; for floats or NumPy arrays alike): a mean moved to the origin loses nothing."""
    total = a + b
    b_part = total - a
    return total, (a - (total - b_part)) + (b - b_part)
