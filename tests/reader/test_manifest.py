import dataclasses
import json
import re
import subprocess
import sys

import pytest

from tfdata_reader.manifest import (
    Compression,
    Counts,
    FeatureSpec,
    Manifest,
    ManifestError,
    ShardInfo,
    schema_from_json,
    schema_to_json,
    shard_name,
)


def _manifest() -> Manifest:
    return Manifest(
        shards=[
            ShardInfo("data-00000-of-00002.tfrecord", 3, 100, "0000abcd"),
            ShardInfo("data-00001-of-00002.tfrecord", 2, 90, "ffff0000"),
        ],
        features=[
            FeatureSpec("id", "int64"),
            FeatureSpec("note", "bytes", [], True),
            FeatureSpec("tokens", "int64", None),
        ],
        compression="none",
        inputs={"patterns": ["a/*.csv"]},
        counts=Counts(records_read=5, records_written=5),
        created="2026-12-02T00:00:00+00:00",
        tool={"name": "tfrecord-etl", "version": "0.1.0"},
    )


@pytest.mark.parametrize(
    "prefix, index, count, compression, expected",
    [
        ("data", 0, 12, "none", "data-00000-of-00012.tfrecord"),
        ("train", 11, 12, "gzip", "train-00011-of-00012.tfrecord.gz"),
    ],
)
def test_shard_name(prefix, index, count, compression, expected):
    assert shard_name(prefix, index, count, compression) == expected


def test_shard_name_rejects_path_characters():
    with pytest.raises(ValueError, match="a shard prefix may hold only ASCII letters"):
        shard_name("../x", 0, 1, "none")


def test_round_trip_and_totals():
    m = _manifest()
    text = m.to_json()
    obj = json.loads(text)
    assert obj["format_version"] == 1
    assert obj["total_records"] == 5
    assert obj["total_bytes"] == 190
    assert obj["features"][1] == {"name": "note", "dtype": "bytes", "shape": [], "nullable": True}
    assert obj["shards"][0] == {
        "path": "data-00000-of-00002.tfrecord",
        "records": 3,
        "bytes": 100,
        "crc32c": "0000abcd",
    }
    assert Manifest.from_json(text) == m


def test_is_fixed():
    m = _manifest()
    assert [f.is_fixed for f in m.features] == [True, False, False]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda o: o.update(format_version=99), "format_version 99 is not supported"),
        (lambda o: o.pop("shards"), "missing key 'shards'"),
        (
            lambda o: o.update(total_records=6),
            "total_records 6 does not equal the sum over shards 5",
        ),
        (
            lambda o: o["features"][0].update(dtype="int32"),
            "dtype must be one of int64, float32, bytes",
        ),
        (lambda o: o["features"][0].update(shape=[0]), "shape must be"),
        (lambda o: o.update(compression="zstd"), "compression must be one of none, gzip"),
        (lambda o: o["features"].append(o["features"][0]), "duplicate feature names"),
        *(
            (
                lambda o, bad=bad: o["shards"][0].update(path=bad),
                re.escape(f"shard path {bad!r} is not a plain relative path inside the dataset"),
            )
            for bad in [
                "../x",
                "/etc/passwd",
                "a/../../x",
                "gs://other/x",
                "a//b",
                "./a",
                "a\\b",
                "",
            ]
        ),
        (
            lambda o: o.update(dead_letter=["../../home/u/.ssh/id_rsa"]),
            "dead-letter path '../../home/u/.ssh/id_rsa' is not a plain relative path",
        ),
    ],
)
def test_from_json_rejects(edit, message):
    obj = json.loads(_manifest().to_json())
    edit(obj)
    with pytest.raises(ManifestError, match=message):
        Manifest.from_json(json.dumps(obj), source="m.json")


def test_from_json_rejects_non_json():
    with pytest.raises(ManifestError, match="m.json: not valid JSON"):
        Manifest.from_json("{", source="m.json")


def test_schema_round_trip_and_partial_schema():
    features = _manifest().features
    assert schema_from_json(schema_to_json(features)) == features
    partial = schema_from_json('{"features": [{"name": "x", "dtype": "float32"}]}')
    assert partial == [FeatureSpec("x", "float32", [], False)]
    with pytest.raises(ManifestError, match="s.json: feature 'x': unknown keys \\['type'\\]"):
        schema_from_json('{"features": [{"name": "x", "dtype": "bytes", "type": 1}]}', "s.json")


def test_manifest_module_imports_neither_tensorflow_nor_beam():
    code = (
        "import sys, tfdata_reader.manifest, tfdata_reader;"
        "print(any(m.split('.')[0] in ('tensorflow', 'apache_beam') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_reader_package_imports_without_beam():
    code = "import sys, tfdata_reader.dataset; print('apache_beam' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_fingerprint_is_the_datasets_identity_not_its_run():
    import dataclasses

    m = _manifest()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", m.fingerprint)
    later = dataclasses.replace(
        m,
        shards=[dataclasses.replace(s, path=s.path.replace(".tfrecord", ".g3.tfrecord"))
                for s in m.shards],
        created="2030-01-01T00:00:00+00:00",
        options={"output": "/elsewhere"},
        inputs={"files": [{"path": "/other/place.csv"}]},
        generation=3,
    )  # fmt: skip
    assert later.fingerprint == m.fingerprint  # the same records, stored the same way
    changed = dataclasses.replace(
        m, shards=[dataclasses.replace(m.shards[0], crc32c="0000abce"), m.shards[1]]
    )
    assert changed.fingerprint != m.fingerprint
    renamed = dataclasses.replace(m, features=[FeatureSpec("ID", "int64"), *m.features[1:]])
    assert renamed.fingerprint != m.fingerprint


def test_an_edited_manifest_no_longer_matches_its_fingerprint():
    obj = json.loads(_manifest().to_json())
    assert obj["fingerprint"] == _manifest().fingerprint
    obj["shards"][0]["crc32c"] = "deadbeef"  # a shard swapped, and the manifest edited to match
    obj["total_records"] = sum(s["records"] for s in obj["shards"])
    with pytest.raises(ManifestError, match="does not match its features and shards"):
        Manifest.from_json(json.dumps(obj))
    del obj["fingerprint"]  # manifests written before fingerprints still read
    assert Manifest.from_json(json.dumps(obj)).shards[0].crc32c == "deadbeef"


@pytest.mark.parametrize(
    "feature",
    [
        FeatureSpec("a", "int64"),
        FeatureSpec("b", "float32", [3], nullable=True),
        FeatureSpec("c", "bytes", None, null_values=["NA", ""]),
        FeatureSpec("d", "int64", [], logical_type="date32[day]", null_values=[]),
        FeatureSpec("e", "float32", [], null_values=["."], unit="kg"),
    ],
)
def test_a_feature_s_json_holds_every_field_that_is_set(feature):
    # Written field by field: a field added to FeatureSpec must be added there too.
    expected = {
        k: v
        for k, v in dataclasses.asdict(feature).items()
        if v is not None or k not in ("logical_type", "null_values", "unit")
    }
    obj = feature.to_json()
    assert obj == expected and list(obj) == list(expected)
    assert FeatureSpec.from_json(obj) == feature
    if feature.shape is not None:
        assert obj["shape"] is not feature.shape  # a copy: editing the JSON leaves the spec


def test_counts_are_typed_and_an_older_manifests_null_values_read_as_missing_values():
    m = _manifest()
    obj = json.loads(m.to_json())
    assert obj["counts"] == {
        "records_read": 5,
        "records_written": 5,
        "bad_records": 0,
        "input_bytes_read": 0,
        "missing_values": {},
    }
    obj["counts"] = {"records_read": 7, "records_written": 5, "bad_records": 2,
                     "input_bytes_read": 99, "null_values": {"note": 3}}  # fmt: skip
    obj["total_records"] = 5
    counts = Manifest.from_json(json.dumps(obj)).counts
    assert counts == Counts(7, 5, 2, 99, missing_values={"note": 3})
    assert counts.recorded


def test_counts_of_a_manifest_without_them_are_not_recorded():
    obj = json.loads(_manifest().to_json())
    del obj["counts"]
    counts = Manifest.from_json(json.dumps(obj)).counts
    assert (counts.recorded, counts.bad_records, counts.to_json()) == (False, 0, {})


def test_malformed_counts_are_a_manifest_error():
    obj = json.loads(_manifest().to_json())
    obj["counts"]["missing_values"] = {"note": "three"}
    with pytest.raises(ManifestError, match="missing_values must map names to whole numbers"):
        Manifest.from_json(json.dumps(obj))


@pytest.mark.parametrize(
    "text, suffix, tf_name",
    [("none", ".tfrecord", ""), ("gzip", ".tfrecord.gz", "GZIP")],
)
def test_compression_names_its_suffix_and_tensorflows_name(text, suffix, tf_name):
    compression = Compression.parse(text)
    assert (compression.suffix, compression.tf_name, str(compression)) == (suffix, tf_name, text)
    manifest = dataclasses.replace(_manifest(), compression=text)
    assert manifest.compression is compression
    assert Manifest.from_json(manifest.to_json()).compression is compression


def test_an_unknown_compression_is_a_manifest_error():
    with pytest.raises(ManifestError, match="compression must be one of none, gzip, got 'zstd'"):
        dataclasses.replace(_manifest(), compression="zstd")
    with pytest.raises(ValueError, match="must be one of none, gzip, got 'GZ'"):
        Compression.parse("GZ")
