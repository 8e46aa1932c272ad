"""Small CSV files read in one parse: the same shards, dead letters and counts as reading them
one by one, whatever the files hold (quoted line breaks, CRLF, a BOM, blank lines, no final
newline, a header alone, a quote left open, bad values, ragged rows, another header)."""

from __future__ import annotations

import csv
import json
import pathlib

import numpy as np
import pytest
from support.datasets import convert, read_all

from beam_jobs.core.inputs import Piece
from beam_jobs.formats.csv import small_files
from beam_jobs.formats.csv.ranges import CsvSource, RangeTally
from beam_jobs.formats.lines.layout import Dialect
from tfdata_reader.manifest import FeatureSpec

HEADER = "id,name,score\n"


def _piece(path: str, size: int, start: int = 0, end: int | None = None) -> Piece:
    return Piece(path, start, size if end is None else end, size)


def test_groups_gather_runs_of_small_whole_files_in_order(monkeypatch):
    monkeypatch.setattr(small_files, "GROUP_BYTES", 100)
    dialect = Dialect(",")
    pieces = [
        _piece("a.csv", 40), _piece("b.csv", 40), _piece("c.csv", 40),  # 120 > 100: two groups
        _piece("big.csv", 1 << 20),  # too big
        _piece("d.csv", 10), _piece("e.csv.gz", 10),  # compressed: alone
        _piece("f.csv", 30, 0, 20),  # part of a file: alone
        _piece("g.csv", 10), _piece("h.csv", 10),
    ]  # fmt: skip
    got = [[p.path for p in g] for g in small_files.groups(pieces, dialect)]
    assert got == [["a.csv", "b.csv"], ["c.csv"], ["big.csv"], ["d.csv"], ["e.csv.gz"],
                   ["f.csv"], ["g.csv", "h.csv"]]  # fmt: skip
    no_header = Dialect(",", column_names=("id", "name", "score"))
    assert [len(g) for g in small_files.groups(pieces[-2:], no_header)] == [1, 1]


_FEATURES = (
    FeatureSpec("id", "int64"),
    FeatureSpec("name", "bytes"),
    FeatureSpec("score", "float32"),
)


def _read_joined(tmp_path: pathlib.Path, texts: list[bytes]):
    pieces = []
    for i, text in enumerate(texts):
        path = tmp_path / f"p{i}.csv"
        path.write_bytes(text)
        pieces.append(_piece(str(path), len(text)))
    got = small_files.read_joined(pieces, lambda p: CsvSource(p, _FEATURES), RangeTally())
    if got is None:
        return None
    return [(pathlib.Path(p.path).name, b.column("id").to_pylist()) for p, b in got]


def test_clean_files_are_dealt_their_own_rows(tmp_path):
    texts = [
        b'id,name,score\n1,"two\nlines",0.5\n2,b,1\n',
        b"\xef\xbb\xbfid,name,score\r\n3,c,2\r\n\r\n4,d,3",  # BOM, CRLF, blank line, no newline
        b"id,name,score\n",  # a header alone
        b'id,name,score\n5,"say ""hi""",4\n',
    ]
    assert _read_joined(tmp_path, texts) is None  # CRLF header bytes differ from LF ones
    texts[1] = b"\xef\xbb\xbfid,name,score\n3,c,2\r\n\r\n4,d,3"
    assert _read_joined(tmp_path, texts) == [("p0.csv", [1, 2]), ("p1.csv", [3, 4]),
                                             ("p3.csv", [5])]  # fmt: skip


@pytest.mark.parametrize(
    "second",
    [
        b"id,name,score\n3,c,oops\n",  # a bad value
        b"id,name,score\n3,c\n",  # a ragged row
        b'id,name,score\n3,"open,2\n',  # a quote left open at the end
        b"id,name,points\n3,c,2\n",  # another header
        # Records pyarrow might count otherwise (found by a hostile review): a line end that
        # is a lone CR (pyarrow ends a line there), a CR before a CRLF, a blank first line
        # (pyarrow skips it and takes the next line as the header).
        b"id,name,score\n3,c,2\r4,d,3\n",
        b"id,name,score\n3,c,2\n\r\r\n",
        b"\nid,name,score\n3,c,2\n",
    ],
)
def test_a_group_that_does_not_read_clean_is_left_to_reading_one_by_one(tmp_path, second):
    assert _read_joined(tmp_path, [HEADER.encode() + b"1,a,1\n", second]) is None


def _dead(out: pathlib.Path, manifest) -> list[tuple[str, int, str]]:
    rows = []
    for path in manifest.dead_letter:
        for line in (out / path).read_text().splitlines():
            d = json.loads(line)
            rows.append((pathlib.Path(d["file"]).name, d["line"], d["reason"]))
    return sorted(rows)


def test_many_small_files_convert_as_when_read_one_by_one(tmp_path, monkeypatch):
    inputs = tmp_path / "in"
    inputs.mkdir()
    bodies = {
        0: '1,"two\nlines",0.5\n2,b,1.5\n',
        1: "3,c,2\r\n\r\n4,d,3",
        3: '5,"say ""hi""",4\n',
        5: "6,e,not a number\n7,f,5\n",  # a bad value: its group is read one by one
        6: "8,g,1,2\n9,h,6\n",  # a row of more fields than the header: a dead letter
        7: "11,i\n12,j,7\n",  # a short row: its score missing (its group is read one by one)
        9: '10,"open,7\n',  # a quote left open at the end of its file
    }
    for i in range(14):
        header = "\ufeff" + HEADER if i == 1 else HEADER
        body = bodies.get(i, f"{100 + i},n{i},{i}.25\n{200 + i},m{i},{i}\n")
        (inputs / f"part-{i:02d}.csv").write_bytes((header + body).encode())
    schema = tmp_path / "schema.json"  # the types whatever the sample holds
    schema.write_text(json.dumps({"features": [f.to_json() for f in _FEATURES]}))
    flags = ["--num_shards=2", "--max_bad_fraction=0.5", f"--schema={schema}"]
    # Groups of two or three files: some read clean (joined), some hold a bad row (not).
    monkeypatch.setattr(small_files, "GROUP_BYTES", 100)
    outcomes = []
    read_joined = small_files.read_joined

    def spy(pieces, source, markers, cr_lines=False):
        got = read_joined(pieces, source, markers, cr_lines)
        outcomes.append((len(pieces), got is not None))
        return got

    monkeypatch.setattr(small_files, "read_joined", spy)
    joined = convert([str(inputs / "*.csv")], tmp_path / "joined", *flags)
    assert {joined for _, joined in outcomes} == {True, False}, outcomes
    monkeypatch.setattr(small_files, "SMALL_FILE_BYTES", 0)  # every file alone
    alone = convert([str(inputs / "*.csv")], tmp_path / "alone", *flags)
    assert joined.fingerprint == alone.fingerprint
    assert joined.counts == alone.counts
    dead = _dead(tmp_path / "joined", joined)
    assert dead == _dead(tmp_path / "alone", alone)
    assert [(name, line) for name, line, _ in dead] == [
        ("part-05.csv", 2), ("part-06.csv", 2), ("part-09.csv", 2)
    ]  # fmt: skip
    # Every other row, as Python's csv module reads the files.
    expected = []
    for path in sorted(inputs.glob("*.csv")):
        with open(path, newline="", encoding="utf-8-sig") as f:
            expected += [r for r in csv.DictReader(f) if r["id"] not in ("6", "8", "10")]
    got = sorted(read_all(tmp_path / "joined"), key=lambda r: r["id"])
    expected.sort(key=lambda r: int(r["id"]))
    assert [r["id"] for r in got] == [int(r["id"]) for r in expected]
    assert [r["name"].decode() for r in got] == [r["name"] for r in expected]
    scores = [r["score"] for r in expected]  # None: a short row's missing field
    assert [r["score"] for r in got] == [[float(np.float32(v))] if v else [] for v in scores]
    assert None in scores and joined.counts.short_rows == {str(inputs / "part-07.csv"): 1}


_CELLS = ["plain", "", '"quoted, comma"', '"two\nlines"', '"say ""hi"""', '""', "12", '"x\r\n"']


@pytest.mark.parametrize("seed", range(8))
def test_records_are_counted_as_pyarrow_reads_them(seed):
    import random

    import pyarrow as pa
    import pyarrow.csv as pcsv

    rng = random.Random(seed)
    end = rng.choice(["\n", "\r\n"])
    lines = ["a,b,c"]
    for _ in range(rng.randint(0, 30)):
        lines.append("" if rng.random() < 0.15 else ",".join(rng.choice(_CELLS) for _ in "abc"))
    text = end.join(lines) + rng.choice(["", end, end + end])
    data = text.encode()
    split = small_files._split(_piece("x.csv", len(data)), data, CsvSource("x.csv", _FEATURES))
    parse = pcsv.ParseOptions(newlines_in_values=True, ignore_empty_lines=True)
    table = pcsv.read_csv(pa.BufferReader(data), parse_options=parse)
    assert split is not None and split.records == table.num_rows
    assert split.header == ("a,b,c" + end).encode()


def test_a_bom_is_dropped_only_in_utf8_as_pyarrow_drops_it(tmp_path):
    from beam_jobs.formats.lines.layout import Dialect

    data = b"\xef\xbb\xbfid,name,score\n1,a,1\n"
    utf8 = small_files._split(_piece("x.csv", len(data)), data, CsvSource("x.csv", _FEATURES))
    latin = CsvSource("x.csv", _FEATURES, Dialect(",", encoding="latin-1"))
    kept = small_files._split(_piece("x.csv", len(data)), data, latin)
    assert utf8 is not None and utf8.header == b"id,name,score\n"
    # In latin-1 the BOM's bytes are text: the header differs from the others', as pyarrow
    # reads it alone ('\xef\xbb\xbfid'), and the file is read on its own.
    assert kept is not None and kept.header == data[: data.index(b"\n") + 1]


def test_rows_are_dealt_to_the_file_that_holds_them(tmp_path):
    # An oversized row's dead letter names its own file (a hostile review saw a lone CR in
    # one file and a CR before a CRLF in another add up to the right total, dealt wrongly).
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.csv").write_bytes(b"name,city\nann,Paris\nbob," + b"R" * 300 + b"\n")
    (inputs / "b.csv").write_bytes(b"name,city\ncat,Oslo\n\n")
    manifest = convert([str(inputs / "*.csv")], tmp_path / "out", "--max_record_bytes=200",
                       "--max_bad_fraction=1")  # fmt: skip
    dead = _dead(tmp_path / "out", manifest)
    assert [name for name, _, _ in dead] == ["a.csv"]  # oversized rows carry no line
