import io

import pytest

from beam_jobs.core.bad_rows import BadRow
from beam_jobs.core.errors import DataError
from beam_jobs.formats.csv.markers import column_markers
from beam_jobs.formats.csv.ranges import CsvSource, RangeStart, RangeTally, read_range
from beam_jobs.formats.csv.source import infer_features, parse_sample
from beam_jobs.formats.lines.layout import Dialect
from tfdata_reader.manifest import FeatureSpec

HEAD = (
    b"i,f,s,mixed,empty,flag,ts\n"
    b"1,1.5,x,1,,true,2024-01-01\n"
    b'2,,"y, ""z""\nw",2.5,,false,2024-01-02\n'
    b"3,3,NA,3,,true,2024-01-03\n"
)

DIALECT = Dialect(",")


def test_parse_sample_cuts_at_the_last_complete_record():
    head = HEAD + b"4,4.5,partial"
    sample = parse_sample("a.csv", head, is_whole_file=False, dialect=DIALECT)
    assert sample.column_names == ["i", "f", "s", "mixed", "empty", "flag", "ts"]
    assert sample.data == HEAD
    assert sample.table.num_rows == 3


def test_infer_features():
    sample = parse_sample("a.csv", HEAD, is_whole_file=True, dialect=DIALECT)
    ints, floats = list(column_markers("int64", None)), list(column_markers("float32", None))
    assert infer_features([sample]) == [
        FeatureSpec("i", "int64", [], False, null_values=ints),
        FeatureSpec("f", "float32", [], True, null_values=floats),
        FeatureSpec("s", "bytes", [], False),  # its 'NA' is text
        FeatureSpec("mixed", "float32", [], False, null_values=floats),
        FeatureSpec("empty", "bytes", [], True),
        FeatureSpec("flag", "int64", [], False, null_values=ints),
        FeatureSpec("ts", "bytes", [], False),
    ]


def test_infer_features_merges_samples_and_applies_overrides():
    a = parse_sample("a.csv", b"n,m\n1,x\n", is_whole_file=True, dialect=DIALECT)
    b = parse_sample("b.csv", b"n,m\n2.5,y\n", is_whole_file=True, dialect=DIALECT)
    assert [f.dtype for f in infer_features([a, b])] == ["float32", "bytes"]
    overrides = [FeatureSpec("n", "bytes")]
    assert infer_features([a, b], overrides)[0] == FeatureSpec("n", "bytes", [], False)


def test_infer_features_rejects_different_headers_and_unknown_overrides():
    a = parse_sample("a.csv", b"n,m\n1,x\n", is_whole_file=True, dialect=DIALECT)
    b = parse_sample("b.csv", b"n,k\n2,y\n", is_whole_file=True, dialect=DIALECT)
    with pytest.raises(DataError, match=r"b.csv: header \['n', 'k'\] differs from \['n', 'm'\]"):
        infer_features([a, b])
    with pytest.raises(DataError, match=r"--schema names columns \['zz'\]"):
        infer_features([a], [FeatureSpec("zz", "int64")])


@pytest.mark.parametrize(
    "head, whole, message",
    [
        (b"", True, "a.csv: the file is empty"),
        (b"abc" * 10, False, "a.csv: no complete header line in the first 30 bytes"),
    ],
)
def test_parse_sample_errors(head, whole, message):
    with pytest.raises(DataError, match=message):
        parse_sample("a.csv", head, is_whole_file=whole, dialect=DIALECT)


FEATURES = [FeatureSpec("a", "int64"), FeatureSpec("b", "bytes")]


def _read(data: bytes, start: int = 0, end: int | None = None):
    bad = []
    batches = list(
        read_range(
            io.BytesIO(data),
            CsvSource("in/a.csv", tuple(FEATURES)),
            start,
            len(data) if end is None else end,
            bad.append,
            RangeStart(header=start == 0),
        )
    )
    return [b.to_pydict() for b in batches], bad


def test_read_range_from_the_middle_uses_given_names():
    assert _read(b"a,b\n1,x\n2,y\n3,z\n", 8, 16) == ([{"a": [2, 3], "b": ["y", "z"]}], [])


def test_read_range_sets_aside_rows_of_the_wrong_type():
    batches, bad = _read(b"a,b\n1,x\nzz,y\n3,z\n")
    assert batches == [{"a": [1, 3], "b": ["x", "z"]}]
    assert bad == [
        BadRow(
            "in/a.csv",
            0,
            17,
            "column 'a' (int64): Failed to parse string: 'zz' as a scalar of type int64",
            1,
            {"cells": {"a": "zz", "b": "y"}},
            offset=8,
        )
    ]


def test_read_range_sets_aside_malformed_rows_and_bad_utf8():
    batches, bad = _read(b"a,b\n1,x,9\n2,\xff\xfe\n3\n4,ok\n")
    assert batches == [{"a": [3, 4], "b": [None, "ok"]}]  # a short row: its last field missing
    # In file order, each with the offset where its row starts.
    assert [b.to_json() for b in bad] == [
        {
            "file": "in/a.csv",
            "line": None,  # numbered by the writer, from the cut counts
            "byte_offset": 4,
            "byte_range": [0, 22],
            "row_in_range": None,
            "reason": "expected 2 columns, got 3",
            "raw": "1,x,9",
        },
        {
            "file": "in/a.csv",
            "line": None,  # numbered by the writer, from the cut counts
            "byte_offset": 10,
            "byte_range": [0, 22],
            "row_in_range": 0,
            "reason": "column 'b' (bytes): not UTF-8 text; pass --encoding with the file's "
            "encoding (--encoding cp1251 reads 'яю', --encoding cp1252 reads 'ÿþ', --encoding "
            "cp1254 reads 'ÿş')",
            "cells": {"a": "2", "b": {"base64": "//4="}},
        },
    ]


def test_short_rows_are_read_in_their_place_and_bad_rows_after_them_keep_their_offsets(
    monkeypatch,
):
    # Short rows (pandas: missing trailing fields) among well-formed, over-long and mistyped
    # rows, in batches of a few rows: file order kept, each bad row at its own offset.
    rows = [b"a,b,c"]
    for i in range(60):
        rows.append([b"%d,x%d,%d" % (i, i, i), b"%d" % i, b"%d,y%d" % (i, i),
                     b"%d,z,1,2" % i, b"q%d,w,3" % i][i % 5])  # fmt: skip
    data = b"\n".join(rows) + b"\n"
    expected = []
    for i in range(60):
        expected += [[(i, f"x{i}", i)], [(i, None, None)], [(i, f"y{i}", None)], [], []][i % 5]
    features = (FeatureSpec("a", "int64"), FeatureSpec("b", "bytes"), FeatureSpec("c", "int64"))
    for block in (1 << 20, 64):  # one batch, or a batch every few rows
        monkeypatch.setattr("beam_jobs.formats.csv.ranges.block_bytes", lambda _, b=block: b)
        bad = []
        tally = RangeTally()
        source = CsvSource("in/s.csv", features)
        read = read_range(
            io.BytesIO(data), source, 0, len(data), bad.append, RangeStart(header=True), tally
        )
        got = [b.to_pydict() for b in read]
        assert len(got) == 1 if block > 64 else len(got) > 5
        assert tally.short_rows == {"in/s.csv": 24}
        flat = [(a, b, c) for batch in got
                for a, b, c in zip(batch["a"], batch["b"], batch["c"], strict=True)]  # fmt: skip
        assert flat == expected
        starts = [sum(len(r) + 1 for r in rows[:k]) for k in range(len(rows))]
        assert [b.offset for b in bad] == [starts[1 + i] for i in range(60) if i % 5 >= 3]
        assert [b.reason.split(":")[0] for b in bad][:2] == [
            "expected 3 columns, got 4", "column 'a' (int64)"]  # fmt: skip


def test_bad_rows_get_exact_offsets_past_blank_lines_quoted_newlines_and_other_bad_rows():
    data = b'a,b\n1,x\n\n"q\nr",y\n\r\nbad\nzz,w\n7,8,9\nyy,v\n4,ok\n'
    start = data.index(b"1,x")  # a range without the header, names given
    batches, bad = _read(data, start, len(data))
    assert batches == [{"a": [1, 4], "b": ["x", "ok"]}]
    assert [(b.offset, b.reason[:22]) for b in bad] == [
        (data.index(b'"q'), "column 'a' (int64): Fa"),
        (data.index(b"bad"), "column 'a' (int64): Fa"),  # short: read, then mistyped
        (data.index(b"zz"), "column 'a' (int64): Fa"),
        (data.index(b"7,8,9"), "expected 2 columns, go"),
        (data.index(b"yy"), "column 'a' (int64): Fa"),
    ]


def test_read_range_rejects_a_different_header():
    with pytest.raises(DataError, match=r"in/a.csv: header \['a', 'c'\] differs from"):
        _read(b"a,c\n1,x\n")


def test_rows_of_many_columns_are_parsed_in_larger_blocks():
    from beam_jobs.formats.csv.ranges import block_bytes

    assert [block_bytes(n) >> 20 for n in (1, 11, 26, 100, 128, 5000)] == [1, 1, 3, 12, 16, 16]


def _read_features(data: bytes, features: list[FeatureSpec]):
    bad: list[BadRow] = []
    source = CsvSource("in/n.csv", tuple(features))
    batches = list(read_range(io.BytesIO(data), source, 0, len(data), bad.append, RangeStart()))
    merged = {f.name: [v for b in batches for v in b.column(f.name).to_pylist()] for f in features}
    return merged, [(b.row, b.reason) for b in bad]


_NUMBERS = [
    FeatureSpec("a", "int64", null_values=list(column_markers("int64", None))),
    FeatureSpec("b", "int64", null_values=list(column_markers("int64", None))),
    FeatureSpec("x", "float32", null_values=list(column_markers("float32", None))),
    FeatureSpec("y", "float32", null_values=list(column_markers("float32", None))),
]


@pytest.mark.parametrize(
    "rows, expected, bad",
    [
        # Clean: every number column converted with the others of its dtype.
        (["1,2,0.5,-1e3", "3,,2.25,7"], {"a": [1, 3], "b": [2, None], "x": [0.5, 2.25],
                                         "y": [-1000.0, 7.0]}, []),
        # A bad value, a marker and a float32 overflow each in one column: the others still
        # convert, and each bad row is named by its own column.
        (["1,2,0.5,1", "2,zz,NA,2", "3,4,1e40,3", "4,05,1.5,4"],
         {"a": [1], "b": [2], "x": [0.5], "y": [1.0]},
         [(1, "column 'b' (int64): Failed to parse string: 'zz' as a scalar of type int64"),
          (2, "column 'x' (float32): 1e+40 is out of the float32 range (at most 3.4e38)"),
          (3, "column 'b' (int64): '05' has a leading zero or is hexadecimal, which int64 would "
              'alter; to keep such codes as written, add {"name": "b", "dtype": "bytes"} to the '
              '"features" of a --schema file')]),
        (["1,2,NA,1", "2,3,4.5,NaN"], {"a": [1, 2], "b": [2, 3], "x": [None, 4.5],
                                       "y": [1.0, float("nan")]}, []),
    ],
)  # fmt: skip
def test_number_columns_converted_together_match_one_by_one(rows, expected, bad):
    data = ("a,b,x,y\n" + "\n".join(rows) + "\n").encode()
    got, got_bad = _read_features(data, _NUMBERS)
    got["y"] = ["nan" if v != v else v for v in got["y"]]  # NaN != NaN
    expected = dict(expected, y=["nan" if v != v else v for v in expected["y"]])
    assert got == expected
    assert got_bad == bad


@pytest.mark.parametrize(
    "data", [b"a,b", b"a,b\n", b"a,b\r\n", b"a,b\r", b"\na,b", b'"a","b"', b'"a",b', b"\r\na,b"]
)
def test_a_file_of_column_names_alone_reads_as_no_rows_with_or_without_a_line_end(data):
    # An export with no rows often lacks the final newline, which pyarrow needs to read it.
    sample = parse_sample("in/a.csv", data, True, DIALECT)
    assert sample.column_names == ["a", "b"] and sample.table.num_rows == 0
    assert _read(data) == ([], [])


def test_a_header_alone_names_a_wrong_column_as_any_header_does():
    with pytest.raises(DataError, match=r"header \['a', 'c'\] differs"):
        _read(b"a,c")


def test_a_last_row_without_a_line_end_reads_as_with_one():
    assert _read(b"a,b\n1,x") == _read(b"a,b\n1,x\n") == ([{"a": [1], "b": ["x"]}], [])
    _, bad = _read(b'a,b\n1,"x')  # a quote left open: no line end is added to it
    assert [(b.reason, b.content) for b in bad] == [
        ("unterminated quoted field: it runs to the end of the file",
         {"cells": {"a": "1", "b": "x"}})
    ]  # fmt: skip
