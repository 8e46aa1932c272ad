"""One writer per output folder, and a publish that never breaks the previous dataset or touches
files that are not ours (ground truth: the sample CSV read by Python's csv module)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import pathlib
import socket
import subprocess
import sys

import pytest
from support.datasets import IN_PROCESS, convert, expected_rows, read_all

from beam_jobs.cli import main
from beam_jobs.core.errors import OutputBusy, TooManyBadRecords, UsageError
from beam_jobs.inspection.verify import verify
from beam_jobs.publish import journal, lease, publish
from beam_jobs.publish.companions import COMPANION_NAMES

LEASE = lease.LEASE_NAME


def _ids(out) -> list[int]:
    return sorted(r["id"] for r in read_all(out))


def _write_lease(out, **fields) -> None:
    now = datetime.datetime.now(datetime.timezone.utc)
    held = {
        "run_id": "f00d",
        "host": "other-host",
        "pid": 1,
        "started": now.isoformat(timespec="seconds"),
        "expires": (now + datetime.timedelta(minutes=5)).isoformat(timespec="seconds"),
        "job": "",
        **fields,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / LEASE).write_text(json.dumps(held))


def test_a_live_lease_stops_a_second_run_with_exit_code_4(sample_csv, tmp_path, capsys):
    out = tmp_path / "out"
    _write_lease(out, job="2026-12-03_etl")
    argv = ["convert", "--input", sample_csv[0], "--output", str(out), *IN_PROCESS]
    assert main(argv) == 4
    captured = capsys.readouterr()
    assert f"error: another conversion is writing {out} (since " in captured.err
    assert "pid 1 on other-host, job 2026-12-03_etl" in captured.err
    assert json.loads(captured.out.splitlines()[-1])["status"] == "busy"
    assert sorted(p.name for p in out.iterdir()) == [LEASE]  # nothing else touched


@pytest.mark.parametrize(
    "holder",
    [
        {"host": socket.gethostname(), "pid": 2**22 + 7},  # a dead process on this host
        {"expires": "2026-01-01T00:00:00+00:00"},  # expired: its run stopped heartbeating
        {"run_id": "x", "started": "garbled"},  # unreadable as a lease
    ],
    ids=["dead_pid", "expired", "unreadable"],
)
def test_the_lease_of_a_run_that_is_gone_is_taken_over(sample_csv, tmp_path, holder):
    out = tmp_path / "out"
    _write_lease(out, **holder)
    if holder.get("started") == "garbled":
        (out / LEASE).write_text("{not json")
    manifest = convert(sample_csv[:1], out)
    assert manifest.total_records == 4000
    assert not (out / LEASE).exists()  # released at the end


@pytest.mark.slow
def test_two_conversions_into_one_output_give_one_dataset_and_one_clear_error(tmp_path):
    from make_sample_csv import write_sample_csv

    # Both start together; whichever takes the lease first converts (a few seconds), and the
    # other arrives while it writes. --overwrite: a late second run would convert again.
    inputs = [str(p) for p in write_sample_csv(tmp_path / "raw", files=2, rows=200_000, seed=3)]
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "beam_jobs", "convert", "--output", str(out), "--overwrite"]
    argv += [a for p in inputs for a in ("--input", p)] + ["--target_shard_bytes=4MiB"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    runs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [(r.wait(timeout=300), *r.communicate()) for r in runs]
    assert sorted(code for code, _, _ in results) == [0, 4], [e[-2000:] for _, _, e in results]
    (_, won, _), (_, _, lost) = sorted(results)
    assert f"another conversion is writing {out}" in lost
    assert json.loads(won.splitlines()[-1])["status"] == "ok"
    assert verify(str(out))[1] == []
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["total_records"] == len(expected_rows(inputs)) == 400_000
    assert not (out / LEASE).exists()


def test_a_failed_run_leaves_the_previous_dataset_and_its_dead_letters_alone(sample_csv, tmp_path):
    out = tmp_path / "out"
    good = convert(sample_csv[:1], out, "--num_shards=2")
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    bad = tmp_path / "bad.csv"
    good_rows = [f"{i},v{i}" for i in range(50)]
    bad.write_text("\n".join(["id,v", *good_rows, *(f"{i},v,extra" for i in range(10))]) + "\n")
    with pytest.raises(TooManyBadRecords) as e:
        convert([str(bad)], out, "--overwrite")
    kept = pathlib.Path(e.value.kept_work.folder)  # its finished work, for a rerun
    assert kept.parent == out and (kept / "run.json").exists()
    after = {
        p.name: p.read_bytes() for p in out.rglob("*") if p.is_file() and kept not in p.parents
    }
    assert {k: v for k, v in after.items() if k in before} == before  # not a byte changed
    assert set(after) - set(before) == {"data-00000-of-00001.g1.tfrecord.jsonl"}
    assert e.value.dead_letters == ["dead_letter/data-00000-of-00001.g1.tfrecord.jsonl"]
    assert verify(str(out))[1] == [] and _ids(out) == list(range(4000))
    # The next good run (another conversion: the kept work is removed) publishes generation 1
    # and removes both generation 0 and the failed run's dead letter.
    again = convert(sample_csv[:1], out, "--overwrite", "--num_shards=3")
    assert again.generation == 1 and good.generation == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"data-0000{i}-of-00003.g1.tfrecord" for i in range(3)]
        + ["manifest.json", *COMPANION_NAMES]
    )


def test_a_failure_while_publishing_keeps_the_previous_dataset_readable(
    sample_csv, tmp_path, monkeypatch
):
    out = tmp_path / "out"
    first = convert(sample_csv[:1], out, "--num_shards=2")
    companions = {c.path: (out / c.path).read_bytes() for c in first.companions}
    replace = os.replace

    def crash(src, dst):
        if str(dst).endswith("manifest.json"):
            raise OSError("disk full while writing the manifest")
        replace(src, dst)

    monkeypatch.setattr(journal.os, "replace", crash)
    with pytest.raises(Exception, match="disk full"):
        convert(sample_csv[1:2], out, "--overwrite", "--num_shards=2")
    monkeypatch.undo()
    # It kept its work and its journal: the same command would finish publishing.
    (kept,) = [p for p in out.iterdir() if p.name.startswith(".tfrecord-etl-tmp-")]
    assert (kept / journal.JOURNAL_NAME).exists()
    # The old shards all check out; the crashed run's renamed shards are extra, unlisted files,
    # and the companions it wrote before failing are not the ones the manifest lists.
    changed = [name for name, data in companions.items() if (out / name).read_bytes() != data]
    assert sorted(changed) == ["dataset_info.json", "statistics.pb"]  # same schema, same bytes
    problems = sorted((p.path, p.problem) for p in verify(str(out))[1])
    shards = [f"data-0000{i}-of-00002.g1.tfrecord" for i in range(2)]
    assert sorted({path for path, _ in problems}) == sorted(shards + changed)
    for path, problem in problems:
        assert (
            problem == "not listed in the manifest"
            if path in shards
            else problem.endswith("(not the file this manifest published)")
        )
    assert _ids(out) == list(range(4000))  # still the first input's rows, all of them
    # The first conversion again is no no-op: its companions were overwritten. It is another
    # conversion than the crashed one's: that one's moved shards are removed with its work.
    again = convert(sample_csv[:1], out, "--num_shards=2")
    assert again.fingerprint == first.fingerprint and again.generation == 1
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"data-0000{i}-of-00002.g1.tfrecord" for i in range(2)]
        + ["manifest.json", *COMPANION_NAMES]
    )
    assert verify(str(out))[1] == []  # the crashed run's leftovers are gone
    assert not (out / LEASE).exists()


def test_files_that_are_not_ours_are_never_deleted(sample_csv, tmp_path):
    out = tmp_path / "out"
    (out / "dead_letter").mkdir(parents=True)
    (out / "dead_letter" / "important.txt").write_text("keep me")
    (out / ".tfrecord-etl-tmp-abc").mkdir()  # looks like ours, holds no run marker
    (out / ".tfrecord-etl-tmp-abc" / "mine.bin").write_text("keep me too")
    with pytest.raises(Exception, match="holds files tfrecord-etl did not write"):
        convert(sample_csv[:1], out)
    for _ in range(2):
        convert(sample_csv[:1], out, "--overwrite", "--num_shards=2")
    assert (out / "dead_letter" / "important.txt").read_text() == "keep me"
    assert (out / ".tfrecord-etl-tmp-abc" / "mine.bin").read_text() == "keep me too"


@pytest.mark.parametrize("flags", [(), ("--overwrite",)])
def test_a_users_files_under_companion_names_are_not_written_over(sample_csv, tmp_path, flags):
    out = tmp_path / "out"
    out.mkdir()
    (out / "features.json").write_text('{"mine": true}')
    (out / "statistics.pb").write_bytes(b"my own")
    with pytest.raises(UsageError, match="holds statistics.pb, features.json, which a conv"):
        convert(sample_csv[:1], out, *flags)
    assert (out / "features.json").read_text() == '{"mine": true}'
    assert (out / "statistics.pb").read_bytes() == b"my own"
    assert sorted(p.name for p in out.iterdir()) == ["features.json", "statistics.pb"]


@pytest.mark.parametrize("flags", [(), ("--overwrite",)])
@pytest.mark.parametrize("text", ['{"name": "my web app"}', "garbage"])
def test_a_manifest_json_that_is_not_ours_is_not_written_over(sample_csv, tmp_path, flags, text):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text(text)
    (out / "schema.pbtxt").write_text("my schema")
    with pytest.raises(UsageError, match="holds a manifest.json that is not a tfrecord-etl man"):
        convert(sample_csv[:1], out, *flags)
    assert (out / "manifest.json").read_text() == text
    assert (out / "schema.pbtxt").read_text() == "my schema"
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "schema.pbtxt"]


def test_companions_a_run_left_when_it_died_publishing_are_ours(sample_csv, tmp_path):
    out = tmp_path / "out"
    dead = out / ".tfrecord-etl-tmp-0123abcd"
    dead.mkdir(parents=True)
    (dead / "run.json").write_text('{"run_id": "0123abcd", "tool": "tfrecord-etl"}')
    (out / "statistics.pb").write_bytes(b"from the dead run")
    manifest = convert(sample_csv[:1], out)
    assert not dead.exists() and verify(str(out))[1] == []
    assert [c.path for c in manifest.companions] == list(COMPANION_NAMES)


def test_an_existing_empty_output_folder_is_used(sample_csv, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert convert(sample_csv[:1], out).total_records == 4000


def test_already_converted_still_removes_a_killed_runs_temporary_folder(sample_csv, tmp_path):
    out = tmp_path / "out"
    convert(sample_csv[:1], out)
    leftover = out / ".tfrecord-etl-tmp-0123456789ab"
    leftover.mkdir()
    (leftover / "run.json").write_text('{"run_id": "0123456789ab", "tool": "tfrecord-etl"}')
    (leftover / "data-00000-of-00001.tfrecord.5f3a").write_bytes(b"x" * 1000)
    from beam_jobs.job.launcher import run

    result = run(["--input", sample_csv[0], "--output", str(out), *IN_PROCESS])
    assert not result.converted and not leftover.exists()


def test_write_shards_refuses_an_output_another_run_holds(tmp_path):
    import apache_beam as beam

    from beam_jobs import WriteShards

    out = tmp_path / "out"
    _write_lease(out)
    with pytest.raises(Exception) as e, beam.Pipeline() as p:
        _ = p | beam.Create([{"id": i} for i in range(10)]) | WriteShards(str(out))
    assert "another conversion holds" in str(e.value)
    assert not (out / "manifest.json").exists()
    with pytest.raises(OutputBusy):
        lease.check_holder(str(out), "")


def test_a_run_whose_lease_is_gone_publishes_nothing(tmp_path):
    """An interrupted launcher releases its lease; a task a cluster still runs must not
    publish that abandoned run (over a newer one, even)."""
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(OutputBusy, match="the lease of run abc123 on .* is gone"):
        lease.check_holder(str(out), "abc123")
    lease.check_holder(str(out), "")  # WriteShards takes no lease


def test_a_writer_of_an_interrupted_run_deletes_what_it_wrote_and_stops(tmp_path, monkeypatch):
    from beam_jobs.formats.csv.format import CsvFormat
    from beam_jobs.sink import temp_folder
    from beam_jobs.sink.shard_writer import WriteShardFn, WriteSpec
    from beam_jobs.sink.temp_folder import RunAbandoned, mark_stopped, start_temp_folder
    from tfdata_reader.manifest import FeatureSpec

    monkeypatch.setattr(temp_folder, "HELD_SECONDS", 0.0)  # the marker read at every check
    temp = pathlib.Path(start_temp_folder(str(tmp_path / "out"), "abc123", run_id="r1"))
    marker = temp / "run.json"
    shard, note = temp / "data-00000-of-00001.tfrecord.x", temp / "progress" / "n.json"
    features = (FeatureSpec("id", "int64", [], False),)
    spec = WriteSpec(CsvFormat(), features, features, str(temp), run_marker=str(marker))
    writer = WriteShardFn(dataclasses.replace(spec, run_id="r1"))
    writer._check_alive([])  # the folder's marker names its run: nothing happens
    assert mark_stopped(str(temp))  # the launcher was stopped (or a rerun took over)...
    shard.write_bytes(b"x")  # ...while this task went on writing
    note.write_text("{}")
    with pytest.raises(RunAbandoned):
        writer._check_alive([str(shard), str(note), None])
    # What it wrote is gone; the folder, with the finished work of others, stays.
    assert sorted(p.name for p in temp.rglob("*")) == ["progress", "run.json"]
    with pytest.raises(RunAbandoned):  # a folder taken over by another run: the same
        start_temp_folder(str(tmp_path / "out"), "abc123", run_id="r2")
        writer._check_alive([])


def test_a_lease_lost_while_statistics_merge_names_nothing(sample_csv, tmp_path, monkeypatch):
    # The launcher interrupted (its lease released) while the publishing worker merged the
    # statistics: nothing gets its final name, no manifest is written.
    out = tmp_path / "out"
    companions = publish.companion_files

    def interrupted(written, manifest):
        held = lease.read_lease(str(out))[0]
        lease.release(str(out), held.run_id)
        return companions(written, manifest)

    monkeypatch.setattr(publish, "companion_files", interrupted)
    with pytest.raises(OutputBusy, match="is gone") as e:
        convert(sample_csv[:1], out, "--num_shards=2")
    # Nothing but the run's finished work, kept for a rerun, which publishes it.
    kept = pathlib.Path(e.value.kept_work.folder)
    assert sorted(p.name for p in out.iterdir()) == [kept.name]
    assert not (kept / "publish.json").exists()
    monkeypatch.undo()
    again = convert(sample_csv[:1], out, "--num_shards=2")
    assert again.counts.tasks_reused == again.counts.tasks == 4
