"""tf.distribute: MultiWorkerMirroredStrategy with 2 local worker processes reads every record
exactly once; Keras trains under MirroredStrategy through `distribute`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from support.datasets import ROOT, SUPPORT, convert
from train_multiworker import free_ports

ALL_IDS = list(range(12_000))


def _run_example(script: str, *args: str) -> str:
    """Runs an example script to completion; returns its stdout."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _run_two_workers(dataset, tmp_path) -> list[dict]:
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    for index in range(2):
        env = dict(
            os.environ,
            TF_CPP_MIN_LOG_LEVEL="2",
            TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
        )
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    str(SUPPORT / "mwms_read_ids.py"),
                    str(dataset),
                    str(tmp_path / f"ids{index}.json"),
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        assert proc.returncode == 0, err[-3000:]
    return [json.loads((tmp_path / f"ids{i}.json").read_text()) for i in range(2)]


@pytest.mark.slow
def test_two_workers_more_shards_than_workers(converted, tmp_path):
    out, manifest = converted
    assert len(manifest.shards) > 2
    results = _run_two_workers(out, tmp_path)
    assert [r["replicas"] for r in results] == [2, 2]
    assert results[0]["ids"] and results[1]["ids"]
    assert sorted(results[0]["ids"] + results[1]["ids"]) == ALL_IDS


@pytest.mark.slow
def test_two_workers_one_shard(sample_csv, tmp_path):
    out = tmp_path / "one"
    convert(sample_csv, out, "--num_shards=1")
    results = _run_two_workers(out, tmp_path)
    assert len(results[0]["ids"]) == len(results[1]["ids"]) == 6000
    assert sorted(results[0]["ids"] + results[1]["ids"]) == ALL_IDS


@pytest.mark.slow
def test_keras_fit_under_mirrored_strategy(converted):
    out, manifest = converted
    stdout = _run_example(
        "train_mirrored.py", str(out), "--steps", "8", "--global_batch_size", "64"
    )
    match = re.search(
        r"trained 8 steps on 2 replicas from 12,000 records in (\d+) shards; final loss (\S+)",
        stdout,
    )
    assert match, stdout
    assert int(match.group(1)) == len(manifest.shards)
    assert 0.0 < float(match.group(2)) < 5.0


@pytest.mark.slow
def test_weighted_example_trains_from_two_sources_each_in_its_share(sample_csv, tmp_path):
    from make_sample_csv import write_sample_csv

    other = write_sample_csv(tmp_path / "raw_b", 1, 3000, seed=1, first_id=100_000)
    convert(sample_csv, tmp_path / "a", "--num_shards=2")
    convert(other, tmp_path / "b", "--num_shards=1")
    stdout = _run_example(
        "train_weighted.py", f"{tmp_path / 'a'}=0.25", f"{tmp_path / 'b'}=0.75",
        "--steps", "30", "--global_batch_size", "128",
    )  # fmt: skip
    found = re.findall(
        r"weight ([0-9.]+), ([0-9,]+) records, quota ([0-9,]+) an epoch; share of a batch "
        r"([0-9.]+) \(spread ([0-9.]+), random sampling's ([0-9.]+)\)",
        stdout,
    )
    # 15,000 records apportioned 1:3; the shares of 30 batches of 128 about 0.25 and 0.75.
    assert [(w, n, q) for w, n, q, *_ in found] == [
        ("0.25", "12,000", "3,750"), ("0.75", "3,000", "11,250"),
    ], stdout  # fmt: skip
    for (*_, share, spread, random), expected in zip(found, (0.25, 0.75), strict=True):
        assert abs(float(share) - expected) < 0.02, stdout
        assert 0.67 <= float(spread) / float(random) <= 1.5, stdout
    assert "trained 30 steps on 2 replicas from 2 weighted sources" in stdout, stdout


@pytest.mark.slow
def test_multiworker_example_trains_on_two_local_workers(converted):
    out, _ = converted
    stdout = _run_example(
        "train_multiworker.py", str(out), "--local_workers", "2", "--global_batch_size", "128"
    )
    lines = sorted(
        re.findall(r"worker (\d): epoch 1: 93 steps on 2 replicas, mean loss ([0-9.]+)", stdout)
    )
    assert [worker for worker, _ in lines] == ["0", "1"], stdout
    assert lines[0][1] == lines[1][1]  # replicas stay in sync: both see the same reduced loss


@pytest.mark.slow
def test_resume_example_continues_the_epoch_after_an_interruption(converted, tmp_path):
    out, manifest = converted
    flags = [str(out), "--checkpoints", str(tmp_path / "ckpt"), "--global_batch_size", "256"]
    stopped = _run_example("resume_training.py", *flags, "--epochs", "2", "--stop_after", "7")
    assert "started at epoch 0 step 0; now at epoch 0 step 7" in stopped, stopped
    steps = -(-manifest.total_records // 256)
    resumed = _run_example("resume_training.py", *flags, "--epochs", "2")
    assert (
        f"started at epoch 0 step 7; now at epoch 2 step 0 ({steps} steps an epoch)" in resumed
    ), resumed
