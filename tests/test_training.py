"""A Keras model trains from the reader under MirroredStrategy on 2 logical CPU devices."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT


@pytest.mark.slow
def test_keras_fit_under_mirrored_strategy(converted):
    out, manifest = converted
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "train_mirrored.py"),
            str(out),
            "--steps",
            "8",
            "--global_batch_size",
            "64",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    match = re.search(
        r"trained 8 steps on 2 replicas from 12,000 records in (\d+) shards; final loss (\S+)",
        result.stdout,
    )
    assert match, result.stdout
    assert int(match.group(1)) == len(manifest.shards)
    assert 0.0 < float(match.group(2)) < 5.0
