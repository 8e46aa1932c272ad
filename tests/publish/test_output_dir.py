"""Reruns, --overwrite, foreign files, and runs killed part-way."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from support.datasets import IN_PROCESS, convert

from beam_jobs.core.errors import UsageError
from beam_jobs.inspection.verify import verify
from beam_jobs.job.launcher import run
from beam_jobs.publish.companions import COMPANION_NAMES
from beam_jobs.publish.output_dir import is_ours


def _argv(inputs, out, *flags):
    return [a for i in inputs for a in ("--input", i)] + ["--output", str(out), *flags, *IN_PROCESS]


@pytest.mark.parametrize(
    "name, ours",
    [
        ("manifest.json", True),
        ("data-00000-of-00012.tfrecord", True),
        ("train-00011-of-00012.tfrecord.gz", True),
        (".tfrecord-etl-tmp-0a1b2c", True),
        ("notes.txt", False),
        ("data-0-of-1.tfrecord", False),
        ("manifest.json.bak", False),
    ],
)
def test_is_ours(name, ours):
    assert is_ours(name) == ours


def test_same_conversion_twice_is_a_no_op(sample_csv, tmp_path):
    out = tmp_path / "out"
    first = run(_argv(sample_csv, out, "--num_shards=2"))
    stamps = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    again = run(_argv(sample_csv, out, "--num_shards=2"))
    assert (first.converted, again.converted) == (True, False)
    assert again.manifest == first.manifest
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == stamps
    redo = run(_argv(sample_csv, out, "--num_shards=2", "--overwrite"))
    assert redo.converted
    # The same bytes in the same shards, as the next generation: the same fingerprint.
    assert [(s.path, s.records, s.bytes, s.crc32c) for s in redo.manifest.shards] == [
        (s.path.replace(".tfrecord", ".g1.tfrecord"), s.records, s.bytes, s.crc32c)
        for s in first.manifest.shards
    ]
    assert redo.manifest.fingerprint == first.manifest.fingerprint


@pytest.mark.parametrize("damage", ["delete", "truncate"])
def test_a_rerun_over_a_damaged_dataset_converts_again(sample_csv, tmp_path, damage):
    out = tmp_path / "out"
    first = run(_argv(sample_csv, out, "--num_shards=2"))
    shard = out / first.manifest.shards[1].path
    if damage == "delete":
        shard.unlink()
    else:
        shard.write_bytes(shard.read_bytes()[:100])
    again = run(_argv(sample_csv, out, "--num_shards=2"))
    assert again.converted
    assert again.manifest.fingerprint == first.manifest.fingerprint
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["manifest.json", *COMPANION_NAMES, *(s.path for s in again.manifest.shards)]
    )


def test_changed_inputs_or_options_convert_again(sample_csv, tmp_path):
    src = tmp_path / "in.csv"
    shutil.copy(sample_csv[0], src)
    out = tmp_path / "out"
    assert run(_argv([str(src)], out, "--num_shards=2")).converted
    assert run(_argv([str(src)], out, "--num_shards=3")).converted
    with open(src, "a") as f:
        f.write("99999,1,0,0,0,0,Oslo,late,0.5\n")
    result = run(_argv([str(src)], out, "--num_shards=3"))
    assert result.converted and result.manifest.total_records == 4001


def test_foreign_files_are_refused_without_overwrite(sample_csv, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(UsageError, match=r"holds files tfrecord-etl did not write \(notes.txt\)"):
        convert(sample_csv, out, "--num_shards=1")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    manifest = convert(sample_csv, out, "--num_shards=1", "--overwrite")
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["data-00000-of-00001.tfrecord", "manifest.json", "notes.txt", *COMPANION_NAMES]
    )
    assert (out / "notes.txt").read_text() == "keep me"
    assert manifest.total_records == 12_000


def test_output_that_is_a_file_is_refused(sample_csv, tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(UsageError, match=f"--output {target} is a file; give a directory"):
        convert(sample_csv, target)


@pytest.mark.slow
def test_killed_runs_leave_nothing_that_a_rerun_or_reader_trusts(sample_csv, tmp_path):
    clean = convert(sample_csv, tmp_path / "clean", "--target_shard_bytes=64KiB")
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "beam_jobs",
        "convert",
        *_argv(sample_csv, out),
        "--target_shard_bytes=64KiB",
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    for delay in (1.0, 2.0, 3.0):
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if (out / "manifest.json").exists():  # a finished run must be complete and correct
            assert verify(str(out))[1] == []
    result = run(_argv(sample_csv, out, "--target_shard_bytes=64KiB"))
    assert verify(str(out))[1] == []
    assert [(s.path, s.records, s.bytes) for s in result.manifest.shards] == [
        (s.path, s.records, s.bytes) for s in clean.shards
    ]
    assert not [p for p in out.iterdir() if p.name.startswith(".tfrecord-etl-tmp-")]


def test_an_input_edited_in_place_with_the_same_size_is_converted_again(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("id,v\n1,x\n2,y\n")
    out = tmp_path / "out"
    first = run(_argv([str(path)], out))
    path.write_text("id,v\n1,x\n2,z\n")  # corrected: the same size
    os.utime(path, (first.manifest.inputs["files"][0]["modified"] + 60,) * 2)
    second = run(_argv([str(path)], out))
    assert second.converted and second.manifest.generation == 1
    again = run(_argv([str(path)], out))
    assert not again.converted


def test_a_folder_that_only_looks_like_our_temporary_folder_is_kept(tmp_path):
    import json

    path = tmp_path / "a.csv"
    path.write_text("id,v\n1,x\n2,y\n")
    out = tmp_path / "out"
    mine = out / ".tfrecord-etl-tmp-cafe"
    mine.mkdir(parents=True)
    (mine / "run.json").write_text(json.dumps({"my": "experiment"}))
    (mine / "results.csv").write_text("a,b\n1,2\n")
    dead = out / ".tfrecord-etl-tmp-beef"  # a killed run's: its marker names its run id
    dead.mkdir()
    (dead / "run.json").write_text(json.dumps({"run_id": "beef", "tool": "tfrecord-etl"}))
    run(_argv([str(path)], out))
    assert (mine / "results.csv").read_text() == "a,b\n1,2\n"
    assert json.loads((mine / "run.json").read_text()) == {"my": "experiment"}
    assert not dead.exists()


def test_a_rerun_is_a_no_op_when_the_writers_found_a_feature_nullable(tmp_path):
    path = tmp_path / "in.jsonl"  # the sampled head has no empty list; a later row has one
    rows = [{"id": i, "tags": ["a", "b"] if i != 5000 else []} for i in range(6000)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["--input", str(path), "--output", str(tmp_path / "out"), "--sample_bytes=4096"]
    first = run(argv)
    assert first.converted and first.manifest.feature("tags").nullable
    assert not run(argv).converted
