"""CSV column types follow what a careful person reads in the values as written (ground truth:
Python's csv module): codes with leading zeros stay text, true/false are 1/0, one stray `n/a`
does not turn a number column into text, and float32 rounding is said aloud."""

from __future__ import annotations

import json
import logging

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support.datasets import convert, expected_rows, read_all

from beam_jobs.cli import main
from beam_jobs.formats.csv.inference import (
    infer_column,
    plain_number_columns,
    plain_text_columns,
)
from beam_jobs.formats.csv.markers import DEFAULT_MARKERS, column_markers
from beam_jobs.formats.csv.numbers import BOOLEAN


@pytest.mark.parametrize(
    "values, dtype, warned",
    [
        (["1", "-2", "+3"], "int64", None),
        (["1", "2.5", "1e3", "inf"], "float32", None),
        (["TRUE", "false", " True "], "int64", None),
        (["02134", "10001", "94105"], "bytes", "leading zeros"),
        (["0.5", "0", "-0"], "float32", None),  # a lone zero is no code
        (["12345678901234567890", "1"], "bytes", "beyond the int64 range"),
        # The example is the integer that does not fit, not the first few.
        (
            ["1", "-2", "9223372036854775807", " 99999999999999999999 "],
            "bytes",
            "e.g. ' 99999999999999999999 '",
        ),
        (["1"] * 995 + ["oops"] * 5, "int64", "int64; 5 of 1,000 not: 'oops'"),
        (["1"] * 980 + ["oops"] * 20, "bytes", "98% numbers; not: 'oops'"),
        (["1"] * 500 + ["oops"] * 501, "bytes", None),  # a text column with numbers in it
        (["1"] * 501 + ["oops"] * 500, "bytes", "50% numbers; not: 'oops'"),
        (["1"] * 500 + ["n/a"] * 500, "int64", None),  # markers: missing values
        (["1.5", "3.14159265358"], "float32", None),  # an info line, no warning
        (["100000000", "0.001"], "float32", None),  # zeros around one digit are not precision
        ([], "bytes", None),
    ],
)
def test_infer_column(values, dtype, warned):
    guess = infer_column("c", pa.array(values, pa.string()))
    assert guess.dtype == dtype
    warnings = [n for n in guess.notes if n.warning]
    if warned is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warned in f"{warnings[0].kind} {warnings[0].detail}"


def test_zip_codes_keep_their_leading_zeros(tmp_path, caplog):
    path = tmp_path / "places.csv"
    path.write_text("zip,pop\n" + "".join(f"{i * 37 % 100000:05d},{i}\n" for i in range(3000)))
    manifest = convert([str(path)], tmp_path / "out", "--num_shards=3")
    assert manifest.feature("zip").dtype == "bytes"
    assert "leading zeros" in caplog.text and "stay as written" in caplog.text
    got = sorted(r["zip"].decode() for r in read_all(tmp_path / "out"))
    assert got == sorted(r["zip"] for r in expected_rows([str(path)]))


@pytest.mark.parametrize("schema", [None, "int64"])
def test_codes_and_hex_after_the_sample_are_dead_letters_not_altered(tmp_path, schema):
    """Arrow's int64 cast reads '01000' as 1000 and '0x1F' as 31; past the sampled head (or
    under --schema int64) such values must not be altered without a word."""
    path = tmp_path / "late.csv"
    late = ["01000", "0x1F", "-007", "0", "-0", " 12 "]
    rows = [f"{10000 + i},{i}" for i in range(150_000)] + [
        f"{v},{-1 - k}" for k, v in enumerate(late)
    ]
    path.write_text("code,n\n" + "\n".join(rows) + "\n")
    flags = ["--num_shards=2", "--max_bad_fraction=0.5"]
    if schema:
        spec = {"features": [{"name": "code", "dtype": schema}, {"name": "n", "dtype": "int64"}]}
        (tmp_path / "s.json").write_text(json.dumps(spec))
        flags.append(f"--schema={tmp_path / 's.json'}")
    manifest = convert([str(path)], tmp_path / "out", *flags)
    assert manifest.feature("code").dtype == "int64"
    assert manifest.counts.bad_records == 3
    dead = [
        json.loads(line)
        for f in sorted((tmp_path / "out" / "dead_letter").iterdir())
        for line in f.read_text().splitlines()
    ]
    assert [(d["line"], d["cells"]["code"]) for d in dead] == [
        (150_002, "01000"),
        (150_003, "0x1F"),
        (150_004, "-007"),
    ]
    assert all("has a leading zero or is hexadecimal, which int64 would alter" in d["reason"]
               for d in dead)  # fmt: skip
    got = {r["n"]: r["code"] for r in read_all(tmp_path / "out") if r["n"] < 0}
    assert got == {-4: 0, -5: 0, -6: 12}


def test_a_few_stray_words_in_a_number_column_are_dead_letters_not_a_text_column(tmp_path, caplog):
    path = tmp_path / "sales.csv"
    rows = [f"{i},{i * 3}" for i in range(4000)]
    for i in (100, 2500, 3999):
        rows[i] = f"{i},oops"
    path.write_text("id,amount\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.01", "--num_shards=2")
    assert manifest.feature("amount").dtype == "int64"
    assert "column 'amount' (int64; 1 of 1" not in caplog.text
    assert "numbers but for a few sampled values" in caplog.text
    assert (manifest.total_records, manifest.counts.bad_records) == (3997, 3)
    letters = [json.loads(line) for f in manifest.dead_letter for line in (out / f).open()]
    assert sorted(letter["line"] for letter in letters) == [102, 2502, 4001]
    expected = {
        int(r["id"]): int(r["amount"]) for r in expected_rows([str(path)]) if r["amount"] != "oops"
    }
    assert {r["id"]: r["amount"] for r in read_all(out)} == expected


def test_true_false_columns_are_one_and_zero(tmp_path):
    path = tmp_path / "flags.csv"
    rows = "".join(f"{i},{'True' if i % 3 else 'false'}\n" for i in range(900))
    path.write_text("id,ok\n" + rows)
    manifest = convert([str(path)], tmp_path / "out")
    assert manifest.feature("ok").dtype == "int64"
    assert {r["id"]: r["ok"] for r in read_all(tmp_path / "out")} == {
        i: int(i % 3 != 0) for i in range(900)
    }


def test_float32_rounding_of_decimals_is_one_info_line_not_a_warning(tmp_path, caplog):
    path = tmp_path / "geo.csv"
    lines = [f"{40 + i / 1e6:.6f},{8 + i / 1e7:.7f}" for i in range(100)]
    path.write_text("lat,lon\n" + "\n".join(lines) + "\n")
    with caplog.at_level(logging.INFO, logger="beam_jobs"):
        convert([str(path)], tmp_path / "out", "--dry_run")
    [line] = [
        r for r in caplog.records if "float32 keeps about 7 significant digits" in r.msg % r.args
    ]
    assert line.levelname == "INFO"
    assert (line.msg % line.args).startswith(
        "2 columns 'lat' (e.g. '40.000001', '40.000002', '40.000003'), 'lon' (e.g. '8.0000001'"
    )
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_a_wide_file_names_every_column_in_one_line_per_kind_of_decision(tmp_path, caplog):
    path = tmp_path / "wide.csv"
    names = [f"c{k}" for k in range(21)]
    rows = [",".join(f"0{(i + k) % 9}" for k in range(21)) + ",x1" for i in range(50)]
    rows[0] = rows[0][: -len("x1")] + "5"
    path.write_text(",".join([*names, "mixed"]) + "\n" + "\n".join(rows) + "\n")
    convert([str(path)], tmp_path / "out", "--dry_run")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    [zeros] = warnings
    assert zeros.startswith("21 columns 'c0' (e.g. ")
    assert all(f"'c{k}'" in zeros for k in range(21)) and "leading zeros" in zeros
    assert "'mixed'" not in caplog.text  # 2% numbers: a text column, nothing to say


def test_r_na_cells_in_number_columns_are_missing_values_and_counted(tmp_path):
    """R's write.csv: `NA` in number columns (past the sampled head too), in a text column
    kept as text; integers stay int64."""
    path = tmp_path / "flights.csv"
    rows = [f"{i},{i % 50 - 10},{i / 4},AA{i % 7}" for i in range(20_000)]
    late = {5: "5,NA,1.25,NA", 19_990: "19990,NA,NA,NA", 19_991: "19991,3,NA,UA"}
    for i, row in late.items():
        rows[i] = row
    path.write_text("id,dep_delay,air_time,carrier\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--sample_bytes=4KiB", "--num_shards=2")
    assert [(f.name, f.dtype, f.nullable) for f in manifest.features] == [
        ("id", "int64", False),
        ("dep_delay", "int64", True),
        ("air_time", "float32", True),
        ("carrier", "bytes", False),
    ]
    assert manifest.feature("dep_delay").null_values == list(column_markers("int64", None))
    assert manifest.feature("carrier").null_values is None
    assert manifest.counts.bad_records == 0
    assert manifest.counts.null_markers == {"air_time": 2, "dep_delay": 2}
    got = {r["id"]: r for r in read_all(out)}
    # A nullable feature reads as a list: [] when missing.
    assert (got[5]["dep_delay"], got[5]["air_time"], got[5]["carrier"]) == ([], [1.25], b"NA")
    assert (got[19_990]["dep_delay"], got[19_990]["air_time"]) == ([], [])
    assert (got[19_991]["dep_delay"], got[19_991]["air_time"]) == ([3], [])
    assert got[7]["dep_delay"] == [-3] and got[7]["air_time"] == [1.75]


def test_null_values_flag_names_the_markers_of_every_column(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("n,s,f\n1,x,1.5\n-999,-999,-999\nNA,NA,NaN\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--null_values=-999,NaN")
    assert [(f.name, f.dtype, f.null_values) for f in manifest.features] == [
        ("n", "bytes", ["-999", "NaN"]),  # 'NA' is no number, nor a marker here: text
        ("s", "bytes", ["-999", "NaN"]),
        ("f", "float32", ["-999", "NaN"]),
    ]
    rows = sorted(read_all(out), key=lambda r: str(r["s"]))
    assert [(r["n"], r["s"], r["f"]) for r in rows] == [
        ([], [], []),
        ([b"NA"], [b"NA"], []),
        ([b"1"], [b"x"], [1.5]),
    ]
    assert manifest.counts.null_markers == {"f": 2, "n": 1, "s": 1}
    assert manifest.options["null_values"] == ["-999", "NaN"]


def test_null_values_empty_turns_markers_off(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("n\n" + "".join(f"{i}\n" for i in range(500)) + "NA\n")
    manifest = convert([str(path)], tmp_path / "out", "--null_values=", "--max_bad_fraction=0.01")
    assert manifest.feature("n").dtype == "int64" and manifest.feature("n").null_values == []
    assert manifest.counts.bad_records == 1  # 'NA' is no int64, and no marker


def test_inspect_schema_reproduces_the_markers(tmp_path, capsys):
    path = tmp_path / "a.csv"
    path.write_text("n,s\n1,NULL\nNULL,b\n")
    out = tmp_path / "out"
    first = convert([str(path)], out, "--null_values=NULL")
    assert main(["inspect", str(out), "--schema"]) == 0
    schema = tmp_path / "schema.json"
    schema.write_text(capsys.readouterr().out)
    again = convert([str(path)], tmp_path / "again", f"--schema={schema}")
    assert again.features == first.features
    assert sorted(map(str, read_all(tmp_path / "again"))) == sorted(map(str, read_all(out)))


def test_types_come_from_stretches_through_the_file_not_its_head_alone(tmp_path):
    """Past the head a whole-number column gets fractions and an empty one gets numbers: the
    stretches sampled through the file type them, so no value is a dead letter or text."""
    path = tmp_path / "late.csv"
    n = 60_000
    rows = [
        f'{i},{i % 90},{"" if i < n // 2 else i % 7},"name {i}"'
        if i < n * 3 // 4
        else f'{i},{i % 90 + 0.5},{i % 7},"name {i}"'
        for i in range(n)
    ]
    path.write_text("id,amount,late,name\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--sample_bytes=64KiB", "--num_shards=2")
    assert [(f.name, f.dtype) for f in manifest.features] == [
        ("id", "int64"),
        ("amount", "float32"),
        ("late", "int64"),
        ("name", "bytes"),
    ]
    assert manifest.counts.bad_records == 0
    got = {r["id"]: (r["amount"], r["late"]) for r in read_all(out)}
    assert got[10] == (10.0, []) and got[n - 1] == ((n - 1) % 90 + 0.5, [(n - 1) % 7])


def test_bytes_that_are_not_utf8_in_a_number_column_are_a_dead_letter_naming_encoding(tmp_path):
    path = tmp_path / "deg.csv"
    rows = [f"{i},{i}".encode() for i in range(400)]
    rows[49] = b"49,7\xb0"  # a Latin-1 degree sign, in the sampled head
    path.write_bytes(b"id,n\n" + b"\n".join(rows) + b"\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.01")
    assert manifest.feature("n").dtype == "int64"
    [letter] = [json.loads(x) for f in manifest.dead_letter for x in (out / f).open()]
    assert letter["line"] == 51
    assert letter["reason"].startswith(
        "column 'n' (int64): Failed to parse string: '7\ufffd' as a scalar of type int64: "
        "not UTF-8 text; pass --encoding with the file's encoding"
    )


_KINDS = [
    ["1", "-2", "+3", " 4 "],
    ["1.5", "-2.25", "1e3", "inf", " .5"],
    ["TRUE", "false"],
    ["02134", "10001"],
    ["12345678901234567890", "1"],
    ["9223372036854775807", "-9223372036854775808"],
    ["1", "oops"],
    ["1", "NA"],
    ["1.5", "NaN"],
    ["1.5", "nan"],
    ["x", "NA"],
    ["1.5", "3.14159265358"],
    ["100000000", "0.001"],
    ["1", "2.5"],
    ["-999", "1"],
    ["", ""],
    ["0x1F", "1"],
    ["1", "2"],
    ["0.25", "0.5"],
]


def _two_samples(kinds, step, last) -> list[list[pa.Array]]:
    """Columns of two samples each (nulls for empty cells): every kind first, then another
    kind (`step` on), itself, or `last`."""
    pairs = [(first, second) for i, first in enumerate(kinds)
             for second in (kinds[(i * step) % len(kinds)], kinds[i], last)]  # fmt: skip
    return [[pa.array([v or None for v in sample], pa.string()) for sample in pair]
            for pair in pairs]  # fmt: skip


@pytest.mark.parametrize("given", [None, (), ("-999",), ("NA", "oops")])
def test_columns_typed_at_once_are_typed_as_one_by_one(given):
    # Every column (two samples of it, nulls for empty cells) in every combination of kinds.
    columns = _two_samples(_KINDS, 7, ["3", None])
    found = plain_number_columns(columns, given)
    for position, column in enumerate(columns):
        texts = pa.concat_arrays(column).drop_null()
        expected = infer_column("c", texts, given)
        plain = not expected.notes and expected.markers_seen == 0 and expected.dtype != "bytes"
        plain = plain and not any(v in DEFAULT_MARKERS + (given or ()) for v in texts.to_pylist())
        plain = plain and not pc.all(pc.match_substring_regex(texts, BOOLEAN)).as_py()
        # Integers of 19 characters may be beyond int64: those columns are typed one by one.
        plain = plain and not (expected.dtype == "int64" and max(map(len, texts.to_pylist())) > 18)
        if position in found:
            assert found[position] == expected, column
        else:
            assert not plain, column  # a plain column of numbers is typed at once
    assert len(found) >= 10, found


_TEXT_KINDS = [
    ["paris", "rome"], ["x", "NA"], ["abc", "-"], ["word", "1"], ["true", "yes"], ["TRUE"],
    ["ville", "nil"], ["São Paulo", "中文"], ["x", "oops"], ["a,b", " y "], ["", ""], ["1", "2"],
]  # fmt: skip


@pytest.mark.parametrize("given", [None, (), ("oops",)])
def test_text_columns_typed_at_once_are_typed_as_one_by_one(given):
    columns = _two_samples(_TEXT_KINDS, 5, ["z", None])
    found = plain_text_columns(columns, given)
    for position, column in enumerate(columns):
        texts = pa.concat_arrays(column).drop_null()
        expected = infer_column("c", texts, given)
        values = texts.to_pylist()
        plain = expected.dtype == "bytes" and not expected.notes and len(values) > 0
        plain = plain and not any(v in DEFAULT_MARKERS + (given or ()) for v in values)
        words = ("true", "false", "-", "nil")
        plain = plain and not any(v.strip().lower() in words for v in values)
        plain = plain and not any(v.strip().isdigit() for v in values)
        if position in found:
            assert found[position] == expected, column
        else:
            assert not plain, column  # a plain column of text is typed at once
    assert len(found) >= 8, found


@pytest.mark.parametrize("marker", [".", "-", "nil", "--", "?", "n.a."])
def test_a_one_token_marker_among_numbers_is_missing_by_default_and_recorded(
    tmp_path, caplog, marker
):
    # FRED and Stata exports write a missing number as '.': by default such a token is the
    # column's missing value, counted, named and recorded per feature, so that --schema
    # with the manifest's schema.pbtxt reads the same.
    rows = [(f"d{i}", marker if i % 29 == 3 else f"{i * 1.25:.2f}") for i in range(600)]
    path = tmp_path / "series.csv"
    path.write_text("date,value\n" + "".join(f"{d},{v}\n" for d, v in rows))
    first = convert([str(path)], tmp_path / "first")
    value = first.feature("value")
    assert (value.dtype, value.null_values[-1]) == ("float32", marker)
    assert first.counts.null_markers == {"value": 21}
    assert first.counts.markers_seen == {"value": {marker: 21}}
    assert first.counts.bad_records == 0
    got = {r["date"].decode(): list(r["value"]) for r in read_all(tmp_path / "first")}
    want = {d: [] if v == marker else [float(pa.scalar(float(v), pa.float32()).as_py())]
            for d, v in rows}  # fmt: skip
    assert got == want
    again = convert([str(path)], tmp_path / "again", "--schema",
                    str(tmp_path / "first" / "schema.pbtxt"))  # fmt: skip
    assert again.fingerprint == first.fingerprint
    assert again.counts.markers_seen == first.counts.markers_seen


@pytest.mark.parametrize("marker", [".", "nil"])
def test_without_token_inference_a_marker_gets_the_null_values_hint_and_following_it_is_exact(
    tmp_path, caplog, marker
):
    # --infer_null_values false keeps such a column as text, with the hint that reads it.
    import shlex

    rows = [(f"d{i}", marker if i % 29 == 3 else f"{i * 1.25:.2f}") for i in range(600)]
    path = tmp_path / "series.csv"
    path.write_text("date,value\n" + "".join(f"{d},{v}\n" for d, v in rows))
    off = convert([str(path)], tmp_path / "first", "--infer_null_values", "false")
    assert off.feature("value").dtype == "bytes"
    warned = [r.getMessage() for r in caplog.records if "mostly numbers" in r.getMessage()]
    assert len(warned) == 1
    flag = shlex.quote(f"--null_values={marker}")
    assert warned[0] == (
        f"column 'value' (96% numbers; not: {marker!r}): mostly numbers, but not all: read as "
        f"text (bytes); to read them as missing values, add {flag} (or, to send them to the "
        "dead letter, give it the dtype float32 in a --schema file)"
    )
    manifest = convert([str(path)], tmp_path / "followed", *shlex.split(flag))
    assert manifest.feature("value").dtype == "float32" and manifest.counts.bad_records == 0
    got = {r["date"].decode(): r["value"] for r in read_all(tmp_path / "followed")}
    want = {d: [] if v == marker else [float(pa.scalar(float(v), pa.float32()).as_py())]
            for d, v in rows}  # fmt: skip
    assert {d: list(v) for d, v in got.items()} == want


def test_one_token_markers_rule(tmp_path):
    # A token in a column mostly of numbers is missing; in a column mostly of tokens, or
    # of text, it is text; a word of letters (a grade 'K') is a value, not a marker.
    half = ["."] * 40 + [str(i) for i in range(60)]
    most = ["."] * 60 + [str(i) for i in range(40)]
    grades = ["K"] * 10 + [str(i % 12 + 1) for i in range(90)]
    words = ["-"] * 10 + [f"w{i}" for i in range(90)]
    lines = ["h,m,g,w"] + [",".join(r) for r in zip(half, most, grades, words, strict=True)]
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n")
    manifest = convert([str(path)], tmp_path / "out")
    assert [(f.name, f.dtype) for f in manifest.features] == [
        ("h", "int64"), ("m", "bytes"), ("g", "bytes"), ("w", "bytes")
    ]  # fmt: skip
    assert manifest.counts.markers_seen == {"h": {".": 40}}
    got = [(list(r["h"]), r["m"]) for r in read_all(tmp_path / "out")]
    want = [([] if h == "." else [int(h)], m.encode()) for h, m in zip(half, most, strict=True)]
    assert sorted(got, key=repr) == sorted(want, key=repr)


def test_a_token_first_seen_after_the_sample_is_missing_and_recorded(tmp_path):
    # 'nil' first appears past the sampled head (52,281 rows, 1,061 of them 'nil', as a real
    # file had): a missing value, counted, and added to the feature's markers, so that
    # --schema reads the same; '?' later in another column too. (GZIP: the sample is the
    # file's head only.)
    import gzip

    rows = [(i, "nil" if i > 40_000 and i % 11 == 0 else str(i * 3),
             "?" if i > 45_000 and i % 13 == 0 else f"{i / 4}") for i in range(52_281)]  # fmt: skip
    path = tmp_path / "late.csv.gz"
    text = "id,n,x\n" + "".join(f"{i},{n},{x}\n" for i, n, x in rows)
    path.write_bytes(gzip.compress(text.encode()))
    first = convert([str(path)], tmp_path / "first", "--sample_bytes", "65536")
    nils = sum(n == "nil" for _, n, _ in rows)
    asks = sum(x == "?" for _, _, x in rows)
    assert (first.counts.bad_records, first.counts.records_written) == (0, 52_281)
    assert first.counts.markers_seen == {"n": {"nil": nils}, "x": {"?": asks}}
    assert first.feature("n").null_values[-1] == "nil"
    assert first.feature("x").null_values[-1] == "?"
    got = {r["id"]: (list(r["n"]), list(r["x"])) for r in read_all(tmp_path / "first")}
    want = {i: ([] if n == "nil" else [int(n)],
                [] if x == "?" else [float(pa.scalar(float(x), pa.float32()).as_py())])
            for i, n, x in rows}  # fmt: skip
    assert got == want
    again = convert([str(path)], tmp_path / "again", "--schema",
                    str(tmp_path / "first" / "schema.pbtxt"))  # fmt: skip
    assert again.fingerprint == first.fingerprint
    off = convert([str(path)], tmp_path / "off", "--sample_bytes", "65536",
                  "--infer_null_values", "false", "--max_bad_fraction", "0.1")  # fmt: skip
    assert off.counts.bad_records == len({i for i, n, x in rows if n == "nil" or x == "?"})


def test_a_number_marker_is_every_spelling_of_that_number_and_travels_in_schema_pbtxt(tmp_path):
    # pandas reads na_values=-1 as missing whether written -1, -1.0 or -1e0; the markers go
    # into schema.pbtxt, so --schema with it reads the same cells as missing.
    spellings = ["-1", "-1.0", "-1.00", " -1e0", "-1.5", "NA", "2.5"]
    rows = [(i, spellings[i % 7], "NA" if i % 5 == 0 else f"w{i % 3}") for i in range(350)]
    path = tmp_path / "m.csv"
    path.write_text("id,x,c\n" + "".join(f"{i},{x},{c}\n" for i, x, c in rows))
    first = convert([str(path)], tmp_path / "first", "--null_values", "NA,-1")
    assert first.counts.null_markers == {"x": 250, "c": 70}
    again = convert([str(path)], tmp_path / "again", "--schema",
                    str(tmp_path / "first" / "schema.pbtxt"))  # fmt: skip
    assert again.feature("x").null_values == ["NA", "-1"]
    assert again.counts.null_markers == first.counts.null_markers
    assert again.fingerprint == first.fingerprint
    got = {r["id"]: (list(r["x"]), r["c"]) for r in read_all(tmp_path / "again")}
    want = {
        i: ([] if x.strip() in ("-1", "-1.0", "-1.00", "-1e0", "NA") else [float(x)],
            [] if c == "NA" else [c.encode()])
        for i, x, c in rows
    }  # fmt: skip
    assert {i: (x, list(c)) for i, (x, c) in got.items()} == want
