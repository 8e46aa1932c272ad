"""Numbers are never silently different: integers beyond int64 stay text, values beyond float32
are dead letters, numbers below its range are stored as 0 and counted (ground truth: Python's
csv and json modules)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.datasets import convert, expected_rows, read_all


def test_twenty_digit_ids_are_text_not_rounded_floats(tmp_path, caplog):
    path = tmp_path / "ids.csv"
    ids = [str(12345678901234567890 + 7919 * i) for i in range(500)]
    path.write_text("id,n\n" + "".join(f"{v},{i}\n" for i, v in enumerate(ids)))
    manifest = convert([str(path)], tmp_path / "out")
    assert manifest.feature("id").dtype == "bytes"
    assert "integers beyond the int64 range: read as text (bytes)" in caplog.text
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
    assert (manifest.total_records, manifest.counts.bad_records) == (999, 1)
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
    assert (manifest.total_records, manifest.counts.bad_records) == (999, 1)
    assert "out of the float32 range" in (out / manifest.dead_letter[0]).read_text()


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_numbers_below_float32s_range_are_stored_as_zero_and_counted(tmp_path, fmt):
    # A dead letter would lose the row for a difference no float32 computation can see: the
    # value is stored as 0, counted by feature, and the summary says so (as pandas reads
    # 2.6e-61 into float32). 1e-40 is a subnormal: kept (rounded like any decimal).
    import pyarrow as pa
    import pyarrow.parquet as pq

    from beam_jobs.inspection.report import float32_changes_note

    values = [i / 3 for i in range(30_000)]  # past the sampled head
    values[20_000], values[20_001], values[20_002] = 1e-50, -7e-46, 1e-40
    values[20_003], values[20_004] = 2.0**-150, 2.0**-149  # the last one float32 stores as 0
    path = tmp_path / f"in.{fmt}"
    if fmt == "csv":
        path.write_text("id,v\n" + "".join(f"{i},{v!r}\n" for i, v in enumerate(values)))
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps({"id": i, "v": v}) + "\n" for i, v in enumerate(values)))
    else:
        pq.write_table(pa.table({"id": range(30_000), "v": pa.array(values, pa.float64())}), path)
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--splits=a=1,b=1", "--rename=v=w")
    assert (manifest.total_records, manifest.counts.bad_records) == (30_000, 0)
    assert manifest.counts.float32_stored_as_zero == {"w": 3}
    assert manifest.counts.float32_rounded_integers == {}
    note = float32_changes_note(manifest)
    assert len(note) == 1 and "were stored as 0 in: w (3);" in note[0]
    got = {r["id"]: r["w"] for r in read_all(out)}
    assert [got[20_000 + k] for k in range(5)] == [0.0, 0.0, np.float32(1e-40), 0.0, 2.0**-149]
    assert str(np.float32(got[20_001])) == "-0.0"  # the sign is kept, as float32 keeps it
    assert got[29_999] == np.float32(29_999 / 3)


def test_parquet_decimals_stay_exact(tmp_path):
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    big = [decimal.Decimal(12345678901234567890 + i) for i in range(50)]
    money = [decimal.Decimal(f"{123456789 + i}.{i:02d}") for i in range(50)]
    small = [decimal.Decimal(1000 + i) for i in range(50)]
    table = pa.table(
        {
            "big": pa.array(big, pa.decimal128(20, 0)),
            "money": pa.array(money, pa.decimal128(12, 2)),
            "small": pa.array(small, pa.decimal128(9, 0)),
        }
    )
    pq.write_table(table, tmp_path / "d.parquet")
    manifest = convert([str(tmp_path / "d.parquet")], tmp_path / "out")
    dtypes = {f.name: f.dtype for f in manifest.features}
    assert dtypes == {"big": "bytes", "money": "bytes", "small": "int64"}
    rows = sorted(read_all(tmp_path / "out"), key=lambda r: r["small"])
    assert [r["big"].decode() for r in rows] == [str(v) for v in big]
    assert [r["money"].decode() for r in rows] == [str(v) for v in money]
    assert [r["small"] for r in rows] == [int(v) for v in small]


def test_a_parquet_file_storing_numbers_as_text_is_named_at_plan_time(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pytest

    from beam_jobs.core.errors import DataError

    for k in range(3):
        pq.write_table(pa.table({"x": [float(i) for i in range(100)]}), tmp_path / f"p{k}.parquet")
    pq.write_table(pa.table({"x": ["n/a"]}), tmp_path / "p3.parquet")
    with pytest.raises(DataError, match=r"column 'x' is text in .*p3\.parquet but numbers in"):
        convert([str(tmp_path / "*.parquet")], tmp_path / "out")
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"features": [{"name": "x", "dtype": "float32", "shape": []}]}))
    manifest = convert([str(tmp_path / "*.parquet")], tmp_path / "out", f"--schema={schema}",
                       "--max_bad_fraction=0.01")  # fmt: skip
    assert (manifest.total_records, manifest.counts.bad_records) == (300, 1)


def test_csv_integers_beyond_2_to_the_53_are_exact(tmp_path):
    values = [9007199254740993, -9223372036854775808, 9223372036854775807, 1234567890123456789]
    path = tmp_path / "ids.csv"
    path.write_text("k,id\n" + "".join(f"{k},{v}\n" for k, v in enumerate(values)))
    manifest = convert([str(path)], tmp_path / "out")
    assert manifest.feature("id").dtype == "int64" and manifest.counts.bad_records == 0
    assert {r["k"]: r["id"] for r in read_all(tmp_path / "out")} == dict(enumerate(values))


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_whole_numbers_float32_changes_after_the_sample_are_counted(tmp_path, fmt):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from beam_jobs.inspection.report import float32_changes_note

    values = [0.5 + i for i in range(30_000)]  # past the sampled head: one changed, one kept
    values[29_000], values[29_001], values[29_002] = 16_777_217, 2**40 + 1, 16_777_216
    path = tmp_path / f"in.{fmt}"
    if fmt == "csv":
        path.write_text("id,v\n" + "".join(f"{i},{v}\n" for i, v in enumerate(values)))
    elif fmt == "jsonl":
        path.write_text("".join(f'{{"id": {i}, "v": {v}}}\n' for i, v in enumerate(values)))
    else:
        pq.write_table(pa.table({"id": range(30_000), "v": pa.array(values, pa.float64())}), path)
    manifest = convert([str(path)], tmp_path / "out", "--splits=a=1,b=1", "--rename=v=w")
    assert manifest.counts.float32_rounded_integers == {"w": 2}
    assert "in: w (2);" in float32_changes_note(manifest)[0]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_numbers_beyond_a_doubles_range_are_dead_letters_not_zero_or_infinity(tmp_path, fmt):
    # Arrow's parsers turn 5e-330 into 0.0 and 2e308 into inf without a word; zeros and
    # infinities as written stay what they are.
    values = {i: repr(i / 7) for i in range(400)}
    values.update({100: "5e-330", 150: "-2.5E-400", 200: "2e308", 250: "-1.0e+999",
                   300: "0.0e-500", 350: "0E400"})  # fmt: skip
    path = tmp_path / f"edges.{fmt}"
    if fmt == "csv":
        values[390] = "-inf"
    else:  # pyarrow refuses an exponent past a double's, even of a zero: loud, as it should
        values[350] = "0.0"
    if fmt == "csv":
        path.write_text("id,x\n" + "".join(f"{i},{v}\n" for i, v in values.items()))
    else:
        path.write_text("".join(f'{{"id": {i}, "x": {v}}}\n' for i, v in values.items()))
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.05", "--sample_bytes=4096")
    letters = [
        json.loads(line) for line in (out / manifest.dead_letter[0]).read_text().splitlines()
    ]
    first_line = 2 if fmt == "csv" else 1
    found = sorted((d["line"] - first_line, d["reason"].rsplit(": ", 1)[-1]) for d in letters)
    assert found == [
        (100, "it would be 0.0"), (150, "it would be -0.0"), (200, "it would be inf"),
        (250, "it would be -inf"),
    ]  # fmt: skip
    got = {r["id"]: r["x"] for r in read_all(out)}
    assert (manifest.total_records, manifest.counts.bad_records) == (396, 4)
    assert got[300] == 0.0 and got[350] == 0.0 and got[1] == pytest.approx(1 / 7)
    if fmt == "csv":
        assert got[390] == float("-inf")


def test_huge_floats_are_not_whole_numbers_that_int64_could_keep(tmp_path, caplog):
    # 3.0000001e+38 is a whole number as a double, but no int64: advising int64 would send
    # every row to the dead letter. float32 rounds it as any decimal (an info line).
    import numpy as np

    path = tmp_path / "huge.csv"
    values = [f"{3 + k / 1e7:.7f}e+38" for k in range(300)] + ["1.5", "16777217.5"]
    path.write_text("id,x\n" + "".join(f"{i},{v}\n" for i, v in enumerate(values)))
    manifest = convert([str(path)], tmp_path / "out")
    assert manifest.counts.float32_rounded_integers == {}
    assert "int64" not in caplog.text
    got = {r["id"]: r["x"] for r in read_all(tmp_path / "out")}
    assert got == {i: float(np.float32(float(v))) for i, v in enumerate(values)}
