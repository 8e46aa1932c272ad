"""Which runner a conversion runs on, from its flags and input size."""

from __future__ import annotations

import os

import pytest

from beam_jobs.job.runner import choose_runner


@pytest.mark.parametrize(
    "argv, runner, mode, workers, noted",
    [
        ([], "FnApiRunner", "multi_processing", os.cpu_count(), False),
        (["small"], "FnApiRunner", "multi_threading", os.cpu_count(), False),
        (["large"], "FnApiRunner", "multi_processing", os.cpu_count(), False),
        # Per-column work holds the interpreter lock: threads would wait for each other,
        # so one thread when the input is too small to pay for starting processes.
        (["many columns"], "FnApiRunner", "multi_processing", os.cpu_count(), False),
        (["tiny, many columns"], "FnApiRunner", "multi_threading", 1, False),
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

    sizes = {"small": 1 << 30, "large": (1 << 30) + 1, "many columns": 1 << 30,
             "tiny, many columns": 128 << 20}  # fmt: skip
    input_bytes = sizes.get(argv[0]) if argv else None
    bound = bool(argv) and "many columns" in argv[0]
    argv = [a for a in argv if a not in sizes]
    options = PipelineOptions(argv)
    note = choose_runner(options, argv, input_bytes, per_column_bound=bound)
    assert options.view_as(StandardOptions).runner == runner
    assert options.view_as(DirectOptions).direct_running_mode == mode
    assert options.view_as(DirectOptions).direct_num_workers == workers
    assert bool(note) == noted


def test_a_worker_process_that_never_exits_is_ended_at_the_pipelines_end(monkeypatch):
    # Beam waits for each worker's process to exit; one whose control stream Beam never
    # closed (after a failed bundle) would keep the run waiting for good.
    import subprocess
    import threading
    import time
    import types

    from beam_jobs.job import local_workers

    monkeypatch.setattr(local_workers, "STOP_SECONDS", 0.5)
    monkeypatch.setattr(local_workers, "_stopping", False)
    process = local_workers._NewSessionPopen(["sleep", "60"])
    worker = threading.Thread(target=process.wait, name="run_worker")
    worker.start()
    start = time.monotonic()
    local_workers._stop_worker_in_time(types.SimpleNamespace(worker_thread=worker))
    assert not worker.is_alive() and process.returncode == -9
    assert time.monotonic() - start < 10
    # Applied to Beam's handler of worker processes.
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    assert local_workers.apply()
    handler = worker_handlers.SubprocessSdkWorkerHandler
    assert handler.stop_worker is local_workers._stop_worker_in_time
    assert subprocess.Popen is not local_workers._NewSessionPopen  # only Beam's view changes


def test_the_runner_line_names_its_workers_in_the_right_number(caplog):
    import logging

    from apache_beam.options.pipeline_options import PipelineOptions

    caplog.set_level(logging.INFO)
    choose_runner(PipelineOptions([]), [], 1 << 20, per_column_bound=True)
    choose_runner(PipelineOptions([]), [], 1 << 31)
    assert "local runner: FnApiRunner with 1 worker thread\n" in caplog.text + "\n"
    assert f"local runner: FnApiRunner with {os.cpu_count()} worker processes" in caplog.text
