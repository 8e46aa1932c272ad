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
