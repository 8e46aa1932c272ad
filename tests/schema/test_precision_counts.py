"""Whole numbers float32 changes, counted while writing (`schema.precision`)."""

import math

import numpy as np
import pyarrow as pa

from beam_jobs.schema.precision import rounded_integers, rounded_integers_of


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
    ]
    alone = [rounded_integers(c) for c in columns]
    assert alone == [0, 0, 2, 0, 1, 2, 1, 0, 1, 1, 0]
    assert rounded_integers_of(columns, min_columns=2) == alone
    assert rounded_integers_of(columns) == alone  # groups of fewer than 8: one by one
    assert rounded_integers_of(columns[:2], min_columns=2) == [0, 0]  # none past 2**24
    assert rounded_integers_of(columns, min_columns=2, max_rows=2) == alone  # 3 rows: alone
    assert rounded_integers_of([]) == []
    rng = np.random.default_rng(0)
    many = [pa.array(rng.normal(size=50) * 1e7) for _ in range(30)]
    many += [pa.array(rng.integers(0, 2**30, 50)) for _ in range(30)]
    assert rounded_integers_of(many) == [rounded_integers(c) for c in many]
