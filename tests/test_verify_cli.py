"""`verify` catches damaged shards; the CLI's output and exit codes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import google_crc32c
import pytest

from beam_jobs.cli import main
from beam_jobs.options import ConvertConfig
from beam_jobs.runner import choose_runner
from beam_jobs.verify import ShardProblem, verify


@pytest.fixture()
def dataset(converted, tmp_path):
    """A private copy of the converted sample, free to damage."""
    out, manifest = converted
    copy = tmp_path / "ds"
    shutil.copytree(out, copy)
    return copy, manifest


def _flip_bit(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x04
    path.write_bytes(bytes(data))


def test_bit_flip(dataset):
    out, manifest = dataset
    shard = manifest.shards[1]
    _flip_bit(out / shard.path, 1000)
    data = (out / shard.path).read_bytes()
    crc = google_crc32c.value(data)
    starts = [0]
    for _ in range(5):
        starts.append(starts[-1] + int.from_bytes(data[starts[-1] : starts[-1] + 8], "little") + 16)
    assert (
        starts[5]
        <= 1000
        < starts[5] + 12 + int.from_bytes(data[starts[5] : starts[5] + 8], "little")
    )
    assert verify(str(out))[1] == [
        ShardProblem(
            shard.path, f"bad record framing: record 5 (byte {starts[5]}): data fails its checksum"
        ),
        ShardProblem(shard.path, f"crc32c is {crc:08x}, manifest says {shard.crc32c}"),
    ]


def test_truncation_at_a_record_boundary(dataset):
    out, manifest = dataset
    import tensorflow as tf

    shard = manifest.shards[0]
    path = out / shard.path
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
    keep = sum(len(r) + 16 for r in records[:-3])
    path.write_bytes(path.read_bytes()[:keep])
    crc = google_crc32c.value(path.read_bytes())
    assert [p.problem for p in verify(str(out))[1]] == [
        f"size is {keep} bytes, manifest says {shard.bytes}",
        f"crc32c is {crc:08x}, manifest says {shard.crc32c}",
        f"holds {shard.records - 3} records, manifest says {shard.records}",
    ]


def test_trailing_garbage_missing_and_extra_files(dataset):
    out, manifest = dataset
    with open(out / manifest.shards[0].path, "ab") as f:
        f.write(b"junk")
    os.remove(out / manifest.shards[2].path)
    shutil.copy(out / manifest.shards[3].path, out / "data-00099-of-00100.tfrecord")
    problems = verify(str(out))[1]
    by_path = {}
    for p in problems:
        by_path.setdefault(p.path, []).append(p.problem)
    assert (
        by_path[manifest.shards[0].path][0]
        == f"bad record framing: record {manifest.shards[0].records} (byte "
        f"{manifest.shards[0].bytes}): stream ends inside the record header"
    )
    assert by_path[manifest.shards[2].path] == ["missing"]
    assert by_path["data-00099-of-00100.tfrecord"] == ["not listed in the manifest"]
    assert set(by_path) == {
        manifest.shards[0].path,
        manifest.shards[2].path,
        "data-00099-of-00100.tfrecord",
    }


def test_cli_verify_exit_codes(dataset, capsys):
    out, manifest = dataset
    assert main(["verify", str(out)]) == 0
    assert capsys.readouterr().out == (
        f"verify ok: {len(manifest.shards)} shards, 12,000 records match {out}/manifest.json\n"
    )
    os.remove(out / manifest.shards[0].path)
    assert main(["verify", str(out)]) == 1
    assert capsys.readouterr().out == (
        f"BAD {manifest.shards[0].path}: missing\nverify failed: 1 bad file(s) in {out}\n"
    )


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


@pytest.mark.parametrize(
    "argv, runner, mode, workers, noted",
    [
        ([], "FnApiRunner", "multi_processing", os.cpu_count(), False),
        (["small"], "FnApiRunner", "multi_threading", os.cpu_count(), False),
        (["large"], "FnApiRunner", "multi_processing", os.cpu_count(), False),
        (["--runner", "DirectRunner"], "FnApiRunner", "multi_processing", os.cpu_count(), True),
        (["--direct_num_workers=1"], "FnApiRunner", "multi_processing", 1, False),
        (["--runner=DataflowRunner"], "DataflowRunner", "in_memory", 1, False),
        (["--runner=DirectRunner", "--prism_location=/x"], "DirectRunner", "in_memory", 1, False),
    ],
)
def test_runner_defaults(argv, runner, mode, workers, noted):
    from apache_beam.options.pipeline_options import (
        DirectOptions,
        PipelineOptions,
        StandardOptions,
    )

    sizes = {"small": 1 << 30, "large": (1 << 30) + 1}
    input_bytes = sizes.get(argv[0]) if argv else None
    argv = [a for a in argv if a not in sizes]
    options = PipelineOptions(argv)
    note = choose_runner(options, argv, input_bytes)
    assert options.view_as(StandardOptions).runner == runner
    assert options.view_as(DirectOptions).direct_running_mode == mode
    assert options.view_as(DirectOptions).direct_num_workers == workers
    assert bool(note) == noted


def test_config_validation():
    from beam_jobs.errors import UsageError

    with pytest.raises(UsageError, match="--input is required"):
        ConvertConfig(inputs=(), output="o")
    with pytest.raises(UsageError, match="--num_shards must be at least 1, got 0"):
        ConvertConfig(inputs=("a",), output="o", num_shards=0)
    with pytest.raises(UsageError, match="--shard_prefix may hold only"):
        ConvertConfig(inputs=("a",), output="o", shard_prefix="a/b")


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
