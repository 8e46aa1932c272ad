import json
import re

from beam_jobs.sink.progress import ProgressReporter, write_note


def test_reporter_reads_notes_once_and_sums_them(tmp_path):
    temp = str(tmp_path / "tmp-run")
    reporter = ProgressReporter(temp, num_shards=5)
    assert reporter.poll() is None  # nothing written yet, folder missing
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
    temp = str(tmp_path / "tmp-run")
    reporter = ProgressReporter(temp, num_shards=1)
    write_note(temp, "data-00000-of-00001.tfrecord", 7, 70, 700)
    write_note(temp, "data-00000-of-00001.tfrecord", 7, 70, 700)
    assert reporter.poll().startswith("progress: 1/1 shards, 7 records, ")


def test_progress_counts_the_worker_processes_that_wrote(tmp_path):
    temp = str(tmp_path / "tmp-run")
    reporter = ProgressReporter(temp, num_shards=3)
    write_note(temp, "data-00000-of-00003.tfrecord", 1, 10, 100)
    note = tmp_path / "tmp-run" / "progress" / "data-00001-of-00003.tfrecord.json"
    note.write_text(json.dumps({"records": 2, "bytes": 2, "input_bytes": 2, "worker": "h:1"}))
    assert reporter.poll().endswith(", from 2 worker processes")
