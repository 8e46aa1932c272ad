"""What --dry_run warns about before anything runs: no records, oversized compressed shards."""

from __future__ import annotations

import gzip

from beam_jobs.cli import main
from beam_jobs.core.units import count_of


def test_counts_take_their_noun_in_the_right_number():
    assert [count_of(n, "shard") for n in (0, 1, 2, 1500)] == [
        "0 shards",
        "1 shard",
        "2 shards",
        "1,500 shards",
    ]


def _dry_run(capsys, *argv: str) -> str:
    assert main(["convert", *argv, "--dry_run"]) == 0
    return capsys.readouterr().out


def test_a_compressed_file_over_the_target_is_warned_about(tmp_path, capsys):
    path = tmp_path / "big.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write("id,text\n" + "".join(f"{i},some text {i}\n" for i in range(40_000)))
    out = _dry_run(capsys, "--input", str(path), "--output", str(tmp_path / "o"),
                   "--target_shard_bytes=64KiB")  # fmt: skip
    assert "inputs       1 file, " in out
    assert "shards       1 shard of about " in out
    [warning] = [line for line in out.splitlines() if line.startswith("warning: ")]
    assert warning.startswith("warning: shard 0 will be about ")
    assert f"(target 64 KiB): {path} is compressed, so one writer reads it whole" in warning


def test_a_plan_of_no_records_is_warned_about(tmp_path, capsys):
    path = tmp_path / "header_only.csv"
    path.write_text("id,text\n")
    out = _dry_run(capsys, "--input", str(path), "--output", str(tmp_path / "o"))
    assert "warning: the plan estimates 0 records" in out


def test_a_plain_plan_has_no_warnings(sample_csv, tmp_path, capsys):
    out = _dry_run(capsys, *[a for p in sample_csv for a in ("--input", p)],
                   "--output", str(tmp_path / "o"))  # fmt: skip
    assert "inputs       3 files, " in out and "warning" not in out


def test_one_record_one_shard_read_in_the_singular(tmp_path, capsys):
    path = tmp_path / "one.csv"
    path.write_text("id,v\n1,2\n")
    out = _dry_run(capsys, "--input", str(path), "--output", str(tmp_path / "o"))
    lines = out.splitlines()
    assert any(line.startswith("estimate     1 record, ") for line in lines), out
    shards = next(line for line in lines if line.startswith("shards "))
    assert shards.startswith("shards       1 shard of about ") and " each" not in shards


def test_a_plan_whose_sampled_rows_all_fail_says_why_and_which_flags(tmp_path, capsys):
    path = tmp_path / "latin1.csv"
    path.write_bytes(b"id,name\n1,Z\xfcrich\n2,B\xe4rn\n")  # a latin-1 body, an ASCII header
    out = _dry_run(capsys, "--input", str(path), "--output", str(tmp_path / "o"))
    assert (
        "warning: the plan estimates 0 records: none of the sampled rows converts (2 bad rows, "
        f"e.g. {path}: column 'name' (bytes): not UTF-8 text; pass --encoding with the file's "
        "encoding (--encoding cp1252 reads 'Zürich', --encoding cp1251 reads 'Zьrich', "
        "--encoding cp1253 reads 'Zόrich'); "
    ) in out
    assert "check --encoding, --delimiter, --column_names and --schema" in out


def test_num_shards_a_file_read_whole_cannot_give_names_why_without_blaming_compression(
    tmp_path, capsys
):
    # A JSON array is read whole: one piece, whatever --num_shards asks; not compressed.
    path = tmp_path / "arr.json"
    path.write_text("[" + ",".join(f'{{"id": {i}}}' for i in range(2000)) + "]")
    argv = ["convert", "--input", str(path), "--output", str(tmp_path / "o"), "--num_shards=3"]
    assert main([*argv, "--dry_run"]) == 0
    size = path.stat().st_size
    assert (
        "warning: --num_shards 3, but the plan has 1 shard: the jsonl input could not be cut "
        f"into more pieces than its 1 file, {size:,} bytes, give; split such files upstream "
        "for more shards"
    ) in capsys.readouterr().out
