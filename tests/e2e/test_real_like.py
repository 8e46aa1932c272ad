"""The real-like corpus (tests/data/real_like, made by its make_corpus.py): files in the shapes
real exports come in. Each converts with exactly the values Python's csv and json modules (or
pyarrow, for Parquet) read, or stops with the expected error naming the file and the flag."""

from __future__ import annotations

import csv
import datetime
import json
import pathlib

import numpy as np
import pytest
from support.datasets import convert, read_all

from beam_jobs.core.errors import DataError

CORPUS = pathlib.Path(__file__).parents[1] / "data" / "real_like"
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _csv(name: str, **options) -> list[dict]:
    encoding = options.pop("encoding", "utf-8-sig")
    with open(CORPUS / name, encoding=encoding, newline="") as f:
        return list(csv.DictReader(f, **options))


def _convert(tmp_path, name: str, *flags: str):
    return convert([str(CORPUS / name)], tmp_path / "out", *flags), read_all(tmp_path / "out")


def _text(value: bytes) -> str:
    return value.decode("utf-8")


@pytest.mark.parametrize(
    "name, flags, reader_options",
    [
        ("cities.tsv", [], {"delimiter": "\t"}),
        ("cities_semicolon.csv", [], {"delimiter": ";"}),
        ("no_header.csv", ["--column_names=id,city,lat"], {"fieldnames": ["id", "city", "lat"]}),
        ("bom_crlf.csv", [], {}),
        ("latin1.csv", ["--encoding=latin-1"], {"encoding": "latin-1"}),
    ],
)
def test_cities_in_every_dialect_read_back_exactly(tmp_path, name, flags, reader_options):
    import numpy as np

    expected = _csv(name, **reader_options)
    manifest, rows = _convert(tmp_path, name, *flags)
    place = "città" if name == "latin1.csv" else "city"
    assert [(f.name, f.dtype) for f in manifest.features] == [
        ("id", "int64"),
        (place, "bytes"),
        ("lat", "float32"),
    ]
    rows.sort(key=lambda r: r["id"])
    assert [r["id"] for r in rows] == [int(e["id"]) for e in expected]
    assert [_text(r[place]) for r in rows] == [e[place] for e in expected]
    assert [r["lat"] for r in rows] == [float(np.float32(e["lat"])) for e in expected]


def test_a_latin1_file_without_its_encoding_names_the_flag(tmp_path):
    with pytest.raises(
        DataError,
        match=r"latin1\.csv: the header is not utf-8: 0xE0 at byte 7 \(line 1\); pass --encoding",
    ):
        _convert(tmp_path, "latin1.csv")


def test_a_repeated_column_name_gets_a_name_of_its_own(tmp_path):
    manifest, rows = _convert(tmp_path, "duplicate_names.csv")
    assert [f.name for f in manifest.features] == ["id", "city", "city_2"]
    with open(CORPUS / "duplicate_names.csv", newline="", encoding="utf-8") as f:
        expected = {int(r[0]): (r[1], float(np.float32(r[2]))) for r in list(csv.reader(f))[1:]}
    assert {r["id"]: (_text(r["city"]), r["city_2"]) for r in rows} == expected


@pytest.mark.parametrize(
    "name, text_columns",
    [
        ("zip_codes.csv", ("zip", "fips")),  # ZIP and FIPS codes keep their leading zeros
        ("dates.csv", ("day", "at")),  # CSV dates stay text unless --schema says otherwise
    ],
)
def test_codes_and_dates_in_csv_stay_text_as_written(tmp_path, name, text_columns):
    manifest, rows = _convert(tmp_path, name)
    assert {f.name: f.dtype for f in manifest.features} == {
        "id": "int64",
        **dict.fromkeys(text_columns, "bytes"),
    }
    expected = {int(e["id"]): tuple(e[c] for c in text_columns) for e in _csv(name)}
    assert {r["id"]: tuple(_text(r[c]) for c in text_columns) for r in rows} == expected


def test_true_false_columns_are_one_and_zero(tmp_path):
    manifest, rows = _convert(tmp_path, "flags.csv")
    assert manifest.feature("active").dtype == "int64"
    expected = {int(e["id"]): int(e["active"].lower() == "true") for e in _csv("flags.csv")}
    assert {r["id"]: r["active"] for r in rows} == expected


def test_a_missing_value_marker_in_a_number_column_is_a_missing_value(tmp_path):
    manifest, rows = _convert(tmp_path, "junk_in_head.csv")
    assert manifest.feature("amount").dtype == "float32"
    expected = {int(e["id"]): e["amount"] for e in _csv("junk_in_head.csv")}
    assert (manifest.counts.bad_records, manifest.counts.null_markers) == (
        0,
        {"amount": 20},
    )
    assert {r["id"]: r["amount"] for r in rows} == {
        i: [] if v == "n/a" else [float(np.float32(v))] for i, v in expected.items()
    }


def test_a_little_junk_in_a_number_column_is_dead_lettered(tmp_path):
    # With no markers at all, `n/a` is junk in a number column: a dead letter.
    manifest, rows = _convert(
        tmp_path, "junk_in_head.csv", "--max_bad_fraction=0.01", "--null_values="
    )
    assert manifest.feature("amount").dtype == "float32"
    expected = {int(e["id"]): e["amount"] for e in _csv("junk_in_head.csv")}
    junk = sorted(i for i, v in expected.items() if v == "n/a")
    assert (manifest.counts.bad_records, len(junk)) == (20, 20)
    letters = []
    for name in manifest.dead_letter:
        letters += [json.loads(line) for line in (tmp_path / "out" / name).read_text().splitlines()]
    assert sorted(letter["line"] for letter in letters) == [i + 2 for i in junk]
    good = {i: float(np.float32(v)) for i, v in expected.items() if v != "n/a"}
    assert {r["id"]: r["amount"] for r in rows} == good


def _micros(text: str) -> int:
    moment = datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.timezone.utc)
    return (moment - EPOCH) // datetime.timedelta(microseconds=1)


def test_json_lines_iso_timestamps_are_microseconds(tmp_path):
    manifest, rows = _convert(tmp_path, "events.jsonl")
    assert manifest.feature("at").logical_type == "timestamp[us]"
    with open(CORPUS / "events.jsonl") as f:
        expected = {e["id"]: e for e in map(json.loads, f)}
    assert {r["id"]: r["at"] for r in rows} == {i: _micros(e["at"]) for i, e in expected.items()}
    assert manifest.feature("day").logical_type == "date32[day]"  # a date alone: days
    epoch = EPOCH.date()
    expected_days = {
        i: (datetime.date.fromisoformat(e["day"]) - epoch).days for i, e in expected.items()
    }
    assert {r["id"]: r["day"] for r in rows} == expected_days


def test_parquet_dates_and_zoned_timestamps(tmp_path):
    import pyarrow.parquet as pq

    manifest, rows = _convert(tmp_path, "dates.parquet")
    logical = {f.name: f.logical_type for f in manifest.features}
    assert logical == {"id": None, "day": "date32[day]", "at": "timestamp[us, tz=UTC]"}
    table = pq.read_table(CORPUS / "dates.parquet").to_pylist()
    expected = {
        e["id"]: ((e["day"] - EPOCH.date()).days, (e["at"] - EPOCH) // datetime.timedelta(0, 0, 1))
        for e in table
    }
    assert {r["id"]: (r["day"], r["at"]) for r in rows} == expected


def test_a_json_array_file_is_read_as_records(tmp_path):
    manifest, rows = _convert(tmp_path, "array.json")
    with open(CORPUS / "array.json") as f:
        expected = json.load(f)
    assert manifest.total_records == len(expected) and manifest.counts.bad_records == 0
    assert sorted(r["id"] for r in rows) == sorted(e["id"] for e in expected)


def _schema(tmp_path, *features: dict) -> str:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps({"features": list(features)}))
    return f"--schema={path}"


def test_schema_bytes_keeps_json_dates_as_written_and_parquet_dates_as_iso_text(tmp_path):
    text = [{"name": name, "dtype": "bytes", "shape": []} for name in ("at", "day")]
    _, rows = _convert(tmp_path / "j", "events.jsonl", _schema(tmp_path, *text))
    with open(CORPUS / "events.jsonl") as f:
        expected = {e["id"]: (e["at"], e["day"]) for e in map(json.loads, f)}
    assert {r["id"]: (_text(r["at"]), _text(r["day"])) for r in rows} == expected
    import pyarrow.parquet as pq

    _, rows = _convert(tmp_path / "p", "dates.parquet", _schema(tmp_path, *text))
    table = pq.read_table(CORPUS / "dates.parquet").to_pylist()
    iso = {
        e["id"]: (e["at"].strftime("%Y-%m-%dT%H:%M:%S.000Z"), e["day"].isoformat()) for e in table
    }
    assert {r["id"]: (_text(r["at"]), _text(r["day"])) for r in rows} == iso


def test_schema_dates_turn_csv_iso_text_into_days_and_microseconds(tmp_path):
    dates = [
        {"name": "day", "dtype": "int64", "shape": [], "logical_type": "date32[day]"},
        {"name": "at", "dtype": "int64", "shape": [], "logical_type": "timestamp[us]"},
    ]
    manifest, rows = _convert(tmp_path, "dates.csv", _schema(tmp_path, *dates))
    assert manifest.feature("day").logical_type == "date32[day]"
    epoch = EPOCH.date()
    expected = {
        int(e["id"]): ((datetime.date.fromisoformat(e["day"]) - epoch).days, _micros(e["at"]))
        for e in _csv("dates.csv")
    }
    assert {r["id"]: (r["day"], r["at"]) for r in rows} == expected
