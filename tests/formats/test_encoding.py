"""--encoding: CSV and text files that are not UTF-8 are read as their encoding says, and a
header that is not UTF-8 without it is a data error naming the flag (not a traceback)."""

from __future__ import annotations

import csv
from collections import Counter

import pyarrow as pa
import pytest
from support.datasets import convert, read_all

from beam_jobs.core.errors import DataError, UsageError
from beam_jobs.formats.csv.casting import typed_batch
from tfdata_reader.manifest import FeatureSpec


def _latin1_csv(path) -> list[dict]:
    rows = [{"id": str(i), "città": f"Forlì {i}", "note": "crème brûlée" if i % 2 else "ß"}
            for i in range(500)]  # fmt: skip
    with open(path, "w", encoding="latin-1", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["id", "città", "note"])
        writer.writeheader()
        writer.writerows(rows)
    with open(path, encoding="latin-1", newline="") as f:  # the oracle reads it back
        return list(csv.DictReader(f))


def test_a_latin1_csv_converts_with_its_encoding(tmp_path):
    path = tmp_path / "latin.csv"
    expected = _latin1_csv(path)
    manifest = convert([str(path)], tmp_path / "out", "--encoding=latin-1", "--num_shards=3")
    assert [f.name for f in manifest.features] == ["id", "città", "note"]
    got = sorted(read_all(tmp_path / "out"), key=lambda r: r["id"])
    assert [(str(r["id"]), r["città"].decode(), r["note"].decode()) for r in got] == [
        (e["id"], e["città"], e["note"]) for e in expected
    ]


def test_a_header_that_is_not_utf8_names_the_flag(tmp_path):
    path = tmp_path / "latin.csv"
    _latin1_csv(path)
    with pytest.raises(
        DataError,
        match=rf"^{path}: the header is not utf-8: 0xE0 at byte 7 \(line 1\); pass --encoding",
    ):
        convert([str(path)], tmp_path / "out")


def test_a_cp1252_text_file_converts_with_its_encoding(tmp_path):
    path = tmp_path / "quotes.txt"
    lines = [f"\u201cquoted\u201d line {i} \u2014 \u20ac{i}" for i in range(300)]
    path.write_bytes("\r\n".join(lines).encode("cp1252") + b"\r\n")
    convert([str(path)], tmp_path / "out", "--encoding=cp1252")
    assert sorted(r["text"].decode() for r in read_all(tmp_path / "out")) == sorted(lines)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--encoding=utf-16"], "does not write newlines, quotes and delimiters as ASCII does"),
        (["--encoding=klingon"], "is not an encoding Python knows"),
    ],
)
def test_encodings_the_readers_cannot_follow_are_usage_errors(tmp_path, flags, message):
    path = tmp_path / "a.csv"
    path.write_text("id\n1\n")
    with pytest.raises(UsageError, match=message):
        convert([str(path)], tmp_path / "out", *flags)


def test_json_lines_are_utf8_by_definition(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id": 1}\n')
    with pytest.raises(UsageError, match="--encoding is for --format csv and text"):
        convert([str(path)], tmp_path / "out", "--encoding=latin-1")


@pytest.mark.parametrize("flags", [[], ["--encoding", "latin-1"]])
def test_a_utf16_file_is_named_as_such_with_the_way_to_convert_it(tmp_path, flags):
    path = tmp_path / "u16.csv"
    path.write_bytes("id,name\n1,Zürich\n".encode("utf-16"))
    with pytest.raises(DataError, match=r"u16.csv: the file starts with a UTF-16 or UTF-32 "):
        convert([str(path)], tmp_path / "out", *flags)


def test_a_text_file_that_is_not_utf8_names_the_flag_at_plan_time(tmp_path, caplog):
    path = tmp_path / "t.txt"
    path.write_bytes(b"Zurich\nZ\xfcrich\n")
    manifest = convert([str(path)], tmp_path / "out")
    assert manifest.total_records == 2
    assert "t.txt: byte 8 is not UTF-8 (invalid start byte)" in caplog.text
    assert "pass --encoding (e.g. latin-1 or cp1252)" in caplog.text


@pytest.mark.parametrize("rows", [20_000, 1_500_000])
def test_a_byte_its_given_encoding_leaves_undefined_is_named_where_it_is(tmp_path, rows):
    # cp1252 has no character for 0x81: the error names its byte and line in the file (not
    # the header, not an offset in a block pyarrow read) and does not advise the flag given.
    lines = ["id,name", *(f"{i},caf\xe9 {i}" for i in range(rows))]
    data = ("\n".join(lines) + "\n").encode("cp1252")
    at = data.index(f"\n{rows - 5_000},".encode()) + 1 + len(f"{rows - 5_000},")
    data = data[:at] + b"\x81" + data[at:]
    path = tmp_path / "cp.csv"
    path.write_bytes(data)
    with pytest.raises(DataError) as raised:
        convert([str(path)], tmp_path / "out", "--encoding", "cp1252")
    line = data[:at].count(b"\n") + 1
    assert line == rows - 5_000 + 2
    assert str(raised.value) == (
        f"{path}: byte {at:,} (line {line}) is not cp1252: 0x81 has no character in it; remove "
        "or fix that byte (iconv -f cp1252 -t utf-8 -c drops such bytes), or pass the file's "
        "true --encoding"
    )


def test_the_encoding_hint_names_only_encodings_that_read_the_bytes_and_shows_what_they_give():
    from beam_jobs.formats.csv.encoding_hint import not_utf8

    # Latin-1 text with C1 bytes that cp1252 leaves undefined (0x81): not cp1252.
    latin = [f"caf\xe9 \xa9 {i}\x81".encode("latin-1") for i in range(20)]
    assert not_utf8(latin) == "not UTF-8 text; pass --encoding with the file's encoding"
    clean = [f"caf\xe9 \xa9 {i}".encode("latin-1") for i in range(20)]
    assert not_utf8(clean) == (
        "not UTF-8 text; pass --encoding with the file's encoding (--encoding cp1252 reads "
        "'café © 0')"
    )
    japanese = ["日本語のテキスト {i}".encode("shift_jis") for _ in range(20)]
    hint = not_utf8(japanese)
    assert hint.startswith(
        "not UTF-8 text; pass --encoding with the file's encoding (--encoding shift_jis reads "
        "'日本語のテキスト {i}'"
    )


def test_only_the_text_values_that_are_not_utf8_are_bad_rows_each_looked_at_alone():
    # A UTF-8 'é' cut between two values is bad in both (each value is decoded alone); the
    # values past ASCII that are UTF-8 stay; a null and an empty value are good.
    values = [b"a\xc3", b"\xa9b", "José".encode(), b"Jos\xe9", None, b"", "中文".encode(), b"x"]
    batch = pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], ["name"])
    sliced = pa.concat_batches([batch, batch]).slice(len(values) - 1, len(values) + 1)
    got, bad = typed_batch(batch, [FeatureSpec("name", "bytes")], Counter())
    assert sorted(bad) == [0, 1, 3]
    assert got.column(0).to_pylist() == ["José", None, "", "中文", "x"]
    got, bad = typed_batch(sliced, [FeatureSpec("name", "bytes")], Counter())
    assert sorted(bad) == [1, 2, 4]  # a slice keeps its own row numbers
    assert got.column(0).to_pylist() == ["x", "José", None, "", "中文", "x"]


def test_a_marker_past_ascii_made_null_is_no_bad_text_beside_a_value_that_is():
    # A marker cell made null keeps its bytes under the null slot: it is a missing value.
    values = [b"Jos\xe9", "\u2014".encode(), b"Ann", "Zo\u00e9".encode()]
    batch = pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], ["name"])
    feature = FeatureSpec("name", "bytes", [], True, null_values=["\u2014"])
    found: Counter[tuple[str, str]] = Counter()
    got, bad = typed_batch(batch, [feature], found)
    assert sorted(bad) == [0]
    assert got.column(0).to_pylist() == [None, "Ann", "Zo\u00e9"]
    assert found == Counter({("name", "\u2014"): 1})
