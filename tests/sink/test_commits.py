"""Finished tasks' records: reused while every file is as recorded (or consumed by a good
join), and the files of attempts that never committed are the only ones a rerun removes."""

from __future__ import annotations

import pathlib
import pickle
import uuid

import google_crc32c
import pytest

from beam_jobs.sink import commits
from beam_jobs.sink.commits import KeptFile

A, B, C = "0123456789abcdef", "fedcba9876543210", "00000000ffffffff"


def _folder(tmp_path: pathlib.Path) -> pathlib.Path:
    folder = tmp_path / "out" / ".tfrecord-etl-tmp-0a1b"
    folder.mkdir(parents=True)
    return folder


def _reuse(folder: pathlib.Path, task: str) -> object:
    """`commits.reuse` as a new run asks it (a run lists the records once a process)."""
    return commits.reuse(str(folder), task, run=uuid.uuid4().hex)


def _kept(path: pathlib.Path, data: bytes, consumer: str = "") -> KeptFile:
    path.write_bytes(data)
    return KeptFile(str(path), len(data), f"{google_crc32c.value(data):08x}", consumer)


@pytest.mark.parametrize(
    "name, attempt",
    [
        ("data-00000-of-00002.tfrecord.3~0123456789abcdef", A),
        ("data-00000-of-00002.tfrecord.runs~0123456789abcdef", A),
        ("data-00000-of-00002.tfrecord~0123456789abcdef.dead_letter.jsonl", A),
        ("write-00003~0123456789abcdef.commit", A),
        ("/o/.tfrecord-etl-tmp-0a1b/done/unit-train-00002-1~fedcba9876543210.commit", B),
        ("data-00000-of-00002.tfrecord.3.0123456789abcdef", None),  # no attempt mark
        ("run.json", None),
        ("x~0123456789abcde", None),  # 15 digits
        ("x~0123456789abcdefa", None),  # 17 digits
    ],
)
def test_the_attempt_a_file_belongs_to_is_in_its_name(name, attempt):
    assert commits.attempt_of(name) == attempt
    if attempt:
        assert commits.attempt_name("s", attempt, ".x") == f"s~{attempt}.x"


def test_a_committed_task_is_reused_while_its_files_are_as_recorded(tmp_path):
    folder = _folder(tmp_path)
    shard = folder / commits.attempt_name("data-00000-of-00001.tfrecord.0", A)
    letter = folder / commits.attempt_name("data-00000-of-00001.tfrecord", A, ".dead_letter.jsonl")
    files = [_kept(shard, b"framed records" * 1000), _kept(letter, b'{"reason": "x"}\n')]
    assert commits.file_crc32c(str(shard)) == (14000, files[0].crc32c)
    assert _reuse(folder, "write-00000") is None  # nothing committed yet
    commits.commit(str(folder), "write-00000", A, {"records": 7}, files)
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.commit")) == [
        f"done/write-00000~{A}.commit"
    ]
    assert _reuse(folder, "write-00000") == {"records": 7}
    assert _reuse(folder, "write-00001") is None  # another task's
    assert commits.committed_attempts(str(folder)) == {A}
    shard.write_bytes(b"framed recordz" * 1000)  # the same size, other bytes
    assert _reuse(folder, "write-00000") is None
    shard.write_bytes(b"framed records" * 999)  # cut short
    assert _reuse(folder, "write-00000") is None
    shard.write_bytes(b"framed records" * 1000)
    letter.unlink()  # a file gone
    assert _reuse(folder, "write-00000") is None
    (folder / "done" / f"write-00000~{A}.commit").write_bytes(b"\x80garbage")
    assert _reuse(folder, "write-00000") is None  # an unreadable record


def test_a_part_consumed_by_a_good_join_needs_no_file_of_its_own(tmp_path):
    folder = _folder(tmp_path)
    join = commits.join_key("train", 3)
    assert (join, commits.unit_key(None, 3, 1), commits.write_task_key(12)) == (
        "join-train-00003",
        "unit--00003-1",
        "write-00012",
    )
    part = folder / commits.attempt_name("train-00003-of-00004.tfrecord.5", A)
    joined = folder / commits.attempt_name("train-00003-of-00004.tfrecord.joined", B)
    commits.commit(str(folder), "write-00005", A, "part", [_kept(part, b"p" * 10, join)])
    part.unlink()  # the join deleted it after joining
    assert _reuse(folder, "write-00005") is None  # no join committed
    commits.commit(str(folder), join, B, "shard", [_kept(joined, b"p" * 30)])
    assert _reuse(folder, "write-00005") == "part"
    joined.write_bytes(b"q" * 30)  # the joined shard damaged: the part is needed again
    assert _reuse(folder, "write-00005") is None
    assert _reuse(folder, join) is None


@pytest.mark.parametrize("flush", [None, 6], ids=["whole part kept", "gzip part kept to its flush"])
def test_a_part_its_join_appended_to_when_cut_short_is_good_while_what_the_join_keeps_is(
    tmp_path, flush
):
    folder = _folder(tmp_path)
    part = folder / commits.attempt_name("train-00003-of-00004.tfrecord.5", A)
    data = b"0123456789"
    part.write_bytes(data)
    crc = f"{google_crc32c.value(data):08x}"
    # A GZIP part's member: its bytes up to the sync flush, their CRC32C, its CRC-32, length.
    member = (flush, google_crc32c.value(data[:flush]), 1, 2) if flush else None
    kept = (flush, f"{google_crc32c.value(data[:6]):08x}") if flush else (10, crc)
    file = commits.part_file(str(part), 10, crc, "join-train-00003", member)
    assert file == KeptFile(str(part), 10, crc, "join-train-00003", kept)
    assert commits.part_file(str(part), 10, crc, "", member) == KeptFile(str(part), 10, crc)
    commits.commit(str(folder), "write-00005", A, "part", [file])
    with open(part, "r+b") as f:  # the join truncated to what it keeps and began to append
        f.truncate(kept[0])
        f.seek(kept[0])
        f.write(b"q" * 7)
    assert _reuse(folder, "write-00005") == "part"
    part.write_bytes(b"x" + data[1:] + b"q" * 7)  # what the join keeps is damaged
    assert _reuse(folder, "write-00005") is None
    part.write_bytes(data[: kept[0] - 1])  # shorter than what the join keeps
    assert _reuse(folder, "write-00005") is None


def test_a_rerun_removes_the_files_of_attempts_that_never_committed_only(tmp_path):
    folder = _folder(tmp_path)
    kept = folder / commits.attempt_name("data-00000-of-00002.tfrecord.runs", A)
    cut = folder / commits.attempt_name("data-00001-of-00002.tfrecord.runs", B)
    letter = folder / commits.attempt_name("data-00001-of-00002.tfrecord", B, ".dead_letter.jsonl")
    commits.commit(str(folder), "write-00000", A, 0, [_kept(kept, b"k")])
    for path in (cut, letter):
        path.write_bytes(b"half")
    partial = folder / "done" / f"write-00002~{C}.commit"  # cut short as it was written
    partial.write_bytes(b"half a record")
    marker = folder / "run.json"
    marker.write_text("{}")
    listing = [str(p) for p in folder.rglob("*") if p.is_file()]
    gone = commits.remove_uncommitted(str(folder), listing)
    assert sorted(pathlib.Path(p).name for p in gone) == sorted([cut.name, letter.name])
    # A record cut short keeps its attempt's files (none here) until publishing, and is none.
    assert sorted(p.name for p in folder.rglob("*") if p.is_file()) == sorted(
        [kept.name, f"write-00000~{A}.commit", partial.name, "run.json"]
    )
    assert _reuse(folder, "write-00002") is None


def test_a_record_or_kept_value_with_a_changed_byte_is_as_none_though_it_would_unpickle(tmp_path):
    folder = _folder(tmp_path)
    part = folder / commits.attempt_name("data-00000-of-00001.tfrecord.0", A)
    commits.commit(str(folder), "write-00000", A, {"note": 30000}, [_kept(part, b"r" * 10)])
    record = folder / "done" / f"write-00000~{A}.commit"
    assert _reuse(folder, "write-00000") == {"note": 30000}
    data = record.read_bytes()
    at = data.index((30000).to_bytes(2, "little"))  # the int in the pickle
    record.write_bytes(data[:at] + (30002).to_bytes(2, "little") + data[at + 2 :])
    assert pickle.loads(record.read_bytes()[4:]).value == {"note": 30002}  # it would load, wrong
    assert _reuse(folder, "write-00000") is None
    assert commits.keep_value(str(folder), "counts.pickle", [1, 2, 3]) == [1, 2, 3]
    assert commits.kept_value(str(folder), "counts.pickle") == [1, 2, 3]
    kept = folder / "counts.pickle"
    kept.write_bytes(kept.read_bytes().replace(b"K\x03", b"K\x04"))  # 3 -> 4
    assert pickle.loads(kept.read_bytes()[4:]) == [1, 2, 4]
    assert commits.kept_value(str(folder), "counts.pickle") is None


def test_deleting_files_one_of_which_another_process_deleted_first_is_no_error(tmp_path):
    here, gone = tmp_path / "a", tmp_path / "b"
    here.write_bytes(b"x")
    commits.delete_present([str(here), str(gone)])
    assert list(tmp_path.iterdir()) == []
