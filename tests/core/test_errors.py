"""A worker's typed error reaches the launcher as the same type, message and details, whatever
the local runner's mode hands over (the exception itself, or only its traceback's text)."""

from __future__ import annotations

import pathlib

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_jobs.core.errors import (
    DataError,
    TooManyBadRecords,
    UsageError,
    raised_for_launcher,
    recover,
)
from beam_jobs.job import local_workers


def _fail_in_worker(_: int) -> None:
    with raised_for_launcher():
        raise TooManyBadRecords("3 of 9 records (33.3%) failed: données", output="gs://b/ds")


@pytest.mark.parametrize("mode", ["in_memory", "multi_threading", "multi_processing"])
def test_a_workers_error_is_rebuilt_with_its_type_message_and_details(mode, monkeypatch):
    # Worker processes import this module to run `_fail_in_worker`.
    monkeypatch.setenv("PYTHONPATH", str(pathlib.Path(__file__).parent))
    local_workers.apply()  # as the launcher does: a worker Beam never lets go is ended
    options = PipelineOptions(
        ["--runner=FnApiRunner", f"--direct_running_mode={mode}", "--direct_num_workers=2"]
    )
    with pytest.raises(Exception) as raised, beam.Pipeline(options=options) as p:
        _ = p | beam.Create([1]) | "Fail" >> beam.Map(_fail_in_worker)
    error = recover(raised.value)
    assert type(error) is TooManyBadRecords
    assert error.message == "3 of 9 records (33.3%) failed: données"
    assert error.output == "gs://b/ds"


def test_recover_reads_the_text_form_and_ignores_other_errors():
    try:
        with raised_for_launcher():
            raise DataError("a.csv:3: bad", file="a.csv")
    except DataError as e:
        text = f"Traceback ...\n{e}\n [while running 'Write']\nDuring handling...\n{e}"
    error = recover(RuntimeError(text))
    assert (type(error), error.message, error.details) == (
        DataError,
        "a.csv:3: bad",
        {"file": "a.csv"},
    )
    assert recover(RuntimeError("worker died")) is None
    assert recover(ValueError("not ours")) is None


def test_an_error_raised_in_the_launcher_is_itself():
    error = UsageError("--input 'x' matches no files")
    assert recover(error).message == error.message and type(recover(error)) is UsageError
    try:
        try:
            raise error
        except UsageError as e:
            raise RuntimeError("runner wrapped it") from e
    except RuntimeError as wrapped:
        assert type(recover(wrapped)) is UsageError


def test_the_marker_is_added_once():
    with pytest.raises(DataError) as raised, raised_for_launcher(), raised_for_launcher():
        raise DataError("x")
    assert str(raised.value).count("TFRECORD_ETL_ERROR[") == 1
