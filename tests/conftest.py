"""Shared fixtures: sample CSV files and their conversion (helpers live in tests/support)."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from support.datasets import ROOT, convert

sys.path.insert(0, str(ROOT / "examples"))

from make_sample_csv import write_sample_csv


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
