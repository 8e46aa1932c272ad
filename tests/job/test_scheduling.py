"""Scheduler-facing behaviour: {date} partitions, --dry_run, exit codes, the JSON summary line."""

from __future__ import annotations

import json
import re

from support.datasets import IN_PROCESS

from beam_jobs.cli import main
from beam_jobs.config.convert import fill_date


def _convert_argv(source: str, output, *flags: str) -> list[str]:
    return ["convert", "--input", source, "--output", str(output), *flags, *IN_PROCESS]


def _last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def test_dry_run_prints_the_plan_and_writes_nothing(sample_csv, tmp_path, capsys):
    out = tmp_path / "daily" / "{date}"
    argv = _convert_argv(sample_csv[0], out, "--run_date=2026-12-01", "--dry_run", "--num_shards=3")
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"dry run: nothing written to {tmp_path}/daily/2026-12-01\n")
    assert "shards       3 shards of about" in text
    assert _last_json(text) == {"status": "dry_run", "exit_code": 0, "planned_shards": 3}
    assert not (tmp_path / "daily").exists()


def test_date_partition_and_json_summary(sample_csv, tmp_path, capsys):
    argv = _convert_argv(
        sample_csv[0], tmp_path / "ds" / "{date}", "--run_date=2026-11-30", "--num_shards=2"
    )
    assert main(argv) == 0
    summary = _last_json(capsys.readouterr().out)
    assert summary.pop("elapsed_seconds") > 0
    assert summary.pop("tasks_reused") == 0  # a first run: nothing kept to reuse
    assert summary == {
        "status": "ok",
        "exit_code": 0,
        "records_read": 4000,
        "records_written": 4000,
        "bad_records": 0,
        "shards": 2,
        "bytes": summary["bytes"],
        "fingerprint": summary["fingerprint"],
    }
    manifest = json.loads((tmp_path / "ds" / "2026-11-30" / "manifest.json").read_text())
    assert summary["fingerprint"] == manifest["fingerprint"]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", manifest["fingerprint"])
    assert (tmp_path / "ds" / "2026-11-30" / "manifest.json").exists()
    assert main(argv) == 0  # a retried launch of the same day is harmless
    assert _last_json(capsys.readouterr().out)["status"] == "already_converted"


def test_errors_end_with_a_json_line_and_their_exit_code(tmp_path, capsys):
    assert main(["convert", "--input", str(tmp_path / "none*.csv"), "--output", "o"]) == 2
    summary = _last_json(capsys.readouterr().out)
    assert summary["status"] == "error" and summary["exit_code"] == 2
    assert summary["error"].endswith("matches no files")
    assert main(["convert", "--input", "a", "--output", "o", "--run_date", "12/01/2026"]) == 2
    assert _last_json(capsys.readouterr().out)["error"] == (
        "--run_date must be YYYY-MM-DD, got '12/01/2026'"
    )
    assert main(["convert", "--input", "a", "--output", "o", "--run_date", "20261201"]) == 2
    assert _last_json(capsys.readouterr().out)["error"] == (
        "--run_date must be YYYY-MM-DD, got '20261201'"
    )


def test_fill_date_replaces_the_date_and_its_parts():
    assert fill_date("gs://raw/{date}/*.csv", "2026-12-01") == "gs://raw/2026-12-01/*.csv"
    assert fill_date("raw/year={yyyy}/month={mm}/day={dd}/*", "2026-03-09") == (
        "raw/year=2026/month=03/day=09/*"
    )
    assert fill_date("raw/{other}/*.csv", "2026-12-01") == "raw/{other}/*.csv"


def test_a_daily_job_reads_and_writes_its_dates_partition(sample_csv, tmp_path, capsys):
    import shutil

    for day in ("2026-11-30", "2026-12-01"):
        (tmp_path / "raw" / day).mkdir(parents=True)
    shutil.copy(sample_csv[0], tmp_path / "raw" / "2026-12-01" / "part.csv")
    argv = _convert_argv(
        str(tmp_path / "raw" / "{date}" / "*.csv"), tmp_path / "ds" / "{date}", "--num_shards=2"
    )
    assert main([*argv, "--run_date=2026-12-01"]) == 0
    summary = _last_json(capsys.readouterr().out)
    assert (summary["status"], summary["shards"]) == ("ok", 2)
    manifest = json.loads((tmp_path / "ds" / "2026-12-01" / "manifest.json").read_text())
    assert manifest["inputs"]["patterns"] == [str(tmp_path / "raw" / "2026-12-01" / "*.csv")]
    # The day before has no files yet: a usage error naming that day's pattern, nothing written.
    assert main([*argv, "--run_date=2026-11-30"]) == 2
    error = _last_json(capsys.readouterr().out)["error"]
    assert error == f"--input '{tmp_path}/raw/2026-11-30/*.csv' matches no files"
    assert not (tmp_path / "ds" / "2026-11-30").exists()


def test_wait_false_returns_after_submitting(sample_csv, tmp_path, capsys):
    out = tmp_path / "out"
    argv = _convert_argv(sample_csv[0], out, "--num_shards=1", "--wait=false")
    assert main(argv) == 0
    summary = _last_json(capsys.readouterr().out)
    assert (summary["status"], summary["exit_code"]) == ("submitted", 0)
    assert "job_id" in summary
    assert main(["convert", "--input", "a.csv", "--output", "o", "--wait=maybe"]) == 2
    assert (
        _last_json(capsys.readouterr().out)["error"] == "--wait must be true or false, got 'maybe'"
    )


def test_an_edited_schema_file_under_the_same_path_is_a_new_conversion(tmp_path, capsys):
    csv = tmp_path / "t.csv"
    csv.write_text("a,b\n1,2\n3,4\n")
    schema = tmp_path / "schema.json"
    schema.write_text('{"features": [{"name": "b", "dtype": "int64"}]}')
    argv = _convert_argv(str(csv), tmp_path / "out", "--schema", str(schema))
    assert main(argv) == 0
    assert _last_json(capsys.readouterr().out)["status"] == "ok"
    assert main(argv) == 0
    assert _last_json(capsys.readouterr().out)["status"] == "already_converted"
    schema.write_text('{"features": [{"name": "b", "dtype": "bytes"}]}')
    assert main(argv) == 0
    assert _last_json(capsys.readouterr().out)["status"] == "ok"
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert {f["name"]: f["dtype"] for f in manifest["features"]} == {"a": "int64", "b": "bytes"}


def test_a_dataset_of_the_earlier_version_is_already_converted(sample_csv, tmp_path, capsys):
    # The version before 2026-12-06 recorded "compression_level": 1 for uncompressed shards
    # (now null): a daily rerun of the same command must still find it converted.
    argv = _convert_argv(sample_csv[0], tmp_path / "ds", "--num_shards=2")
    assert main(argv) == 0
    path = tmp_path / "ds" / "manifest.json"
    manifest = json.loads(path.read_text())
    assert manifest["options"]["compression_level"] is None
    manifest["options"]["compression_level"] = 1
    path.write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(argv) == 0
    assert _last_json(capsys.readouterr().out)["status"] == "already_converted"
    gzip = _convert_argv(sample_csv[0], tmp_path / "ds", "--num_shards=2", "--compression=gzip")
    assert main(gzip) == 0  # another compression: converted again
    assert _last_json(capsys.readouterr().out)["status"] == "ok"
