"""--columns, --rename and --label: the output keeps the chosen columns in order under their new
names, and a label recorded in the manifest is what the reader returns, a text label as its id
in the manifest's vocabulary."""

from __future__ import annotations

import csv
import json

import pytest
from support.datasets import convert, read_all

from beam_jobs.core.errors import UsageError
from tfdata_reader import make_dataset

SPECIES = ["setosa", "versicolor", "virginica"]


@pytest.fixture()
def iris(tmp_path):
    path = tmp_path / "iris.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "sepal_length", "petal_length", "species", "note"])
        for i in range(600):
            writer.writerow([i, 4 + i % 40 / 10, 1 + i % 60 / 10, SPECIES[i % 7 % 3], f"n{i}"])
    with open(path, newline="") as f:
        return path, list(csv.DictReader(f))


def test_columns_and_renames_shape_the_output(iris, tmp_path):
    path, expected = iris
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--columns=species,id,petal_length",
                       "--rename=petal_length=petal,species=kind", "--num_shards=2")  # fmt: skip
    assert [f.name for f in manifest.features] == ["kind", "id", "petal"]
    rows = sorted(read_all(out), key=lambda r: r["id"])
    assert [(r["id"], r["kind"].decode()) for r in rows] == [
        (int(e["id"]), e["species"]) for e in expected
    ]
    assert set(rows[0]) == {"kind", "id", "petal"}


@pytest.mark.parametrize("form", [["--label", "kind"], ["--label=kind"]])
def test_a_text_label_comes_back_as_its_id_in_the_vocabulary(iris, tmp_path, form):
    from beam_jobs.job.launcher import run

    path, expected = iris
    out = tmp_path / "out"
    argv = ["--input", str(path), "--output", str(out), "--rename=species=kind", *form,
            "--direct_running_mode=in_memory", "--direct_num_workers=1"]  # fmt: skip
    manifest = run(argv).manifest
    assert (manifest.label, manifest.label_vocabulary) == ("kind", SPECIES)
    saved = json.loads((out / "manifest.json").read_text())
    assert (saved["label"], saved["label_vocabulary"]) == ("kind", SPECIES)
    got = {}
    for features, label in make_dataset(str(out), 64, shuffle=False):
        assert "kind" not in features
        got.update(zip(features["id"].numpy().tolist(), label.numpy().tolist(), strict=True))
    assert got == {int(e["id"]): SPECIES.index(e["species"]) for e in expected}
    # label_key="" asks for plain dicts, the label among the features
    [batch] = list(make_dataset(str(out), 1000, shuffle=False, label_key=""))
    assert sorted(set(batch["kind"].numpy().tolist())) == [s.encode() for s in SPECIES]


def test_an_integer_label_is_returned_as_it_is(iris, tmp_path):
    path, expected = iris
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--label=id", "--columns=id,petal_length")
    assert (manifest.label, manifest.label_vocabulary) == ("id", [])
    labels = [i for _, label in make_dataset(str(out), 64, shuffle=False) for i in label.numpy()]
    assert sorted(labels) == [int(e["id"]) for e in expected]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--columns=id,nope"], r"name columns the input does not have: \[.nope.\]"),
        (["--rename=id=note"], "--rename gives two output columns the name 'note'"),
        (["--rename=id"], "--rename takes old=new pairs"),
        (["--columns=id,id"], "--columns must list distinct column names"),
        (["--label=species", "--rename=species=kind"], "--label 'species' is not a feature"),
        (["--label=sepal_length"], "must hold one integer or text value per record"),
    ],
)  # fmt: skip
def test_bad_column_choices_are_usage_errors(iris, tmp_path, flags, message):
    path, _ = iris
    with pytest.raises(UsageError, match=message):
        convert([str(path)], tmp_path / "out", *flags)


def test_beams_job_labels_still_pass_through(iris, tmp_path):
    from beam_jobs.job.argv import split_argv

    ours, beams = split_argv(["--label", "team=ml", "--label", "y", '--labels={"a": "b"}'])
    assert (ours, beams) == ({"label_column": "y"}, ["--label", "team=ml", '--labels={"a": "b"}'])


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_a_bad_value_in_a_column_left_out_is_no_bad_row(tmp_path, fmt):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"id": i, "keep": f"k{i}", "drop": i} for i in range(3000)]
    rows[1500]["drop"] = "oops"  # past the sampled head: the column stays int64
    path = tmp_path / f"in.{fmt}"
    if fmt == "csv":
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, ["id", "keep", "drop"])
            writer.writeheader()
            writer.writerows(rows)
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pq.write_table(pa.table({"id": [0], "keep": ["k0"], "drop": [0]}), tmp_path / "a.parquet")
        table = pa.table({"id": [1], "keep": ["k1"], "drop": ["oops"]})
        pq.write_table(table, path)
        rows = [{"id": 0, "keep": "k0"}, {"id": 1, "keep": "k1"}]
    pattern = str(tmp_path / "*.parquet") if fmt == "parquet" else str(path)
    flags = ["--columns", "id,keep", "--sample_bytes=4096", "--num_shards=1"]
    if fmt == "parquet":
        flags.append("--max_bad_fraction=0.9")
    manifest = convert([pattern], tmp_path / "out", *flags)
    assert [f.name for f in manifest.features] == ["id", "keep"]
    assert manifest.counts.bad_records == 0
    got = sorted((r["id"], r["keep"].decode()) for r in read_all(tmp_path / "out"))
    assert got == [(r["id"], r["keep"]) for r in rows]


def test_a_number_label_with_missing_values_comes_dense(tmp_path):
    path = tmp_path / "num.csv"
    path.write_text("id,y\n" + "".join(f"{i},{'' if i % 3 == 0 else 7}\n" for i in range(30)))
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--label=y")
    assert manifest.feature("y").nullable
    [(features, label)] = list(make_dataset(str(out), 30, shuffle=False))
    assert label.shape == (30,)  # one per record, not ragged
    got = dict(zip(features["id"].numpy().ravel().tolist(), label.numpy().tolist(), strict=True))
    assert got == {i: -1 if i % 3 == 0 else 7 for i in range(30)}


def test_records_without_a_label_are_counted_in_a_warning(tmp_path, capsys):
    from beam_jobs.cli import main

    path = tmp_path / "lab.csv"
    path.write_text("x,y\n1,1\n2,-1\n3,\n4,1\n")
    assert (
        main(["convert", "--input", str(path), "--output", str(tmp_path / "o"), "--label=y"]) == 0
    )
    assert (
        "warning: 1 record without a label 'y': make_dataset gives them -1 (NaN for floats), "
        "like a real label of that value; filter them out or fill them upstream"
    ) in capsys.readouterr().out
