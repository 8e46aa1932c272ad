"""Listing inputs: folders with or without a trailing slash, each file once, never the output."""

from __future__ import annotations

import os

import pytest
from support.datasets import convert, expected_rows, read_all

from beam_jobs.core.errors import UsageError
from beam_jobs.plan.inputs import list_inputs


@pytest.fixture()
def tree(tmp_path):
    (tmp_path / "raw" / "2026" / "12").mkdir(parents=True)
    for i, rel in enumerate(["a.csv", "2026/b.csv", "2026/12/c.csv", ".hidden.csv"]):
        (tmp_path / "raw" / rel).write_text(f"id,v\n{i},x{i}\n")
    return tmp_path


def _names(files) -> list[str]:
    return [os.path.relpath(f.path) for f in files]


@pytest.mark.parametrize("pattern", ["raw", "raw/", "./raw//", "raw/**"])
def test_a_folder_means_every_file_below_it(tree, monkeypatch, pattern):
    monkeypatch.chdir(tree)
    assert _names(list_inputs([pattern])) == ["raw/2026/12/c.csv", "raw/2026/b.csv", "raw/a.csv"]


def test_each_file_is_listed_once_by_its_full_path(tree, monkeypatch):
    monkeypatch.chdir(tree)
    files = list_inputs(["raw/a.csv", "./raw/a.csv", str(tree / "raw" / "a.csv"), "raw/*.csv"])
    assert [f.path for f in files] == [str(tree / "raw" / "a.csv")]
    os.symlink(tree / "raw" / "a.csv", tree / "link.csv")
    assert len(list_inputs(["raw/a.csv", "link.csv"])) == 1
    os.link(tree / "raw" / "a.csv", tree / "hard.csv")  # one file, two names
    assert _names(list_inputs(["raw/a.csv", "hard.csv"])) == ["raw/a.csv"]
    assert _names(list_inputs(["hard.csv", "raw/*.csv"])) == ["hard.csv"]


def test_the_output_folder_is_never_an_input(tree):
    out = tree / "raw" / "out"
    out.mkdir()
    (out / "data-00000-of-00001.tfrecord").write_text("x")
    (out / "manifest.json").write_text("{}")
    files = list_inputs([str(tree / "raw")], exclude=str(out))
    assert len(files) == 3 and not any("/out/" in f.path for f in files)
    with pytest.raises(UsageError, match="matches only files under --output"):
        list_inputs([str(out / "*")], exclude=str(out))


def test_rerunning_with_the_output_inside_the_input_folder_reads_the_raw_rows_once(tree):
    raw = tree / "raw"
    rows = expected_rows([str(p) for p in sorted(raw.rglob("[!.]*.csv"))])
    for _ in range(2):  # the second run must not read the first run's shards or manifest
        manifest = convert([f"{raw}/"], raw / "out", "--overwrite", "--format=csv")
        assert manifest.total_records == len(rows) == 3
        assert sorted(r["id"] for r in read_all(raw / "out")) == [0, 1, 2]
    assert [f["path"] for f in manifest.inputs["files"]] == [
        str(raw / "2026" / "12" / "c.csv"),
        str(raw / "2026" / "b.csv"),
        str(raw / "a.csv"),
    ]


def test_the_same_file_twice_is_converted_once(tree):
    a = tree / "raw" / "a.csv"
    manifest = convert([str(a), f"{tree}/raw/./a.csv"], tree / "out")
    assert manifest.total_records == 1


@pytest.mark.parametrize(
    "pattern",
    ["raw/**/*.csv", "raw/**/12/*.csv", "raw/2026/**/*.csv", "**/*.csv", "raw/**/**/*.csv"],
)
def test_globstar_matches_what_pythons_glob_matches(tree, monkeypatch, pattern):
    import glob

    monkeypatch.chdir(tree)
    found = glob.glob(pattern, recursive=True)  # with `**/**`, some paths more than once
    expected = sorted({p for p in found if os.path.isfile(p)})
    assert _names(list_inputs([pattern])) == expected


def test_globstar_matches_no_folder_too(tree, monkeypatch):
    monkeypatch.chdir(tree)
    found = ["raw/2026/12/c.csv", "raw/2026/b.csv", "raw/a.csv"]
    assert _names(list_inputs(["raw/**/*.csv"])) == found


def test_a_path_that_exists_as_typed_is_that_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("data[1].csv", "data1.csv", "report?.csv", "reportX.csv"):
        (tmp_path / name).write_text("id\n1\n")
    assert _names(list_inputs(["data[1].csv"])) == ["data[1].csv"]
    assert _names(list_inputs(["report?.csv"])) == ["report?.csv"]
    assert _names(list_inputs(["data[1].csv", "data1.csv"])) == ["data1.csv", "data[1].csv"]


def test_a_listed_file_carries_its_stamp(tree):
    [found] = list_inputs([str(tree / "raw" / "a.csv")])
    stat = os.stat(found.path)
    assert (found.stamp.size, found.stamp.modified) == (stat.st_size, stat.st_mtime)
