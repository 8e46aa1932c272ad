"""Running the real conversion and reading datasets back, with the independent oracles."""

from __future__ import annotations

import csv
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
SUPPORT = pathlib.Path(__file__).resolve().parent

# One in-process worker, for speed; tests that need the runner's own modes pass them.
IN_PROCESS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def convert(inputs: list[str], output: pathlib.Path, *flags: str, in_process: bool = True):
    """Runs the real conversion pipeline; returns the published manifest."""
    from beam_jobs.job.launcher import run

    argv = [a for i in inputs for a in ("--input", i)] + ["--output", str(output), *flags]
    return run(argv + (IN_PROCESS if in_process else [])).manifest


def expected_rows(paths: list[str]) -> list[dict[str, str]]:
    """Rows of CSV files as parsed by Python's csv module: the independent oracle."""
    rows = []
    for path in sorted(paths):
        with open(path, newline="", encoding="utf-8") as f:
            rows.extend(csv.DictReader(f))
    return rows


def _py(value):
    import tensorflow as tf

    if isinstance(value, tf.RaggedTensor):
        return value.to_list()
    return value.numpy().tolist()


def read_all(out, **options) -> list[dict]:
    """Every record of a dataset, as {feature: python value}, in the order read."""
    from tfdata_reader import make_dataset

    ds = make_dataset(str(out), 1 << 20, shuffle=False, **options)
    rows = []
    for batch in ds:
        columns = {k: _py(v) for k, v in batch.items()}
        rows.extend(
            dict(zip(columns, values, strict=True))
            for values in zip(*columns.values(), strict=True)
        )
    return rows
