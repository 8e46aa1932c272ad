"""Dates and times: one unit per feature, recorded in the manifest, whatever unit each input
file stored; a value the unit cannot hold exactly is a dead letter, never truncated."""

from __future__ import annotations

import datetime
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.datasets import convert, read_all

from beam_jobs.core.errors import DataError

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _micros(moment: datetime.datetime) -> int:
    return (moment - EPOCH) // datetime.timedelta(microseconds=1)


def test_parquet_timestamps_in_several_units_and_dates_convert_to_one_unit(tmp_path):
    moments = [datetime.datetime(2026, 12, 1, 8, i, i, 1000 * i, tzinfo=datetime.timezone.utc)
               for i in range(50)]  # fmt: skip
    days = [datetime.date(2026, 1, 1) + datetime.timedelta(days=i) for i in range(50)]
    times = [datetime.time(10, i, 30) for i in range(50)]
    for name, unit in (("a", "ms"), ("b", "ns")):
        table = pa.table(
            {
                "id": pa.array(range(50) if name == "a" else range(50, 100), pa.int64()),
                "at": pa.array(moments, pa.timestamp(unit, tz="UTC")),
                "day": pa.array(days, pa.date32() if name == "a" else pa.date64()),
                "clock": pa.array(times, pa.time32("s") if name == "a" else pa.time64("us")),
            }
        )
        pq.write_table(table, tmp_path / f"{name}.parquet")
    out = tmp_path / "out"
    manifest = convert([str(tmp_path / "*.parquet")], out)
    logical = {f.name: (f.dtype, f.logical_type) for f in manifest.features}
    assert logical == {
        "id": ("int64", None),
        "at": ("int64", "timestamp[us, tz=UTC]"),
        "day": ("int64", "date32[day]"),
        "clock": ("int64", "time64[us]"),
    }
    rows = {r["id"]: r for r in read_all(out)}
    for i in range(50):
        for base in (0, 50):
            row = rows[base + i]
            assert row["at"] == _micros(moments[i])
            assert row["day"] == (days[i] - datetime.date(1970, 1, 1)).days
            assert row["clock"] == ((10 * 60 + i) * 60 + 30) * 1_000_000
    manifest_json = json.loads((out / "manifest.json").read_text())
    assert manifest_json["features"][1]["logical_type"] == "timestamp[us, tz=UTC]"


def test_a_nanosecond_timestamp_is_a_dead_letter_not_truncated(tmp_path):
    ns = [1_700_000_000_000_000_000 + 1000 * i for i in range(100)]
    ns[60] += 1  # not a whole microsecond
    pq.write_table(
        pa.table({"id": list(range(100)), "at": pa.array(ns, pa.timestamp("ns"))}),
        tmp_path / "t.parquet",
    )
    manifest = convert([str(tmp_path / "t.parquet")], tmp_path / "out", "--max_bad_fraction=0.1")
    assert (manifest.total_records, manifest.counts.bad_records) == (99, 1)
    got = {r["id"]: r["at"] for r in read_all(tmp_path / "out")}
    assert got[61] == ns[61] // 1000 and 60 not in got


def test_json_iso_dates_convert_to_microseconds(tmp_path):
    path = tmp_path / "events.jsonl"
    stamps = [f"2026-12-{1 + i % 28:02d}T10:00:{i % 60:02d}" for i in range(200)]
    path.write_text("".join(json.dumps({"id": i, "at": s}) + "\n" for i, s in enumerate(stamps)))
    manifest = convert([str(path)], tmp_path / "out")
    assert manifest.feature("at").logical_type == "timestamp[us]"
    assert manifest.counts.bad_records == 0
    got = {r["id"]: r["at"] for r in read_all(tmp_path / "out")}
    for i, s in enumerate(stamps):
        moment = datetime.datetime.fromisoformat(s).replace(tzinfo=datetime.timezone.utc)
        assert got[i] == _micros(moment)


def test_a_time_of_day_in_a_date_feature_is_a_dead_letter(tmp_path):
    days = [datetime.date(2024, 3, 1) + datetime.timedelta(days=i) for i in range(20)]
    for k in range(10):  # only some files are sampled; file 4 stores timestamps
        if k == 4:
            moments = [datetime.datetime(d.year, d.month, d.day) for d in days]
            moments[3] = moments[3].replace(hour=13, minute=45, second=7)
            column = pa.array(moments, pa.timestamp("us"))
        else:
            column = pa.array(days, pa.date32())
        ids = pa.array(range(20 * k, 20 * k + 20), pa.int64())
        pq.write_table(pa.table({"id": ids, "day": column}), tmp_path / f"p{k}.parquet")
    out = tmp_path / "out"
    # Every file's footer is planned: the types' clash is said whichever files were sampled.
    with pytest.raises(DataError, match=r"column 'day' holds date32\[day\] and timestamp\[us\]"):
        convert([str(tmp_path / "*.parquet")], out)
    schema = tmp_path / "schema.json"
    day = {"name": "day", "dtype": "int64", "logical_type": "date32[day]"}
    schema.write_text(json.dumps({"features": [day]}))
    manifest = convert([str(tmp_path / "*.parquet")], out, "--max_bad_fraction=0.01",
                       "--schema", str(schema))  # fmt: skip
    assert manifest.feature("day").logical_type == "date32[day]"
    assert (manifest.total_records, manifest.counts.bad_records) == (199, 1)
    letter = json.loads((out / manifest.dead_letter[0]).read_text())
    assert "2024-03-04 13:45:07" in letter["reason"] and "date32" in letter["reason"]
    got = {r["id"]: r["day"] for r in read_all(out)}
    epoch = datetime.date(1970, 1, 1)
    assert got == {
        20 * k + i: (d - epoch).days for k in range(10) for i, d in enumerate(days)
        if (k, i) != (4, 3)
    }  # fmt: skip


def test_a_json_number_in_a_timestamp_feature_is_a_dead_letter(tmp_path):
    path = tmp_path / "events.jsonl"
    lines = [json.dumps({"id": i, "at": f"2026-12-01T10:00:{i % 60:02d}"}) for i in range(600)]
    lines[500] = json.dumps({"id": 500, "at": 1704103200})
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--sample_bytes=4096", "--max_bad_fraction=0.01")
    assert manifest.feature("at").logical_type == "timestamp[us]"
    assert (manifest.total_records, manifest.counts.bad_records) == (599, 1)
    letter = json.loads((out / manifest.dead_letter[0]).read_text())
    assert letter["line"] == 501 and "where timestamp[us] is expected" in letter["reason"]


def test_schema_int64_without_a_unit_keeps_the_inferred_unit(tmp_path):
    """`--schema` int64 for a date or time column means the default unit (days, microseconds),
    recorded, not each file's own unit (ms in one file, us in another) or a cast failure."""
    moment = datetime.datetime(2026, 1, 31, 8, 30)
    for name, unit in (("a", "ms"), ("b", "us")):
        table = pa.table(
            {
                "at": pa.array([moment], pa.timestamp(unit)),
                "day": pa.array([datetime.date(2026, 1, 31)], pa.date32()),
            }
        )
        pq.write_table(table, tmp_path / f"{name}.parquet")
    schema = tmp_path / "schema.json"
    specs = [{"name": "at", "dtype": "int64"}, {"name": "day", "dtype": "int64"}]
    schema.write_text(json.dumps({"features": specs}))
    out = tmp_path / "out"
    manifest = convert([str(tmp_path / "*.parquet")], out, f"--schema={schema}")
    assert {f.name: f.logical_type for f in manifest.features} == {
        "at": "timestamp[us]",
        "day": "date32[day]",
    }
    expected = _micros(moment.replace(tzinfo=datetime.timezone.utc))
    assert [(r["at"], r["day"]) for r in read_all(out)] == [(expected, 20484)] * 2
    assert manifest.counts.bad_records == 0

    lines = tmp_path / "dates.jsonl"
    lines.write_text(
        '{"d": "2026-01-31", "tz": "2026-01-31T08:30:00+02:00"}\n'
        '{"d": "1969-12-31", "tz": "2026-01-31T08:30:00-05:00"}\n'
    )
    specs = [{"name": "d", "dtype": "int64"}, {"name": "tz", "dtype": "int64"}]
    schema.write_text(json.dumps({"features": specs}))
    manifest = convert([str(lines)], tmp_path / "out_jsonl", f"--schema={schema}")
    assert manifest.feature("d").logical_type == "date32[day]"
    assert manifest.feature("tz").logical_type.startswith("timestamp[us")
    six_thirty = _micros(datetime.datetime(2026, 1, 31, 6, 30, tzinfo=datetime.timezone.utc))
    assert [(r["d"], r["tz"]) for r in read_all(tmp_path / "out_jsonl")] == [
        (20484, six_thirty),
        (-1, six_thirty + 7 * 3600 * 10**6),
    ]


def test_a_timestamp_in_an_unsampled_file_of_a_plain_integer_feature_is_a_dead_letter():
    """A file the plan did not sample holds times where the feature holds plain integers: no
    unit says what its integers would count."""
    from beam_jobs.schema.conform import conform
    from tfdata_reader.manifest import FeatureSpec

    moment = datetime.datetime(2026, 1, 31, 8, 30)
    table = pa.table({"at": pa.array([moment, None], pa.timestamp("ms"))})
    batch, bad = conform(table, [FeatureSpec("at", "int64", [], True)])
    assert batch.num_rows == 1 and batch.column(0).to_pylist() == [None]
    assert list(bad) == [0] and "where the feature holds plain integers" in bad[0]


def test_one_bad_timestamp_after_the_sample_is_one_dead_letter_not_its_chunk(tmp_path):
    """Past the sampled head, a chunk whose times pyarrow reads as text (one is 'garbage')
    converts its good values like pyarrow's JSON reader does (Z and offsets are UTC)."""
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    path = tmp_path / "late.jsonl"
    with path.open("w") as f:
        for i in range(30_000):
            f.write(json.dumps({"id": i, "at": (start + datetime.timedelta(seconds=i))
                                .strftime("%Y-%m-%dT%H:%M:%SZ")}) + "\n")  # fmt: skip
        f.write('{"id": 30000, "at": "2026-01-01T00:00:39.250000Z"}\n')
        f.write('{"id": 30001, "at": "2026-01-01T08:30:00+02:00"}\n')
        f.write('{"id": 30002, "at": "garbage"}\n')
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--num_shards=2")
    assert manifest.feature("at").logical_type.startswith("timestamp[us")
    assert manifest.counts.bad_records == 1
    [dead] = [json.loads(line) for f in (out / "dead_letter").iterdir() for line in f.open()]
    assert dead["line"] == 30_003 and "'garbage'" in dead["reason"]
    got = {r["id"]: r["at"] for r in read_all(out)}
    assert len(got) == 30_002
    assert got[29_999] == _micros(start + datetime.timedelta(seconds=29_999))
    assert got[30_000] == _micros(start) + 39_250_000
    assert got[30_001] == _micros(start.replace(hour=6, minute=30))


def test_csv_timestamps_with_a_zone_under_schema_are_utc(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("at\n2026-01-01T00:00:00Z\n2026-01-01T08:30:00+02:00\n2026-01-01T01:00:00\n")
    schema = tmp_path / "s.json"
    spec = {"name": "at", "dtype": "int64", "logical_type": "timestamp[us]"}
    schema.write_text(json.dumps({"features": [spec]}))
    manifest = convert([str(path)], tmp_path / "out", f"--schema={schema}")
    assert manifest.counts.bad_records == 0
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    assert [r["at"] for r in read_all(tmp_path / "out")] == [
        _micros(start),
        _micros(start.replace(hour=6, minute=30)),
        _micros(start.replace(hour=1)),
    ]
