"""TFDS loads a converted folder: `tfds.builder_from_directory(OUT).as_dataset(split=...)`
reads every record with the right values, with and without splits, and after a rerun."""

from __future__ import annotations

import json

import pytest
from support.datasets import convert, expected_rows

tfds = pytest.importorskip("tensorflow_datasets")


def _tfds_rows(out, split: str) -> list[dict]:
    builder = tfds.builder_from_directory(str(out))
    rows = []
    for example in builder.as_dataset(split=split, shuffle_files=False):
        rows.append({k: v.numpy() for k, v in example.items()})
    return rows


def _value(row: dict, name: str):
    value = row[name]
    if getattr(value, "ndim", 0):  # (None,): a value that may be missing
        value = value[0] if len(value) else None
    return value.decode() if isinstance(value, bytes) else value


def _check(rows: list[dict], expected: dict[int, dict]) -> None:
    assert len(rows) == len(expected)
    assert sorted(_value(r, "id") for r in rows) == sorted(expected)  # each record once
    for row in rows:
        want = expected[_value(row, "id")]
        assert _value(row, "city") == (want["city"] or None)
        assert _value(row, "note") == (want["note"] or None)
        score = _value(row, "score")
        assert (score is None) == (want["score"] == "")
        if score is not None:
            assert score == pytest.approx(float(want["score"]), rel=1e-6)  # float32
        assert _value(row, "label") == int(want["label"])


def test_tfds_reads_every_record(sample_csv, tmp_path):
    out = tmp_path / "out"
    manifest = convert(sample_csv, out, "--num_shards=3")
    expected = {int(r["id"]): r for r in expected_rows(sample_csv)}
    builder = tfds.builder_from_directory(str(out))
    assert builder.info.splits["train"].shard_lengths == [s.records for s in manifest.shards]
    _check(_tfds_rows(out, "train"), expected)
    info = json.loads((out / "dataset_info.json").read_text())
    assert info["description"].endswith(f"fingerprint {manifest.fingerprint}.")


def test_tfds_reads_each_split_and_a_later_generation(sample_csv, tmp_path):
    out = tmp_path / "out"
    convert(sample_csv, out, "--num_shards=1")
    manifest = convert(sample_csv, out, "--splits=train=2,eval=1", "--num_shards=2")
    assert manifest.generation == 1  # shard names hold .g1: the template follows them
    expected = {int(r["id"]): r for r in expected_rows(sample_csv)}
    seen = 0
    for split, summary in manifest.split_summary().items():
        rows = _tfds_rows(out, split)
        assert len(rows) == summary["records"]
        _check(rows, {_value(r, "id"): expected[_value(r, "id")] for r in rows})
        seen += len(rows)
    assert seen == len(expected)


def test_gzip_datasets_get_no_tfds_files(sample_csv, tmp_path):
    out = tmp_path / "out"
    convert(sample_csv, out, "--num_shards=1")
    assert (out / "dataset_info.json").exists()
    convert(sample_csv, out, "--num_shards=1", "--compression=gzip")
    # TFDS reads uncompressed TFRecord files only; the plain run's files would describe
    # shards that are gone.
    assert not (out / "dataset_info.json").exists() and not (out / "features.json").exists()


def test_an_empty_split_is_left_out(tmp_path):
    raw = tmp_path / "one.csv"
    raw.write_text("id,city\n7,Oslo\n")
    out = tmp_path / "out"
    manifest = convert([str(raw)], out, "--splits=train=1,eval=1")
    summary = manifest.split_summary()
    (full,) = [name for name, s in summary.items() if s["records"] == 1]
    (empty,) = [name for name, s in summary.items() if s["records"] == 0]
    builder = tfds.builder_from_directory(str(out))
    assert list(builder.info.splits) == [full]  # TFDS fails on reading a split of empty shards
    assert [_value(r, "id") for r in _tfds_rows(out, full)] == [7]
    with pytest.raises(ValueError, match="Unknown split"):
        builder.as_dataset(split=empty)
