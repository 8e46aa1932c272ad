"""The shuffle's plan: buckets a shard, units, and runs and buckets that grow with the data."""

from __future__ import annotations

import math

import pytest

from beam_jobs.plan.shuffle import (
    BUCKET_BYTES,
    MAX_HELD_BYTES,
    MIN_STRETCH_BYTES,
    RUN_BYTES,
    ShuffleUnit,
    held_bytes,
    plan_shuffle,
)


def test_runs_and_buckets_keep_their_sizes_up_to_8_gb_then_grow_with_the_square_root():
    assert held_bytes(0) == (RUN_BYTES, BUCKET_BYTES) == (16 << 20, 32 << 20)
    assert held_bytes(8e9) == (22_897_337, 32 << 20)
    assert held_bytes(1e12) == (256_000_000, 256_000_000)
    assert held_bytes(1e14) == (MAX_HELD_BYTES, MAX_HELD_BYTES) == (512 << 20, 512 << 20)


@pytest.mark.parametrize("framed", [1e6, 1e9, 8.6e9, 3e10, 1e12, 4e12])
def test_a_runs_stretch_of_a_bucket_stays_at_least_64_kib_below_the_cap(framed):
    run, bucket = held_bytes(framed)
    assert run * bucket / framed >= MIN_STRETCH_BYTES == 64 << 10
    reads = math.ceil(framed / run) * math.ceil(framed / bucket)
    assert reads <= framed / MIN_STRETCH_BYTES + 2 * framed / BUCKET_BYTES + 1


def test_the_plan_sizes_runs_by_the_largest_split_and_cuts_shards_into_buckets():
    plan = plan_shuffle({"train": 4, "eval": 1}, {"train": 3e10, "eval": 1e9}, seed=7)
    run, bucket = held_bytes(3e10)
    assert plan.run_bytes == run == bucket == 44_340_501
    assert plan.splits == (("train", 4, math.ceil(3e10 / 4 / bucket)), ("eval", 1, 23))
    assert plan.splits[0][2] == 170
    assert plan.buckets("train") == 680 and plan.split_index("eval") == 1
    # Fewer than 8 shards: a unit a bucket, each a part of its shard.
    units = plan.units()
    assert len(units) == 680 + 23
    assert units[0] == ShuffleUnit("train", 0, 4, 0, 170, (0,))
    assert plan.parts_by_shard()[("eval", 0)] == tuple(range(23))
    # Enough shards: one unit a shard, its buckets in order.
    many = plan_shuffle({None: 8}, {None: 8 * 40e6}, seed=0)
    assert [u.buckets for u in many.units()][:2] == [(0, 1), (2, 3)]
    assert many.run_bytes == RUN_BYTES


@pytest.mark.parametrize(
    "shards", [{None: 3}, {"train": 2, "eval": 1}, {None: 9}, {"a": 5, "b": 5}]
)
def test_a_unit_is_found_from_its_key_and_its_buckets(shards):
    import numpy as np

    plan = plan_shuffle(shards, {k: 2e8 for k in shards}, seed=0, bucket_bytes=32 << 20)
    for unit in plan.units():
        assert plan.unit(unit.key) == unit
        assert plan.parts_per_shard(unit.split) == unit.num_parts
        found = plan.units_of(unit.split, np.array(unit.buckets, np.int64))
        assert set(zip(*(a.tolist() for a in found), strict=True)) == {(unit.shard, unit.part)}
