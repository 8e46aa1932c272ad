"""Shared fixtures: sample CSV files, a conversion runner, and an oracle for expected values."""

from __future__ import annotations

import csv
import os
import pathlib
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from make_sample_csv import write_sample_csv  # noqa: E402

# In-process runner for speed; the multi-process default is covered by its own slow test.
IN_PROCESS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def convert(inputs: list[str], output: pathlib.Path, *flags: str, in_process: bool = True):
    """Runs the real conversion pipeline; returns the published manifest."""
    from beam_jobs.launcher import run

    argv = [a for i in inputs for a in ("--input", i)] + ["--output", str(output), *flags]
    return run(argv + (IN_PROCESS if in_process else [])).manifest


def expected_rows(paths: list[str]) -> list[dict[str, str]]:
    """Rows of CSV files as parsed by Python's csv module: the independent oracle."""
    rows = []
    for path in sorted(paths):
        with open(path, newline="", encoding="utf-8") as f:
            rows.extend(csv.DictReader(f))
    return rows


@pytest.fixture(scope="session")
def sample_csv(tmp_path_factory) -> list[str]:
    """Three sample CSV files, 4000 rows each (about 330 KB in all)."""
    return write_sample_csv(tmp_path_factory.mktemp("raw"), files=3, rows=4000, seed=7)


@pytest.fixture(scope="session")
def converted(sample_csv, tmp_path_factory):
    """The sample converted into shards of about 64 KiB; returns (output dir, manifest)."""
    out = tmp_path_factory.mktemp("converted") / "ds"
    manifest = convert(sample_csv, out, "--target_shard_bytes=64KiB")
    return out, manifest
