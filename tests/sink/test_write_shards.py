"""`beam_jobs.WriteShards` inside a user's own pipeline: dicts, record batches, Examples."""

from __future__ import annotations

import json

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest
import tensorflow as tf
from support.datasets import read_all

from beam_jobs import WriteShards
from beam_jobs.inspection.verify import verify
from tfdata_reader.manifest import FeatureSpec

OPTIONS = ["--runner=FnApiRunner", "--direct_running_mode=in_memory", "--direct_num_workers=1"]


def _run(elements, out, **kwargs):
    with beam.Pipeline(argv=OPTIONS) as p:
        _ = p | beam.Create(elements, reshuffle=False) | WriteShards(str(out), **kwargs)
    return json.loads((out / "manifest.json").read_text())


def test_dicts_with_nested_values_lists_and_bad_rows(tmp_path):
    rows = [
        {"id": i, "geo": {"x": i / 4}, "tags": [f"t{j}" for j in range(i % 3)], "name": f"n{i}"}
        for i in range(5000)
    ]
    rows[77]["id"] = "seventy-seven"  # contradicts the int64 spec: dead letter, not a crash
    manifest = _run(rows, tmp_path / "out", target_shard_bytes="48KiB", max_bad_fraction=0.01)
    assert [f["name"] for f in manifest["features"]] == ["id", "geo.x", "tags", "name"]
    assert manifest["counts"]["records_written"] == 4999
    assert manifest["counts"]["bad_records"] == 1
    sizes = [s["bytes"] for s in manifest["shards"]]
    assert len(sizes) == -(-manifest["total_bytes"] // (48 * 1024))
    assert max(sizes) <= 1.1 * 48 * 1024 and max(sizes) / min(sizes) <= 1.5
    [dead] = (tmp_path / "out" / manifest["dead_letter"][0]).read_text().splitlines()
    assert json.loads(dead)["cells"]["id"] == "seventy-seven"
    got = sorted(read_all(tmp_path / "out"), key=lambda r: r["id"])
    want = [r for r in rows if r["id"] != "seventy-seven"]
    assert [g["id"] for g in got] == [r["id"] for r in want]
    assert [g["geo.x"] for g in got] == [np.float32(r["geo"]["x"]) for r in want]
    assert [g["tags"] for g in got] == [[t.encode() for t in r["tags"]] for r in want]
    assert verify(str(tmp_path / "out"))[1] == []


def test_record_batches_with_a_given_spec_and_gzip(tmp_path):
    batches = [
        pa.RecordBatch.from_pydict({"k": list(range(i, i + 100)), "v": [b"x" * 10] * 100})
        for i in range(0, 1000, 100)
    ]
    features = [FeatureSpec("k", "int64"), FeatureSpec("v", "bytes")]
    manifest = _run(batches, tmp_path / "out", features=features, compression="gzip", num_shards=3)
    assert [s["path"] for s in manifest["shards"]] == [
        f"data-0000{i}-of-00003.tfrecord.gz" for i in range(3)
    ]
    assert sorted(r["k"] for r in read_all(tmp_path / "out")) == list(range(1000))


def test_serialized_examples_pass_through(tmp_path):
    def example(i):
        feature = {"a": tf.train.Feature(int64_list=tf.train.Int64List(value=[i, -i]))}
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

    records = [example(i) for i in range(300)]
    manifest = _run(records, tmp_path / "out", num_shards=2)
    assert manifest["features"] == [
        {"name": "a", "dtype": "int64", "shape": [2], "nullable": False}
    ]
    got = sorted(r["a"] for r in read_all(tmp_path / "out"))
    assert got == sorted([i, -i] for i in range(300))


def test_too_many_bad_rows_raise_the_typed_error_with_a_clean_message(tmp_path):
    from apache_beam.options.pipeline_options import PipelineOptions

    from beam_jobs import TooManyBadRecords

    rows = [{"id": i} for i in range(2000)] + [{"id": "x"}] * 3
    options = PipelineOptions(["--runner=FnApiRunner"])
    with pytest.raises(TooManyBadRecords) as e, beam.Pipeline(options=options) as p:
        _ = p | beam.Create(rows) | WriteShards(str(tmp_path / "out"))
    assert str(e.value).startswith("3 of 2,003 records (0.150%) could not be converted")
    assert "TFRECORD_ETL_ERROR" not in str(e.value)


def test_the_same_elements_give_the_same_records_with_features_in_spec_order(tmp_path):
    """What WriteShards promises for determinism: the same records, whatever the bundles."""
    from google.protobuf.internal.encoder import _VarintBytes

    rows = [{"z": i, "a": f"s{i}", "m": [i / 2] * (i % 3)} for i in range(2000)]
    features = [
        FeatureSpec("z", "int64"),
        FeatureSpec("a", "bytes"),
        FeatureSpec("m", "float32", None),
    ]
    _run(rows, tmp_path / "one", features=features, num_shards=3)
    _run(rows[::-1], tmp_path / "other", features=features, target_shard_bytes="16KiB")

    def expected(row):
        entries = b"".join(
            tf.train.Features(feature={name: feature}).SerializeToString()
            for name, feature in [
                ("z", tf.train.Feature(int64_list=tf.train.Int64List(value=[row["z"]]))),
                ("a", tf.train.Feature(bytes_list=tf.train.BytesList(value=[row["a"].encode()]))),
                ("m", tf.train.Feature(float_list=tf.train.FloatList(value=row["m"]))),
            ]
        )
        return b"\x0a" + _VarintBytes(len(entries)) + entries

    def records(out):
        paths = sorted(str(p) for p in out.glob("data-*"))
        return sorted(r.numpy() for r in tf.data.TFRecordDataset(paths))

    want = sorted(expected(row) for row in rows)
    assert records(tmp_path / "one") == want
    assert records(tmp_path / "other") == want


def test_serialized_examples_are_written_with_the_specs_features_in_its_order(tmp_path):
    def example(**features):
        return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()

    def ints(*values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    records = [example(zzz=ints(9), b=ints(i), a=ints(-i)) for i in range(50)]
    records.append(example(a=ints(7)))  # no b: missing
    features = [FeatureSpec("a", "int64"), FeatureSpec("b", "int64", [], True)]
    _run(records, tmp_path / "out", features=features, num_shards=1)
    written = sorted(
        r.numpy()
        for r in tf.data.TFRecordDataset(str(tmp_path / "out" / "data-00000-of-00001.tfrecord"))
    )
    from google.protobuf.internal.encoder import _VarintBytes

    def in_order(a, b):  # protobuf's bytes of each map entry, a then b
        entries = b"".join(
            tf.train.Features(feature={k: v}).SerializeToString() for k, v in (("a", a), ("b", b))
        )
        return b"\x0a" + _VarintBytes(len(entries)) + entries

    want = sorted([in_order(ints(-i), ints(i)) for i in range(50)] + [in_order(ints(7), ints())])
    assert written == want  # zzz dropped, a before b, the missing b present and empty


def _rows_with(odd: dict[int, object]):
    return lambda i: odd.get(i, {"id": i, "v": i})


def test_elements_that_are_no_rows_or_too_big_are_dead_letters(tmp_path):
    odd = {
        2100: None,
        2200: "hello",
        2300: [1, 2],
        2400: {"id": 2400, "v": 2**63},
        2500: {"id": 2500, "v": -(2**63) - 1},
    }
    out = tmp_path / "out"
    with beam.Pipeline(argv=OPTIONS) as p:
        _ = (
            p
            | beam.Create(range(3000))
            | beam.Map(_rows_with(odd))
            | WriteShards(str(out), max_bad_fraction=0.01, sample_size=100)
        )
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["counts"]["records_written"], manifest["counts"]["bad_records"]) == (2995, 5)
    dead = [json.loads(line) for f in manifest["dead_letter"]
            for line in (out / f).read_text().splitlines()]  # fmt: skip
    reasons = sorted(row["reason"].split(";")[0].split(",")[0] for row in dead)
    assert reasons[-2:] == [
        "feature 'v': the integer -9223372036854775809 is beyond the int64 range",
        "feature 'v': the integer 9223372036854775808 is beyond the int64 range",
    ]
    kinds = sorted(row["cells"].get("element") for row in dead if "element" in row["cells"])
    assert kinds == ["'hello'", "None", "[1, 2]"]
    assert sorted(r["id"] for r in read_all(out, label_key="")) == sorted(
        set(range(3000)) - set(odd)
    )


def test_write_shards_takes_converts_sharding_flags_and_records_them_alike(tmp_path):
    from beam_jobs.core.compression import Compression
    from beam_jobs.core.errors import UsageError

    with pytest.raises(UsageError, match=r"unknown keyword argument target_shard_byte \(did you"):
        WriteShards(str(tmp_path / "x"), target_shard_byte="1MiB")
    with pytest.raises(UsageError, match="--compression must be one of none, gzip, got 'zip'"):
        WriteShards(str(tmp_path / "x"), compression="zip")
    rows = [{"id": i} for i in range(40)]
    manifest = _run(rows, tmp_path / "out", compression=Compression.GZIP, num_shards="2")
    assert manifest["compression"] == "gzip" and len(manifest["shards"]) == 2
    assert manifest["options"] == {
        "target_shard_bytes": 256 << 20,
        "num_shards": 2,
        "compression": "gzip",
        "compression_level": 1,
        "shard_prefix": "data",
        "order": "shuffled",
        "shuffle_seed": 0,
        "max_bad_fraction": 0.001,
    }
    assert manifest["order"] == {"kind": "shuffled", "seed": 0}


def test_write_shards_orders_each_shard_by_its_records_and_seed(tmp_path):
    rows = [{"id": i} for i in range(3000)]
    manifest = _run(rows, tmp_path / "out", num_shards=2)
    ids = [r["id"] for r in read_all(tmp_path / "out")]
    assert sorted(ids) == list(range(3000)) and ids != sorted(ids)
    kept = _run(rows, tmp_path / "kept", num_shards=2, order="input")
    assert kept["order"] == {"kind": "input"}
    kept_ids = [r["id"] for r in read_all(tmp_path / "kept")]
    assert sorted(kept_ids) == list(range(3000))
    again = _run(rows, tmp_path / "again", num_shards=2)  # the same elements, the same bytes
    assert [s["crc32c"] for s in again["shards"]] == [s["crc32c"] for s in manifest["shards"]]


def test_the_same_rows_give_the_same_records_dead_letters_and_counts_as_convert(tmp_path):
    # One table of cases run through both: a whole number float32 rounds (counted), a number
    # below its range (stored as 0, counted), a key the spec lacks (counted, never dropped
    # unsaid), a list where one value is expected and an integer past int64 (dead letters with
    # their reasons).
    from support.datasets import convert

    rows = [{"id": i, "x": i / 4} for i in range(400)]
    rows[10] = {"id": 10, "x": 16777217}
    rows[20] = {"id": 20, "x": 1e-60}
    rows[390] = {"id": 390, "x": 1.5, "late": "k"}  # past convert's sample
    rows[395] = {"id": 395, "x": [1.0, 2.0]}
    rows[398] = {"id": 2**63 + 5, "x": 1.0}
    features = [FeatureSpec("id", "int64"), FeatureSpec("x", "float32")]
    lines = tmp_path / "rows.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in rows))
    by_convert = convert([str(lines)], tmp_path / "c", "--sample_bytes", "4096",
                         "--max_bad_fraction", "0.01")  # fmt: skip
    assert by_convert.features == features
    by_transform = _run(rows, tmp_path / "w", features=features, max_bad_fraction="0.01")
    assert (
        by_convert.counts.ignored_fields == by_transform["counts"]["ignored_fields"] == {"late": 1}
    )
    assert (
        by_convert.counts.float32_rounded_integers
        == by_transform["counts"]["float32_rounded_integers"]
        == {"x": 1}
    )
    assert (
        by_convert.counts.float32_stored_as_zero
        == by_transform["counts"]["float32_stored_as_zero"]
        == {"x": 1}
    )
    assert by_convert.counts.bad_records == by_transform["counts"]["bad_records"] == 2

    def records(out):
        return sorted((r["id"], r["x"]) for r in read_all(out))

    assert records(tmp_path / "c") == records(tmp_path / "w")
    assert len(records(tmp_path / "w")) == 398

    def reasons(out, manifest_dead):
        found = []
        for name in manifest_dead:
            found += [json.loads(line)["reason"] for line in (out / name).read_text().splitlines()]
        return sorted(found)

    converted = reasons(tmp_path / "c", by_convert.dead_letter)
    written = reasons(tmp_path / "w", by_transform["dead_letter"])
    x_list = "feature 'x' (float32, shape []): 2 values where 1 are expected"
    too_big = "feature 'id': the integer 9223372036854775813 is beyond the int64 range"
    assert written == [too_big, x_list]
    assert converted == [f"cannot read as JSON: {too_big}", x_list]


def test_a_key_first_seen_after_the_sample_is_counted_and_named_not_dropped_unsaid(
    tmp_path, caplog
):
    """Rows that make one table (pyarrow's from_pylist would keep the first row's keys only)."""
    rows = [{"id": i, "v": float(i)} for i in range(3000)]
    rows[2500] = {"id": 2500, "v": 1.0, "late": "surprise"}
    features = [FeatureSpec("id", "int64"), FeatureSpec("v", "float32")]
    with caplog.at_level("WARNING", logger="beam_jobs.transforms.write_shards"):
        manifest = _run(rows, tmp_path / "out", features=features)
    assert manifest["counts"]["ignored_fields"] == {"late": 1}
    assert manifest["total_records"] == 3000
    assert "WriteShards left out 1 values of 1 key that are not features: 'late' (1)" in (
        caplog.text
    )


def test_an_integer_past_int64_from_a_typed_map_is_a_dead_letter_not_a_coder_error(tmp_path):
    """Beam infers dict[str, int] for this Map and would code it with a 64-bit integer coder."""
    out = tmp_path / "out"
    with beam.Pipeline(argv=OPTIONS) as p:
        _ = (
            p
            | beam.Create(range(2000))
            | beam.Map(lambda i: {"id": i, "v": 2**70 if i == 1234 else i})
            | WriteShards(str(out), max_bad_fraction=0.01)
        )
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["counts"]["records_written"], manifest["counts"]["bad_records"]) == (1999, 1)
    (dead,) = [json.loads(line) for f in manifest["dead_letter"]
               for line in (out / f).read_text().splitlines()]  # fmt: skip
    assert (
        dead["reason"]
        == "feature 'v': the integer 1180591620717411303424 is beyond the int64 range"
    )
    assert dead["cells"] == {"id": 1234, "v": 2**70}
