"""Inputs inside containers: ZIP archives (each member an input, `archive.zip!member`) and
`.json` files holding one JSON array of objects. Oracles: Python's zipfile, csv and json."""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import zipfile

import pytest
from support.datasets import convert, read_all

from beam_jobs.core.errors import DataError, UsageError
from beam_jobs.formats.jsonl.arrays import _Scanner, array_lines


def _dead(out):
    folder = out / "dead_letter"
    if not folder.exists():
        return []
    return [json.loads(x) for f in sorted(folder.iterdir()) for x in f.read_text().splitlines()]


def _csv(rows):
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def test_each_member_of_a_zip_archive_is_an_input(tmp_path):
    archive = tmp_path / "data.zip"
    first = [["id", "name"], *([i, f"n{i}"] for i in range(3000))]
    second = [["id", "name"], [5000, 'say "hi",\nthere'], ["oops", "x"], [5001, "y"]]
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("part/a.csv", _csv(first))
        z.writestr("part/b.csv", _csv(second))
        z.writestr("part/", "")  # a folder entry
        z.writestr("__MACOSX/part/._a.csv", "junk")  # macOS's resource fork
    out = tmp_path / "out"
    manifest = convert([str(archive)], out, "--max_bad_fraction=0.01")
    assert [f["path"] for f in manifest.inputs["files"]] == [
        f"{archive}!part/a.csv",
        f"{archive}!part/b.csv",
    ]
    got = sorted((r["id"], r["name"].decode()) for r in read_all(out))
    expected = [(i, f"n{i}") for i in range(3000)] + [(5000, 'say "hi",\nthere'), (5001, "y")]
    assert got == sorted(expected)
    [dead] = _dead(out)
    assert (dead["file"], dead["line"], dead["cells"]["id"]) == (
        f"{archive}!part/b.csv",
        4,  # the quoted field's newline counts: the row starts on line 4
        "oops",
    )


def test_a_damaged_zip_member_is_a_data_error_naming_it(tmp_path):
    archive = tmp_path / "d.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        z.writestr("a.csv", "id\n" + "".join(f"{i}\n" for i in range(5000)))
    data = bytearray(archive.read_bytes())
    data[20_000] ^= 0x01  # a digit changed: the member's CRC-32 no longer matches
    archive.write_bytes(bytes(data))
    with pytest.raises(DataError, match=rf"^{archive}!a.csv: the ZIP member is damaged .*CRC"):
        convert([str(archive)], tmp_path / "out")


def test_a_zip_archive_for_a_format_that_is_not_read_as_a_stream_is_refused(tmp_path):
    archive = tmp_path / "p.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.parquet", b"PAR1")
    with pytest.raises(UsageError, match=r"a ZIP archive; its members are read as csv, jsonl"):
        convert([str(archive)], tmp_path / "out", "--format=parquet")


def test_a_file_that_is_no_zip_archive_is_a_data_error(tmp_path):
    path = tmp_path / "fake.csv.zip"
    path.write_text("id\n1\n")
    with pytest.raises(DataError, match=rf"^{path}: not a ZIP archive"):
        convert([str(path)], tmp_path / "out")


def _records(n, seed=3):
    rng = random.Random(seed)
    tricky = ["a,b", 'say "]}"', "back\\slash\\", "[{", "line\nbreak", "é ü 漢"]
    return [
        {"id": i, "v": rng.random(), "s": rng.choice(tricky) + str(i), "tags": [i, i + 1]}
        for i in range(n)
    ]


@pytest.mark.parametrize("indent, gz", [(2, False), (None, True)])
def test_a_json_array_is_read_as_records(tmp_path, indent, gz):
    records = _records(20_000)  # about 2 MB: several of the scanner's 1 MiB steps
    text = json.dumps(records, indent=indent, ensure_ascii=False).encode()
    path = tmp_path / ("a.json.gz" if gz else "a.json")
    path.write_bytes(gzip.compress(text) if gz else text)
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--sample_bytes=64KiB", "--target_shard_bytes=256KiB")
    assert manifest.total_records == 20_000 and manifest.counts.bad_records == 0
    got = sorted(read_all(out), key=lambda r: r["id"])
    assert [(r["id"], r["s"].decode(), r["tags"]) for r in got] == [
        (r["id"], r["s"], r["tags"]) for r in records
    ]


def test_a_bad_element_of_a_json_array_is_a_dead_letter_at_its_position(tmp_path):
    records = [{"id": i} for i in range(3000)]
    records[1234] = {"id": "twelve"}
    records[2000] = 7  # no object
    path = tmp_path / "a.json"
    path.write_text(json.dumps(records, indent=1))
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.01")
    assert manifest.total_records == 2998
    assert [(d["line"], d["raw"].strip()) for d in _dead(out)] == [
        (1235, '{\n  "id": "twelve"\n }'.replace("\n", " ")),
        (2001, "7"),
    ]


def test_the_array_scanner_gives_the_same_lines_whatever_the_steps():
    text = json.dumps(_records(300), indent=2).encode()
    whole = array_lines(text)
    assert [json.loads(line) for line in whole.splitlines() if line.strip()] == _records(300)
    for step in (1, 2, 3, 7, 64, 1000):
        scanner = _Scanner()
        assert b"".join(scanner.feed(text[i : i + step]) for i in range(0, len(text), step)) == (
            whole
        ), step


def test_zip_members_know_the_compressed_suffixes():
    from beam_jobs.formats.compressed import COMPRESSED_SUFFIXES
    from beam_jobs.formats.zip_members import PACKED_SUFFIXES

    assert sorted(PACKED_SUFFIXES) == sorted(COMPRESSED_SUFFIXES)


def _zip_with(tmp_path, entries, method=zipfile.ZIP_DEFLATED):
    archive = tmp_path / "z.zip"
    with zipfile.ZipFile(archive, "w", method) as z:
        for name, data in entries:
            z.writestr(name, data)
    return archive


def test_two_members_of_one_name_are_refused_not_read_as_one_twice(tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name
        archive = _zip_with(tmp_path, [("a.csv", "x,y\n1,first\n"), ("a.csv", "x,y\n3,second\n")])
    with pytest.raises(DataError, match=rf"^{archive}: the ZIP archive holds more than one member"):
        convert([str(archive)], tmp_path / "out")


def test_a_compressed_member_is_refused_naming_it(tmp_path):
    archive = _zip_with(tmp_path, [("d.csv.gz", gzip.compress(b"x\n1\n"))])
    with pytest.raises(DataError, match=rf"^{archive}!d.csv.gz: a compressed file inside a ZIP"):
        convert([str(archive)], tmp_path / "out", "--format=csv")


def test_a_broken_deflate_stream_or_an_encrypted_member_is_a_data_error(tmp_path):
    body = "".join(f"{i},{i * 7 % 13}\n" for i in range(20_000))
    archive = _zip_with(tmp_path, [("d.csv", "id,v\n" + body)])
    data = bytearray(archive.read_bytes())
    start = 30 + len("d.csv")  # the member's data follows its local header
    data[start + 40 : start + 60] = bytes(20)  # early in the DEFLATE stream
    archive.write_bytes(bytes(data))
    with pytest.raises(DataError, match=rf"^{archive}!d.csv: "):
        convert([str(archive)], tmp_path / "out")
    encrypted = bytearray(_zip_with(tmp_path, [("e.csv", "id\n1\n")]).read_bytes())
    encrypted[6] |= 0x01  # the local header's "encrypted" flag
    central = encrypted.rfind(b"PK\x01\x02")
    encrypted[central + 8] |= 0x01  # and the central directory's
    (tmp_path / "e.zip").write_bytes(bytes(encrypted))
    with pytest.raises(
        DataError, match=r"e.zip!e.csv: cannot be read from its archive .*encrypted"
    ):
        convert([str(tmp_path / "e.zip")], tmp_path / "out2", "--format=csv")


@pytest.mark.parametrize(
    "text, message",
    [
        ('[{"a": 1},\n {"a": 2},\n', r"the JSON array does not close \(no '\]' at its end\)"),
        ('[{"a": 1}]\n[{"a": 2}]\n', r"text after the JSON array's closing '\]' \(at byte 11\)"),
        ('[{"a": 1}] x', r"text after the JSON array's closing '\]' \(at byte 11\)"),
    ],
)
def test_a_json_array_cut_short_or_followed_by_more_is_a_data_error(tmp_path, text, message):
    path = tmp_path / "a.json"
    path.write_text(text)
    with pytest.raises(DataError, match=rf"^{path}: {message}"):
        convert([str(path)], tmp_path / "out")


def test_a_null_element_or_line_is_a_dead_letter_not_an_empty_record(tmp_path):
    inputs = [("a.json", '[{"a": 1}, null, {"a": 2}]'), ("b.jsonl", '{"a": 1}\nnull\n{"a": 2}\n')]
    for i, (name, text) in enumerate(inputs):
        (tmp_path / name).write_text(text)
        out = tmp_path / f"out{i}"
        manifest = convert([str(tmp_path / name)], out, "--max_bad_fraction=0.5")
        assert sorted(r["a"] for r in read_all(out)) == [1, 2]
        assert [(d["line"], d["reason"]) for d in _dead(out)] == [(2, "not a JSON object: null")]
        assert manifest.counts.records_read == 3


def test_every_bad_element_of_a_json_array_is_a_dead_letter_at_its_position(tmp_path):
    path = tmp_path / "a.json"
    path.write_text('[{"a": 1}, null, {"a": 2},\n [1], "x", {"a": 3}, null]')
    out = tmp_path / "out"
    convert([str(path)], out, "--max_bad_fraction=0.9")
    assert sorted(r["a"] for r in read_all(out)) == [1, 2, 3]
    assert [(d["line"], d["reason"]) for d in _dead(out)] == [
        (2, "not a JSON object: null"),
        (4, "not a JSON object: an array"),
        (5, "not a JSON object: a string"),
        (7, "not a JSON object: null"),
    ]


def test_a_first_element_past_the_sample_says_so(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps([{"a": "x" * 10_000}, {"a": "y"}]))
    with pytest.raises(
        DataError, match=r"no complete element of its JSON array in the first 4,096"
    ):
        convert([str(path)], tmp_path / "out", "--sample_bytes=4KiB")


def test_a_file_whose_name_holds_zip_bang_is_that_file_even_beside_an_archive(tmp_path):
    # `sales.zip!2024.csv` exists as typed: it is that file, not member 2024.csv of sales.zip
    # (which exists too, with other rows); a rerun finds the same input, unchanged.
    named = tmp_path / "sales.zip!2024.csv"
    named.write_text("a,b\n1,2\n3,4\n")
    with zipfile.ZipFile(tmp_path / "sales.zip", "w") as z:
        z.writestr("2024.csv", "a,b\n9,9\n")
    manifest = convert([str(named)], tmp_path / "out")
    assert sorted((r["a"], r["b"]) for r in read_all(tmp_path / "out")) == [(1, 2), (3, 4)]
    assert manifest.total_records == 2
    again = convert([str(named)], tmp_path / "out")  # the same input: nothing to do
    assert again.fingerprint == manifest.fingerprint
    # The archive itself: its member's name reads the file, so the clash is refused.
    with pytest.raises(DataError) as raised:
        convert([str(tmp_path / "sales.zip")], tmp_path / "clash")
    assert str(raised.value) == (
        f"{named}: both a file of that name and a member of the ZIP archive "
        f"{tmp_path / 'sales.zip'}; rename the file, or move the archive to read its members"
    )
    (tmp_path / "sales.zip!2024.csv").unlink()  # without the file: the archive's member
    convert([str(tmp_path / "sales.zip")], tmp_path / "inside")
    assert [(r["a"], r["b"]) for r in read_all(tmp_path / "inside")] == [(9, 9)]
