"""The conversion on a real Dask cluster: a scheduler and two single-threaded workers started
here on 127.0.0.1, against the local runner on the same input."""

from __future__ import annotations

import csv
import json
import pathlib
import signal
import subprocess
import sys
import time

import pytest
from support.dask_cluster import dask_cluster

from beam_jobs.core.errors import UsageError
from beam_jobs.job import on_dask
from beam_jobs.plan.shards import MIN_TASKS

ROWS = 30_000
TARGET = "128KiB"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """tcp://127.0.0.1:PORT of a scheduler with two workers (one thread each), whose current
    folder is not the tests' (a relative --output must still land where the launcher means)."""
    with dask_cluster(tmp_path_factory.mktemp("dask"), workers=2) as address:
        yield address


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> pathlib.Path:
    """Two CSV files with quoted commas and newlines inside fields (the counts before each
    cut decide where records start)."""
    folder = tmp_path_factory.mktemp("dask_input")
    for part in range(2):
        with open(folder / f"part-{part}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "x", "note"])
            for i in range(part * ROWS // 2, (part + 1) * ROWS // 2):
                note = f"line one {i}\nline, two" if i % 7 == 0 else f"plain {i}"
                writer.writerow([i, i * 0.5, note])
    return folder


def _convert(cwd: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "beam_jobs", "convert", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _records_by_shard(folder: pathlib.Path) -> dict[str, list[tuple]]:
    """Each shard's records, each as its features sorted by name (the encoder's feature order
    is not fixed, so bytes and crc32c may differ between equal records)."""
    import tensorflow as tf

    manifest = json.loads((folder / "manifest.json").read_text())
    shards = {}
    for shard in manifest["shards"]:
        records = []
        for raw in tf.data.TFRecordDataset(str(folder / shard["path"])):
            example = tf.train.Example.FromString(raw.numpy())
            records.append(tuple(sorted((k, str(v)) for k, v in example.features.feature.items())))
        shards[shard["path"]] = records
    return shards


def _status(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def _wait_until_idle(address: str, timeout: float = 60) -> None:
    """Until no worker of the cluster runs a task (what an interrupted run left running has
    ended)."""
    from distributed import Client

    # Threads still running a task, those the scheduler let go of included (a task of a client
    # that left runs on: a thread cannot be stopped). A lambda: pickled by value, as the
    # workers cannot import this module.
    running = lambda dask_worker: len(dask_worker.active_threads)  # noqa: E731
    deadline = time.monotonic() + timeout
    with Client(address, timeout=30) as client:
        while any(client.run(running).values()):
            assert time.monotonic() < deadline, client.run(running)
            time.sleep(0.1)


@pytest.mark.slow
def test_dask_cluster_writes_the_same_shards_as_the_local_runner(cluster, sample, tmp_path):
    from distributed import Client

    common = ["--input", f"{sample}/*.csv", "--target_shard_bytes", TARGET]
    local = _convert(tmp_path, *common, "--output", "local")
    assert local.returncode == 0, local.stderr
    with Client(cluster) as client:
        client.get_task_stream()  # starts the scheduler's task recording
        started = time.time()
        run = _convert(
            tmp_path,
            *common,
            "--output",
            "on_dask",  # relative: the workers' own folder is elsewhere
            "--runner",
            "DaskRunner",
            "--dask_client_address",
            cluster,
            "--progress_seconds",
            "0.2",
        )
        tasks = client.get_task_stream(start=started)
    assert run.returncode == 0, run.stderr
    status = _status(run.stdout)
    assert status["status"] == "ok"
    assert status["records_read"] == status["records_written"] == ROWS
    manifest = json.loads((tmp_path / "on_dask" / "manifest.json").read_text())
    assert len(manifest["shards"]) >= 6
    assert manifest["total_records"] == ROWS
    assert _records_by_shard(tmp_path / "on_dask") == _records_by_shard(tmp_path / "local")
    # Byte for byte the local runner's dataset: the same shards, checksums and fingerprint.
    local_manifest = json.loads((tmp_path / "local" / "manifest.json").read_text())
    assert manifest["shards"] == local_manifest["shards"]
    assert manifest["fingerprint"] == local_manifest["fingerprint"]
    verify = subprocess.run(
        [sys.executable, "-m", "beam_jobs", "verify", str(tmp_path / "on_dask")],
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "progress: " in run.stderr
    # One Dask task per write task, spread over both workers: MIN_TASKS of them, the shards
    # being smaller than an eighth of the input (`plan.shards.first_pass_tasks`).
    writers = {}
    for task in tasks:
        key = task["key"]
        if isinstance(key, tuple) and str(key[0]).startswith("apply_dofn_to_bundle-"):
            writers.setdefault(key[0], {})[key[1]] = task["worker"]
    per_task = [w for w in writers.values() if sorted(w) == list(range(MIN_TASKS))]
    assert per_task, writers.keys()
    assert len(set(per_task[0].values())) == 2


@pytest.mark.slow
def test_bad_rows_fail_on_dask_with_the_dead_letters_of_a_local_run(cluster, tmp_path):
    path = tmp_path / "bad.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "n"])
        for i in range(4000):
            writer.writerow([i, "oops" if i % 50 == 3 else i])
    flags = ["--input", str(path), "--target_shard_bytes", "16KiB", "--max_bad_fraction", "0.001"]
    flags += ["--schema", _schema(tmp_path)]
    local = _convert(tmp_path, *flags, "--output", "local")
    run = _convert(
        tmp_path,
        *flags,
        "--output",
        "on_dask",
        "--runner",
        "DaskRunner",
        "--dask_client_address",
        cluster,
    )
    assert (local.returncode, run.returncode) == (1, 1), run.stderr
    assert _status(run.stdout)["exit_code"] == 1
    bad = [line for line in run.stderr.splitlines() if "bad.csv:" in line]
    assert bad and bad == [line for line in local.stderr.splitlines() if "bad.csv:" in line]
    assert "bad.csv:5: " in run.stderr  # row 3 (i=3) is line 5: header, then rows 0..


def _schema(folder: pathlib.Path) -> str:
    path = folder / "schema.json"
    spec = [{"name": "id", "dtype": "int64"}, {"name": "n", "dtype": "int64"}]
    path.write_text(json.dumps({"features": spec}))
    return str(path)


@pytest.mark.slow
def test_large_inputs_are_counted_once_one_dask_task_per_segment(
    cluster, sample, tmp_path, monkeypatch
):
    from distributed import Client

    from beam_jobs.config.convert import ConvertConfig
    from beam_jobs.job import launcher
    from beam_jobs.plan.conversion import make_plan
    from beam_jobs.transforms import convert_to_shards

    monkeypatch.setattr(convert_to_shards, "LAUNCHER_COUNT_BYTES", 0)  # as for a large input
    argv = ["--input", f"{sample}/*.csv", "--output", str(tmp_path / "out"), "--target_shard_bytes"]
    argv += [TARGET]
    from beam_jobs.job.argv import split_argv

    segments = convert_to_shards.cut_segments(
        make_plan(ConvertConfig.from_flags(split_argv(argv)[0]))
    )
    assert len(segments) >= 6
    with Client(cluster) as client:
        client.get_task_stream()
        started = time.time()
        result = launcher.run([*argv, "--runner", "DaskRunner", "--dask_client_address", cluster])
        tasks = client.get_task_stream(start=started)
    assert result.manifest.total_records == ROWS
    counted = [t for t in tasks if str(t["key"]).startswith("count_segment-")]
    assert len(counted) == len(segments)


@pytest.mark.slow
def test_without_an_address_a_local_cluster_is_started_and_stopped(sample, tmp_path):
    run = _convert(
        tmp_path,
        "--input",
        f"{sample}/*.csv",
        "--output",
        "out_dask",
        "--target_shard_bytes",
        "1MiB",
        "--runner",
        "dask",
    )
    assert run.returncode == 0, run.stderr
    assert "started a local Dask cluster of" in run.stderr
    assert _status(run.stdout)["records_written"] == ROWS


def test_wait_false_is_refused_on_dask(tmp_path, sample):
    run = _convert(
        tmp_path,
        "--input",
        f"{sample}/*.csv",
        "--output",
        "out",
        "--runner",
        "DaskRunner",
        "--wait=false",
    )
    assert run.returncode == 2
    assert "--wait=false is not supported with --runner DaskRunner" in run.stderr
    assert not (tmp_path / "out").exists()


def test_prepare_sets_the_class_path_and_a_partition_per_task_up_to_a_bound():
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
    from apache_beam.runners.dask.dask_runner import DaskOptions

    options = PipelineOptions(["--runner", "DaskRunner"])
    assert on_dask.is_dask(options)
    on_dask.prepare(options, num_tasks=9, wait=True)
    assert options.view_as(StandardOptions).runner == on_dask.DASK_RUNNER
    assert options.view_as(DaskOptions).npartitions == 9
    # 20,000 tasks: the launcher's graph would hold a partition each (230 KB apiece).
    options = PipelineOptions(["--runner", "DaskRunner"])
    on_dask.prepare(options, num_tasks=20_000, wait=True)
    assert options.view_as(DaskOptions).npartitions == on_dask.MAX_PARTITIONS == 512
    argv = ["--runner", "dask", "--dask_npartitions", "3"]
    options = PipelineOptions(argv)
    on_dask.prepare(options, num_tasks=9, wait=True)
    assert options.view_as(DaskOptions).npartitions == 3
    assert not on_dask.is_dask(PipelineOptions(["--runner", "FnApiRunner"]))


class _Client:
    def __init__(self, *workers: str) -> None:
        self._workers = workers

    def scheduler_info(self) -> dict:
        return {"workers": {w: {} for w in self._workers}}


def test_local_paths_are_refused_for_workers_on_other_hosts():
    remote = _Client("tcp://127.0.0.1:4000", "tcp://10.1.2.3:4000")
    with pytest.raises(UsageError, match=r"/data/out is a local path, but Dask workers run on "):
        on_dask._check_hosts(remote, ["gs://b/in.csv", "/data/out"])
    on_dask._check_hosts(remote, ["gs://b/in.csv", "gs://b/out"])  # shared storage: fine
    on_dask._check_hosts(_Client("tcp://127.0.0.1:1", "tcp://localhost:2"), ["/data/out"])


@pytest.mark.parametrize(
    "flag", ["--dask_npartitions=-3", "--dask_npartitions=0", "--dask_partition_size=-1"]
)
def test_partition_flags_below_one_are_usage_errors(flag):
    from apache_beam.options.pipeline_options import PipelineOptions

    argv = ["--runner", "DaskRunner", flag]
    with pytest.raises(UsageError, match=r"must be at least 1, got"):
        on_dask.prepare(PipelineOptions(argv), num_tasks=4, wait=True)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--runner=dask_runner"], "--runner dask_runner: Unexpected pipeline runner"),
        (["--runner=DaskRunner", "--dask_client_address=nonsense"], "--dask_client_address"),
    ],
)
def test_a_runner_or_address_that_cannot_be_is_a_usage_error_before_anything_is_written(
    tmp_path, sample, flags, message
):
    run = _convert(tmp_path, "--input", f"{sample}/*.csv", "--output", "out", *flags)
    assert run.returncode == 2, run.stderr
    assert message in run.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_scheduler_without_workers_is_named_not_waited_on_forever(tmp_path, sample, monkeypatch):
    from beam_jobs.job import launcher

    monkeypatch.setattr(on_dask, "WAIT_FOR_WORKERS_SECONDS", 2)
    with dask_cluster(tmp_path, workers=0) as address:
        argv = ["--input", f"{sample}/*.csv", "--output", str(tmp_path / "out")]
        with pytest.raises(UsageError, match=f"the Dask scheduler at {address} has no workers"):
            launcher.run([*argv, "--runner", "DaskRunner", "--dask_client_address", address])
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_an_interrupted_dask_run_publishes_nothing_later_and_the_same_command_resumes_it(
    cluster, tmp_path
):
    """Dask does not stop a task that has started: a writer of the interrupted run deletes
    what it wrote unless it finished first (the run's marker no longer names its run), and
    its publishing finds the run's lease gone. What is left is finished work only, which the
    same command reuses."""
    path = tmp_path / "big.csv"
    with open(path, "w") as f:
        f.write("id,a,text\n")
        f.writelines(f"{i},{i * 0.5},some text here {i}\n" for i in range(400_000))
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "beam_jobs", "convert", "--input", str(path), "--output",
            str(out), "--target_shard_bytes=2MiB", "--runner=DaskRunner",
            f"--dask_client_address={cluster}"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    # Writers are at work on the cluster once the first of the 17 tasks has left its note (a
    # fixed wait was once longer than the whole run).
    while not list(out.glob(".tfrecord-etl-tmp-*/progress/*.json")):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr[-2000:]
    assert _status(stdout)["status"] == "interrupted"
    _wait_until_idle(cluster)  # what the cluster still runs of it ends meanwhile
    left = [p.name for p in out.iterdir()]
    assert all(name.startswith(".tfrecord-etl-tmp-") for name in left), left  # no shard
    for folder in out.iterdir():  # every file of a kept folder is a finished task's
        records = {p.name.split("~")[1][:16] for p in folder.glob("done/*.commit")}
        for file in folder.rglob("*~*"):
            assert file.name.split("~")[1][:16] in records, file
    again = _convert(tmp_path, *argv[4:])
    assert again.returncode == 0, again.stderr[-2000:]
    whole = _convert(tmp_path, *argv[4:7], str(tmp_path / "whole"), *argv[8:])
    assert _status(again.stdout)["fingerprint"] == _status(whole.stdout)["fingerprint"]
    assert _status(again.stdout)["records_written"] == 400_000


@pytest.mark.slow
def test_a_worker_killed_mid_run_is_recovered_and_the_bytes_are_the_local_runners(sample, tmp_path):
    """Dask runs a killed worker's tasks again on the others: the finished ones are reused
    from their records (`sink.commits`), and the shards are those of the local runner."""
    import os

    from distributed import Client

    common = ["--input", f"{sample}/*.csv", "--target_shard_bytes", TARGET]
    local = _convert(tmp_path, *common, "--output", "local")
    assert local.returncode == 0, local.stderr
    with dask_cluster(tmp_path, workers=2) as address:
        with Client(address) as client:
            pids = client.run(os.getpid)
        out = tmp_path / "on_dask"
        argv = [sys.executable, "-m", "beam_jobs", "convert", *common, "--output", str(out),
                "--runner", "DaskRunner", "--dask_client_address", address,
                "--stall_seconds", "120"]  # fmt: skip
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not list(out.glob(".tfrecord-etl-tmp-*/done/write-*.commit")):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        os.kill(sorted(pids.values())[0], signal.SIGKILL)  # a worker dies mid-run
        stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    assert _status(stdout)["fingerprint"] == _status(local.stdout)["fingerprint"]


@pytest.mark.slow
def test_a_dask_run_whose_task_hangs_ends_naming_it_not_waited_on_forever(sample, tmp_path):
    from support.runs import hooked_env

    with dask_cluster(tmp_path, workers=2, env=hooked_env(TFRECORD_ETL_TEST_HANG="1")) as address:
        run = _convert(tmp_path, "--input", f"{sample}/*.csv", "--output", "out",
                       "--target_shard_bytes", TARGET, "--runner", "DaskRunner",
                       "--dask_client_address", address, "--stall_seconds", "10")  # fmt: skip
    assert run.returncode == 3, run.stderr[-3000:]
    line = next(x for x in run.stderr.splitlines() if x.startswith("error: "))
    assert " (--stall_seconds 10) in stage WriteShards (the write tasks): " in line
    assert f"task-00001-of-{MIN_TASKS:05d} (" in line
    assert _status(run.stdout)["status"] == "error"
