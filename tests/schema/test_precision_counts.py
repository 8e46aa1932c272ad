"""What float32 changes, counted while writing (`schema.precision`): whole numbers it rounds
and numbers below its range it stores as 0."""

import math

import numpy as np
import pyarrow as pa

from beam_jobs.schema.precision import (
    Float32Changes,
    float32_changes_of,
    rounded_integers,
    zeroed_numbers,
)


def _alone(columns):
    return [(rounded_integers(c), zeroed_numbers(c)) for c in columns]


def test_columns_looked_at_together_count_as_each_alone():
    big = 2**24 + 1  # the first whole number float32 changes
    columns = [
        pa.array([1.0, 2.0, -3.5], pa.float64()),
        pa.array([0.0, -0.0, math.nan], pa.float64()),
        pa.array([float(big), 5.0, -float(big)], pa.float64()),  # two change
        pa.array([float(2**24), math.inf, -math.inf], pa.float64()),  # none changes
        pa.array([1, None, big], pa.int64()),  # a null: counted alone
        pa.array([big, 2**53 + 1, 3], pa.int64()),
        pa.array([-(2**63), 2**63 - 1, 0], pa.int64()),  # -2**63 is a float32: one changes
        pa.array([7, 8, 9], pa.int32()),  # one of its type: alone
        pa.chunked_array([[float(big)], [1.0, 2.0]]),
        pa.array([[float(big), 1.0], [], None], pa.list_(pa.float64())),
        pa.array([b"x", b"y", b"z"]),
        pa.array([1e-50, -(2.0**-150), 2.0**-149], pa.float64()),  # two are stored as 0
        pa.array([1e-46, None, 1e-40], pa.float64()),  # one: 1e-40 is a subnormal
        pa.array([[1e-300], [0.0, -1e-60]], pa.list_(pa.float64())),
        pa.array([1e-45, 0.0, 1.0], pa.float32()),  # already float32: what it holds is stored
    ]
    alone = _alone(columns)
    assert [r for r, _ in alone] == [0, 0, 2, 0, 1, 2, 1, 0, 1, 1, 0, 0, 0, 0, 0]
    assert [z for _, z in alone] == [0] * 11 + [2, 1, 2, 0]
    assert float32_changes_of(columns, min_columns=2) == alone
    assert float32_changes_of(columns) == alone  # groups of fewer than 8: one by one
    assert float32_changes_of(columns[:2], min_columns=2) == [(0, 0), (0, 0)]  # none changes
    assert float32_changes_of(columns, min_columns=2, max_rows=2) == alone  # 3 rows: alone
    assert float32_changes_of([]) == []
    rng = np.random.default_rng(0)
    many = [pa.array(rng.normal(size=50) * 1e7) for _ in range(30)]
    many += [pa.array(rng.integers(0, 2**30, 50)) for _ in range(30)]
    many += [pa.array(rng.normal(size=50) * 1e-44) for _ in range(30)]
    assert float32_changes_of(many) == _alone(many)
    assert sum(z for _, z in float32_changes_of(many)) > 0


def test_changes_are_counted_by_feature():
    changes = Float32Changes()
    changes.count("a", pa.array([1e-50, 16777217.0, 1.0]))
    changes.count("a", pa.array([-1e-60]))
    changes.count("b", pa.array([2.5]))
    assert dict(changes.rounded) == {"a": 1, "b": 0}
    assert dict(changes.zeroed) == {"a": 2, "b": 0}
