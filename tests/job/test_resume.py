"""A run that does not publish keeps its finished work, and the same command reuses it: killed
(SIGKILL of the process group) at points of both passes, of the joins and of publishing, on
worker threads and processes, the rerun publishes the fingerprint of an uninterrupted run and
reuses exactly what was finished. Another input or option starts fresh, saying why; a run whose
progress stands still ends naming what it waited for; a signal while publishing lets it finish,
or leaves the previous dataset with no stray shard."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess

import google_crc32c
import pytest
from support.runs import convert_argv, hooked_env, kill_when, records, start, status

from beam_jobs.config.convert import ConvertConfig
from beam_jobs.job import resume
from beam_jobs.job.argv import split_argv
from beam_jobs.plan.conversion import make_plan
from beam_jobs.plan.shards import MIN_TASKS

ROWS = 250_000
BAD = 50  # rows with a word for a number: dead letters, within the default budget
PLAIN = ("--target_shard_bytes=1MiB",)
GZIP_SPLITS = ("--target_shard_bytes=1MiB", "--compression=gzip", "--splits=train=2,eval=1")
INPUT_SPLITS = ("--target_shard_bytes=1MiB", "--order=input", "--splits=train=2,eval=1")
PROCESSES = ("--direct_running_mode=multi_processing", "--direct_num_workers=2")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> pathlib.Path:
    """Rows sorted by label, a few of them bad (a word where the count is a number)."""
    path = tmp_path_factory.mktemp("resume") / "rows.csv"
    with open(path, "w") as f:
        f.write("id,label,count,text\n")
        for i in range(ROWS):
            count = "many" if i % (ROWS // BAD) == 7 else str(i % 1000)
            f.write(f"{i},{i * 10 // ROWS},{count},some text for row {i}\n")
    return path


@pytest.fixture(scope="module")
def whole(source, tmp_path_factory) -> dict[tuple[str, ...], pathlib.Path]:
    """Each flag set's output, converted without a stop."""
    folder = tmp_path_factory.mktemp("whole")
    found = {}
    for k, flags in enumerate((PLAIN, GZIP_SPLITS, INPUT_SPLITS)):
        done = subprocess.run(convert_argv(source, folder / str(k), *flags), capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        found[flags] = folder / str(k)
    return found


def _shards(manifest: dict) -> list[tuple]:
    return [(s["path"], s["records"], s["bytes"], s["crc32c"]) for s in manifest["shards"]]


def assert_same_dataset(out: pathlib.Path, expected: pathlib.Path) -> None:
    """The same fingerprint; else the shards that differ (what a failure needs to be read)."""
    got, want = (json.loads((o / "manifest.json").read_text()) for o in (out, expected))
    if got["fingerprint"] != want["fingerprint"]:
        mine, theirs = _shards(got), _shards(want)
        pairs = [(a, b) for a, b in zip(mine, theirs, strict=False) if a != b]
        features = got["features"] == want["features"]
        raise AssertionError(
            f"fingerprint {got['fingerprint']} != {want['fingerprint']}: {len(mine)} shards vs "
            f"{len(theirs)}, features equal: {features}, differing (got, expected): {pairs}"
        )


def _journal(out: pathlib.Path) -> bool:
    return bool(list(out.glob(".tfrecord-etl-tmp-*/publish.json")))


# Where a run is killed: as soon as the output holds so many records of finished tasks, or
# (publishing) once its journal is written and its shards are moved (a hook holds it there).
POINTS = {
    "first pass": lambda out: records(out, "write-") >= 2,
    "second pass": lambda out: records(out, "unit-") >= 1,
    "joins": lambda out: records(out, "join-") >= 1,
    "publishing": lambda out: _journal(out) and any(out.glob("*-of-*.tfrecord*")),
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "flags, point, mode",
    [
        (PLAIN, "first pass", ()),
        (PLAIN, "second pass", ()),
        (PLAIN, "publishing", ()),
        (PLAIN, "first pass", PROCESSES),
        (GZIP_SPLITS, "second pass", PROCESSES),
        (INPUT_SPLITS, "joins", ()),
    ],
    ids=["first-pass", "second-pass", "publishing", "processes", "gzip-splits", "joins"],
)
def test_a_killed_run_resumes_to_the_bytes_of_an_uninterrupted_run(
    source, whole, tmp_path, flags, point, mode
):
    out = tmp_path / "out"
    argv = convert_argv(source, out, *flags, *mode)
    env = hooked_env(TFRECORD_ETL_TEST_SIGNAL_AT="moved", TFRECORD_ETL_TEST_SIGNAL="0")
    proc = start(argv, env if point == "publishing" else None)
    assert kill_when(proc, lambda: POINTS[point](out))
    # The tasks the killed run finished (threads died with it): write tasks and units (the
    # joins are reused too, but they are no tasks of the summary's).
    finished = records(out, "write-") + records(out, "unit-")
    assert [p.name for p in out.glob("*-of-*.tfrecord*")] == [] or point == "publishing"
    again = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert_same_dataset(out, whole[flags])
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []
    manifest = json.loads((out / "manifest.json").read_text())
    if point == "publishing":  # the journal's publishing finished, as the killed run wrote it
        assert "finishing the publishing a stopped run of this conversion began" in again.stderr
        return
    counts = manifest["counts"]
    reused = counts["tasks_reused"]
    assert reused == finished if not mode else reused >= finished, (reused, finished)
    assert f"resumed: {reused:,} of {counts['tasks']:,} tasks reused" in again.stdout
    assert manifest["total_records"] + manifest["counts"]["bad_records"] == ROWS


def test_why_a_kept_folder_is_not_this_conversions_is_said_in_a_few_words():
    files = [{"path": "/d/a.csv", "bytes": 10, "modified": "t1"}]
    key = {"tool": "1.0", "inputs": files, "options": {"shuffle_seed": 0}, "features": []}
    cases = [
        (None, "it was left by an earlier version of tfrecord-etl"),
        ({**key, "tool": "0.9"}, "it was made by tfrecord-etl 0.9, this is 1.0"),
        (
            {**key, "inputs": [{"path": "/d/a.csv", "bytes": 9, "modified": "t0"}]},
            "input /d/a.csv changed (9 -> 10 bytes, modified t0 -> t1)",
        ),
        ({**key, "inputs": []}, "input /d/a.csv is new"),
        (
            {**key, "inputs": [*files, {"path": "/d/b.csv"}, {"path": "/d/c.csv"}]},
            "input /d/b.csv is gone (and 1 other input)",
        ),
        ({**key, "options": {"shuffle_seed": 5}}, "--shuffle_seed was 5, now 0"),
        (
            {**key, "options": {"shuffle_seed": 0, "compression": "gzip", "num_shards": 3}},
            '--compression was "gzip", now not given (and 1 other option)',
        ),
        (
            {**key, "features": [{"name": "x"}]},
            "its feature spec differs (a --schema file changed, or what was sampled)",
        ),
        ({**key, "plan": "other"}, "its plan differs"),
    ]
    for kept, reason in cases:
        assert resume.why_not(kept, {**key, "plan": "p"} if kept is None else key) == reason


def test_the_key_is_the_same_for_the_same_command_and_names_what_changes_the_bytes(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("id,x\n" + "".join(f"{i},{i / 7}\n" for i in range(2000)))

    def key(*flags: str) -> resume.WorkKey:
        argv = ["--input", str(path), "--output", str(tmp_path / "out"), *flags]
        config = ConvertConfig.from_flags(split_argv(argv)[0])
        return resume.work_key(config, make_plan(config))

    first = key("--num_shards=3")
    assert key("--num_shards=3").digest == first.digest and len(first.work) == 16
    # The bad-row budget, progress and stall limit do not change a byte: the same work.
    same = key("--num_shards=3", "--max_bad_fraction=0.2", "--stall_seconds=90")
    assert same.digest == first.digest
    seeded = key("--num_shards=3", "--shuffle_seed=5")
    assert seeded.digest != first.digest
    assert resume.why_not(first.parts, seeded.parts) == "--shuffle_seed was 0, now 5"
    size = path.stat().st_size
    path.write_text(path.read_text() + "2000,1.5\n")
    grown = resume.why_not(first.parts, key("--num_shards=3").parts)
    assert grown.startswith(f"input {path} changed ({size:,} -> {size + 9:,} bytes, modified ")


@pytest.mark.slow
def test_another_input_or_option_starts_fresh_and_says_why(tmp_path):
    path = tmp_path / "in.csv"  # row 5 is bad: a run allowed none fails at its end, kept
    rows = (f"{i},{'oops' if i == 5 else i / 7}\n" for i in range(30_000))
    path.write_text("id,x\n" + "".join(rows))
    out = tmp_path / "out"
    flags = ("--target_shard_bytes=64KiB",)
    strict = (*flags, "--max_bad_fraction=0")
    failed = subprocess.run(convert_argv(path, out, *strict), capture_output=True, text=True,
                            timeout=300)  # fmt: skip
    assert failed.returncode == 1, failed.stderr[-2000:]
    kept = status(failed)["kept_work"]
    seeded = subprocess.run(convert_argv(path, out, *flags, "--shuffle_seed=5"),
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert seeded.returncode == 0, seeded.stderr[-2000:]
    assert (
        f"starting fresh: the finished work kept in {kept} (" in seeded.stderr
        and ") is not this conversion's (--shuffle_seed was 0, now 5); removed" in seeded.stderr
    )
    assert status(seeded)["tasks_reused"] == 0
    failed = subprocess.run(convert_argv(path, out, *strict), capture_output=True, text=True,
                            timeout=300)  # fmt: skip
    assert failed.returncode == 1
    size = path.stat().st_size
    with open(path, "a") as f:
        f.write("30000,1.5\n")
    grown = subprocess.run(convert_argv(path, out, *flags), capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert grown.returncode == 0, grown.stderr[-2000:]
    assert f"(input {path} changed ({size:,} -> {size + 10:,} bytes, modified " in grown.stderr
    assert status(grown)["tasks_reused"] == 0 and status(grown)["records_written"] == 30_000


@pytest.mark.slow
@pytest.mark.parametrize("mode", [(), PROCESSES], ids=["threads", "processes"])
def test_a_run_whose_progress_stands_still_ends_naming_what_it_waited_for(source, whole, tmp_path,
                                                                          mode):  # fmt: skip
    out = tmp_path / "out"
    argv = convert_argv(source, out, *PLAIN, "--stall_seconds=10", *mode)
    stalled = subprocess.run(argv, env=hooked_env(TFRECORD_ETL_TEST_HANG="1"),
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    assert stalled.returncode == 3, stalled.stderr[-3000:]
    line = next(x for x in stalled.stderr.splitlines() if x.startswith("error: "))
    assert line.startswith("error: no progress for ")
    assert " (--stall_seconds 10) in stage WriteShards (the write tasks): " in line
    assert f"task-00001-of-{MIN_TASKS:05d} (" in line  # the hung task (by index: of 26 shards)
    kept = status(stalled)
    assert kept["status"] == "error" and kept["kept_tasks"] >= 1
    again = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert_same_dataset(out, whole[PLAIN])
    assert status(again)["tasks_reused"] == kept["kept_tasks"]


@pytest.fixture(scope="module")
def previous(source, tmp_path_factory) -> pathlib.Path:
    """An output holding a dataset (seed 9) that the runs below replace."""
    out = tmp_path_factory.mktemp("previous") / "out"
    done = subprocess.run(convert_argv(source, out, *PLAIN, "--shuffle_seed=9"),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    "at, signum, mode",
    [
        ("write", signal.SIGTERM, ()),
        ("moved", signal.SIGINT, ()),
        ("manifest", signal.SIGTERM, ()),
        ("moved", signal.SIGTERM, PROCESSES),
        ("write", signal.SIGINT, PROCESSES),
    ],
    ids=[
        "before-threads",
        "moving-threads",
        "manifest-threads",
        "moving-processes",
        "before-processes",
    ],
)
def test_a_signal_while_publishing_finishes_it_or_leaves_the_previous_dataset_alone(
    source, whole, previous, tmp_path, at, signum, mode
):
    out = tmp_path / "out"
    shutil.copytree(previous, out)
    before = json.loads((out / "manifest.json").read_text())
    argv = convert_argv(source, out, *PLAIN, *mode)
    env = hooked_env(TFRECORD_ETL_TEST_SIGNAL_AT=at, TFRECORD_ETL_TEST_SIGNAL=str(int(signum)))
    proc = start(argv, env)
    stdout, stderr = proc.communicate(timeout=300)
    name = signal.Signals(signum).name
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {s["path"] for s in manifest["shards"]} | set(manifest["dead_letter"])
    shards = {p.name for p in out.glob("*-of-*.tfrecord*")}
    shards |= {p.relative_to(out).as_posix() for p in out.glob("dead_letter/*")}
    assert shards == listed  # no stray shard or dead letter, whichever way it ended
    if at == "write":  # publishing had not begun: the run stops, the old dataset stays
        assert proc.returncode == 128 + signum, stderr[-3000:]
        assert status(stdout)["status"] == "interrupted"
        assert manifest["fingerprint"] == before["fingerprint"]
        return
    assert proc.returncode == 0, stderr[-3000:]
    assert f"{name} came while publishing: publishing finished first" in stdout
    assert_same_dataset(out, whole[PLAIN])
    assert manifest["fingerprint"] == status(stdout)["fingerprint"]
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def _strays(out: pathlib.Path) -> set[str]:
    """Shards and dead letters in the output that its manifest does not list."""
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {s["path"] for s in manifest["shards"]} | set(manifest["dead_letter"])
    found = {p.name for p in out.glob("*-of-*.tfrecord*")}
    found |= {p.relative_to(out).as_posix() for p in out.glob("dead_letter/*")}
    return found - listed


@pytest.mark.slow
def test_a_killed_publishing_is_checked_before_a_rerun_finishes_it(source, whole, tmp_path):
    """A shard damaged after its run was killed while publishing: the rerun does not move it
    into place; it puts the files back, runs the damaged task again, and publishes the
    uninterrupted run's bytes."""
    out = tmp_path / "out"
    argv = convert_argv(source, out, *PLAIN)
    env = hooked_env(TFRECORD_ETL_TEST_SIGNAL_AT="moved", TFRECORD_ETL_TEST_SIGNAL="0")
    assert kill_when(start(argv, env), lambda: POINTS["publishing"](out))
    shard = sorted(out.glob("*-of-*.tfrecord"))[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    again = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"is not finished: {shard.name} is not as its manifest lists" in again.stderr
    assert_same_dataset(out, whole[PLAIN])
    manifest = json.loads((out / "manifest.json").read_text())
    for entry in manifest["shards"]:
        stored = (out / entry["path"]).read_bytes()
        assert f"{google_crc32c.value(stored):08x}" == entry["crc32c"], entry["path"]
    assert _strays(out) == set()
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


@pytest.mark.slow
def test_rerunning_the_published_command_undoes_another_conversions_half_publishing(
    source, tmp_path
):
    out = tmp_path / "out"
    done = subprocess.run(convert_argv(source, out, *PLAIN, "--shuffle_seed=9"),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    before = json.loads((out / "manifest.json").read_text())["fingerprint"]
    other = convert_argv(source, out, *PLAIN, "--shuffle_seed=5")
    env = hooked_env(TFRECORD_ETL_TEST_SIGNAL_AT="moved", TFRECORD_ETL_TEST_SIGNAL="0")
    assert kill_when(start(other, env), lambda: _journal(out) and bool(_strays(out)))
    again = subprocess.run(convert_argv(source, out, *PLAIN, "--shuffle_seed=9"),
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert status(again)["status"] == "already_converted"
    assert json.loads((out / "manifest.json").read_text())["fingerprint"] == before
    assert _strays(out) == set()
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_a_published_run_ends_even_when_its_runner_never_says_so(tmp_path, monkeypatch):
    """A Dask client that lost its futures waits forever after the job is done: once the
    dataset is published (work folder and lease gone, this conversion's manifest), the
    launcher stops waiting."""
    import threading

    from beam_jobs.job import launcher, watchdog

    path = tmp_path / "in.csv"
    path.write_text("id,x\n" + "".join(f"{i},{i / 7}\n" for i in range(5000)))
    ran = launcher._run_pipeline

    def never_returns(*args):
        ran(*args)  # published
        threading.Event().wait()  # a runner that never says so

    monkeypatch.setattr(launcher, "_run_pipeline", never_returns)
    monkeypatch.setattr(watchdog, "PUBLISHED_GRACE", 0.5)
    monkeypatch.setattr(watchdog, "CHECK_SECONDS", 0.2)
    argv = ["--input", str(path), "--output", str(tmp_path / "out"), "--num_shards=2"]
    result = launcher.run([*argv, "--direct_running_mode=in_memory", "--stall_seconds=60"])
    assert result.status is launcher.ConvertStatus.CONVERTED
    assert result.manifest.total_records == 5000


class _Notes:
    """What the watchdog reads of a run's progress."""

    def __init__(self, notes, units=(), stages=None, quiet=75.0):
        import time

        self._notes, self._units, self.stages = notes, set(units), stages or {}
        self.last_change = time.monotonic() - quiet

    def notes(self):
        return self._notes

    def units_done(self):
        return self._units


@pytest.mark.parametrize(
    "notes, units, stages, said",
    [
        ({}, (), None, ": no write task has started (4 tasks planned): the runner has no worker "
                       "free for them, or its workers cannot start"),
        ({"a": {"done": True}, "b": {"done": False, "worker": "h:7"}}, (), None,
         " in stage WriteShards (the write tasks): 1 of 4 done; waiting for b (running on h:7), "
         "c (no note yet), d (no note yet)"),
        ({k: {"done": True} for k in "abcd"}, ("u1",), None,
         " in stage Shuffle (the second pass): 1 of 2 units done; waiting for u2 (no note yet)"),
        ({k: {"done": True} for k in "abcd"}, ("u1", "u2"), None,
         ": every task is done; waiting for stage Publish to start (the runner gathers the "
         "shards for it)"),
        ({k: {"done": True} for k in "abcd"}, ("u1", "u2"),
         {"publish": {"step": "naming 2 shards", "worker": "h:9"}},
         " in stage Publish, at: naming 2 shards (on h:9)"),
    ],
)  # fmt: skip
def test_a_stall_names_the_stage_and_what_it_waited_for(notes, units, stages, said):
    from beam_jobs.job.watchdog import Expected, stall_message

    expected = Expected(("a", "b", "c", "d"), ("u1", "u2"))
    message = stall_message(_Notes(notes, units, stages), expected, 60)
    assert message == "no progress for 1 min 15 s (--stall_seconds 60)" + said


def test_a_stalled_task_whose_worker_process_ended_here_is_said_so_and_the_limit_has_a_floor():
    import socket

    from beam_jobs.core.errors import UsageError
    from beam_jobs.job.watchdog import Expected, stall_message

    host = socket.gethostname()
    dead, alive = f"{host}:{_ended_pid()}", f"{host}:{os.getpid()}"
    notes = {"a": {"done": False, "worker": dead}, "b": {"done": False, "worker": alive}}
    message = stall_message(_Notes(notes), Expected(("a", "b")), 60)
    assert message.endswith(
        f"waiting for a (running on {dead}, a process that has ended), b (running on {alive})"
    )
    with pytest.raises(UsageError, match="^--stall_seconds must be at least 10 seconds, not 9"):
        ConvertConfig.from_flags(
            split_argv(["--input=x.csv", "--output=o", "--stall_seconds=9"])[0]
        )


def _ended_pid() -> int:
    """The id of a process that has ended (and was reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_full_disk_is_said_plainly_and_the_work_kept_is_still_counted(tmp_path, monkeypatch):
    import errno

    from beam_jobs.cli import _full_disk
    from beam_jobs.job import launcher
    from beam_jobs.sink import commits

    full = OSError(errno.ENOSPC, "No space left on device", "/o/.tfrecord-etl-tmp-1/run.json")
    wrapped = RuntimeError("a worker failed")
    wrapped.__cause__ = full
    wrapped.kept_work = "kept"  # type: ignore[attr-defined]
    said = _full_disk(wrapped)
    assert str(said) == (
        "no space left on the device writing /o/.tfrecord-etl-tmp-1/run.json: free space "
        "there and run the same command again"
    )
    assert said.kept_work == "kept"  # type: ignore[union-attr]
    assert _full_disk(ValueError("other")) is None
    # Tidying fails on the full disk (the marker's rewrite): what is kept is still counted.
    folder = tmp_path / ".tfrecord-etl-tmp-1"
    (folder / "done").mkdir(parents=True)
    part = folder / commits.attempt_name("data-00000-of-00002.tfrecord.runs", "0" * 16)
    part.write_bytes(b"r" * 1000)
    commits.commit(str(folder), "write-00000", "0" * 16, 0, [])

    def refused(*args):
        raise full

    monkeypatch.setattr(resume, "keep_on_failure", refused)
    kept = launcher._keep_quietly(str(folder), 4)
    record = next((folder / "done").iterdir()).stat().st_size
    assert kept == resume.KeptWork(str(folder), 1000 + record, 1, 4)
