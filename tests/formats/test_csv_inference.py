"""CSV column types follow what a careful person reads in the values as written (ground truth:
Python's csv module): codes with leading zeros stay text, true/false are 1/0, one stray `n/a`
does not turn a number column into text, and float32 rounding is said aloud."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from support.datasets import convert, expected_rows, read_all

from beam_jobs.formats.csv.inference import infer_column


@pytest.mark.parametrize(
    "values, dtype, warned",
    [
        (["1", "-2", "+3"], "int64", None),
        (["1", "2.5", "1e3", "inf"], "float32", None),
        (["TRUE", "false", " True "], "int64", None),
        (["02134", "10001", "94105"], "bytes", "leading zeros"),
        (["0.5", "0", "-0"], "float32", None),  # a lone zero is no code
        (["12345678901234567890", "1"], "bytes", "beyond the int64 range"),
        (["1"] * 995 + ["n/a"] * 5, "int64", "5 of 1,000 sampled values are not numbers"),
        (["1"] * 980 + ["n/a"] * 20, "bytes", "is 98% numbers, but 20 of 1,000 sampled values"),
        (["1"] * 500 + ["n/a"] * 500, "bytes", None),  # a text column with numbers in it
        (["1.5", "3.14159265358"], "float32", "more significant digits than float32 keeps"),
        (["100000000", "0.001"], "float32", None),  # zeros around one digit are not precision
        ([], "bytes", None),
    ],
)
def test_infer_column(values, dtype, warned):
    guess = infer_column("c", pa.array(values, pa.string()))
    assert guess.dtype == dtype
    if warned is None:
        assert guess.warnings == ()
    else:
        assert len(guess.warnings) == 1 and warned in guess.warnings[0]


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
    assert manifest.counts["bad_records"] == 3
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
        rows[i] = f"{i},n/a"
    path.write_text("id,amount\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--max_bad_fraction=0.01", "--num_shards=2")
    assert manifest.feature("amount").dtype == "int64"
    assert "1 of 1" not in caplog.text and "are not numbers" in caplog.text
    assert (manifest.total_records, manifest.counts["bad_records"]) == (3997, 3)
    letters = [json.loads(line) for f in manifest.dead_letter for line in (out / f).open()]
    assert sorted(letter["line"] for letter in letters) == [102, 2502, 4001]
    expected = {
        int(r["id"]): int(r["amount"]) for r in expected_rows([str(path)]) if r["amount"] != "n/a"
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


def test_float32_rounding_is_warned_about(tmp_path, caplog):
    path = tmp_path / "geo.csv"
    path.write_text("lat\n" + "".join(f"{40 + i / 1e6:.6f}\n" for i in range(100)))
    manifest = convert([str(path)], tmp_path / "out", "--dry_run")
    assert manifest is None or manifest  # dry run: nothing written
    assert "more significant digits than float32 keeps" in caplog.text


def test_a_wide_file_prints_a_few_type_warnings_and_a_count(tmp_path, caplog):
    path = tmp_path / "wide.csv"
    names = [f"c{k}" for k in range(21)]
    rows = [",".join(f"0{(i + k) % 9}" for k in range(21)) for i in range(50)]
    path.write_text(",".join(names) + "\n" + "\n".join(rows) + "\n")
    convert([str(path)], tmp_path / "out", "--dry_run")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len([w for w in warnings if "leading zeros" in w]) == 5
    assert "... and 16 more warnings about column types" in warnings[-1]
