"""Ctrl-C and SIGTERM: the run ends within seconds with 130 / 143, says so, publishes nothing,
leaves no lease and no shard, keeps only its finished work (named in its last words), and the
same command then resumes it into the dataset an uninterrupted run publishes."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "big.csv"
    with open(path, "w") as f:
        f.write("id,a,b,text\n")
        f.writelines(f"{i},{i * 0.5},{i % 97},some text here {i}\n" for i in range(1_500_000))
    return path


def _records(folder: pathlib.Path) -> int:
    """Finished tasks' records in a kept work folder."""
    return len(list(folder.glob("done/*.commit")))


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_ends_the_run_cleanly(big_csv, tmp_path, signum, code):
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "beam_jobs", "convert", "--input", str(big_csv),
            "--output", str(out), "--compression=gzip", "--target_shard_bytes=16MiB"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(out.glob(".tfrecord-etl-tmp-*/done/*.commit")):  # a task finished
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    os.kill(proc.pid, signum)
    signalled = time.monotonic()
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr[-2000:]
    assert time.monotonic() - signalled < 15
    name = signal.Signals(signum).name
    status = json.loads(stdout.splitlines()[-1])
    (kept,) = out.iterdir()  # no shard, manifest or lease: the finished work alone
    assert status == {
        "status": "interrupted",
        "exit_code": code,
        "signal": name,
        "kept_work": str(kept),
        "kept_bytes": sum(p.stat().st_size for p in kept.rglob("*") if p.is_file()),
        "kept_tasks": _records(kept),
    }
    assert status["kept_tasks"] >= 1
    assert f"error: interrupted by {name}: nothing was published; its finished work (" in stderr
    assert f"is kept in {kept}: run the same command again to resume" in stderr
    if signum == signal.SIGTERM:
        again = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr[-2000:]
        resumed = json.loads(again.stdout.splitlines()[-1])
        assert resumed["records_written"] == 1_500_000
        assert resumed["tasks_reused"] == status["kept_tasks"]
        whole = subprocess.run(
            [*argv[:7], str(tmp_path / "whole"), *argv[8:]], capture_output=True, text=True
        )
        assert json.loads(whole.stdout.splitlines()[-1])["fingerprint"] == resumed["fingerprint"]
        assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_beam_and_tensorflow_are_imported_ends_the_run_cleanly(
    tmp_path, signum, code
):
    path = tmp_path / "a.csv"
    path.write_text("id\n1\n")
    argv = [sys.executable, "-m", "beam_jobs", "convert", "--input", str(path),
            "--output", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.6)  # the command line has started; Beam and TensorFlow take seconds to import
    os.kill(proc.pid, signum)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr[-2000:]
    assert "Traceback" not in stderr
    assert json.loads(stdout.splitlines()[-1])["status"] == "interrupted"


def test_a_signal_that_code_it_went_through_wrapped_still_ends_the_run_as_interrupted(tmp_path):
    """A signal inside a dataclass field's `__set_name__` (as an import meets one) comes out
    wrapped in Python's RuntimeError: still an interruption, 143, not an error (exit 3)."""
    from support.runs import hooked_env

    path = tmp_path / "a.csv"
    path.write_text("id\n1\n")
    argv = [sys.executable, "-m", "beam_jobs", "convert", "--input", str(path),
            "--output", str(tmp_path / "out")]  # fmt: skip
    env = hooked_env(TFRECORD_ETL_TEST_SIGNAL_IN_SET_NAME=str(int(signal.SIGTERM)))
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 143, done.stderr[-2000:]
    assert "error: interrupted by SIGTERM: nothing was published" in done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["status"] == "interrupted"


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_worker_processes_start_ends_the_run_and_them(
    big_csv, tmp_path, signum, code
):
    """Beam's runner, unwinding, waits for every worker process to end, and one still starting
    never did: the launcher hung for good. The signal now stops the workers first; sent to the
    whole process group (a terminal's Ctrl-C), it reaches only the launcher."""
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "beam_jobs", "convert", "--input", str(big_csv),
            "--output", str(out), "--direct_running_mode=multi_processing"]  # fmt: skip
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while not any(p.name.startswith(".tfrecord-etl-tmp-") for p in out.glob(".*")):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    os.killpg(proc.pid, signum)  # the pipeline is starting its worker processes
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr[-2000:]
    assert "Traceback" not in stderr and "Exception in thread" not in stderr, stderr[-3000:]
    assert json.loads(stdout.splitlines()[-1])["status"] == "interrupted"
    assert sorted(p.name for p in out.iterdir()) == []
    time.sleep(5)  # a worker whose launcher is gone exits
    workers = subprocess.run(["pgrep", "-f", "sdk_worker_main"], capture_output=True, text=True)
    assert workers.stdout == "", workers.stdout
