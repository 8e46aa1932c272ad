import json
import pathlib
import re

from beam_jobs.sink import progress
from beam_jobs.sink.progress import ProgressReporter, RunningNote, format_duration, write_note


def test_reporter_reads_notes_once_and_sums_them(tmp_path):
    temp = str(tmp_path / ".tfrecord-etl-tmp-0a1b")
    (tmp_path / ".tfrecord-etl-tmp-0a1b").mkdir()  # as the launcher makes it
    reporter = ProgressReporter(temp, num_shards=5)
    assert reporter.poll() is None  # nothing written yet, notes folder missing
    write_note(temp, "data-00000-of-00005.tfrecord", 100, 2000, 1_500_000)
    write_note(temp, "data-00003-of-00005.tfrecord", 200, 4000, 2_500_000)
    line = reporter.poll()
    assert re.fullmatch(
        r"progress: 2/5 shards, 300 records, 4\.0 MB of input at [0-9.]+ MB/s, "
        r"from 1 worker process",
        line,
    ), line
    assert reporter.poll() is None  # no new notes
    write_note(temp, "data-00001-of-00005.tfrecord", 1, 10, 1_000_000)
    assert reporter.poll().startswith("progress: 3/5 shards, 301 records, 5.0 MB of input at ")


def test_a_retried_shard_is_counted_once(tmp_path):
    temp = str(tmp_path / ".tfrecord-etl-tmp-0a1b")
    (tmp_path / ".tfrecord-etl-tmp-0a1b").mkdir()  # as the launcher makes it
    reporter = ProgressReporter(temp, num_shards=1)
    write_note(temp, "data-00000-of-00001.tfrecord", 7, 70, 700)
    write_note(temp, "data-00000-of-00001.tfrecord", 7, 70, 700)
    assert reporter.poll().startswith("progress: 1/1 shards, 7 records, ")


def test_progress_counts_the_worker_processes_that_wrote(tmp_path):
    temp = str(tmp_path / ".tfrecord-etl-tmp-0a1b")
    (tmp_path / ".tfrecord-etl-tmp-0a1b").mkdir()  # as the launcher makes it
    reporter = ProgressReporter(temp, num_shards=3)
    write_note(temp, "data-00000-of-00003.tfrecord", 1, 10, 100)
    note = tmp_path / ".tfrecord-etl-tmp-0a1b" / "progress" / "data-00001-of-00003.tfrecord.json"
    note.write_text(json.dumps({"records": 2, "bytes": 2, "input_bytes": 2, "worker": "h:1"}))
    assert reporter.poll().endswith(", from 2 worker processes")


def test_running_notes_give_the_share_of_the_input_and_an_eta(tmp_path, monkeypatch):
    temp = str(tmp_path / ".tfrecord-etl-tmp-0a1b")
    (tmp_path / ".tfrecord-etl-tmp-0a1b" / progress.NOTES_DIR).mkdir(
        parents=True
    )  # as the launcher makes it
    clock = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    reporter = ProgressReporter(temp, num_shards=4, input_bytes=8_000_000)
    running = RunningNote(temp, "data-00001-of-00004.tfrecord", every=5.0)
    running.update(10, 100, 1_000_000)  # before its first 5 s: no note
    assert reporter.poll() is None
    clock[0] += 10.0
    running.update(50, 500, 1_000_000)
    write_note(temp, "data-00000-of-00004.tfrecord", 100, 1000, 1_000_000)
    # 2 MB of 8 in 10 s: 25%, the other 6 MB in 30 s more.
    assert reporter.poll() == (
        "progress: 1/4 shards (25% of 8.0 MB of input, about 30 s left), 150 records, "
        "2.0 MB of input at 0.2 MB/s, from 1 worker process"
    )
    assert reporter.poll() is None  # nothing changed
    clock[0] += 1.0
    running.update(60, 600, 1_500_000)  # rewritten at most every 5 s: not yet
    assert reporter.poll() is None
    clock[0] += 5.0
    running.update(70, 700, 3_000_000)
    assert reporter.poll().startswith("progress: 1/4 shards (50% of 8.0 MB of input, about 16 s")
    write_note(temp, "data-00001-of-00004.tfrecord", 80, 800, 3_000_000)  # now done
    assert reporter.poll().startswith("progress: 2/4 shards (50% of ")


def test_durations_read_as_seconds_minutes_and_hours():
    assert [format_duration(s) for s in (0.4, 42, 425, 3 * 3600 + 125)] == [
        "0 s", "42 s", "7 min 05 s", "3 h 02 min",
    ]  # fmt: skip


def test_a_terminal_gets_a_live_bar_that_ends_full(tmp_path, capsys):
    temp = str(tmp_path / ".tfrecord-etl-tmp-0a1b")
    (tmp_path / ".tfrecord-etl-tmp-0a1b").mkdir()  # as the launcher makes it
    reporter = ProgressReporter(temp, num_shards=2, interval=0.05, input_bytes=4000, live=True)
    reporter.start()
    write_note(temp, "data-00000-of-00002.tfrecord", 10, 100, 1000)
    write_note(temp, "data-00001-of-00002.tfrecord", 30, 300, 3000)
    reporter.stop()
    shown = capsys.readouterr().err
    assert "100%|" in shown and ", 2/2 shards, 40 records, " in shown


def test_a_writer_notes_its_share_of_the_input_while_it_runs(tmp_path, monkeypatch):
    from support.datasets import convert

    rows = "\n".join(f"{i},{i * 0.5},word{i % 7}" for i in range(150_000))
    (tmp_path / "in.csv").write_text("id,x,w\n" + rows + "\n")
    size = (tmp_path / "in.csv").stat().st_size
    notes = []
    monkeypatch.setattr(progress, "NOTE_SECONDS", 0.0)  # a note after every batch
    monkeypatch.setattr(progress, "write_note", lambda *a, **k: notes.append((*a[1:], k)))
    convert([str(tmp_path / "in.csv")], tmp_path / "out", "--num_shards", "1")
    # The shuffle's second pass notes its unit apart (after the task's last note).
    assert notes[-1][:2] == (f"{progress.SHUFFLE_NOTES}/data-00000-of-00001.tfrecord.part0",
                             150_000)  # fmt: skip
    notes = [n for n in notes[:-1] if not n[0].startswith(progress.SHUFFLE_NOTES)]
    running = [n for n in notes if n[-1] == {"done": False}]
    assert len(running) >= 2 and notes[-1][:2] == ("data-00000-of-00001.tfrecord", 150_000)
    shares = [n[3] for n in running]  # input bytes, estimated from the rows read
    assert shares == sorted(shares) and 0 < shares[0] < shares[-1] <= size
    assert notes[-1][3] == size and notes[-1][-1] == {}  # the last: done, exact


def test_a_running_note_does_not_make_again_the_folder_an_interrupted_run_removed(tmp_path):
    # A worker still running after the launcher removed the run's folder wrote its note into
    # a folder made again, left behind once the worker was stopped.
    temp = tmp_path / ".tfrecord-etl-tmp-0a1b"
    running = RunningNote(str(temp), "data-00000-of-00001.tfrecord", every=0.0)
    running.update(10, 100, 1_000)
    assert not temp.exists()
    (temp / progress.NOTES_DIR).mkdir(parents=True)
    running.update(20, 200, 2_000)
    assert [p.name for p in (temp / progress.NOTES_DIR).iterdir()] == [
        "data-00000-of-00001.tfrecord.json"
    ]


def test_the_launchers_temporary_folder_holds_the_notes_folder(tmp_path):
    from beam_jobs.sink.temp_folder import start_temp_folder

    folder = start_temp_folder(str(tmp_path), "abc123", run_id="r1")
    made = sorted(p.name for p in pathlib.Path(folder).iterdir())
    assert made == [progress.NOTES_DIR, "run.json"]


def test_a_shuffled_conversions_second_pass_is_counted_apart(tmp_path):
    temp = str(tmp_path / ".tfrecord-etl-tmp-0a1b")
    (tmp_path / ".tfrecord-etl-tmp-0a1b").mkdir()  # as the launcher makes it
    reporter = ProgressReporter(temp, num_shards=2, shuffle_units=3)
    write_note(temp, "task-00000-of-00002", 10, 100, 1000)
    assert reporter.poll().endswith("from 1 worker process")  # the first pass is not done
    write_note(temp, "task-00001-of-00002", 10, 100, 1000)
    write_note(temp, f"{progress.SHUFFLE_NOTES}/data-00000-of-00002.tfrecord.part0", 9, 99, 0)
    line = reporter.poll()
    assert line.startswith("progress: 2/2 shards, 20 records, ")  # units add no records
    assert line.endswith("; shuffled into shards: 1/3 units"), line
    write_note(temp, f"{progress.SHUFFLE_NOTES}/data-00001-of-00002.tfrecord.part0", 9, 99, 0)
    assert reporter.poll().endswith("; shuffled into shards: 2/3 units")
