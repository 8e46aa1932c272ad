import os

import pytest

from beam_jobs.sink.run_files import create_run_file, make_run_folder
from beam_jobs.sink.temp_folder import remove_folder


def test_a_run_file_makes_the_folders_below_the_temporary_folder(tmp_path):
    temp = tmp_path / ".tfrecord-etl-tmp-0a1b"
    temp.mkdir()
    with create_run_file(str(temp / "progress" / "train" / "a.json")) as f:
        f.write(b"{}")
    assert (temp / "progress" / "train" / "a.json").read_bytes() == b"{}"


def test_a_run_file_never_makes_the_temporary_folder_again(tmp_path):
    # A writer that outlives an interrupted run (its folder removed) fails instead of
    # leaving the folder behind.
    temp = tmp_path / ".tfrecord-etl-tmp-0a1b"
    for path in (temp / "data.tfrecord.part0", temp / "progress" / "data.json"):
        with pytest.raises(FileNotFoundError):
            create_run_file(str(path))
    assert os.listdir(tmp_path) == []


def test_a_file_outside_a_temporary_folder_goes_into_an_existing_folder(tmp_path):
    with create_run_file(str(tmp_path / "data.tfrecord")) as f:
        f.write(b"1")
    with pytest.raises(FileNotFoundError):
        create_run_file(str(tmp_path / "missing" / "data.tfrecord"))
    assert sorted(os.listdir(tmp_path)) == ["data.tfrecord"]


def test_a_pipeline_without_a_launcher_makes_its_folder_itself(tmp_path):
    temp = tmp_path / "out" / ".tfrecord-etl-tmp-0a1b"
    make_run_folder(str(temp))
    with create_run_file(str(temp / "x")) as f:
        f.write(b"1")
    remove_folder(str(temp))
    assert os.listdir(tmp_path / "out") == []
