"""The second pass's index: each write task's stretches go to the units that read them, so
no element holds every run's index; a unit reads its buckets' stretches in task order."""

from __future__ import annotations

import numpy as np
import pytest

from beam_jobs.core.errors import DataError
from beam_jobs.core.tasks import Run, WrittenRuns, WrittenShard
from beam_jobs.plan.shuffle import plan_shuffle
from beam_jobs.sink.join_parts import merged_tallies
from beam_jobs.sink.shuffle.units import RunStretches, openers, unit_pieces, unit_work

# 2 shards of 3 buckets each, one unit a bucket (fewer than 8 shards): units (shard, part).
PLAN = plan_shuffle({None: 2}, {None: 2 * 3 * 10e6}, seed=0, bucket_bytes=10_000_000)
TASKS = {("", 0): (0, 1), ("", 1): (2,)}
OPENS = openers(TASKS, PLAN)
TEMP = "/t/.tfrecord-etl-tmp-0a"


def _output(task: int, shard: int, runs: list[tuple[list[int], list[int]]]) -> WrittenRuns:
    """A write task's output: runs of (buckets, counts), 10 framed bytes a record."""
    path = f"/t/.tfrecord-etl-tmp-0a/task{task}.runs"
    made, offset = [], 0
    for buckets, counts in runs:
        b, c = np.array(buckets, np.int64), np.array(counts, np.int64)
        made.append(Run(path, offset, b, c, 10 * c))
        offset += 14 * int(c.sum())
    records = sum(sum(c) for _, c in runs)
    return WrittenRuns(
        task=task, split=None, shard=shard, num_shards=2, name=f"s{shard}", path=path,
        records=records, bytes=10 * records, crc32c="", runs=tuple(made),
    )  # fmt: skip


OUTPUTS = [
    _output(0, 0, [([0, 1, 2, 3, 4, 5], [1, 1, 1, 1, 1, 1]), ([0, 4], [2, 3])]),
    _output(1, 0, [([2, 5], [1, 1])]),
    _output(2, 1, [([0, 3, 4, 5], [4, 4, 4, 4])]),
]


def _gathered(outputs: list[WrittenRuns]) -> dict[tuple[str, int, int], list[object]]:
    keyed: dict[tuple[str, int, int], list[object]] = {}
    for output in outputs:
        for key, piece in unit_pieces(output, PLAN, OPENS, TEMP):
            keyed.setdefault(key, []).append(piece)
    return keyed


def test_each_unit_gets_only_its_buckets_stretches_and_part_0_the_tallies():
    assert PLAN.parts_per_shard(None) == 3 and len(PLAN.units()) == 6
    keyed = _gathered(OUTPUTS)
    assert sorted(keyed) == [("", s, p) for s in (0, 1) for p in (0, 1, 2)]
    for (_, shard, part), pieces in keyed.items():
        for piece in pieces:
            if isinstance(piece, tuple):
                assert piece[2] == (f"task{piece[0]}.runs",)  # named in the folder: short
                stretches = RunStretches.from_wire(piece, TEMP).stretches
                assert set(stretches[:, 0].tolist()) == {3 * shard + part}
    tallies = {k: [p.part for p in v if isinstance(p, WrittenShard)] for k, v in keyed.items()}
    assert tallies == {
        ("", 0, 0): [0, 1], ("", 0, 1): [], ("", 0, 2): [],
        ("", 1, 0): [2], ("", 1, 1): [], ("", 1, 2): [],
    }  # fmt: skip
    assert all(not p.temp_path for v in keyed.values() for p in v if isinstance(p, WrittenShard))


def test_a_units_stretches_come_in_task_then_run_order_whatever_the_arrival():
    keyed = _gathered(OUTPUTS)
    work = unit_work(("", 1, 1), reversed(keyed[("", 1, 1)]), PLAN, TEMP)
    # bucket 4: task 0's first run (1 record), its second (3), then task 2's (4).
    assert work.stretches[:, [0, 2]].tolist() == [[4, 1], [4, 3], [4, 4]]
    assert work.paths == (
        "/t/.tfrecord-etl-tmp-0a/task0.runs",
        "/t/.tfrecord-etl-tmp-0a/task2.runs",
    )
    assert work.stretches[:, 1].tolist() == [0, 0, 1]
    assert work.stretches[:, 3].tolist() == [4 * 4, 84 + 4 * 2, 4 * 8]  # lengths at
    assert work.unit == PLAN.unit(("", 1, 1)) and work.tallies == ()
    first = unit_work(("", 0, 0), keyed[("", 0, 0)], PLAN, TEMP)
    assert [t.part for t in first.tallies] == [0, 1]
    assert merged_tallies(first.tallies, TEMP, TASKS[("", 0)]).records == 11 + 2
    assert first.records == 1 + 2 + 4  # bucket 0: task 0's two runs, task 2's run


def test_a_part_no_run_holds_a_record_of_is_still_written():
    keyed = _gathered([_output(0, 0, [([0], [5])]), _output(1, 0, []), _output(2, 1, [])])
    assert sorted(keyed) == [("", s, p) for s in (0, 1) for p in (0, 1, 2)]
    empty = unit_work(("", 1, 2), keyed[("", 1, 2)], PLAN, TEMP)
    assert empty.records == 0 and empty.paths == ()


def test_lost_or_repeated_outputs_and_runs_short_of_their_records_are_refused():
    keyed = _gathered(OUTPUTS[:1] + OUTPUTS[2:])  # task 1's output lost
    work = unit_work(("", 0, 0), keyed[("", 0, 0)], PLAN, TEMP)
    with pytest.raises(DataError, match=r"parts of write tasks \[0, 1\]"):
        merged_tallies(work.tallies, TEMP, TASKS[("", 0)])  # what the unit's writer merges
    twice = _gathered(OUTPUTS + OUTPUTS[:1])
    with pytest.raises(DataError, match="arrived twice"):
        unit_work(("", 0, 1), twice[("", 0, 1)], PLAN, TEMP)
    short = OUTPUTS[0].__class__(**{**OUTPUTS[0].__dict__, "records": 1})
    with pytest.raises(DataError, match="wrote 1 records of split \\(all\\) but its runs hold 11"):
        list(unit_pieces(short, PLAN, OPENS, TEMP))


def test_shards_without_tasks_of_their_own_are_opened_by_the_last_task_range_before_them():
    # 5 shards whose input two ranges of tasks read (small shards, shuffled): the tallies of
    # tasks 0-1 go with shard 0, task 2's with shard 2 (`plan.shards.first_pass_tasks`).
    plan = plan_shuffle({None: 5}, {None: 5 * 10e6}, seed=0, bucket_bytes=10_000_000)
    tasks = {("", 0): (0, 1), ("", 2): (2,)}
    opens = openers(tasks, plan)
    assert opens == {("", 0): (0, 2), ("", 2): (2, 5)}
    outputs = [_output(0, 0, []), _output(1, 0, []), _output(2, 2, [([4], [3])])]
    keyed: dict[tuple[str, int, int], list[object]] = {}
    for output in outputs:
        for key, piece in unit_pieces(output, plan, opens, TEMP):
            keyed.setdefault(key, []).append(piece)
    assert sorted(keyed) == [("", s, 0) for s in range(5)]
    tallies = {k[1]: [p.part for p in v if isinstance(p, WrittenShard)] for k, v in keyed.items()}
    assert tallies == {0: [0, 1], 1: [], 2: [2], 3: [], 4: []}
    assert unit_work(("", 4, 0), keyed[("", 4, 0)], plan, TEMP).records == 3
