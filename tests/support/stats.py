"""Comparing statistics accumulators field by field."""

from __future__ import annotations

import math

import numpy as np

from beam_jobs.stats.accumulate import FeatureStats


def _state(stats: FeatureStats) -> dict:
    """An accumulator's fields, its sample's as fields of their own."""
    state = stats.__getstate__()
    # The mean is origin + mean: where the origin sits between them is how it was summed.
    state["mean"] = state.pop("origin") + state["mean"]
    sample = state.pop("sample")
    if sample is not None:
        state |= {f"sample.{name}": value for name, value in sample.__getstate__().items()}
    return state


def assert_same_state(a: FeatureStats, b: FeatureStats, close: tuple[str, ...] = ()) -> None:
    """The same fields (generators by where they are; `close` ones within float rounding;
    the others' floats to the sign of a zero, which statistics.pb's bytes show)."""
    mine, theirs = _state(a), _state(b)
    assert sorted(mine) == sorted(theirs)
    for name, value in mine.items():
        other = theirs[name]
        if isinstance(value, np.ndarray):
            assert np.array_equal(value, other, equal_nan=True), name
            if value.dtype.kind == "f":
                assert np.array_equal(np.signbit(value), np.signbit(other)), name
        elif isinstance(value, np.random.Generator):
            assert value.bit_generator.state == other.bit_generator.state, name
        elif name in close:
            assert math.isclose(value, other, rel_tol=1e-9, abs_tol=1e-9), name
        elif name != "sampler":
            assert value == other or (value != value and other != other), name
            if isinstance(value, float):
                assert math.copysign(1, value) == math.copysign(1, other), name
