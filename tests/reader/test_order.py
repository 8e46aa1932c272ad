"""The epoch order of shuffled datasets (pure): every record once an epoch, the same global
steps on any number of input pipelines, resumable from (epoch, step)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tfdata_reader.order import (
    EpochPlan,
    Sharing,
    Windows,
    epoch_plan,
    epoch_steps,
    stream_count,
    window_steps,
)
from tfdata_reader.sequence import EpochSequence, Piece, pieces_of, rotated_shards


@pytest.mark.parametrize(
    "global_batch, expected",
    [(1, 1), (31, 1), (32, 1), (64, 2), (96, 3), (100, 2), (256, 8), (1024, 32), (4096, 64),
     (4095, 63), (6, 1), (384, 12)],
)  # fmt: skip
def test_stream_count(global_batch, expected):
    assert stream_count(global_batch) == expected


def test_pieces_of_a_rotated_sequence_wrap_around():
    records = [3, 0, 5, 2]
    order = np.array([2, 0, 3, 1])  # 5 records of shard 2, 3 of shard 0, 2 of shard 3
    assert pieces_of(records, order, 0, 0, 10) == [Piece(2, 0, 5), Piece(0, 0, 3), Piece(3, 0, 2)]
    assert pieces_of(records, order, 4, 0, 10) == [
        Piece(2, 4, 5), Piece(0, 0, 3), Piece(3, 0, 2), Piece(2, 0, 4),
    ]  # fmt: skip
    assert pieces_of(records, order, 7, 2, 5) == [Piece(3, 1, 2), Piece(2, 0, 2)]
    assert pieces_of(records, order, 0, 4, 4) == []


def _expand(pieces):
    return [(p.shard, r) for p in pieces for r in range(p.start, p.stop)]


def _permuted(records: list, key: int, window: int) -> list:
    """A window's records permuted by a function of the stream's key and the window's index
    (the reader uses TensorFlow's stateless shuffle; any such function gives the same steps
    on every pipeline count)."""
    return [records[i] for i in np.random.default_rng([key, window]).permutation(len(records))]


def pipeline_steps(plan: EpochPlan) -> list[list[tuple[int, int]]]:
    """The records of each step as the reader assembles them: step by step, stream by stream,
    each stream's windows permuted, the steps before the start step left out, each chunk
    sliced."""
    steps: list[list[tuple[int, int]]] = [[] for _ in range(plan.full_steps)]
    cuts = np.cumsum([0, *plan.window_records])
    for read in plan.streams:
        records = _expand(read.full_pieces)
        assert len(records) == cuts[-1] or not read.full_pieces
        windows = [records[a:b] for a, b in itertools.pairwise(cuts)]
        records = [r for w, window in enumerate(windows)
                   for r in _permuted(window, read.window_key, read.first_window + w)]  # fmt: skip
        records = records[read.skip_steps * plan.chunk :]
        lo, hi = read.full_slice
        for s in range(plan.full_steps):
            if hi > lo:
                steps[s] += records[s * plan.chunk : (s + 1) * plan.chunk][lo:hi]
    if plan.final_records:
        steps.append([r for read in plan.streams for r in _expand(read.final_pieces)])
    return steps


def plan_of(records, sharing, *, seed, epoch, **kw) -> EpochPlan:
    """The plan of one source (`records`: its units' counts)."""
    return epoch_plan(EpochSequence.of(records, seed, epoch), sharing, **kw)


def _global_steps(records, global_batch, pipelines, drop_remainder=False, **kw):
    streams = stream_count(global_batch)
    per = [
        pipeline_steps(
            plan_of(records, Sharing(global_batch, streams, pipelines, i, drop_remainder), **kw)
        )
        for i in range(pipelines)
    ]
    count = max(len(p) for p in per)
    # A pipeline whose share of the final, partial step is empty (fewer records than
    # pipelines) has one step less; tf.distribute ends such an epoch for all replicas.
    assert all(len(p) in (count, count - 1) for p in per), [len(p) for p in per]
    return [sorted(r for p in per for r in (p[s] if s < len(p) else [])) for s in range(count)], per


CASES = [
    [1000],
    [3, 0, 517, 1, 1, 77],
    [256] * 7,
    [5000, 3, 2999, 1024],
    [1, 1, 1],
]


@pytest.mark.parametrize("records", CASES)
@pytest.mark.parametrize("global_batch", [8, 64, 96, 256, 1000])
def test_every_pipeline_count_gives_the_same_steps_and_every_record_once(records, global_batch):
    total = sum(records)
    reference, _ = _global_steps(records, global_batch, 1, seed=7, epoch=3)
    assert len(reference) == epoch_steps(total, global_batch)
    every = sorted(r for step in reference for r in step)
    assert every == sorted((s, r) for s, n in enumerate(records) for r in range(n))
    assert all(len(step) == global_batch for step in reference[: total // global_batch])
    for pipelines in (2, 4, 8, 3, 5):
        if global_batch % pipelines:
            continue
        steps, per = _global_steps(records, global_batch, pipelines, seed=7, epoch=3)
        assert steps == reference, pipelines
        for mine in per:  # each pipeline's share of a full step is exact
            assert all(len(s) == global_batch // pipelines for s in mine[: total // global_batch])


def test_pipelines_that_divide_the_streams_read_nothing_twice():
    records = [3000, 1234, 777]
    global_batch = 256  # 8 streams
    for pipelines in (1, 2, 4, 8):
        plans = [
            plan_of(records, Sharing(256, 8, pipelines, i), seed=1, epoch=0)
            for i in range(pipelines)
        ]  # fmt: skip
        read = [r for plan in plans for s in plan.streams
                for r in _expand(s.full_pieces) + _expand(s.final_pieces)]  # fmt: skip
        assert sorted(read) == sorted(set(read)) and len(read) == sum(records)
        assert global_batch % pipelines == 0


def test_drop_remainder_leaves_out_the_partial_step_only():
    records = [1000, 37]
    steps, _ = _global_steps(records, 64, 2, seed=0, epoch=0, drop_remainder=True)
    assert len(steps) == 1037 // 64 and all(len(s) == 64 for s in steps)


def test_each_epoch_and_seed_has_its_own_order_and_the_same_arguments_the_same():
    records = [500]  # one shard: the rotation alone changes where steps cut it
    a, _ = _global_steps(records, 64, 1, seed=1, epoch=0)
    b, _ = _global_steps(records, 64, 1, seed=1, epoch=1)
    c, _ = _global_steps(records, 64, 1, seed=2, epoch=0)
    again, _ = _global_steps(records, 64, 1, seed=1, epoch=0)
    assert a == again and a != b and a != c
    orders = {tuple(rotated_shards([1] * 6, 5, e)[0]) for e in range(20)}
    assert len(orders) > 10  # the shard order is drawn per epoch too


@pytest.mark.parametrize("window", [1, 3, 100])
@pytest.mark.parametrize("pipelines_before, pipelines_after", [(2, 4), (4, 1), (1, 8), (8, 2)])
def test_resuming_at_a_step_on_another_pipeline_count_continues_the_epoch(
    pipelines_before, pipelines_after, window
):
    records = [3, 0, 517, 1, 1, 77, 900]
    kw = {"seed": 4, "epoch": 2, "window": window}
    reference, _ = _global_steps(records, 96, 1, **kw)
    for step in (0, 1, 7, len(reference) - 1, len(reference)):
        before, _ = _global_steps(records, 96, pipelines_before, **kw)
        after, _ = _global_steps(records, 96, pipelines_after, start_step=step, **kw)
        assert before[:step] + after == reference


@pytest.mark.parametrize("records", CASES)
@pytest.mark.parametrize("window", [2, 5, 1000])
def test_windows_keep_every_record_once_and_the_steps_of_every_pipeline_count(records, window):
    total, global_batch = sum(records), 64
    kw = {"seed": 7, "epoch": 1, "window": window}
    reference, _ = _global_steps(records, global_batch, 1, **kw)
    every = sorted(r for step in reference for r in step)
    assert every == sorted((s, r) for s, n in enumerate(records) for r in range(n))
    assert all(len(step) == global_batch for step in reference[: total // global_batch])
    for pipelines in (2, 4, 8):
        assert _global_steps(records, global_batch, pipelines, **kw)[0] == reference


def _meet_again(first: list[list], second: list[list]) -> float:
    """Of the pairs of records in one step of `first`, the share in one step of `second`."""
    step_of = {r: s for s, step in enumerate(second) for r in step}
    pairs = met = 0
    for step in first:
        later = [step_of[r] for r in step]
        pairs += len(later) * (len(later) - 1) // 2
        met += sum(n * (n - 1) // 2 for n in np.unique(later, return_counts=True)[1])
    return met / pairs


@pytest.mark.parametrize(
    "records, window, most",
    [([5000] * 8, 1000, 1.1), ([5000] * 8, 32, 1.5), ([5000] * 8, 8, 3.0),
     ([40_000], 1000, 1.1), ([40_000], 1, 15.0)],
    ids=["8 shards of one size, whole streams", "8 shards, windows of 32 steps",
         "8 shards, windows of 8 steps", "one shard, whole streams", "one shard, no window"],
)  # fmt: skip
def test_batch_mates_of_one_epoch_meet_in_the_next_about_as_often_as_a_full_reshuffle_gives(
    records, window, most
):
    """A full reshuffle each epoch puts two batch-mates in one step again with chance
    (G - 1) / (N - 1); whole streams permuted come within 2x of it (8 shards of one size,
    with records at the same places, included), windows of `w` steps about 1 + steps / (8 w)
    times it, and no window (chunks read as they lie) far more."""
    total, global_batch = sum(records), 256
    full = (global_batch - 1) / (total - 1)
    epochs = [_global_steps(records, global_batch, 1, seed=3, epoch=e, window=window)[0]
              for e in range(3)]  # fmt: skip
    ratio = max(_meet_again(epochs[e], epochs[e + 1]) for e in range(2)) / full
    assert ratio <= most, ratio
    assert window > 1 or ratio > 10  # what windows are for


@pytest.mark.parametrize(
    "global_batch, record_bytes, budget, steps, expected",
    [(256, 100, 64 << 20, 10_000, 2621), (256, 100, 64 << 20, 500, 500),
     (256, 1_000_000, 64 << 20, 500, 1), (1, 0, 10, 5, 5)],
)  # fmt: skip
def test_a_window_holds_the_steps_that_fit_the_memory_at_most_the_epoch(
    global_batch, record_bytes, budget, steps, expected
):
    assert window_steps(global_batch, record_bytes, budget, steps) == expected


@pytest.mark.parametrize(
    "steps, starts, sizes",
    [(1, [0, 1, 2, 3, 4], [1] * 20), (2, [0, 1, 3, 5, 7], [1, *[2] * 9, 1]),
     (5, [0, 1, 5, 10, 15, 20], [1, 4, 5, 5, 5]), (8, [0, 1, 5, 13, 21, 29], [1, 4, 8, 7]),
     (40, [0, 1, 5, 21, 61, 101], [1, 4, 15])],
)  # fmt: skip
def test_an_epochs_windows_ramp_up_from_one_step_then_hold_the_windows_steps(steps, starts, sizes):
    """The first batches of an epoch wait for one step's records, not a window's."""
    windows = Windows(steps)
    assert [windows.start(k) for k in range(len(starts))] == starts
    for step in range(60):
        k = windows.index(step)
        assert windows.start(k) <= step < windows.start(k + 1)
    assert windows.sizes(0, 20) == sizes
    assert windows.sizes(2, 20) == sizes[2:]


def test_a_plan_reads_windows_ramping_up_from_its_start_steps_window():
    sharing = Sharing(64, 2)
    plan = plan_of([10_000], sharing, seed=0, epoch=0, window=40)
    assert plan.windows == (1, 4, 16, 40, 40, 40, 15)  # 156 full steps
    resumed = plan_of([10_000], sharing, seed=0, epoch=0, window=40, start_step=30)
    assert resumed.windows == (40, 40, 40, 15)  # from step 21, its window's first
    assert {read.skip_steps for read in resumed.streams} == {9}


def test_a_start_step_past_the_epoch_is_refused():
    with pytest.raises(ValueError, match="start_step 3 is past the epoch's 2 steps"):
        plan_of([100], Sharing(64, 2), seed=0, epoch=0, start_step=3)


def test_batches_of_a_shuffled_dataset_stay_random_samples():
    """Consecutive records of a shuffled dataset are a random sample: a step's records come
    from `streams` places of the sequence, so its spread is that of random positions."""
    records = [40_000] * 5
    steps, _ = _global_steps(records, 256, 1, seed=3, epoch=0)
    positions = [[s * 40_000 + r for s, r in step] for step in steps[:50]]
    spread = np.mean([np.std(p) for p in positions])
    rng = np.random.default_rng(0)
    random = np.mean([np.std(rng.choice(200_000, 256, replace=False)) for _ in range(50)])
    assert spread > 0.5 * random  # 8 streams spread over the whole dataset
    assert len(list(itertools.chain(*steps))) == 200_000


def test_sharing_counts_must_divide_the_global_batch():
    with pytest.raises(ValueError, match="global_batch 100 must be a multiple of streams"):
        Sharing(100, 3)
    with pytest.raises(ValueError, match=r"pipeline must be in \[0, 2\), got 2"):
        Sharing(100, 2, 2, 2)
