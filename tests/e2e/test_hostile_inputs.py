"""Real-looking hostile inputs from the second review of the real-files issue: each converts
exactly, is a dead letter with its reason, or stops the plan naming the fix."""

from __future__ import annotations

import gzip
import json
import logging

import pytest
from support.datasets import convert, read_all

from beam_jobs.cli import main
from beam_jobs.core.errors import DataError
from beam_jobs.schema.precision import FLOAT32_ROUNDING


def _dead(out) -> list[dict]:
    folder = out / "dead_letter"
    rows = (
        [json.loads(x) for f in sorted(folder.iterdir()) for x in f.open()]
        if folder.exists()
        else []
    )
    return sorted(rows, key=lambda d: d["line"])


def test_json_float32_notes_name_the_columns_that_round(tmp_path, caplog):
    path = tmp_path / "places.jsonl"
    rows = [{"price": 0.5, "lat": 47.3768866, "lon": 8.5416941, "name": "p"}] * 20
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with caplog.at_level(logging.INFO, logger="beam_jobs"):
        convert([str(path)], tmp_path / "out", "--dry_run")
    warned = [r.getMessage() for r in caplog.records if "float32 keeps" in r.getMessage()]
    assert warned == [
        f"2 columns 'lat' (e.g. 47.3768866), 'lon' (e.g. 8.5416941): {FLOAT32_ROUNDING}"
    ]


def test_a_date_in_a_timestamp_column_is_midnight_also_beside_a_bad_value(tmp_path):
    path = tmp_path / "d.jsonl"
    lines = [json.dumps({"id": i, "at": f"2026-01-01T00:00:{i % 60:02d}Z"}) for i in range(3000)]
    lines += ['{"id": 3000, "at": "2026-01-31"}', '{"id": 3001, "at": "2026-01-31T25:00:00Z"}']
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--sample_bytes=4KiB", "--max_bad_fraction=0.01")
    assert [d["line"] for d in _dead(out)] == [3002]
    got = {r["id"]: r["at"] for r in read_all(out)}
    assert got[3000] == 1769817600 * 10**6 and manifest.counts.bad_records == 1


def test_the_last_row_of_a_gzip_csv_with_wrong_columns_and_latin1_text_is_a_dead_letter(tmp_path):
    path = tmp_path / "small.csv.gz"
    path.write_bytes(gzip.compress(b"id,name\n1,a\n2,b\n3,caf\xe9,x\n"))
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.5")
    assert [(d["line"], d["reason"]) for d in _dead(out)] == [(4, "expected 2 columns, got 3")]
    assert sorted(r["id"] for r in read_all(out)) == [1, 2]
    assert manifest.counts.records_read == 3


def test_a_list_where_a_json_number_is_expected_past_the_sample_is_a_dead_letter(tmp_path):
    path = tmp_path / "k.jsonl"
    lines = [json.dumps({"id": i, "junk": i}) for i in range(3000)]
    lines.append('{"id": 3000, "junk": [null, 1]}')
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--sample_bytes=4KiB", "--max_bad_fraction=0.01")
    assert [d["line"] for d in _dead(out)] == [3001]
    assert manifest.total_records == 3000


def test_plus_minus_is_no_integer(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("id,n\n" + "".join(f"{i},{i}\n" for i in range(3000)) + "3000,+-1\n3001,+5\n")
    out = tmp_path / "out"
    convert([str(path)], out, "--sample_bytes=4KiB", "--max_bad_fraction=0.01")
    assert [d["cells"]["n"] for d in _dead(out)] == ["+-1"]
    assert {r["id"]: r["n"] for r in read_all(out)}[3001] == 5


def test_a_mostly_integer_column_is_offered_int64_not_float32(tmp_path, caplog):
    path = tmp_path / "ids.csv"
    values = [str(123456789 + i) if i % 20 else "unknown" for i in range(400)]
    path.write_text("customer_id\n" + "\n".join(values) + "\n")
    convert([str(path)], tmp_path / "out", "--dry_run")
    assert "give it the dtype int64 in a --schema file" in caplog.text


def test_a_utf16_text_file_is_named_not_converted_to_garbage(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes("hello\nwörld\n".encode("utf-16"))
    for flags in ([], ["--encoding=latin-1"]):
        with pytest.raises(DataError, match="UTF-16 or UTF-32 byte order mark"):
            convert([str(path)], tmp_path / "out", *flags)


def test_inspect_input_takes_the_label(tmp_path, capsys):
    path = tmp_path / "l.csv"
    path.write_text("x,y\n1,1\n2,0\n")
    assert main(["inspect", "--input", str(path), "--label", "y", "--schema"]) == 0
    assert [f["name"] for f in json.loads(capsys.readouterr().out)["features"]] == ["x", "y"]


def test_num_shards_a_compressed_file_cannot_give_is_warned_about(tmp_path, capsys):
    path = tmp_path / "d.csv.gz"
    path.write_bytes(gzip.compress(b"id\n" + b"".join(b"%d\n" % i for i in range(1000))))
    argv = ["convert", "--input", str(path), "--output", str(tmp_path / "o"), "--num_shards=4"]
    assert main([*argv, "--dry_run"]) == 0
    assert (
        "warning: --num_shards 4, but the plan has 1 shard: a compressed file cannot be cut "
        f"({path}), so one writer reads each whole"
    ) in capsys.readouterr().out


def test_a_value_where_an_object_is_expected_is_a_dead_letter(tmp_path):
    path = tmp_path / "t.jsonl"
    lines = [json.dumps({"id": i, "user": {"id": i * 10, "name": f"u{i}"}}) for i in range(3000)]
    lines.append('{"id": 3000, "user": 30000}')
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--sample_bytes=4KiB", "--max_bad_fraction=0.01")
    assert [(d["line"], d["reason"]) for d in _dead(out)] == [
        (3001, "feature 'user.id': a value where 'user' is an object")
    ]
    assert manifest.total_records == 3000 and "user" not in manifest.counts.ignored_fields


def test_a_json_key_left_out_by_columns_has_no_say_in_the_spec(tmp_path, capsys):
    path = tmp_path / "a.jsonl"
    rows = [{"id": i, "user": {"id": i * 10}, "junk": [[1, 2], [3]]} for i in range(50)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--columns=id,user.id")
    assert [f.name for f in manifest.features] == ["id", "user.id"]
    assert manifest.counts.ignored_fields == {}
    assert sorted((r["id"], r["user.id"]) for r in read_all(out)) == [
        (i, i * 10) for i in range(50)
    ]
