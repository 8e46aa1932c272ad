"""Bad rows go to OUT/dead_letter/, every good row is converted, and a threshold fails the job."""

from __future__ import annotations

import json
import pathlib

import pytest
from support.datasets import convert, read_all

from beam_jobs.cli import main
from beam_jobs.core.errors import DataError, TooManyBadRecords
from tfdata_reader import make_dataset


@pytest.fixture()
def dirty_csv(tmp_path):
    """1000 good rows (ids 0-999) and four bad ones of different kinds."""
    rows = [b"id,score,name\n"]
    for i in range(1000):
        rows.append(f"{i},{i / 4},name {i}\n".encode())
        if i == 100:
            rows.append(b"5000,1.5,extra,column\n")
        if i == 200:
            rows.append(b"5001,2.5,a,b,c\n")
        if i == 300:
            rows.append(b"5002,not a number,x\n")
        if i == 400:
            rows.append(b"5003,3.5,\xff bad utf-8\n")
    path = tmp_path / "dirty.csv"
    path.write_bytes(b"".join(rows))
    return path


def _dead_letters(out, manifest_names):
    return [
        json.loads(line)
        for name in manifest_names
        for line in (out / name).read_text().splitlines()
    ]


def test_good_rows_are_converted_and_bad_rows_dead_lettered(dirty_csv, tmp_path):
    out = tmp_path / "out"
    manifest = convert(
        [str(dirty_csv)], out, "--num_shards=3", "--max_bad_fraction=0.01", "--sample_bytes=4096"
    )
    assert manifest.counts.records_read == 1004
    assert manifest.counts.records_written == 1000
    assert manifest.counts.bad_records == 4
    ids = sorted(i for b in make_dataset(str(out), 256) for i in b["id"].numpy().tolist())
    assert ids == list(range(1000))
    letters = _dead_letters(out, manifest.dead_letter)
    assert sorted((d["reason"], d.get("raw"), json.dumps(d.get("cells"))) for d in letters) == [
        (
            "column 'name' (bytes): not UTF-8 text; pass --encoding with the file's encoding "
            "(--encoding cp1250 reads '˙ bad utf-8', --encoding cp1251 reads 'я bad utf-8', "
            "--encoding cp1252 reads 'ÿ bad utf-8')",
            None,
            json.dumps({"id": "5003", "score": "3.5", "name": {"base64": "/yBiYWQgdXRmLTg="}}),
        ),
        (
            "column 'score' (float32): Failed to parse string: 'not a number' as a scalar of type "
            "double",
            None,
            json.dumps({"id": "5002", "score": "not a number", "name": "x"}),
        ),
        ("expected 3 columns, got 4", "5000,1.5,extra,column", "null"),
        ("expected 3 columns, got 5", "5001,2.5,a,b,c", "null"),
    ]
    assert {d["file"] for d in letters} == {str(dirty_csv)}
    data = dirty_csv.read_bytes()
    starts = {d["byte_offset"]: d.get("raw") or d["cells"]["id"] for d in letters}
    assert sorted(starts) == sorted(
        data.index(row) for row in (b"5000,", b"5001,", b"5002,", b"5003,")
    )
    assert all(data[offset:].startswith(text.encode()) for offset, text in starts.items())
    # Header on line 1, row i on line i + 2, each bad row after the rows before it.
    lines = {d.get("raw") or d["cells"]["id"]: d["line"] for d in letters}
    assert lines == {"5000,1.5,extra,column": 103, "5001,2.5,a,b,c": 204, "5002": 305, "5003": 406}
    assert sorted(p.name for p in (out / "dead_letter").iterdir()) == sorted(
        name.split("/")[1] for name in manifest.dead_letter
    )


def test_too_many_bad_rows_fail_the_job_and_publish_only_the_dead_letter(dirty_csv, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(TooManyBadRecords) as e:
        convert([str(dirty_csv)], out, "--num_shards=2", "--sample_bytes=4096")
    assert str(e.value) == (
        "4 of 1,004 records (0.398%) could not be converted, more than --max_bad_fraction 0.001 "
        f"allows; they are listed with their reasons in {out}/dead_letter/; no manifest was "
        "published (an earlier conversion in that folder is left as it was)"
    )
    assert e.value.dead_letters == ["dead_letter/data-00000-of-00002.tfrecord.jsonl"]
    # The finished work is kept (both write tasks and both units) for a rerun.
    kept = e.value.kept_work
    assert (kept.tasks, kept.planned) == (4, 4)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [pathlib.Path(kept.folder).name, "dead_letter"]
    )
    assert sum(len(p.read_text().splitlines()) for p in (out / "dead_letter").iterdir()) == 4


def test_cli_exit_code_and_summary(dirty_csv, tmp_path, capsys):
    out = tmp_path / "out"
    base = [
        "convert",
        "--input",
        str(dirty_csv),
        "--output",
        str(out),
        "--direct_running_mode=in_memory",
        "--direct_num_workers=1",
        "--sample_bytes=4096",
    ]
    first_bad_rows = [
        f"first bad rows (all of them are in {out}/dead_letter/):",
        f"  {dirty_csv}:103: expected 3 columns, got 4",
        f"  {dirty_csv}:204: expected 3 columns, got 5",
        f"  {dirty_csv}:305: column 'score' (float32): Failed to parse string: 'not a number' "
        "as a scalar of type double",
        f"  {dirty_csv}:406: column 'name' (bytes): not UTF-8 text; pass --encoding with the "
        "file's encoding (--encoding cp1250 reads '˙ bad utf-8', --encoding cp1251 reads "
        "'я bad utf-8', --encoding cp1252 reads 'ÿ bad utf-8')",
    ]
    assert main(base) == 1
    error = capsys.readouterr().err.splitlines()
    assert "could not be converted, more than --max_bad_fraction 0.001" in error[0]
    assert error[1:-1] == first_bad_rows
    assert error[-1].startswith("its finished work (2 of 2 tasks, ")
    assert error[-1].endswith("run the same command again to resume, or add --fresh to discard it")
    # A larger budget does not change the bytes: the rerun reuses every finished task.
    assert main([*base, "--max_bad_fraction=0.5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "resumed: 2 of 2 tasks reused, 0 run" in lines
    assert [line.split()[-1] for line in lines if line.startswith(("records", "bad"))] == [
        "1,004",
        "1,000",
        "4",
    ]
    assert lines[-6:-1] == first_bad_rows  # before the JSON summary line


def test_records_over_max_record_bytes_are_dead_lettered(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text(
        "id,text\n" + "".join(f"{i},{'x' * (500 if i == 7 else 10)}\n" for i in range(20))
    )
    out = tmp_path / "out"
    manifest = convert(
        [str(path)], out, "--num_shards=1", "--max_record_bytes=200", "--max_bad_fraction=0.1"
    )
    assert (manifest.total_records, manifest.counts.bad_records) == (19, 1)
    [letter] = _dead_letters(out, manifest.dead_letter)
    assert letter == {
        "file": str(path),
        "line": None,
        "byte_offset": None,
        "byte_range": [0, path.stat().st_size],
        "row_in_range": None,
        "reason": "the encoded record has 534 bytes, over --max_record_bytes 200",
        "cells": {"id": 7, "text": "x" * 500},
    }
    ids = sorted(i for b in make_dataset(str(out), 64) for i in b["id"].numpy().tolist())
    assert ids == [i for i in range(20) if i != 7]


@pytest.mark.parametrize("splits", [[], ["--splits=train=1,eval=1"]])
def test_an_oversized_record_among_many_small_files_names_its_own_file(tmp_path, splits):
    # Small files' batches are joined before encoding: the dead letter still names the file.
    for k in range(6):
        long = 300 if k == 4 else 0
        rows = "".join(f"{10 * k + i},{'x' * (long if i == 2 else 5)}\n" for i in range(5))
        (tmp_path / f"part-{k}.csv").write_text("id,text\n" + rows)
    out = tmp_path / "out"
    flags = ["--num_shards=1", "--max_record_bytes=200", "--max_bad_fraction=0.1", *splits]
    manifest = convert([str(tmp_path / "part-*.csv")], out, *flags)
    assert (manifest.total_records, manifest.counts.bad_records) == (29, 1)
    [letter] = _dead_letters(out, manifest.dead_letter)
    assert (letter["file"], letter["cells"]) == (
        str(tmp_path / "part-4.csv"),
        {"id": 42, "text": "x" * 300},
    )


def test_an_unterminated_quote_on_the_last_line_is_dead_lettered(tmp_path):
    path = tmp_path / "open_quote.csv"
    good = "".join(f"{i},text {i}\n" for i in range(300))
    path.write_text("id,text\n" + good + '300,"never closed\n')
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--num_shards=4", "--max_bad_fraction=0.01")
    assert (manifest.total_records, manifest.counts.bad_records) == (300, 1)
    [letter] = _dead_letters(out, manifest.dead_letter)
    assert letter["reason"] == "unterminated quoted field: it runs to the end of the file"
    assert letter["cells"] == {"id": "300", "text": "never closed\n"}
    assert letter["byte_offset"] == path.read_bytes().index(b'300,"never')
    assert letter["line"] == 302
    ids = sorted(i for b in make_dataset(str(out), 64) for i in b["id"].numpy().tolist())
    assert ids == list(range(300))


def test_an_unterminated_last_row_with_too_few_columns_leaves_the_row_before_it_alone(tmp_path):
    # pyarrow leaves the last row out for its column count; the good row before it is written.
    path = tmp_path / "open_quote.csv"
    path.write_text("a,b,c\n" + "".join(f"{i},{i},{i}\n" for i in range(9)) + '9,9,9\n7,"8\n')
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.2")
    assert (manifest.total_records, manifest.counts.bad_records) == (10, 1)
    [letter] = _dead_letters(out, manifest.dead_letter)
    assert letter["reason"] == (
        "unterminated quoted field: it runs to the end of the file (expected 3 columns, got 2)"
    )
    assert letter["line"] == 12
    assert sorted(r["a"] for r in read_all(out)) == list(range(10))


@pytest.mark.parametrize("sample_bytes", ["4096", "1MiB"])  # found while writing, or planning
def test_an_unterminated_quote_that_would_swallow_lines_stops_the_job(tmp_path, sample_bytes):
    path = tmp_path / "open_quote.csv"
    good = "".join(f"{i},text {i}\n" for i in range(300))
    path.write_text("id,text\n" + good + '300,"never closed\n301,a\n302,b\n')
    out = tmp_path / "out"
    with pytest.raises(DataError) as e:
        convert([str(path)], out, "--num_shards=4", f"--sample_bytes={sample_bytes}")
    assert str(e.value).startswith(
        f"{path}:302: a quoted field opens in this row and never closes, so the 2 lines after it"
    )
    assert not (out / "manifest.json").exists()


@pytest.mark.parametrize("gzipped", [False, True])
@pytest.mark.parametrize("counted_by", ["launcher", "beam_stage"])
def test_line_numbers_are_physical_lines(tmp_path, monkeypatch, gzipped, counted_by):
    # Quoted newlines and blank lines make line numbers differ from row numbers; 3 shards cut
    # the plain file mid-way, so lines before each cut come from the cut counts.
    import gzip

    import beam_jobs.transforms.convert_to_shards

    if counted_by == "beam_stage":
        monkeypatch.setattr(beam_jobs.transforms.convert_to_shards, "LAUNCHER_COUNT_BYTES", -1)
    text = ["id,note"]  # line 1
    for i in range(600):
        text.append(f'{i},"two\nlines"' if i % 3 == 0 else f"{i},one line")
        if i % 50 == 0:
            text.append("")  # a blank line
        if i in (100, 450):
            text.append(f"{9000 + i},bad,extra")
    data = ("\n".join(text) + "\n").encode()
    path = tmp_path / ("in.csv.gz" if gzipped else "in.csv")
    path.write_bytes(gzip.compress(data) if gzipped else data)
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--num_shards=3", "--max_bad_fraction=0.01")
    letters = _dead_letters(out, manifest.dead_letter)
    # Rows 0..100 take 1 + 34 + 101 + 3 lines (header, quoted newlines of rows 0, 3, ..., 99,
    # the rows, blank lines after rows 0, 50, 100): row 9100 is on line 140; rows 101..450
    # add 350 + 117 + 7 + 1 (rows, quoted newlines, blank lines, row 9100) = 475 more.
    assert sorted((d["raw"], d["line"]) for d in letters) == [
        ("9100,bad,extra", 140),
        ("9450,bad,extra", 615),
    ]
    assert all(data[d["byte_offset"] :].startswith(d["raw"].encode()) for d in letters)


def test_first_bad_rows_say_where_each_row_is(tmp_path):
    from beam_jobs.sink.dead_letter import first_bad_rows

    rows = [
        {"file": "a.csv", "line": 7, "byte_offset": 90, "reason": "r1"},
        {"file": "b.tfrecord", "line": None, "byte_offset": 1234, "reason": "r2"},
        {"file": "c.parquet", "line": None, "byte_offset": None, "reason": "r3"},
    ]
    (tmp_path / "data-00000-of-00002.tfrecord.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows[:2])
    )
    (tmp_path / "data-00001-of-00002.tfrecord.jsonl").write_text(json.dumps(rows[2]) + "\n")
    files = sorted(str(p) for p in tmp_path.iterdir())
    assert first_bad_rows(files) == [
        "a.csv:7: r1",
        "b.tfrecord (byte 1234): r2",
        "c.parquet: r3",
    ]
    assert first_bad_rows(files, limit=1) == ["a.csv:7: r1"]


@pytest.mark.parametrize("gzipped", [False, True])
def test_an_unterminated_quote_on_the_last_line_of_a_gzip_is_a_dead_letter_too(tmp_path, gzipped):
    import gzip

    data = b'a,b\n1,2\n3,"x\n'
    path = tmp_path / ("q.csv.gz" if gzipped else "q.csv")
    path.write_bytes(gzip.compress(data) if gzipped else data)
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.5")
    assert (manifest.total_records, manifest.counts.bad_records) == (1, 1)
    [letter] = _dead_letters(out, manifest.dead_letter)
    assert letter["line"] == 3 and letter["reason"].startswith("unterminated quoted field")


def test_a_last_line_of_only_a_quote_blames_that_line(tmp_path):
    path = tmp_path / "q.csv"
    path.write_bytes(b'a,b,c\n1,2,3\n4,5,6\n"')  # no newline at the end
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.5")
    assert (manifest.total_records, manifest.counts.bad_records) == (2, 1)
    [letter] = _dead_letters(out, manifest.dead_letter)
    assert (letter["line"], letter["raw"]) == (4, '"')
    assert sorted(r["a"] for r in read_all(out)) == [1, 4]


def test_the_first_bad_rows_come_from_the_first_shards_whatever_order_they_finished(tmp_path):
    from beam_jobs.inspection.report import bad_rows_note

    (tmp_path / "dead_letter").mkdir()
    for index, line in ((0, 5), (1, 455)):
        row = {"file": "in.csv", "line": line, "reason": "bad"}
        name = f"dead_letter/data-0000{index}-of-00002.tfrecord.jsonl"
        (tmp_path / name).write_text(json.dumps(row) + "\n")
    finished = ["dead_letter/data-00001-of-00002.tfrecord.jsonl"]
    finished.append("dead_letter/data-00000-of-00002.tfrecord.jsonl")
    assert bad_rows_note(str(tmp_path), finished)[1:] == ["  in.csv:5: bad", "  in.csv:455: bad"]


@pytest.mark.parametrize("shards", [1, 3])
def test_rows_with_the_wrong_column_count_that_are_not_utf8_are_dead_letters(tmp_path, shards):
    """pyarrow cannot hand such a row to the invalid-row handler (it decodes it first); the
    reader sets it aside and reads around it, in the sample and past it, at any cut."""
    lines = [b"id,name"]
    bad_lines = {}
    for i in range(3000):
        if i in (0, 7, 1499, 1500, 2999):
            bad_lines[len(lines) + 1] = i
            lines.append(b"%d,Z\xfcrich,extra" % i)  # latin-1, three columns
        else:
            lines.append(b"%d,name %d" % (i, i))
    path = tmp_path / "mixed.csv"
    path.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, f"--num_shards={shards}", "--max_bad_fraction=0.01")
    assert manifest.counts.bad_records == len(bad_lines)
    dead = sorted(
        (json.loads(line) for f in (out / "dead_letter").iterdir() for line in f.open()),
        key=lambda d: d["line"],
    )
    assert [d["line"] for d in dead] == sorted(bad_lines)
    assert {d["reason"] for d in dead} == {"expected 2 columns, got 3"}
    got = sorted((r["id"], r["name"].decode()) for r in read_all(out))
    assert got == [(i, f"name {i}") for i in range(3000) if i not in bad_lines.values()]


def test_a_reason_shows_a_long_value_cut_short_and_the_row_keeps_it_whole(tmp_path):
    huge = "9" * 300
    path = tmp_path / "in.csv"
    path.write_text(f"id,v\n1,{huge}\n" + "".join(f"{i},{i}\n" for i in range(2, 400)))
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"features": [{"name": "v", "dtype": "int64"}]}))
    manifest = convert([str(path)], tmp_path / "out", "--schema", str(schema),
                       "--max_bad_fraction=0.01")  # fmt: skip
    [row] = [json.loads(line) for line in
             (tmp_path / "out" / manifest.dead_letter[0]).read_text().splitlines()]  # fmt: skip
    assert row["reason"] == (
        "column 'v' (int64): Failed to parse string: '99999999999999999999999999999... "
        "(302 characters) as a scalar of type int64"
    )
    assert row["cells"]["v"] == huge
