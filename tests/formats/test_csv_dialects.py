"""CSV dialects: tab and semicolon files, files without a header, lines before the header, and
headers that cannot be column names; values checked against Python's csv module."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from support.datasets import convert, read_all

from beam_jobs.cli import main
from beam_jobs.core.errors import DataError, UsageError
from beam_jobs.formats.csv.dialect import detect_delimiter, looks_like_data
from beam_jobs.formats.lines.layout import parse_delimiter


def _write(path, rows, delimiter, header=("id", "name", "note")):
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    if header:
        writer.writerow(header)
    writer.writerows(rows)
    path.write_text(buffer.getvalue())


def _rows(n: int, delimiter: str) -> list[list]:
    # Fields that hold the delimiter, quotes and newlines, so they must be quoted.
    return [[i, f"n{i}{delimiter}x" if i % 3 else f'say "{i}"', f"a\nb{i}"] for i in range(n)]


@pytest.mark.parametrize(
    "name, delimiter, flags",
    [
        ("a.tsv", "\t", []),
        ("a.csv", ";", []),
        ("a.csv", "|", []),
        ("a.txt", ";", ["--format=csv", "--delimiter=semicolon"]),
        ("a.csv", "\t", ["--delimiter=\\t"]),
    ],
)
def test_delimited_files_convert_with_every_value_exact(tmp_path, name, delimiter, flags):
    path = tmp_path / name
    rows = _rows(3000, delimiter)
    _write(path, rows, delimiter)
    manifest = convert([str(path)], tmp_path / "out", "--num_shards=7", *flags)
    assert [f.name for f in manifest.features] == ["id", "name", "note"]
    assert manifest.counts.bad_records == 0
    got = sorted(
        [r["id"], r["name"].decode(), r["note"].decode()] for r in read_all(tmp_path / "out")
    )
    assert got == sorted(rows)


def test_files_without_a_header_take_the_given_column_names(tmp_path):
    path = tmp_path / "plain.csv"
    rows = [[i, i * 2.5] for i in range(100)]
    _write(path, rows, ",", header=None)
    manifest = convert([str(path)], tmp_path / "out", "--column_names=a,b", "--num_shards=3")
    assert [(f.name, f.dtype) for f in manifest.features] == [("a", "int64"), ("b", "float32")]
    assert sorted(r["a"] for r in read_all(tmp_path / "out")) == list(range(100))  # no row lost


def test_lines_before_the_header_are_skipped_even_with_a_quote_in_them(tmp_path):
    path = tmp_path / "report.csv"
    preamble = '"Q3 report\nexported 2026-12-01\n'  # its quote opens a field, for CSV
    body = io.StringIO()
    csv.writer(body, lineterminator="\n").writerows([["id", "v"], *_rows(2000, ",")])
    path.write_text(preamble + body.getvalue().replace("id,v\n", "id,v,w\n", 1))
    manifest = convert([str(path)], tmp_path / "out", "--skip_header_lines=2", "--num_shards=5")
    assert [f.name for f in manifest.features] == ["id", "v", "w"]
    assert manifest.total_records == 2000 and manifest.counts.bad_records == 0


def test_a_header_that_looks_like_data_is_named_at_plan_time(tmp_path, caplog):
    path = tmp_path / "numbers.csv"
    _write(path, [[i, i + 1] for i in range(50)], ",", header=("10", "11"))
    convert([str(path)], tmp_path / "out", "--dry_run")
    assert "looks like data, not column names" in caplog.text
    assert "--column_names" in caplog.text


def test_column_names_given_for_a_file_with_a_header_stop_the_plan(tmp_path, caplog):
    path = tmp_path / "hdr.csv"
    path.write_text("id,v\n1,2\n3,4\n")
    message = r"the first line \(ID,v\) is the column names given by --column_names: .* pass " \
        r"--skip_header_lines 1"  # fmt: skip
    with pytest.raises(DataError, match=message):
        convert([str(path)], tmp_path / "out", "--column_names", "ID, v")
    assert not (tmp_path / "out").exists()
    manifest = convert(
        [str(path)], tmp_path / "out", "--column_names=id,v", "--skip_header_lines=1"
    )
    assert manifest.total_records == 2 and manifest.feature("id").dtype == "int64"


@pytest.mark.parametrize(
    "header, names",
    [
        (("id", "id"), ["id", "id_2"]),
        (("", "id"), ["column_1", "id"]),
        (("id", " ", "column_2"), ["id", "column_2_", "column_2"]),
        (("a", "", "a", ""), ["a", "column_2", "a_2", "column_4"]),
    ],
)
def test_blank_or_repeated_header_names_get_names_of_their_own(tmp_path, caplog, header, names):
    path = tmp_path / "dup.csv"
    rows = [list(range(i, i + len(header))) for i in range(3)]
    _write(path, rows, ",", header=header)
    manifest = convert([str(path)], tmp_path / "out", "--num_shards=2")
    assert [f.name for f in manifest.features] == names
    assert sorted(tuple(r[n] for n in names) for r in read_all(tmp_path / "out")) == [
        tuple(r) for r in rows
    ]
    assert f"{path}: the header's column" in caplog.text


def test_a_generated_name_is_the_one_the_column_flags_take(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text('"","x","y"\n"1",2,"a"\n"2",4,"b"\n')  # R's write.csv: row names first
    manifest = convert(
        [str(path)], tmp_path / "out", "--columns=column_1,x", "--rename=column_1=row"
    )
    assert [(f.name, f.dtype) for f in manifest.features] == [("row", "int64"), ("x", "int64")]
    assert sorted((r["row"], r["x"]) for r in read_all(tmp_path / "out")) == [(1, 2), (2, 4)]


@pytest.mark.parametrize("names", ["id,", "id,id"])
def test_empty_or_repeated_column_names_flag_is_a_data_error(tmp_path, names):
    path = tmp_path / "a.csv"
    path.write_text("1,2\n")
    with pytest.raises(DataError, match=r"^--column_names has"):
        convert([str(path)], tmp_path / "out", f"--column_names={names}")


def test_inspect_shows_the_dialect_it_chose(tmp_path, capsys):
    path = tmp_path / "a.csv"
    _write(path, _rows(10, ";"), ";")
    assert main(["inspect", "--input", str(path)]) == 0
    assert (
        "format       csv: delimiter semicolon (detected), header line" in capsys.readouterr().out
    )


def test_dialect_rules():
    assert detect_delimiter("x.tsv.gz", b"a\tb\n1\t2\n") == "\t"
    assert detect_delimiter("x.tsv.gz", b"a b\n1 2\n") == "\t"  # nothing splits: the name
    assert detect_delimiter("x.csv", b"a;b;c") == ";"
    assert detect_delimiter("x.csv", b"a;b\tc") == ","  # two candidates: no guess
    assert detect_delimiter("x.csv", b"a,b;c") == ","
    # A .tsv that holds commas, not tabs (a misnamed export), is comma-separated.
    assert detect_delimiter("m.tsv", b"id,name,score\n1,a,1.5\n2,b,2\n") == ","
    # Tab-separated with commas in the names and values: tab splits into more fields.
    head = b"id\tName (last, first)\tscore\n1\tSmith, John\t3.5\n2\tDoe, Jane\t4\n"
    assert detect_delimiter("names.csv", head) == "\t"
    # Semicolons inside quoted values do not count; a record cut by the head's end is ignored.
    assert detect_delimiter("q.csv", b'id,text\n1,"a;b;c"\n2,"x;y"\n3,"z') == ","
    # Rows short of the header (trailing empty fields left out), or one longer (row names
    # without a name): the delimiter that splits the header and every row into 2 or more.
    assert detect_delimiter("s.csv", b"a;b;c\n1;2;3\n4;5\n6;7\n") == ";"
    assert detect_delimiter("s.txt", b"a\tb\tc\n1\t2\n") == "\t"
    assert detect_delimiter("r.csv", b'"a";"b"\n"1";2;3\n"2";4;5\n') == ";"
    assert detect_delimiter("s.csv", b"a;b;c\n1;2;3\nword\n4;5\n") == ";"  # most split
    assert detect_delimiter("s.csv", b"a;b;c\nword\nword\n4;5\n") == ","  # most do not
    assert parse_delimiter("tab") == parse_delimiter("\\t") == "\t"
    for bad in ('"', "ab", "\n", ""):
        with pytest.raises(ValueError, match="--delimiter must be one character"):
            parse_delimiter(bad)
    assert looks_like_data(["1", "2.5", "-3e2"]) and not looks_like_data(["id", "2"])
    # A headerless iris.data: names with fractions; years as names are a real header.
    assert looks_like_data(["5.1", "3.5", "Iris-setosa"]) and looks_like_data(["1", "-2", "x"])
    assert not looks_like_data(["country", "2019", "2020"])


def test_dialect_flags_are_for_csv_only(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n')
    with pytest.raises(UsageError, match="are for --format csv only"):
        convert([str(path)], tmp_path / "out", "--delimiter=;")


def test_a_tab_separated_csv_with_commas_in_names_and_values_converts_exactly(tmp_path):
    path = tmp_path / "people.csv"
    rows = [["id", "Name (last, first)", "score"]]
    rows += [[str(i), f"Smith{i}, John", f"{i}.5"] for i in range(200)]
    path.write_text("".join("\t".join(r) + "\n" for r in rows))
    manifest = convert([str(path)], tmp_path / "out", "--num_shards=2")
    assert [f.name for f in manifest.features] == ["id", "Name (last, first)", "score"]
    with path.open(newline="") as f:
        truth = list(csv.DictReader(f, delimiter="\t"))
    got = sorted(read_all(tmp_path / "out"), key=lambda r: r["id"])
    assert [(r["id"], r["Name (last, first)"].decode()) for r in got] == [
        (int(t["id"]), t["Name (last, first)"]) for t in truth
    ]


@pytest.mark.parametrize("cut", [None, 3])
def test_blank_lines_of_a_one_column_file_are_missing_values(tmp_path, cut):
    lines = ["n"] + [("" if i % 7 == 3 else ("x" if i == 40 else str(i))) for i in range(60)]
    path = tmp_path / "one.csv"
    path.write_text("\n".join(lines) + "\n")
    # Python's csv module gives a blank line as a record of no field: here, a missing value.
    want = [(row[0] if row else None) for row in csv.reader(io.StringIO(path.read_text()))][1:]
    flags = ["--schema", str(_int_schema(tmp_path)), "--max_bad_fraction=0.1"]
    flags += [f"--num_shards={cut}"] if cut else []
    manifest = convert([str(path)], tmp_path / "out", *flags)
    assert manifest.counts.records_read == 60
    assert manifest.counts.missing_values == {"n": want.count(None)}
    got = sorted((r["n"] or [None])[0] for r in read_all(tmp_path / "out", label_key="")
                 if r["n"])  # fmt: skip
    assert got == sorted(int(v) for v in want if v not in (None, "x"))
    [dead] = manifest.dead_letter
    [row] = [json.loads(line) for line in (tmp_path / "out" / dead).read_text().splitlines()]
    assert (row["line"], row["cells"]) == (42, {"n": "x"})


def _int_schema(folder):
    path = folder / "schema.json"
    path.write_text(json.dumps({"features": [{"name": "n", "dtype": "int64"}]}))
    return path


def test_blank_lines_between_records_of_several_columns_are_no_records(tmp_path):
    path = tmp_path / "two.csv"
    path.write_text("a,b\n1,x\n\n2,y\n\n")
    manifest = convert([str(path)], tmp_path / "out")
    assert manifest.counts.records_read == 2


@pytest.mark.parametrize(
    "titles",
    [["Monthly sales 2024"], ["Sales", "Source: the shop;", ""], ["Sales 2024,,"]],
)  # fmt: skip
def test_title_lines_above_the_header_are_taken_out_as_skip_header_lines_would(
    tmp_path, caplog, titles
):
    # A report's title (or a title padded with commas to the header's width) above the
    # header: taken out of every file, as the hint the run gave before said; a file without
    # it is refused (its header differs).
    rows = [(i % 12 + 1, f"r{i % 5}", f"{i * 3.5:.1f}") for i in range(300)]
    folder = tmp_path / "in"
    folder.mkdir()
    body = "month,region,sales\n" + "".join(f"{m},{r},{s}\n" for m, r, s in rows)
    (folder / "a.csv").write_text("\n".join(titles) + "\n" + body)
    (folder / "b.csv").write_text("\n".join(["Another title", *titles[1:]]) + "\n" + body)
    manifest = convert([str(folder / "*.csv")], tmp_path / "out")
    assert [f.name for f in manifest.features] == ["month", "region", "sales"]
    assert "a title above the header, taken out of every file" in caplog.text
    got = sorted((r["month"], r["region"].decode(), r["sales"]) for r in read_all(tmp_path / "out"))
    assert manifest.counts.bad_records == 0
    assert got == sorted(2 * [(m, r, float(np.float32(s))) for m, r, s in rows])
    (folder / "b.csv").write_text(body)
    with pytest.raises(DataError, match=r"b\.csv: header .* differs"):
        convert([str(folder / "*.csv")], tmp_path / "refused")
    skip = len(titles)
    given = convert([str(folder / "a.csv")], tmp_path / "given", "--skip_header_lines", str(skip))
    assert given.counts.records_written == 300


def test_a_header_one_name_short_of_its_rows_gets_the_name_as_pandas_reads_it(tmp_path, caplog):
    # R's write.table with row names: the first field (quoted) has no name; a writer ending
    # each row with a delimiter: the last. Every row converts, its values as Python's csv
    # module reads them.
    named = tmp_path / "rownames.csv"
    named.write_text('"w","f"\n' + "".join(f'"{i}",{i / 4},{i * 2}\n' for i in range(1, 51)))
    trailing = tmp_path / "trailing.csv"
    trailing.write_text("x,t\n" + "".join(f"{i},t{i},\n" for i in range(50)))
    manifest = convert([str(named)], tmp_path / "named")
    assert [(f.name, f.dtype) for f in manifest.features] == [
        ("column_1", "int64"), ("w", "float32"), ("f", "int64")]  # fmt: skip
    assert manifest.counts.bad_records == 0
    got = sorted((r["column_1"], r["w"], r["f"]) for r in read_all(tmp_path / "named"))
    assert got == [(i, i / 4, i * 2) for i in range(1, 51)]
    assert "its header holds 2 names and its rows 3 fields (R's write.table with row names)" in (
        caplog.text
    )
    manifest = convert([str(trailing)], tmp_path / "trailing")
    assert [f.name for f in manifest.features] == ["x", "t", "column_3"]
    got = sorted((r["x"], r["t"], r["column_3"]) for r in read_all(tmp_path / "trailing"))
    assert got == [(i, f"t{i}".encode(), []) for i in range(50)]  # missing in every row
    assert manifest.feature("column_3").nullable and manifest.counts.bad_records == 0
    other = tmp_path / "second.csv"  # another header: refused, as for any header
    other.write_text('"w","g"\n"1",2,3\n')
    with pytest.raises(DataError, match=r"second\.csv: header b'\"w\",\"g\"' differs from"):
        convert([str(named), str(other)], tmp_path / "both")


def test_a_count_line_above_rows_without_a_header_is_skipped_in_a_file_alone(tmp_path):
    # scikit-learn's data files: `569,30,malignant,benign` above the rows, no header. One file:
    # skipped, as the flags the run named before would; among several files (one without the
    # line would lose a row unseen): refused, naming them.
    path = tmp_path / "wine.csv"
    rows = [[round(0.5 + i, 2), i * 3, i % 3, i, i + 1, i + 2] for i in range(40)]
    path.write_text("40,5,class_0,class_1\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    manifest = convert([str(path)], tmp_path / "out")
    assert [f.name for f in manifest.features] == [f"column_{k}" for k in range(1, 7)]
    assert manifest.counts.bad_records == 0
    got = sorted(tuple(r[f"column_{k}"] for k in range(1, 7)) for r in read_all(tmp_path / "out"))
    assert got == sorted((float(np.float32(r[0])), *r[1:]) for r in rows)
    other = tmp_path / "wine2.csv"
    other.write_text(path.read_text())
    with pytest.raises(DataError) as raised:
        convert([str(path), str(other)], tmp_path / "both")
    names = "column_1,column_2,column_3,column_4,column_5,column_6"
    assert str(raised.value) == (
        f"{path}: line 1 holds 4 field(s) but the rows after it hold 6 and have no header line "
        "(line 2 is data): is line 1 a count or a title? --skip_header_lines 1 --column_names "
        f"{names} reads the rows (name the columns as you like)"
    )


@pytest.mark.parametrize(
    ("head", "names"),
    [
        (b'"a","b"\n"1",2,3\n"2",4,5\n', ("column_1", "a", "b")),
        (b"a,b\n1,2,\n3,4,\n", ("a", "b", "column_3")),
        (b"column_1,a\n1,2,3\n", ("column_1_", "column_1", "a")),  # no name taken twice
        (b"a,b\n1,2,3\n4,5\n6,7\n", None),  # most rows agree with the header
        (b",a,b\n1,2,3,4\n", None),  # a blank name: the header is not R's
        (b"1,2\n1,2,3\n", None),  # no names: data
        (b"a,b,c\n1,2,3\n", None),
        (b"a,b\n", None),
    ],
)
def test_complete_header_adds_a_name_only_when_the_rows_agree_on_one_field_more(head, names):
    from beam_jobs.formats.csv.header_fit import complete_header

    found = complete_header("f.csv", head, ",", "utf-8")
    assert (found and found.names) == names
    if found is not None:
        assert found.line == head.split(b"\n")[0]


def test_rows_with_fewer_fields_read_their_missing_fields_as_missing_as_pandas_does(tmp_path):
    # A writer that leaves out trailing empty fields (statsmodels' arima212_forecast.csv):
    # every row in its place, the short ones counted by file and named in the summary.
    import pandas as pd

    from beam_jobs.inspection.report import short_rows_note

    path = tmp_path / "forecast.csv"
    lines = ["dates,cpi,predict,stderr"]
    for i in range(30_000):
        lines.append([f"d{i},{i}.5,{i}.25,0.5", f"d{i},{i}.5,", f"d{i},{i}.5", f"d{i}"][i % 4])
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--order", "input", "--target_shard_bytes", "256KiB")
    assert len(manifest.shards) > 1 and manifest.counts.bad_records == 0
    assert manifest.counts.short_rows == {str(path): 22_500}
    assert "warning: 22,500 rows held fewer fields than the header" in short_rows_note(manifest)[0]
    frame = pd.read_csv(path, dtype={"dates": str})
    got = _in_shard_order(out, manifest)
    assert [r.feature["dates"].bytes_list.value[0].decode() for r in got] == frame["dates"].tolist()
    for column in ("cpi", "predict", "stderr"):
        want = [[] if pd.isna(v) else [float(np.float32(v))] for v in frame[column]]
        assert [list(r.feature[column].float_list.value) for r in got] == want, column


def _in_shard_order(out, manifest):
    """Each record's features, shard after shard in the manifest's order."""
    import tensorflow as tf

    records = []
    for shard in manifest.shards:
        for data in tf.data.TFRecordDataset(str(out / shard.path)).as_numpy_iterator():
            records.append(tf.train.Example.FromString(data).features)
    return records


@pytest.mark.parametrize("rows", [40, 120_000])
def test_a_units_row_under_the_header_is_taken_out_alike_in_small_and_large_files(tmp_path, rows):
    # `id,mm,kg,C` under the header: small files made every number column text, large ones
    # dead-lettered it. By default it is taken out of the data and kept as the features'
    # units (manifest, schema.pbtxt: --schema reads the same); --units_row false reads it as
    # data.
    path = tmp_path / "parts.csv"
    data = [(f"P{i}", 100 + i % 800, round((i % 500) / 8, 3), i % 60 - 20) for i in range(rows)]
    path.write_text("part,length,weight,temp\nid,mm,kg,°C\n"
                    + "".join(f"{p},{n},{w},{t}\n" for p, n, w, t in data))  # fmt: skip
    manifest = convert([str(path)], tmp_path / "out")
    assert [(f.dtype, f.unit) for f in manifest.features] == [
        ("bytes", "id"), ("int64", "mm"), ("float32", "kg"), ("int64", "°C")
    ]  # fmt: skip
    assert (manifest.counts.records_read, manifest.counts.bad_records) == (rows, 0)
    got = sorted((r["part"].decode(), r["length"], r["weight"], r["temp"])
                 for r in read_all(tmp_path / "out"))  # fmt: skip
    assert got == sorted((p, n, float(np.float32(w)), t) for p, n, w, t in data)
    again = convert([str(path)], tmp_path / "again", "--schema",
                    str(tmp_path / "out" / "schema.pbtxt"))  # fmt: skip
    assert again.fingerprint == manifest.fingerprint and again.features == manifest.features
    kept = convert([str(path)], tmp_path / "kept", "--units_row", "false",
                   "--max_bad_fraction", "0.5")  # fmt: skip
    assert kept.counts.records_read == rows + 1
    assert all(f.unit is None for f in kept.features)


def test_a_units_row_with_units_in_a_few_columns_is_taken_out(tmp_path):
    # Only the voltage and current columns name a unit; the others are blank.
    path = tmp_path / "log.csv"
    data = [(i, i * 0.5, 3.3 + i % 3 / 10, i % 9) for i in range(5_000)]
    path.write_text("step,time,voltage,current\n,,V,A\n"
                    + "".join(f"{a},{b},{c},{d}\n" for a, b, c, d in data))  # fmt: skip
    manifest = convert([str(path)], tmp_path / "out")
    assert [(f.name, f.dtype, f.unit) for f in manifest.features] == [
        ("step", "int64", None), ("time", "float32", None),
        ("voltage", "float32", "V"), ("current", "int64", "A"),
    ]  # fmt: skip
    assert (manifest.counts.records_written, manifest.counts.bad_records) == (5_000, 0)


def test_a_units_row_must_be_in_every_file_sampled_or_not(tmp_path):
    # A file without the line would lose its first row: refused, naming it and the line.
    folder = tmp_path / "in"
    folder.mkdir()
    rows = "".join(f"p{i},{i},{i / 4},{i % 30}\n" for i in range(30))
    (folder / "a.csv").write_text("part,length,weight,temp\nid,mm,kg,C\n" + rows)
    (folder / "b.csv").write_text("part,length,weight,temp\n" + rows)
    with pytest.raises(DataError) as raised:
        convert([str(folder / "*.csv")], tmp_path / "out")
    assert str(raised.value) == (
        f"{folder / 'b.csv'}: line 2 b'p0,0,0.0,0' is not the units line of "
        f"{folder / 'a.csv'} (b'id,mm,kg,C'), whose line 2 holds the columns' units and is "
        "taken out of every file; convert such files apart, or read that line as data in all "
        "(--units_row false)"
    )
    many = tmp_path / "many"
    many.mkdir()
    for k in range(40):
        units = "" if k == 33 else "id,mm,kg,C\n"
        (many / f"f{k:03d}.csv").write_text("part,length,weight,temp\n" + units + rows)
    with pytest.raises(DataError, match=r"f033\.csv: line 2 b'p0,0,0\.0,0' is not the units"):
        convert([str(many / "*.csv")], tmp_path / "many_out")  # 8 of 40 are sampled
    spaced = tmp_path / "spaced.csv"  # names --column_names could not give: no matter now
    spaced.write_text('part,"length, mm",weight (kg),temp\nid,mm,kg,C\n' + rows)
    manifest = convert([str(spaced)], tmp_path / "spaced")
    assert [f.name for f in manifest.features] == ["part", "length, mm", "weight (kg)", "temp"]
    assert (manifest.counts.records_written, manifest.counts.bad_records) == (30, 0)


def test_a_first_row_of_markers_or_words_in_text_columns_is_no_units_row(tmp_path):
    # `?` (UCI's missing value) is no unit, and a row holding a number no units row: data,
    # kept (as text columns).
    rows = "".join(f"{i},{i + 60},{i + 150},n{i}\n" for i in range(50))
    for k, first in enumerate(("?,?,200,alice", "unknown,unknown,200,alice")):
        unknown = tmp_path / "uci.csv"
        unknown.write_text(f"age,bp,chol,name\n{first}\n{rows}")
        assert convert([str(unknown)], tmp_path / f"uci{k}").counts.records_written == 51
    path = tmp_path / "plain.csv"
    path.write_text("name,a,b\nx,NA,n/a\n" + "".join(f"w{i},{i},{i / 2}\n" for i in range(20)))
    manifest = convert([str(path)], tmp_path / "out")
    assert [f.dtype for f in manifest.features] == ["bytes", "int64", "float32"]
    words = tmp_path / "words.csv"  # text in the first row of columns that hold text anyway
    words.write_text("a,b,c\nx,y,1\n" + "".join(f"{i},w{i},{i}\n" for i in range(20)))
    manifest = convert([str(words)], tmp_path / "words")
    assert manifest.counts.records_written == 21


def test_a_completed_header_is_checked_in_every_file_and_a_bom_is_no_part_of_a_name(tmp_path):
    # Files the plan did not sample are read with the names completed from the first one:
    # each one's header line is checked as it is read (one swapped is refused, naming it).
    folder = tmp_path / "in"
    folder.mkdir()
    for k in range(20):
        header = '"Height","Weight"' if k == 13 else '"Weight","Height"'
        rows = "".join(f'"{i}",{k}.5,{k * 100 + i}.25\n' for i in range(1, 4))
        bom = "\ufeff" if k == 0 else ""
        (folder / f"f{k:03d}.csv").write_text(f"{bom}{header}\n{rows}")
    with pytest.raises(DataError, match=r"f013\.csv: header b'\"Height\",\"Weight\"' differs"):
        convert([str(folder / "*.csv")], tmp_path / "out")
    (folder / "f013.csv").unlink()
    manifest = convert([str(folder / "*.csv")], tmp_path / "out")
    assert [f.name for f in manifest.features] == ["column_1", "Weight", "Height"]
    assert manifest.counts.records_written == 57


def test_a_bom_read_as_text_of_another_encoding_is_the_same_in_every_check(tmp_path):
    path = tmp_path / "b.csv"  # with cp1252 the BOM is text of the first name, in both checks
    path.write_bytes(b'\xef\xbb\xbf"Weight","Feed"\n"1",26.5,"x"\n"2",27.5,"y"\n')
    manifest = convert([str(path)], tmp_path / "out", "--encoding", "cp1252")
    assert next(f.name for f in manifest.features) == "column_1"
    assert manifest.counts.records_written == 2


def test_short_rows_take_part_in_inferring_their_columns_types(tmp_path):
    # `dog` in a short row's first column makes that column text, as pandas reads it.
    import pandas as pd

    path = tmp_path / "short.csv"
    path.write_text("a,b,c\n1,cat\ndog,c\n3,b,c\n")
    manifest = convert([str(path)], tmp_path / "out", "--order", "input")
    assert manifest.counts.bad_records == 0
    assert [(f.name, f.dtype) for f in manifest.features] == [
        ("a", "bytes"), ("b", "bytes"), ("c", "bytes")
    ]  # fmt: skip
    rows = read_all(tmp_path / "out", label_key="")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert [r["a"].decode() for r in rows] == frame["a"].tolist() == ["1", "dog", "3"]
    assert [r["b"].decode() for r in rows] == frame["b"].tolist() == ["cat", "c", "b"]


_NOTES = (
    "\nSource: U.S. Census Bureau, table 7\nFootnotes: https://example.gov/notes, p. 2\n"
    "Retrieved 2024-05-01\n"
)


@pytest.mark.parametrize("gzipped", [False, True])
def test_notes_under_the_table_are_left_out_counted_and_named(tmp_path, gzipped):
    # A government export: 65 rows, then a blank line and three lines of notes (one holds a
    # comma: two fields of five, fewer than half). They were 3 dead letters and a refusal.
    import gzip

    rows = [(1960 + i, f"S{i % 5}", "" if i == 9 else 1000 + i * 7, f"{i / 3:.2f}", f"n{i}")
            for i in range(65)]  # fmt: skip
    text = "Year,State,Population,Rate,Name\n" + "".join(
        f"{y},{s},{p},{r},{n}\n" if y != 1970 else f"{y},{s},{p}\n" for y, s, p, r, n in rows
    )  # the row of 1970 is short (three fields of five): a row, not a note
    path = tmp_path / ("gov.csv.gz" if gzipped else "gov.csv")
    data = (text + _NOTES).encode()
    path.write_bytes(gzip.compress(data) if gzipped else data)
    manifest = convert([str(path)], tmp_path / "out")
    assert [(f.name, f.dtype) for f in manifest.features] == [
        ("Year", "int64"), ("State", "bytes"), ("Population", "int64"), ("Rate", "float32"),
        ("Name", "bytes"),
    ]  # fmt: skip
    assert manifest.counts.notes_lines == {str(path): 3}
    assert manifest.counts.short_rows == {str(path): 1}
    assert (manifest.counts.records_read, manifest.counts.bad_records) == (65, 0)
    got = sorted((r["Year"], r["State"], r["Population"], r["Rate"], r["Name"])
                 for r in read_all(tmp_path / "out"))  # fmt: skip
    want = [
        (y, s.encode(), [] if p == "" else [p], [] if y == 1970 else [float(np.float32(r))],
         [] if y == 1970 else [n.encode()])
        for y, s, p, r, n in rows
    ]  # fmt: skip
    assert got == want


def test_notes_end_a_large_file_read_in_ranges_and_only_at_its_end(tmp_path):
    # Notes are counted once, whichever range holds them; a short row of one field in the
    # middle of the file is a row.
    rows = [(i, f"w{i % 7}", i % 13) for i in range(300_000)]
    lines = [f"{a},{b},{c}\n" for a, b, c in rows]
    lines[1000] = "1000\n"  # one field of three, mid-file: a short row
    path = tmp_path / "big.csv"
    path.write_text("a,b,c\n" + "".join(lines) + "Source: a survey\n\nRetrieved 2024-05-01\n\n")
    manifest = convert([str(path)], tmp_path / "out", "--target_shard_bytes", "1MiB")
    assert manifest.counts.tasks > 2
    assert manifest.counts.notes_lines == {str(path): 2}
    assert manifest.counts.short_rows == {str(path): 1}
    assert (manifest.counts.records_read, manifest.counts.bad_records) == (300_000, 0)


def test_notes_start_and_the_rest_of_a_file():
    from beam_jobs.formats.csv.notes import fits_features, notes_start, rest_is_notes
    from tfdata_reader.manifest import FeatureSpec

    fits = fits_features([FeatureSpec("a", "int64"), FeatureSpec("b", "bytes"),
                          FeatureSpec("c", "float32")], tokens=True)  # fmt: skip
    table = b"a,b,c\n1,2,3\n4,5,6\n"
    notes = b"\nSource: x\nNotes: see x; y\r\n\n"
    assert notes_start(table + notes, ",", 3, fits) == len(table) + 1  # past the blank line
    assert notes_start(table, ",", 3, fits) == len(table)
    assert notes_start(table + b"x\n" + b'"quoted"\n', ",", 3, fits) == len(table) + 11
    assert notes_start(b"Source: x\n", ",", 3, fits) == 10  # no row above: no notes
    # A line whose values fit their columns is a (short) row: 7 under a, '.' a marker.
    assert notes_start(table + b"7\n", ",", 3, fits) == len(table) + 2
    assert notes_start(table + b".\n", ",", 3, fits) == len(table) + 2
    data = io.BytesIO(table + notes)
    assert rest_is_notes(data, len(table) + 3, ",", 3, fits)  # a range cut inside the notes
    assert rest_is_notes(data, len(table + notes), ",", 3, fits)
    assert not rest_is_notes(data, 6, ",", 3, fits)


@pytest.mark.parametrize("gzipped", [False, True])
def test_a_large_file_of_cr_line_ends_reads_as_its_lf_twin(tmp_path, gzipped):
    # Old Mac line ends (CR alone) past the sample size: "no complete header line" before.
    # The same records, bad rows on the same lines, the same fingerprint as the LF file.
    import gzip

    lines = ["id,name,score"] + [f"{i},n{i},{i * 0.5}" for i in range(150_000)]
    lines[70_001] = "70000,oops,not a number"
    lf, cr = tmp_path / "lf", tmp_path / "cr"
    lf.mkdir()
    cr.mkdir()
    name = "data.csv.gz" if gzipped else "data.csv"
    for folder, end in ((lf, "\n"), (cr, "\r")):
        data = (end.join(lines) + end).encode()
        (folder / name).write_bytes(gzip.compress(data) if gzipped else data)
    flags = ("--target_shard_bytes", "1MiB", "--max_bad_fraction", "0.01")
    want = convert([str(lf / name)], tmp_path / "lf_out", *flags)
    got = convert([str(cr / name)], tmp_path / "cr_out", *flags)
    assert (got.counts.records_read, got.counts.bad_records) == (150_000, 1)
    assert got.fingerprint == want.fingerprint
    dead = [json.loads(line) for f in sorted((tmp_path / "cr_out" / "dead_letter").iterdir())
            for line in f.read_text().splitlines()]  # fmt: skip
    assert [d["line"] for d in dead] == [70_002]


def test_a_units_line_and_a_second_line_of_names_are_both_taken_out(tmp_path):
    # SAM's module libraries: `Units,V,W` then `[0],snl_voltage,snl_power` under the header.
    path = tmp_path / "sam.csv"
    rows = [(f"m{i}", 20 + i % 9, round(100.5 + i, 1)) for i in range(500)]
    path.write_text("Name,Vmp,Pmp\nUnits,V,W\n[0],snl_vmp,snl_pmp\n"
                    + "".join(f"{n},{v},{p}\n" for n, v, p in rows))  # fmt: skip
    manifest = convert([str(path)], tmp_path / "out")
    assert [(f.name, f.dtype, f.unit) for f in manifest.features] == [
        ("Name", "bytes", "Units / [0]"), ("Vmp", "int64", "V / snl_vmp"),
        ("Pmp", "float32", "W / snl_pmp"),
    ]  # fmt: skip
    assert (manifest.counts.records_written, manifest.counts.bad_records) == (500, 0)
    got = sorted((r["Name"].decode(), r["Vmp"], r["Pmp"]) for r in read_all(tmp_path / "out"))
    assert got == sorted((n, v, float(np.float32(p))) for n, v, p in rows)


@pytest.mark.parametrize(
    "text",
    [
        "sample,lead_ppm,zinc_ppm\nS1,<LOD,<LOD\nS2,5,3\nS3,7,2\nS4,9,4\nS5,<LOD,6\n",
        "name,age,score\nAlice,unknown,\nBob,30,5\nCarol,40,6\nDan,50,7\n",
        "name,,,\nalice,smith,NY,teacher\nbob,jones,LA,nurse\ncarol,wu,SF,pilot\ndave,li,NY,cook\n",
        'id,name,v\n1,"Smith, J",1.5\n2,x,2.5\n3,y,3.5\n4,z,4.5\n',
    ],
)
def test_a_first_row_of_data_is_never_taken_for_units_or_a_title(tmp_path, text):
    # A unit that is also a value of its column below (`<LOD`), one word among numbers beside
    # text (`Alice,unknown,`), a padded first line over rows of words: rows, every one.
    path = tmp_path / "in.csv"
    path.write_text(text)
    manifest = convert([str(path)], tmp_path / "out", "--max_bad_fraction", "0.5")
    rows = list(csv.reader(io.StringIO(text)))[1:]
    assert manifest.counts.records_read == len(rows)
    assert all(f.unit is None for f in manifest.features)


def test_letters_of_any_script_are_no_one_token_marker_and_percent_is_a_unit(tmp_path):
    # RE2's \w is ASCII: `É` was a "mark" and so a missing value. `%` is a unit.
    path = tmp_path / "n.csv"
    path.write_text("id,n\n" + "".join(f"{i},{i + 4}\n" for i in range(1, 10)) + "10,É\n")
    manifest = convert([str(path)], tmp_path / "out")
    assert manifest.feature("n").dtype == "bytes" and not manifest.counts.markers_seen
    share = tmp_path / "share.csv"
    share.write_text("country,share,growth\n,%,%\nA,10,1.5\nB,20,2.5\nC,30,3.5\nD,40,4.5\n")
    manifest = convert([str(share)], tmp_path / "share_out")
    assert [(f.dtype, f.unit) for f in manifest.features] == [
        ("bytes", None), ("int64", "%"), ("float32", "%")
    ]  # fmt: skip
    assert (manifest.counts.records_written, manifest.counts.null_markers) == (4, {})


def test_a_crlf_file_among_cr_only_ones_keeps_its_line_breaks(tmp_path):
    # The first file is CR-only: each file's own head decides whether its CRs are line ends.
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_bytes(
        b"id,name,v\r" + b"".join(f"{i},n{i},{i}.5\r".encode() for i in range(20))
    )
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    writer.writerows([["id", "name", "v"], [100, "multi\r\nline", 1.5], [101, "m", 2.5]])
    (folder / "b.csv").write_bytes(buf.getvalue().encode())
    manifest = convert([str(folder / "*.csv")], tmp_path / "out")
    assert manifest.counts.records_written == 22
    names = {r["id"]: r["name"] for r in read_all(tmp_path / "out")}
    assert names[100] == b"multi\r\nline" and names[7] == b"n7"


def test_a_later_file_may_quote_its_units_line_otherwise(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    rows = "".join(f"p{i},{i},{i / 4}\n" for i in range(30))
    (folder / "a.csv").write_text("part,length,weight\nid,mm,kg\n" + rows)
    (folder / "b.csv").write_text('part,length,weight\nid,mm,"kg"\n' + rows)
    manifest = convert([str(folder / "*.csv")], tmp_path / "out")
    assert (manifest.counts.records_written, manifest.counts.bad_records) == (60, 0)


def test_a_title_over_a_small_file_that_ends_in_a_short_line_is_still_a_title(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("Sensor log 2024\npart,length,weight\np1,10,1.5\np2,20,2.5\np3,30,3.5\n"
                    "p4,40,4.5\nSource: lab\n")  # fmt: skip
    manifest = convert([str(path)], tmp_path / "out")
    assert [f.name for f in manifest.features] == ["part", "length", "weight"]
    # `Source: lab` could be a row of the text column `part`: a short row, not a note.
    assert (manifest.counts.records_read, manifest.counts.short_rows) == (5, {str(path): 1})


def test_a_large_cr_only_file_after_an_lf_first_file_names_its_line_ends(tmp_path):
    # The first file (by name) decides whether files are looked at for CR line ends: a large
    # CR-only file after an LF one is refused, and converting it apart, as the message says,
    # reads it exactly.
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_text("id,v\n" + "".join(f"{i},{i}.5\n" for i in range(50)))
    rows = [(i, f"{i}.5") for i in range(100, 150_000)]
    (folder / "b.csv").write_bytes(b"id,v\r" + "".join(f"{i},{v}\r" for i, v in rows).encode())
    with pytest.raises(DataError) as raised:
        convert([str(folder / "*.csv")], tmp_path / "both")
    assert str(raised.value) == (
        f"{folder / 'b.csv'}: its lines end in CR alone (old Mac line ends) and the "
        "conversion's first file's (by name) do not: convert the files with CR line ends apart "
        "(a conversion whose first file ends its lines so reads every such file)"
    )
    manifest = convert([str(folder / "b.csv")], tmp_path / "apart")
    assert (manifest.counts.records_written, manifest.counts.bad_records) == (len(rows), 0)
    got = sorted((r["id"], r["v"]) for r in read_all(tmp_path / "apart"))
    assert got == [(i, float(np.float32(v))) for i, v in rows]
