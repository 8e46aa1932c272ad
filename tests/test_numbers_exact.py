"""Numbers are never silently different: integers beyond int64 stay text, values beyond float32
are dead letters (ground truth: Python's csv and json modules)."""

from __future__ import annotations

import json

from support.datasets import convert, expected_rows, read_all


def test_twenty_digit_ids_are_text_not_rounded_floats(tmp_path, caplog):
    path = tmp_path / "ids.csv"
    ids = [str(12345678901234567890 + 7919 * i) for i in range(500)]
    path.write_text("id,n\n" + "".join(f"{v},{i}\n" for i, v in enumerate(ids)))
    manifest = convert([str(path)], tmp_path / "out")
    assert manifest.feature("id").dtype == "bytes"
    assert "has integers beyond the int64 range" in caplog.text
    got = sorted(r["id"].decode() for r in read_all(tmp_path / "out"))
    assert got == sorted(r["id"] for r in expected_rows([str(path)]))


def test_a_float_beyond_float32_is_a_dead_letter_not_infinity(tmp_path):
    path = tmp_path / "big.csv"
    rows = [f"{i},{i / 3}" for i in range(1000)]
    rows[700] = "700,1e40"
    rows[800] = "800,inf"  # written as infinity: stays infinity
    path.write_text("id,x\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.01", "--sample_bytes=4096")
    assert (manifest.total_records, manifest.counts["bad_records"]) == (999, 1)
    letter = json.loads((out / manifest.dead_letter[0]).read_text())
    assert letter["line"] == 702 and "1e+40 is out of the float32 range" in letter["reason"]
    values = {r["id"]: r["x"] for r in read_all(out)}
    assert values[800] == float("inf") and 700 not in values


def test_json_values_beyond_float32_are_dead_letters(tmp_path):
    path = tmp_path / "big.jsonl"
    lines = [json.dumps({"id": i, "x": i / 3}) for i in range(1000)]
    lines[600] = json.dumps({"id": 600, "x": 1e40})
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.01", "--sample_bytes=4096")
    assert (manifest.total_records, manifest.counts["bad_records"]) == (999, 1)
    assert "out of the float32 range" in (out / manifest.dead_letter[0]).read_text()
