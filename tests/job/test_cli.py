"""The command line: inspect, usage errors, help, and the installed console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from beam_jobs.cli import main


def test_cli_inspect(converted, capsys):
    out, manifest = converted
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "records      12,000\n" in text
    assert f"shards       {len(manifest.shards)} (" in text
    assert "score    float32     []       yes" in text
    assert main(["inspect", str(out), "--schema"]) == 0
    assert '"name": "score"' in capsys.readouterr().out


def test_cli_usage_errors(tmp_path, capsys):
    assert main(["convert", "--input", str(tmp_path / "x*.csv"), "--output", str(tmp_path)]) == 2
    assert "matches no files" in capsys.readouterr().err
    assert main(["convert", "--input", "a.csv", "--output", "b", "--target_shard_bytes", "12"]) == 2
    assert capsys.readouterr().err == (
        "error: --target_shard_bytes must be at least 1024 bytes, got 12\n"
    )
    assert main(["convert", "--input", "a.csv", "--output", "b", "--compression", "zip"]) == 2
    assert "--compression must be one of none, gzip" in capsys.readouterr().err
    assert main(["convert", "--input", "a", "--output", "b"]) == 2
    assert capsys.readouterr().err == (
        "error: cannot tell the input format from ['a']; pass --format (csv, jsonl, parquet, "
        "text, images, tfrecord)\n"
    )
    assert main(["bogus"]) == 2
    assert main(["inspect", str(tmp_path)]) == 1
    assert "manifest.json does not exist" in capsys.readouterr().err


def test_convert_help_lists_our_flags(capsys):
    assert main(["convert", "--help"]) == 0
    text = capsys.readouterr().out
    for flag in (
        "--input",
        "--output",
        "--target_shard_bytes",
        "--num_shards",
        "--compression",
        "--schema",
        "--shard_prefix",
    ):
        assert flag in text


@pytest.mark.slow
def test_console_script_end_to_end(sample_csv, tmp_path):
    """The installed `tfrecord-etl` command, run as a user would, with the default runner."""
    exe = os.path.join(os.path.dirname(sys.executable), "tfrecord-etl")
    out = tmp_path / "cli"
    result = subprocess.run(
        [
            exe,
            "convert",
            "--input",
            sample_csv[0],
            "--input",
            sample_csv[1],
            "--output",
            str(out),
            "--target_shard_bytes",
            "100KB",
            "--compression",
            "gzip",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert ["records", "written", "8,000"] in [line.split() for line in result.stdout.splitlines()]
    check = subprocess.run([exe, "verify", str(out)], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0 and check.stdout.startswith("verify ok: ")


def test_inspect_input_prints_the_plan_without_an_output(sample_csv, capsys):
    assert main(["inspect", "--input", sample_csv[0]]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "plan (nothing is written)"
    assert "format       csv" in text and "(none)" not in text


def test_too_many_bad_rows_print_a_few_lines_not_tracebacks(tmp_path):
    """What a scheduler's log shows for an expected data error: the error, the first bad rows,
    the dead-letter folder and the JSON status line; tracebacks only with --verbose."""
    bad = tmp_path / "bad.csv"
    bad.write_text("id,v\n" + "".join(f"{i},x\n" for i in range(100)) + "1,x,extra\n" * 5)
    argv = [sys.executable, "-m", "beam_jobs", "convert", "--input", str(bad)]
    quiet = subprocess.run(
        [*argv, "--output", str(tmp_path / "o1")], capture_output=True, text=True
    )
    assert quiet.returncode == 1
    lines = quiet.stderr.splitlines()
    assert len(lines) <= 15, quiet.stderr
    assert "Traceback" not in quiet.stderr and "TFRECORD_ETL_ERROR" not in quiet.stderr
    assert any(line.startswith("error: 5 of 105 records (4.762%)") for line in lines)
    assert f"  {bad}:102: expected 2 columns, got 3" in lines
    loud = subprocess.run(
        [*argv, "--output", str(tmp_path / "o2"), "--verbose"], capture_output=True, text=True
    )
    assert loud.returncode == 1 and "Traceback" in loud.stderr


@pytest.mark.parametrize(
    "flag, suggestion",
    [("--compresion", "--compression"), ("--num_shard", "--num_shards"), ("--zzz_flag", None)],
)
def test_an_unknown_flag_is_a_usage_error_with_a_suggestion(tmp_path, capsys, flag, suggestion):
    csv = tmp_path / "a.csv"
    csv.write_text("id\n1\n")
    argv = ["convert", "--input", str(csv), "--output", str(tmp_path / "o"), flag, "x"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    expected = f"{flag} (did you mean {suggestion}?)" if suggestion else f"{flag};"
    assert f"error: unknown flag: {expected}" in err
    assert not (tmp_path / "o").exists()


def test_beam_flags_still_pass_through(tmp_path, capsys):
    csv = tmp_path / "a.csv"
    csv.write_text("id\n1\n")
    argv = ["convert", "--input", str(csv), "--output", str(tmp_path / "o"), "--dry_run"]
    assert main([*argv, "--project", "p", "--experiments=x", "--direct_num_workers=1"]) == 0


def test_a_schema_file_that_cannot_be_read_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "a.csv"
    path.write_text("id\n1\n")
    argv = ["convert", "--input", str(path), "--output", str(tmp_path / "o")]
    assert main([*argv, "--schema", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: cannot be read" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, says",
    [
        ("[{", "schema.json"),  # not JSON
        ('[{"name": "id", "dtype": "int64"}]', 'expected {"features": [...]}'),  # a bare list
    ],
)
def test_a_schema_file_that_is_not_a_schema_is_a_usage_error(tmp_path, capsys, text, says):
    path = tmp_path / "a.csv"
    path.write_text("id\n1\n")
    schema = tmp_path / "schema.json"
    schema.write_text(text)
    argv = ["convert", "--input", str(path), "--output", str(tmp_path / "o")]
    assert main([*argv, "--schema", str(schema)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: --schema ") and says in error
    assert not (tmp_path / "o").exists()


def test_files_the_shell_expanded_from_a_glob_are_a_usage_error(tmp_path, capsys):
    for k in (1, 2, 3):
        (tmp_path / f"part{k}.csv").write_text("id\n1\n")
    # What `--input dir/*.csv` becomes when the shell expands the glob.
    argv = ["convert", "--input", str(tmp_path / "part1.csv"), str(tmp_path / "part2.csv")]
    argv += [str(tmp_path / "part3.csv"), "--output", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"unexpected arguments {tmp_path}/part2.csv, {tmp_path}/part3.csv:" in err
    assert "--input 'dir/*.csv'" in err
    assert not (tmp_path / "o").exists()


def test_inspect_input_reads_the_inputs_as_convert_would(tmp_path, capsys):
    path = tmp_path / "l1.csv"
    path.write_bytes(b"1|Z\xfcrich\n2|Bern\n")
    flags = ["--encoding", "latin-1", "--delimiter", "|", "--column_names", "id,city"]
    assert main(["inspect", "--input", str(path), *flags, "--schema"]) == 0
    spec = json.loads(capsys.readouterr().out)
    assert [(f["name"], f["dtype"]) for f in spec["features"]] == [
        ("id", "int64"),
        ("city", "bytes"),
    ]
    assert main(["inspect", "--input", str(path), *flags]) == 0
    out = capsys.readouterr().out
    assert "delimiter pipe, no header line (--column_names), encoding iso8859-1" in out


def test_a_dry_run_with_splits_names_its_write_tasks(tmp_path, capsys):
    csv = tmp_path / "a.csv"
    csv.write_text("id,v\n" + "".join(f"{i},{i * 7}\n" for i in range(30_000)))
    argv = ["convert", "--input", str(csv), "--output", str(tmp_path / "o"), "--dry_run"]
    assert main([*argv, "--splits=train=2,eval=1", "--num_shards=3", "--order=input"]) == 0
    out = capsys.readouterr().out
    assert "shards       train (2/3): 3 of about" in out
    # Both splits cut at 1/3 and 2/3 of the input: three tasks, each a part of one shard each.
    assert "tasks        3 write tasks, reading the input once;" in out
    assert main([*argv, "--splits=train=1,eval=1", "--num_shards=2", "--split_key=id"]) == 0
    assert "tasks        2 write tasks deal the records out to random buckets of the shards; " \
        "4 units then write them" in capsys.readouterr().out  # fmt: skip
    # Small shards: the first pass reads the input in MIN_TASKS ranges (both splits cut at
    # the same eighths), not a task a shard.
    assert main([*argv, "--splits=train=2,eval=1", "--num_shards=2000"]) == 0
    out = capsys.readouterr().out
    assert "train (2/3): 2,000 of about" in out and "eval (1/3): 2,000 of about" in out
    assert "tasks        8 write tasks deal the records out to random buckets of the shards; " \
        "4,000 units then write them" in out  # fmt: skip


def test_the_status_line_names_a_workers_error_not_its_traceback(tmp_path, capsys):
    from beam_jobs import cli

    text = (
        'Traceback (most recent call last):\n  File "x.py", line 1, in f\n    g()\n'
        "IsADirectoryError: [Errno 21] Is a directory: 'out/dataset_info.json'\n"
        " [while running 'Publish/Publish']"
    )
    assert cli._headline(text) == (
        "IsADirectoryError: [Errno 21] Is a directory: 'out/dataset_info.json'"
    )
    assert cli._headline("plain words\nmore") == "plain words"
    assert cli._headline("") == ""


@pytest.mark.parametrize("mode", ["in_memory", "multi_threading"])
def test_a_full_disk_is_said_in_a_few_lines(tmp_path, capsys, monkeypatch, mode):
    import errno

    from beam_jobs.codec.shard_file import ShardFileWriter

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ShardFileWriter, "_store", full)
    path = tmp_path / "in.csv"
    path.write_text("a\n" + "".join(f"{i}\n" for i in range(100)))
    argv = ["convert", "--input", str(path), "--output", str(tmp_path / "out")]
    assert main([*argv, f"--direct_running_mode={mode}", "--direct_num_workers=1"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) <= 3, err
    assert err[0].startswith("error: no space left on the device"), err
    assert err[0].endswith(": free space there and run the same command again"), err
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.slow
def test_a_workers_error_is_said_once_without_the_workers_tracebacks(tmp_path, capfd):
    path = tmp_path / "in.csv"  # numbers in the sampled head, words past it: bad rows
    path.write_text("a\n" + "".join(f"{i if i < 2000 else 'w'}\n" for i in range(3000)))
    argv = ["convert", "--input", str(path), "--output", str(tmp_path / "out")]
    argv += ["--sample_bytes=4096", "--direct_running_mode=multi_processing"]
    assert main(argv) == 1  # too many bad rows, found by a worker process
    err = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert "Traceback" not in "\n".join(err), err
    said = [line for line in err if line.startswith("error: ")]
    assert len(said) == 1 and "1,000 of 3,000 records" in said[0]


def test_the_python_api_raises_a_caught_error_without_printing_beam_logs(tmp_path):
    """A caller's `except TooManyBadRecords` runs before anything is printed (verbose=True
    shows Beam's own logs again)."""
    bad = tmp_path / "bad.csv"
    bad.write_text("id,v\n" + "".join(f"{i},{i}\n" for i in range(100)) + "1,2,3\n" * 5)
    script = (
        "import sys, beam_jobs\n"
        "try:\n"
        f"    beam_jobs.convert(input={str(bad)!r}, output=sys.argv[1],"
        " verbose=sys.argv[2] == 'v', pipeline_options={'direct_num_workers': 1})\n"
        "except beam_jobs.TooManyBadRecords as e:\n"
        "    print('caught', str(e).split(' could')[0])\n"
    )
    quiet = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "o1"), "q"], capture_output=True, text=True
    )
    assert (quiet.stdout, quiet.stderr) == ("caught 5 of 105 records (4.762%)\n", "")
    loud = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "o2"), "v"], capture_output=True, text=True
    )
    assert loud.stdout == quiet.stdout and "Traceback" in loud.stderr


def test_diff_prints_its_answer_without_tensorflow_start_up_lines(converted):
    out, _ = converted
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [sys.executable, "-m", "beam_jobs", "diff", str(out), str(out)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.stderr == ""  # TensorFlow is imported, its notices left out
    assert result.returncode == 0 and result.stdout.startswith("same fingerprint")
