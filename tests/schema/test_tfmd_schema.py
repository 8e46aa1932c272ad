"""`schema.pbtxt`: the feature spec as a TensorFlow Metadata Schema beside every dataset, read by
tfx-bsl's TFXIO, and a TFDV-style Schema as `--schema` driving a conversion."""

from __future__ import annotations

import datetime
import glob

import pytest
from google.protobuf import text_format
from support.datasets import convert, read_all
from tensorflow_metadata.proto.v0 import schema_pb2

from beam_jobs.core.errors import UsageError
from beam_jobs.formats.csv.markers import column_markers
from beam_jobs.schema.tfmd import schema_from_pbtxt, schema_pbtxt
from tfdata_reader.manifest import FeatureSpec


def _schema(folder) -> schema_pb2.Schema:
    return text_format.Parse((folder / "schema.pbtxt").read_text(), schema_pb2.Schema())


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tfmd")
    (folder / "a.jsonl").write_text(
        "".join(
            f'{{"id": {i}, "score": {"null" if i % 4 == 0 else i / 2}, '
            f'"tags": {list(range(i % 3))},'
            f' "pair": [{i}, {-i}], "city": "{["Oslo", "Rome", "Lima"][i % 3]}",'
            f' "at": "2026-11-{1 + i % 28:02d}T10:00:00Z"}}\n'
            for i in range(200)
        )
    )
    manifest = convert([str(folder / "a.jsonl")], folder / "out", "--label=city")
    return folder / "out", manifest


def test_every_conversion_writes_the_spec_as_a_tfmd_schema(dataset):
    out, manifest = dataset
    schema = _schema(out)
    by_name = {f.name: f for f in schema.feature}
    assert list(by_name) == [f.name for f in manifest.features]
    types = {n: schema_pb2.FeatureType.Name(f.type) for n, f in by_name.items()}
    assert types == {"id": "INT", "score": "FLOAT", "tags": "INT", "pair": "INT", "city": "BYTES",
                     "at": "INT"}  # fmt: skip
    assert by_name["id"].presence.min_fraction == 1.0 and by_name["id"].HasField("shape")
    assert (by_name["pair"].value_count.min, by_name["pair"].value_count.max) == (1, 0)
    assert by_name["score"].presence.min_fraction == 0.0
    assert (by_name["score"].value_count.min, by_name["score"].value_count.max) == (0, 1)
    assert by_name["tags"].HasField("value_count") and by_name["tags"].value_count.max == 0
    assert (
        schema_pb2.TimeDomain.IntegerTimeFormat.Name(by_name["at"].time_domain.integer_format)
        == "UNIX_MICROSECONDS"
    )
    assert list(by_name["at"].annotation.tag) == ["tfrecord_etl.logical_type=timestamp[us]"]
    [domain] = schema.string_domain
    assert (domain.name, list(domain.value)) == ("city", ["Lima", "Oslo", "Rome"])
    assert by_name["city"].domain == "city"
    assert schema_from_pbtxt((out / "schema.pbtxt").read_text()) == list(manifest.features)


def test_tfx_bsl_reads_our_shards_with_our_schema(dataset):
    from tfx_bsl.public import tfxio

    out, _ = dataset
    io = tfxio.TFExampleRecord(
        file_pattern=sorted(glob.glob(str(out / "data-*"))), schema=_schema(out)
    )
    options = tfxio.TensorFlowDatasetOptions(batch_size=500, shuffle=False, num_epochs=1)
    [batch] = list(io.TensorFlowDataset(options))
    ours = sorted(read_all(out, label_key=""), key=lambda r: r["id"])
    order = batch["id"].numpy().argsort()
    assert batch["id"].numpy()[order].tolist() == [r["id"] for r in ours]
    import tensorflow as tf

    pairs = tf.sparse.to_dense(batch["pair"]).numpy()[order].tolist()
    assert pairs == [r["pair"] for r in ours]
    assert batch["city"].numpy()[order].tolist() == [r["city"] for r in ours]


@pytest.mark.parametrize(
    "spec",
    [
        FeatureSpec("a", "int64"),
        FeatureSpec("b", "float32", [], True),
        FeatureSpec("c", "bytes", None, True),
        FeatureSpec("d", "int64", [3], False),
        FeatureSpec("e", "int64", None, False),
        FeatureSpec("f", "int64", [], True, "date32[day]"),
        FeatureSpec("g", "int64", [], False, "timestamp[ns, tz=Europe/Oslo]"),
        FeatureSpec("h", "int64", [], False, "time64[us]"),
        FeatureSpec("i", "int64", [], True, "duration[s]"),
    ],
)
def test_specs_survive_the_round_trip(spec):
    assert schema_from_pbtxt(schema_pbtxt([spec])) == [spec]


_TFDV_SCHEMA = """
feature { name: "zip" type: BYTES presence { min_fraction: 1.0 min_count: 1 }
          shape { dim { size: 1 } } }
feature { name: "visits" type: FLOAT value_count { min: 1 max: 1 } presence { min_count: 1 } }
feature { name: "day" type: INT time_domain { integer_format: UNIX_DAYS } }
feature { name: "old" type: INT deprecated: true }
feature { name: "later" type: INT lifecycle_stage: PLANNED }
"""


def test_a_tfdv_schema_drives_a_conversion(tmp_path):
    (tmp_path / "in.csv").write_text(
        "zip,visits,day,old\n"
        + "".join(f"0{i:04d},{i},2026-11-{1 + i % 9:02d},{i}\n" for i in range(50))
    )
    (tmp_path / "schema.pbtxt").write_text(_TFDV_SCHEMA)
    manifest = convert(
        [str(tmp_path / "in.csv")], tmp_path / "out", f"--schema={tmp_path / 'schema.pbtxt'}"
    )
    # Number columns get the CSV's default missing-value markers, given types or inferred.
    ints, floats = list(column_markers("int64", None)), list(column_markers("float32", None))
    assert list(manifest.features) == [
        FeatureSpec("zip", "bytes", [], False),
        # presence without min_fraction 1: optional
        FeatureSpec("visits", "float32", [], True, null_values=floats),
        # a CSV column: one value
        FeatureSpec("day", "int64", [], True, "date32[day]", null_values=ints),
        FeatureSpec("old", "int64", [], False, null_values=ints),  # deprecated there: inferred
    ]
    rows = sorted(read_all(tmp_path / "out"), key=lambda r: r["zip"])
    assert [r["zip"] for r in rows[:2]] == [b"00000", b"00001"]  # leading zeros kept
    days = (datetime.date(2026, 11, 4) - datetime.date(1970, 1, 1)).days
    assert rows[3]["visits"] == [3.0] and rows[3]["day"] == [days]


@pytest.mark.parametrize(
    "text, message",
    [
        ("feature { name: 'x' type: STRUCT }", r"feature 'x' has type STRUCT; Example features"),
        ("feature { name: 'x' type: INT shape { dim { size: 2 } dim { size: 2 } } }",
         r"feature 'x' has shape \[2, 2\]"),
        ("feature { nme: 'x' }", r"not a JSON schema nor a text-format TFMD Schema"),
    ],
)  # fmt: skip
def test_a_schema_that_cannot_drive_a_conversion_is_a_usage_error(tmp_path, text, message):
    (tmp_path / "in.csv").write_text("x\n1\n")
    (tmp_path / "s.pbtxt").write_text(text)
    with pytest.raises(UsageError, match=rf"^--schema .*s.pbtxt: .*{message}"):
        convert([str(tmp_path / "in.csv")], tmp_path / "out", f"--schema={tmp_path / 's.pbtxt'}")
