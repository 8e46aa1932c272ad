"""End-to-end conversions on the real pipeline (local FnApiRunner) with small real files."""

from __future__ import annotations

import csv
import gzip
import json
import logging
import math
import os
import pathlib
import shutil

import google_crc32c
import numpy as np
import pytest
import tensorflow as tf
from support.datasets import convert, expected_rows

from beam_jobs.codec.framing import count_records
from beam_jobs.config.convert import ConvertConfig
from beam_jobs.core.errors import DataError, UsageError
from beam_jobs.formats.csv.markers import column_markers
from beam_jobs.inspection.verify import verify
from beam_jobs.plan.conversion import make_plan
from beam_jobs.publish.companions import COMPANION_NAMES
from tfdata_reader import make_dataset
from tfdata_reader.dataset import parse_spec
from tfdata_reader.manifest import FeatureSpec

TARGET = 64 * 1024

# A CSV's number columns read pandas' missing-value markers as missing (`markers`).
INTS, FLOATS = list(column_markers("int64", None)), list(column_markers("float32", None))


def _expected_value(text: str, dtype: str):
    if text == "":
        return []
    if dtype == "int64":
        return [int(text)]
    if dtype == "float32":
        return [np.float32(float(text))]
    return [text.encode("utf-8")]


def _records_in_shard_order(out: pathlib.Path, manifest) -> list[dict[str, list]]:
    """Every record, shard 0 first, each as {feature: list of values}."""
    compression = "GZIP" if manifest.compression == "gzip" else ""
    spec = {
        f.name: tf.io.RaggedFeature(
            {"int64": tf.int64, "float32": tf.float32, "bytes": tf.string}[f.dtype]
        )
        for f in manifest.features
    }
    rows = []
    for shard in manifest.shards:
        records = tf.data.TFRecordDataset(str(out / shard.path), compression_type=compression)
        for batch in records.batch(100_000):
            parsed = {k: v.to_list() for k, v in tf.io.parse_example(batch, spec).items()}
            rows.extend(
                dict(zip(parsed, values, strict=True))
                for values in zip(*parsed.values(), strict=True)
            )
    return rows


def _assert_same_values(rows, oracle, manifest):
    """Every record holds its input row's values: row by row in input order, or, for a
    shuffled dataset, as many of each row (and in a different order than the input's)."""
    dtypes = {f.name: f.dtype for f in manifest.features}
    wanted = [{k: _expected_value(v, dtypes[k]) for k, v in want.items()} for want in oracle]
    assert len(rows) == len(wanted)
    if not manifest.order.shuffled:
        for got, want in zip(rows, wanted, strict=True):
            assert got == want
        return
    assert sorted(map(_canonical, rows)) == sorted(map(_canonical, wanted))


def _canonical(row: dict) -> str:
    """A record's values as one text, features sorted, float32 values as Python floats."""
    return repr(
        sorted(
            (k, [float(v) if isinstance(v, np.floating) else v for v in vs])
            for k, vs in row.items()
        )
    )


def test_every_value_round_trips_in_input_order(sample_csv, tmp_path):
    out = tmp_path / "out"
    manifest = convert(sample_csv, out, f"--target_shard_bytes={TARGET}", "--order=input")
    assert manifest.order.kind == "input"
    _assert_same_values(_records_in_shard_order(out, manifest), expected_rows(sample_csv), manifest)


def test_every_value_round_trips_shuffled_by_default(converted, sample_csv):
    out, manifest = converted
    assert (manifest.order.kind, manifest.order.seed) == ("shuffled", 0)
    rows = _records_in_shard_order(out, manifest)
    _assert_same_values(rows, expected_rows(sample_csv), manifest)
    ids = [r["id"][0] for r in rows]
    assert abs(np.corrcoef(ids, np.arange(len(ids)))[0, 1]) < 0.05  # no trace of input order


def test_the_parallel_quote_count_stage_gives_the_same_records(sample_csv, tmp_path, monkeypatch):
    # Large or remote inputs have their quotes counted by a Beam stage instead of the launcher.
    import beam_jobs.transforms.convert_to_shards

    monkeypatch.setattr(beam_jobs.transforms.convert_to_shards, "LAUNCHER_COUNT_BYTES", -1)
    manifest = convert(sample_csv, tmp_path / "out", f"--target_shard_bytes={TARGET}")
    rows = _records_in_shard_order(tmp_path / "out", manifest)
    _assert_same_values(rows, expected_rows(sample_csv), manifest)


def test_shards_are_size_targeted_and_balanced(converted):
    out, manifest = converted
    sizes = [s.bytes for s in manifest.shards]
    assert len(sizes) >= 5
    assert max(sizes) <= 1.1 * TARGET
    assert max(sizes) / min(sizes) <= 1.5
    assert sizes == [os.path.getsize(out / s.path) for s in manifest.shards]


def test_manifest_describes_the_output(converted, sample_csv):
    out, manifest = converted
    n = len(manifest.shards)
    assert [s.path for s in manifest.shards] == [
        f"data-{i:05d}-of-{n:05d}.tfrecord" for i in range(n)
    ]
    for shard in manifest.shards:
        data = (out / shard.path).read_bytes()
        assert shard.crc32c == f"{google_crc32c.value(data):08x}"
    assert manifest.features == [
        FeatureSpec("id", "int64", [], False, null_values=INTS),
        FeatureSpec("label", "int64", [], False, null_values=INTS),
        FeatureSpec("x0", "float32", [], False, null_values=FLOATS),
        FeatureSpec("x1", "float32", [], False, null_values=FLOATS),
        FeatureSpec("x2", "float32", [], False, null_values=FLOATS),
        FeatureSpec("x3", "float32", [], False, null_values=FLOATS),
        FeatureSpec("city", "bytes", [], False),
        FeatureSpec("note", "bytes", [], True),
        FeatureSpec("score", "float32", [], True, null_values=FLOATS),
    ]
    assert manifest.total_records == 12_000
    assert manifest.compression == "none"
    assert manifest.counts.records_read == 12_000
    assert manifest.counts.records_written == 12_000
    assert manifest.counts.bad_records == 0
    assert manifest.counts.missing_values["note"] == 1200  # every 10th row
    assert manifest.counts.missing_values["score"] == 1714  # rows with i % 7 == 3
    assert manifest.inputs["files"] == [
        {"path": p, "bytes": os.path.getsize(p), "modified": os.path.getmtime(p)}
        for p in sorted(sample_csv)
    ]
    assert manifest.inputs["total_bytes"] == sum(os.path.getsize(p) for p in sample_csv)
    assert manifest.options["target_shard_bytes"] == TARGET
    assert manifest.tool == {"name": "tfrecord-etl", "version": "0.1.0"}
    assert manifest.format_version == 1
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk["total_records"] == 12_000
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [s.path for s in manifest.shards] + ["manifest.json", *COMPANION_NAMES]
    )


def test_verify_passes_on_a_fresh_conversion(converted):
    out, _ = converted
    _, problems = verify(str(out))
    assert problems == []


def test_gzip_forced_shard_count(sample_csv, tmp_path):
    out = tmp_path / "gz"
    manifest = convert(sample_csv, out, "--compression=gzip", "--num_shards=3")
    assert [s.path for s in manifest.shards] == [
        f"data-0000{i}-of-00003.tfrecord.gz" for i in range(3)
    ]
    sizes = [s.bytes for s in manifest.shards]
    assert max(sizes) / min(sizes) <= 1.5
    assert manifest.compression == "gzip"
    _assert_same_values(_records_in_shard_order(out, manifest), expected_rows(sample_csv), manifest)
    assert verify(str(out))[1] == []


def test_gzip_shards_hit_the_target_on_disk(sample_csv, tmp_path):
    manifest = convert(
        sample_csv, tmp_path / "gz", "--compression=gzip", "--target_shard_bytes=32KiB"
    )
    sizes = [s.bytes for s in manifest.shards]
    assert len(sizes) >= 3
    assert max(sizes) <= 1.1 * 32 * 1024
    assert max(sizes) / min(sizes) <= 1.5


def test_cuts_inside_quoted_newlines_lose_nothing(tmp_path):
    path = tmp_path / "quoted.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "text"])
        for i in range(3000):
            text = f'row {i}\n"quoted", with\nnewlines\n\n' * (1 + i % 3) if i % 2 else f"plain {i}"
            w.writerow([i, text])
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--num_shards=37")
    assert len(manifest.shards) == 37
    _assert_same_values(
        _records_in_shard_order(out, manifest), expected_rows([str(path)]), manifest
    )


def test_stray_quotes_in_unquoted_fields_lose_and_split_nothing(tmp_path):
    """Real exports hold quotes inside unquoted fields (`TV 55" screen`): a literal character
    for Python's csv module and pyarrow alike, so it must not shift where records start."""
    path = tmp_path / "stray.csv"
    products = ['TV 55" screen', 'pipe 3/4" x 2"', "O'Neil", 'say "hi"', '12"']
    lines = ["id,name,note"]
    for i in range(4000):
        name = products[i % len(products)] if i % 3 else f"item {i}"
        note = '"line one\nline ""two"""' if i % 7 == 0 else f"n{i}"
        lines.append(f"{i},{name},{note}")
    path.write_text("\n".join(lines) + "\n")
    rows = expected_rows([str(path)])
    assert len(rows) == 4000 and rows[5]["name"] == 'TV 55" screen'
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--num_shards=23")
    assert manifest.counts.records_read == manifest.total_records == 4000
    assert manifest.counts.bad_records == 0
    _assert_same_values(_records_in_shard_order(out, manifest), rows, manifest)


def test_rerun_with_another_shard_count_replaces_the_old_shards(sample_csv, tmp_path):
    out = tmp_path / "out"
    convert(sample_csv, out, "--num_shards=5")
    manifest = convert(sample_csv, out, "--num_shards=2")
    # The second conversion into the folder is generation 1: new names, the old ones removed.
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["data-00000-of-00002.g1.tfrecord", "data-00001-of-00002.g1.tfrecord", "manifest.json",
         *COMPANION_NAMES]
    )  # fmt: skip
    assert manifest.generation == 1 and manifest.total_records == 12_000
    assert verify(str(out))[1] == []


def test_schema_overrides_inferred_types(sample_csv, tmp_path):
    schema = tmp_path / "schema.json"
    schema.write_text(
        json.dumps(
            {"features": [{"name": "id", "dtype": "bytes"}, {"name": "label", "dtype": "float32"}]}
        )
    )
    out = tmp_path / "out"
    manifest = convert(sample_csv[:1], out, f"--schema={schema}", "--num_shards=1", "--order=input")
    assert manifest.feature("id") == FeatureSpec("id", "bytes", [], False)
    assert manifest.feature("label") == FeatureSpec(
        "label", "float32", [], False, null_values=FLOATS
    )
    batch = next(iter(make_dataset(str(out), 3, shuffle=False)))
    assert batch["id"].numpy().tolist() == [b"0", b"1", b"2"]
    assert batch["label"].dtype == tf.float32


def test_a_value_that_contradicts_the_sampled_type_goes_to_the_dead_letter(tmp_path):
    path = tmp_path / "late.csv"
    path.write_text("n,s\n" + "".join(f"{i},x\n" for i in range(2000)) + "oops,y\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--sample_bytes=4096")
    assert manifest.feature("n").dtype == "int64"
    assert (manifest.total_records, manifest.counts.bad_records) == (2000, 1)
    assert manifest.counts.records_read == 2001
    assert manifest.dead_letter == ["dead_letter/data-00000-of-00001.tfrecord.jsonl"]
    lines = (out / manifest.dead_letter[0]).read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {
            "file": str(path),
            "line": 2002,
            "byte_offset": path.read_bytes().index(b"oops,y"),
            "byte_range": [0, path.stat().st_size],
            "row_in_range": 2000,
            "reason": (
                "column 'n' (int64): Failed to parse string: 'oops' as a scalar of type int64"
            ),
            "cells": {"n": "oops", "s": "y"},
        }
    ]


def test_files_with_different_headers_are_rejected(tmp_path):
    (tmp_path / "a.csv").write_text("n,s\n1,x\n")
    (tmp_path / "b.csv").write_text("n,t\n2,y\n")
    with pytest.raises(DataError, match=r"b.csv: header \['n', 't'\] differs from \['n', 's'\]"):
        convert([str(tmp_path / "*.csv")], tmp_path / "out")


def test_inputs_that_match_nothing_are_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"--input '.*nothing/\*.csv' matches no files"):
        convert([str(tmp_path / "nothing/*.csv")], tmp_path / "out")


def test_empty_files_are_an_error_and_header_only_files_give_no_records(tmp_path):
    (tmp_path / "a.csv").write_text("")
    (tmp_path / "b.csv").write_text("n,s\n")
    (tmp_path / "c.csv").write_text("n,s\n1,x\n2,y\n")
    with pytest.raises(DataError) as e:
        convert([str(tmp_path / "*.csv")], tmp_path / "out")
    assert str(e.value) == (
        f"1 input file(s) are empty (0 bytes): {tmp_path / 'a.csv'}; remove them from --input"
    )
    assert not (tmp_path / "out").exists()
    manifest = convert([str(tmp_path / "[bc].csv")], tmp_path / "out")
    assert manifest.total_records == 2
    assert [f["path"] for f in manifest.inputs["files"]] == [
        str(tmp_path / "b.csv"),
        str(tmp_path / "c.csv"),
    ]


def test_parse_spec_matches_manifest_shapes(converted):
    _, manifest = converted
    spec = parse_spec(manifest.features)
    assert isinstance(spec["id"], tf.io.FixedLenFeature)
    assert isinstance(spec["score"], tf.io.RaggedFeature)


@pytest.mark.slow
def test_worker_processes_convert_every_row(sample_csv, tmp_path, caplog):
    """The multi-process local runner (what inputs over 1 GiB get), with real worker processes."""
    out = tmp_path / "mp"
    with caplog.at_level(logging.INFO, logger="beam_jobs.job.runner"):
        manifest = convert(
            sample_csv,
            out,
            "--target_shard_bytes=128KiB",
            "--direct_running_mode=multi_processing",
            in_process=False,
        )
    assert f"local runner: FnApiRunner with {os.cpu_count()} worker processes" in caplog.text
    assert manifest.total_records == 12_000
    assert math.ceil(manifest.total_bytes / (1.1 * 128 * 1024)) <= len(manifest.shards)
    assert verify(str(out))[1] == []
    shutil.rmtree(out)


def test_rows_longer_than_a_parse_block_convert(tmp_path):
    """pyarrow parses in 1 MiB blocks; rows up to --max_record_bytes must still convert, longer
    ones go to the dead letter, and one too long to parse at all stops the job by name."""
    path = tmp_path / "long.csv"
    rows = [f"{i},short {i}" for i in range(3000)]
    rows[1500] = "1500," + "x" * (3 << 20)  # 3 MiB, past several blocks
    rows[2500] = '2500,"' + "y\n" * (1 << 20) + '"'  # 2 MiB of quoted newlines
    path.write_text("id,text\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    manifest = convert([str(path)], out, "--num_shards=3")
    assert (manifest.total_records, manifest.counts.bad_records) == (3000, 0)
    got = {r["id"][0]: len(r["text"][0]) for r in _records_in_shard_order(out, manifest)}
    assert got[1500] == 3 << 20 and got[2500] == 2 << 20 and got[7] == len("short 7")
    small = convert([str(path)], tmp_path / "small", "--max_record_bytes=2.5MiB")
    assert (small.total_records, small.counts.bad_records) == (2999, 1)  # the 3 MiB row
    with pytest.raises(DataError, match="too long to parse in blocks of 1,433,600 bytes"):
        convert([str(path)], tmp_path / "tiny", "--max_record_bytes=700KiB")


def test_gzip_split_shards_are_gzip_on_disk_for_every_reader(sample_csv, tmp_path):
    # With splits most shards are parts of several write tasks, one gzip member each.
    out = tmp_path / "gz"
    manifest = convert(
        sample_csv,
        out,
        "--compression=gzip",
        "--splits=train=2,eval=1",
        "--target_shard_bytes=48KiB",
    )
    for split, summary in manifest.split_summary().items():
        sizes = [s.bytes for s in manifest.shards if s.split == split]
        assert summary["shards"] >= 2 and max(sizes) <= 1.1 * 48 * 1024, split
        assert max(sizes) / min(sizes) <= 1.5
    framed = 0
    for shard in manifest.shards:
        with gzip.open(out / shard.path) as f:  # Python's gzip reads every member
            assert count_records(f) == shard.records
        framed += shard.records
    assert framed == manifest.total_records == len(expected_rows(sample_csv))
    rows = sorted(_records_in_shard_order(out, manifest), key=lambda r: r["id"][0])  # TF's reader
    oracle = sorted(expected_rows(sample_csv), key=lambda r: int(r["id"]))
    _assert_same_values(rows, oracle, manifest)
    assert verify(str(out))[1] == []


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_a_shard_of_many_files_written_in_parts_holds_every_row_in_order(
    tmp_path, monkeypatch, compression
):
    # 23 files in one shard, written by tasks of 5 files (their parts joined in order); file 11
    # has a bad row, which the dead letter gives with its own file and line.
    inputs = tmp_path / "in"
    inputs.mkdir()
    for k in range(23):
        rows = [f"{k * 10 + i},name {k} {i}" for i in range(10)]
        if k == 11:
            rows[4] = "not a number,bad"
        (inputs / f"part-{k:02d}.csv").write_text("id,name\n" + "\n".join(rows) + "\n")
    flags = ["--compression", compression, "--max_bad_fraction", "0.1", "--order=input"]
    whole = convert([str(inputs / "*.csv")], tmp_path / "whole", *flags)
    monkeypatch.setattr("beam_jobs.plan.shards.FILES_PER_TASK", 5)
    config = ConvertConfig.from_flags({"input": [str(inputs / "*.csv")], "output": "o"})
    assert [len(t.pieces) for t in make_plan(config).tasks] == [5, 5, 5, 5, 3]
    manifest = convert([str(inputs / "*.csv")], tmp_path / "out", *flags)
    assert [(s.path, s.records) for s in manifest.shards] == [(whole.shards[0].path, 229)]
    rows = _records_in_shard_order(tmp_path / "out", manifest)
    assert [r["id"][0] for r in rows] == [i for i in range(230) if i != 114]
    dead = (tmp_path / "out" / manifest.dead_letter[0]).read_text().splitlines()
    assert [(json.loads(d)["file"], json.loads(d)["line"]) for d in dead] == [
        (str(inputs / "part-11.csv"), 6)
    ]
    verify(str(tmp_path / "out"))
    if compression == "none":  # the same bytes as one task writing the shard whole
        assert manifest.shards[0].crc32c == whole.shards[0].crc32c


@pytest.mark.parametrize("flags", [[], ["--compression=gzip"], ["--splits=train=3,eval=1"]])
def test_shards_written_in_parts_of_task_bytes_hold_what_whole_ones_do(
    tmp_path, monkeypatch, flags
):
    # One file of quoted newlines, its shards written by tasks of at most 16 KiB of input each
    # (the parts joined in order): the same records in the same shards as tasks of whole
    # shards, and without GZIP the same bytes (Python's csv module as the oracle).
    path = tmp_path / "quoted.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "text", "x"])
        for i in range(3000):
            text = f'row {i}\n"quoted", with\nnewlines\n' * (1 + i % 3) if i % 2 else f"plain {i}"
            w.writerow([i, text, f"{i * 0.25:.2f}"])
    size = path.stat().st_size
    flags = ["--num_shards=3", "--order=input", *flags]
    whole = convert([str(path)], tmp_path / "whole", *flags)
    monkeypatch.setattr("beam_jobs.plan.shards.TASK_BYTES", 16 << 10)
    splits = next((f.split("=", 1)[1] for f in flags if f.startswith("--splits")), None)
    config = ConvertConfig.from_flags(
        {"input": [str(path)], "output": "o", "num_shards": 3, "splits": splits}
    )
    tasks = make_plan(config).tasks
    assert len(tasks) == math.ceil(size / 3 / (16 << 10)) * 3
    assert max(t.input_bytes for t in tasks) <= 16 << 10
    manifest = convert([str(path)], tmp_path / "out", *flags)
    assert [(s.path, s.records) for s in manifest.shards] == [
        (s.path, s.records) for s in whole.shards
    ]
    rows = _records_in_shard_order(tmp_path / "out", manifest)
    assert rows == _records_in_shard_order(tmp_path / "whole", whole)
    if not flags[2:]:
        _assert_same_values(rows, expected_rows([str(path)]), manifest)
        assert manifest.fingerprint == whole.fingerprint
    verify(str(tmp_path / "out"))
