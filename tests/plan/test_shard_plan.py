import collections

import pytest

from beam_jobs.core.inputs import InputFile, Piece
from beam_jobs.core.tasks import ShardPart
from beam_jobs.plan.shards import (
    MIN_TASKS,
    choose_num_shards,
    cut_points,
    first_pass_tasks,
    plan_shards,
    plan_split_tasks,
    plan_tasks,
    shard_tasks,
)


@pytest.mark.parametrize(
    "est_bytes, target, records, forced, expected",
    [
        (1000, 1000, 10, None, 1),
        (1001, 1000, 10, None, 2),
        (10_000, 1000, 100, None, 10),
        (10_000, 1000, 3, None, 3),  # never more shards than records
        (0, 1000, 0, None, 1),  # at least one
        (10_000, 1000, 100, 4, 4),  # forced count wins
        (3.9e12, 256 * 2**20, 1e10, None, 14529),
    ],
)
def test_choose_num_shards(est_bytes, target, records, forced, expected):
    assert choose_num_shards(est_bytes, target, records, forced) == expected


def test_plan_shards_spans_files_in_equal_ranges():
    files = [InputFile("a", 10), InputFile("b", 0), InputFile("c", 5)]
    shards = plan_shards(files, 3)
    assert [s.pieces for s in shards] == [
        (Piece("a", 0, 5, 10),),
        (Piece("a", 5, 10, 10), Piece("b", 0, 0, 0)),  # empty: a piece, so its format sees it
        (Piece("c", 0, 5, 5),),
    ]
    assert [(s.index, s.num_shards, s.input_bytes) for s in shards] == [
        (0, 3, 5),
        (1, 3, 5),
        (2, 3, 5),
    ]


def test_plan_shards_uneven_split_and_file_boundaries():
    files = [InputFile("a", 7), InputFile("b", 3)]
    shards = plan_shards(files, 4)  # bounds 0, 2, 5, 7, 10
    assert [s.pieces for s in shards] == [
        (Piece("a", 0, 2, 7),),
        (Piece("a", 2, 5, 7),),
        (Piece("a", 5, 7, 7),),
        (Piece("b", 0, 3, 3),),
    ]


def test_plan_shards_one_shard_holds_every_file():
    files = [InputFile("a", 4), InputFile("b", 6)]
    assert plan_shards(files, 1)[0].pieces == (Piece("a", 0, 4, 4), Piece("b", 0, 6, 6))


def test_plan_shards_covers_every_byte_once():
    files = [InputFile(f"f{i}", size) for i, size in enumerate([0, 13, 1, 40, 7, 0, 29])]
    for n in range(1, 40):
        covered = {}
        for shard in plan_shards(files, n):
            for p in shard.pieces:
                for offset in range(p.start, p.end):
                    covered[(p.path, offset)] = covered.get((p.path, offset), 0) + 1
        assert covered == {(f.path, o): 1 for f in files for o in range(f.size)}


def test_plan_shards_rejects_zero():
    with pytest.raises(ValueError, match="num_shards must be at least 1, got 0"):
        plan_shards([InputFile("a", 1)], 0)


def test_cut_points_are_interior_piece_starts():
    files = [InputFile("a", 7), InputFile("b", 3)]
    assert cut_points(plan_shards(files, 4)) == {"a": [2, 5], "b": []}


def test_atomic_files_are_never_cut_and_empty_shards_are_dropped():
    # Three whole files (e.g. .gz inputs) of 10, 10 and 40 bytes cut into 6 ranges of 10:
    # every cut inside the 40-byte file snaps to its start or end, leaving 3 shards.
    files = [InputFile("a", 10, ()), InputFile("b", 10, ()), InputFile("c", 40, ())]
    shards = plan_shards(files, 6)
    assert [(s.index, s.num_shards) for s in shards] == [(0, 3), (1, 3), (2, 3)]
    assert [s.pieces for s in shards] == [
        (Piece("a", 0, 10, 10),),
        (Piece("b", 0, 10, 10),),
        (Piece("c", 0, 40, 40),),
    ]


def test_cuts_snap_to_the_nearest_allowed_offset():
    # Row groups start at 0, 30 and 70 of a 100-byte file; ideal cuts 25, 50, 75.
    files = [InputFile("p", 100, (30, 70))]
    shards = plan_shards(files, 4, split="train")
    assert [s.pieces for s in shards] == [
        (Piece("p", 0, 30, 100),),
        (Piece("p", 30, 70, 100),),
        (Piece("p", 70, 100, 100),),
    ]
    assert {s.split for s in shards} == {"train"}


def test_every_empty_file_gets_one_zero_length_piece():
    files = [InputFile("e1", 0), InputFile("a", 10), InputFile("e2", 0), InputFile("e3", 0)]
    shards = plan_shards(files, 2)
    assert [s.pieces for s in shards] == [
        (Piece("e1", 0, 0, 0), Piece("a", 0, 5, 10)),
        (Piece("a", 5, 10, 10), Piece("e2", 0, 0, 0), Piece("e3", 0, 0, 0)),
    ]
    assert [s.pieces for s in plan_shards([InputFile("e", 0)], 1)] == [(Piece("e", 0, 0, 0),)]


def test_split_tasks_lie_between_every_splits_cuts():
    files = [InputFile("a", 700), InputFile("b", 0), InputFile("c", 301), InputFile("d", 1000)]
    counts = [("train", 5), ("eval", 3), ("test", 2)]
    shards, tasks = plan_split_tasks(files, counts)
    # Each split's shards are the byte ranges plan_shards gives it.
    for split, count in counts:
        assert [s for s in shards if s.split == split] == plan_shards(files, count, split)
    # The tasks cover every byte once, in order, and each lies inside one shard of each split.
    read = [b for t in tasks for b in _bytes_of(t)]
    assert read == [(f.path, b) for f in files for b in range(f.size)]
    assert [t.index for t in tasks] == list(range(len(tasks)))
    for task in tasks:
        assert [p.split for p in task.parts] == ["train", "eval", "test"]
        for part in task.parts:
            shard = shards[[s.split for s in shards].index(part.split) + part.index]
            assert set(_bytes_of(task)) <= set(_bytes_of(shard))
    # Every shard of every split is made of at least one task's part.
    made = {(p.split, p.index) for t in tasks for p in t.parts}
    assert made == {(s.split, s.index) for s in shards}
    assert sum(t.input_bytes for t in tasks) == 2001


def test_split_tasks_of_equal_counts_are_the_shards():
    files = [InputFile("a", 1000)]
    shards, tasks = plan_split_tasks(files, [("train", 4), ("eval", 4)])
    assert [t.pieces for t in tasks] == [s.pieces for s in shards if s.split == "train"]
    assert [[p.index for p in t.parts] for t in tasks] == [[i, i] for i in range(4)]


def test_split_tasks_of_an_empty_input_make_every_shard():
    # --num_shards 3 of nothing: each split's shards are all written (empty), by some task.
    shards, tasks = plan_split_tasks([InputFile("a", 0)], [("train", 3), ("eval", 2)])
    assert [[(p.split, p.index) for p in t.parts] for t in tasks] == [
        [("train", 0), ("eval", 0)], [("train", 1), ("eval", 1)], [("train", 2), ("eval", 1)]
    ]  # fmt: skip
    assert [t.pieces for t in tasks] == [(), (), (Piece("a", 0, 0, 0),)]
    assert len(shards) == 5


def _bytes_of(shard) -> list[tuple[str, int]]:
    return [(p.path, b) for p in shard.pieces for b in range(p.start, p.end)]


def test_a_shard_of_many_files_is_written_in_parts_by_several_tasks():
    files = [InputFile(f"f{i}", 10) for i in range(7)] + [InputFile("big", 100)]
    shards = plan_shards(files, 2)  # 85 bytes each: f0-f6 and 15 of big; the rest of big
    tasks = shard_tasks(shards, files_per_task=3)
    assert [[p.path for p in t.pieces] for t in tasks] == [
        ["f0", "f1", "f2"], ["f3", "f4", "f5"], ["f6", "big"], ["big"],
    ]  # fmt: skip
    assert [t.parts for t in tasks] == [(ShardPart(None, 0, 2),)] * 3 + [(ShardPart(None, 1, 2),)]
    assert [(t.index, t.num_tasks, t.in_parts, t.whole_shard) for t in tasks] == [
        (0, 4, True, False), (1, 4, True, False), (2, 4, True, False), (3, 4, False, True),
    ]  # fmt: skip
    # Few enough files: a task per shard, each writing its shard whole.
    assert [(t.pieces, t.whole_shard) for t in shard_tasks(shards)] == [
        (s.pieces, True) for s in shards
    ]


def test_a_shard_of_more_than_task_bytes_is_written_in_parts_cut_where_its_files_may_be():
    # a: cut anywhere; gz: nowhere inside (compressed); p: only at 30 and 70 (row groups).
    files = [InputFile("a", 250), InputFile("gz", 300, cuts=()), InputFile("p", 100, cuts=(30, 70))]
    shards, tasks = plan_tasks(files, 2, task_bytes=90)
    assert shards == plan_shards(files, 2)  # the shards do not change: 0-250 and 250-650
    assert [t.pieces for t in tasks] == [
        (Piece("a", 0, 83, 250),), (Piece("a", 83, 166, 250),), (Piece("a", 166, 250, 250),),
        (Piece("gz", 0, 300, 300),), (Piece("p", 0, 30, 100),), (Piece("p", 30, 100, 100),),
    ]  # fmt: skip
    # 250-650 was cut at 330, 410, 490 and 570: in gz, moved to its ends; in p, to 30.
    assert [(t.index, t.num_tasks, t.parts[0].index, t.in_parts) for t in tasks] == [
        (0, 6, 0, True), (1, 6, 0, True), (2, 6, 0, True),
        (3, 6, 1, True), (4, 6, 1, True), (5, 6, 1, True),
    ]  # fmt: skip
    # Shards within the bound: a task each, writing its shard whole, as shard_tasks has them.
    shards, tasks = plan_tasks(files, 2, task_bytes=400)
    assert tasks == shard_tasks(shards)
    assert [t.whole_shard for t in tasks] == [True, True]
    # MIN_TASKS shards or more: enough tasks already, none is cut (joining would copy them).
    files = [InputFile("a", 8000)]
    shards, tasks = plan_tasks(files, MIN_TASKS - 1, task_bytes=500)
    assert len(shards) == MIN_TASKS - 1 and len(tasks) == 3 * (MIN_TASKS - 1)
    shards, tasks = plan_tasks(files, MIN_TASKS, task_bytes=500)
    assert tasks == shard_tasks(shards) and len(tasks) == MIN_TASKS


def test_task_bytes_and_files_per_task_bound_a_task_together():
    files = [InputFile(f"f{i}", 10) for i in range(5)] + [InputFile("big", 100)]
    _, tasks = plan_tasks(files, 1, files_per_task=2, task_bytes=60)
    assert [[(p.path, p.start, p.end) for p in t.pieces] for t in tasks] == [
        [("f0", 0, 10), ("f1", 0, 10)], [("f2", 0, 10), ("f3", 0, 10)],
        [("f4", 0, 10)], [("big", 0, 50)], [("big", 50, 100)],
    ]  # fmt: skip
    assert {t.parts[0] for t in tasks} == {ShardPart(None, 0, 1)}


def test_split_tasks_read_at_most_task_bytes():
    files = [InputFile("a", 1000)]
    shards, tasks = plan_split_tasks(files, [("train", 1), ("eval", 1)], task_bytes=300)
    assert [(t.pieces[0].start, t.pieces[0].end) for t in tasks] == [
        (0, 250),
        (250, 500),
        (500, 750),
        (750, 1000),
    ]
    assert [[(p.split, p.index) for p in t.parts] for t in tasks] == [
        [("train", 0), ("eval", 0)]
    ] * 4
    assert shards == [*plan_shards(files, 1, "train"), *plan_shards(files, 1, "eval")]


def _per_split(shards) -> dict[str | None, int]:
    return dict(collections.Counter(s.split for s in shards))


def test_a_shuffled_first_pass_reads_ranges_of_task_bytes_when_shards_are_smaller():
    files = [InputFile("a", 1000)]
    shards, tasks = plan_tasks(files, 20)
    # max(MIN_TASKS, 1000 / 100) = 10 ranges, each counted as a task of shard 2r of 20.
    first = first_pass_tasks(files, _per_split(shards), tasks, task_bytes=100)
    assert [(t.index, t.num_tasks, t.pieces) for t in first] == [
        (r, 10, (Piece("a", 100 * r, 100 * r + 100, 1000),)) for r in range(10)
    ]
    assert [t.parts for t in first] == [(ShardPart(None, 2 * r, 20),) for r in range(10)]
    assert not any(t.whole_shard for t in first)  # named by index, not a shard's name
    # As many shards as ranges or fewer, or no input bytes: the tasks of input order.
    shards, tasks = plan_tasks(files, 10)
    assert first_pass_tasks(files, _per_split(shards), tasks, task_bytes=100) == tasks
    shards, tasks = plan_tasks([InputFile("a", 0)], 20)
    assert first_pass_tasks([InputFile("a", 0)], _per_split(shards), tasks, task_bytes=100) == tasks


def test_a_shuffled_first_pass_with_splits_cuts_each_splits_ranges_alike():
    files = [InputFile("a", 1000)]
    shards, tasks = plan_split_tasks(files, [("train", 20), ("eval", 4)])
    first = first_pass_tasks(files, _per_split(shards), tasks, task_bytes=100)
    # train: 10 ranges (shards 0, 2, ..., 18 of 20 carry their tallies); eval: its 4 shards.
    assert [(t.pieces[0].start, t.pieces[0].end) for t in first] == [
        (0, 100), (100, 200), (200, 250), (250, 300), (300, 400), (400, 500), (500, 600),
        (600, 700), (700, 750), (750, 800), (800, 900), (900, 1000),
    ]  # fmt: skip
    assert [[(p.split, p.index, p.num_shards) for p in t.parts] for t in first] == [
        [("train", 2 * (t.pieces[0].start // 100), 20), ("eval", t.pieces[0].start // 250, 4)]
        for t in first
    ]


@pytest.mark.parametrize(
    "columns, rows, bound",
    [(12, 3_000, False), (400, 600, False), (400, 100, True), (3_000, 200, True)],
)
def test_a_plan_is_per_column_bound_with_more_columns_than_rows_a_task(
    tmp_path, columns, rows, bound
):
    from beam_jobs.config.convert import ConvertConfig
    from beam_jobs.plan.conversion import make_plan

    header = ",".join(f"c{i}" for i in range(columns))
    body = "".join(
        ",".join(str(r * columns + i) for i in range(columns)) + "\n" for r in range(rows)
    )
    (tmp_path / "in.csv").write_text(header + "\n" + body)
    config = ConvertConfig.from_flags({"input": [str(tmp_path / "in.csv")], "output": "o",
                                       "num_shards": 1})  # fmt: skip
    plan = make_plan(config)
    assert len(plan.tasks) == 1 and len(plan.features) == columns
    assert plan.per_column_bound is bound
