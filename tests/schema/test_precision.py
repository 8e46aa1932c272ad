"""float32 rounding is said aloud at plan time for JSON lines and Parquet, as for CSV."""

from __future__ import annotations

import json
import logging

import pyarrow as pa
import pyarrow.parquet as pq
from support.datasets import convert

from beam_jobs.schema.precision import FLOAT32_ROUNDING, float32_notes
from beam_jobs.schema.type_notes import TypeNote
from tfdata_reader.manifest import FeatureSpec


def test_values_float32_shows_as_written_are_not_warned_about():
    v = FeatureSpec("v", "float32", [], True)
    assert float32_notes([v], {"v": [0.1, 1.5, 2.0, None, "x", True, [0.25]]}) == []
    [note] = float32_notes([v], {"v": [0.1, 47.3768866, [12345678901234567.0]]})
    assert note == TypeNote(
        FLOAT32_ROUNDING, "v", "e.g. 47.3768866, 1.2345678901234568e+16", warning=False
    )
    ints = FeatureSpec("n", "int64", [], True)
    assert float32_notes([ints], {"n": [47.3768866]}) == []  # only float32 features


def test_json_lines_and_parquet_doubles_are_warned_about_at_plan_time(tmp_path, caplog):
    values = [47.3768866, 1.5, 12345678901234567.0]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"v": v}) + "\n" for v in values))
    pq.write_table(pa.table({"v": pa.array(values, pa.float64())}), tmp_path / "p.parquet")
    for name in ("p.jsonl", "p.parquet"):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="beam_jobs"):
            convert([str(tmp_path / name)], tmp_path / f"out_{name}", "--dry_run")
        assert f"column 'v' (e.g. 47.3768866, 1.2345678901234568e+16): {FLOAT32_ROUNDING}" in (
            caplog.text
        ), name
