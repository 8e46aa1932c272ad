"""Real public files convert exactly on the first try, with default flags: checked by the
independent oracle of `make realdata` (Python's csv and json modules, TensorFlow's Example
proto), and numbers with R's `NA` stay numbers."""

from __future__ import annotations

import io
import zipfile

import pytest
from support.datasets import ROOT, convert

from realdata.oracle import check_output, csv_rows, json_rows

FILES = ROOT / "tests" / "data" / "realdata"


def _check(out, path, data):
    if path.endswith(".json"):
        return check_output(out, None, json_rows(data))
    header, rows = csv_rows(data)
    return check_output(out, header, rows)


@pytest.mark.parametrize("name", ["airquality.csv", "Cars93.csv", "penguins.csv", "cars.json"])
def test_a_real_file_converts_exactly_with_default_flags(tmp_path, name):
    path = FILES / name
    out = tmp_path / "out"
    convert([str(path)], out)
    check = _check(out, name, path.read_bytes())
    assert check.problems == [] and check.text_numbers == []
    assert (check.written, check.dead) == (check.rows, 0)


def test_r_exports_keep_their_numbers_numeric_and_their_na_missing(tmp_path):
    out = tmp_path / "out"
    manifest = convert([str(FILES / "airquality.csv")], out)
    types = {f.name: (f.dtype, f.nullable) for f in manifest.features}
    assert types == {
        "column_1": ("int64", False),  # R's row names: a header name of ""
        "Ozone": ("int64", True),
        "Solar.R": ("int64", True),
        "Wind": ("float32", False),
        "Temp": ("int64", False),
        "Month": ("int64", False),
        "Day": ("int64", False),
    }
    assert manifest.counts.null_markers == {"Ozone": 37, "Solar.R": 7}  # R's summary()


def test_a_zipped_real_file_converts_as_its_member(tmp_path):
    data = (FILES / "penguins.csv").read_bytes()
    archive = tmp_path / "penguins.csv.zip"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("penguins.csv", data)
    archive.write_bytes(buffer.getvalue())
    out = tmp_path / "out"
    manifest = convert([str(archive)], out)
    assert [f["path"] for f in manifest.inputs["files"]] == [f"{archive}!penguins.csv"]
    check = _check(out, "penguins.csv", data)
    assert check.problems == [] and (check.written, check.rows) == (344, 344)
    assert manifest.feature("bill_length_mm").dtype == "float32"
    assert manifest.counts.null_markers["bill_length_mm"] == 2


def test_the_oracle_finds_a_changed_value_a_lost_row_and_numbers_stored_as_text(tmp_path):
    path = FILES / "airquality.csv"
    out = tmp_path / "out"
    convert([str(path)], out)
    header, rows = csv_rows(path.read_bytes())
    changed = [(rows[0][0], [rows[0][1][0], "42", *rows[0][1][2:]]), *rows[1:]]
    first = f"((1,), (41,), (190,), ({_f32(7.4)!r},), (67,), (5,), (1,))"
    assert check_output(out, header, changed).problems == [
        f"1 expected rows not in the output (e.g. [{first.replace('(41,)', '(42,)')}]), "
        f"1 output rows not expected (e.g. [{first}])"
    ]
    assert check_output(out, header, rows[1:]).problems == [
        f"0 expected rows not in the output (e.g. []), 1 output rows not expected (e.g. [{first}])"
    ]
    as_text = tmp_path / "text"
    convert([str(path)], as_text, "--null_values=")  # 'NA' is no marker: Ozone is text
    assert check_output(as_text, header, rows).text_numbers == ["Ozone", "Solar.R"]


def _f32(value):
    import struct

    return struct.pack("<f", value)
