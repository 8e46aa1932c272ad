"""Every input format end to end: real files written here, converted on the real pipeline, and
every value read back through `make_dataset` and compared with an independent oracle.

One module past 300 lines on purpose: a section per format, so that a new format's round trip
is written beside the others (its error cases are in test_format_errors.py)."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
import zstandard
from support.datasets import convert, expected_rows, read_all

from beam_jobs.core.errors import DataError
from beam_jobs.inspection.verify import verify
from tfdata_reader import make_dataset

TARGET = 32 * 1024


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def assert_sizes(manifest, target=TARGET):
    sizes = [s.bytes for s in manifest.shards]
    assert len(sizes) > 1
    assert max(sizes) <= 1.1 * target
    assert max(sizes) / min(sizes) <= 1.5


# --- JSON lines ---------------------------------------------------------------------------


def _json_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        row = {"id": i, "user": {"name": f"u{rng.randrange(1000)}", "geo": {"lat": i / 7}}}
        if i % 3:
            row["tags"] = [f"t{rng.randrange(9)}" for _ in range(rng.randrange(4))]
        if i % 5:
            row["scores"] = [rng.random() for _ in range(rng.randrange(1, 4))]
        if i % 7 == 0:
            row["note"] = None
        rows.append(row)
    return rows


def test_jsonl_nested_missing_and_lists_round_trip(tmp_path):
    rows = _json_rows(3000, seed=1)
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    manifest = convert([str(path)], tmp_path / "out", f"--target_shard_bytes={TARGET}")
    specs = {f.name: (f.dtype, f.shape) for f in manifest.features}
    assert specs == {
        "id": ("int64", []),
        "user.name": ("bytes", []),
        "user.geo.lat": ("float32", []),
        "tags": ("bytes", None),
        "scores": ("float32", None),
        "note": ("bytes", []),
    }
    assert_sizes(manifest)
    got = sorted(read_all(tmp_path / "out"), key=lambda r: r["id"])
    assert len(got) == len(rows)
    for g, r in zip(got, rows, strict=True):
        assert g["id"] == r["id"]
        assert g["user.name"] == r["user"]["name"].encode()  # dense: present in every record
        assert g["user.geo.lat"] == np.float32(r["user"]["geo"]["lat"])
        assert g["tags"] == [t.encode() for t in r.get("tags", [])]
        assert g["scores"] == [np.float32(s) for s in r.get("scores", [])]
        assert g["note"] == []


def test_jsonl_bad_lines_go_to_the_dead_letter(tmp_path):
    lines = [json.dumps({"id": i, "v": i * 2}) for i in range(200)]
    lines[10] = "[1, 2]"
    lines[20] = '{"id": 20, "v": '
    lines[30] = '{"id": 30, "v": "thirty"}'
    data = ("\n".join(lines) + "\n").encode()
    data = data.replace(b'{"id": 40, "v": 80}', b'{"id": 40, "v": "\xff"}')
    (tmp_path / "in.jsonl").write_bytes(data)
    manifest = convert(
        [str(tmp_path / "in.jsonl")], tmp_path / "out", "--num_shards=2", "--max_bad_fraction=0.1"
    )
    assert manifest.counts.records_read == 200
    assert manifest.counts.bad_records == 4
    assert sorted(r["id"] for r in read_all(tmp_path / "out")) == sorted(
        set(range(200)) - {10, 20, 30, 40}
    )
    bad = []
    for name in manifest.dead_letter:
        bad += [json.loads(line) for line in (tmp_path / "out" / name).read_text().splitlines()]
    by_start = {b["byte_range"][0]: b for b in bad}
    starts = {i: data.index(lines[i].encode()) if i != 40 else None for i in (10, 20, 30)}
    assert by_start[starts[10]]["reason"] == "not a JSON object: an array"
    assert by_start[starts[10]]["raw"] == "[1, 2]"
    assert by_start[starts[20]]["reason"].startswith("invalid JSON: Expecting value")
    assert by_start[starts[30]]["reason"] == (
        "feature 'v' (int64, shape []): text where an integer is expected (string)"
    )
    [utf8] = [b for b in bad if b["reason"].startswith("invalid UTF-8")]
    assert utf8["raw"] == {"base64": "eyJpZCI6IDQwLCAidiI6ICL/In0="}
    assert sorted(b["line"] for b in bad) == [11, 21, 31, 41]  # lines[i] is line i + 1


# --- Parquet -----------------------------------------------------------------------------------


def test_parquet_list_columns_and_row_group_plan(tmp_path):
    n = 6000
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int32()),
            "x": pa.array([i / 3 for i in range(n)], pa.float64()),
            "name": pa.array([None if i % 11 == 0 else f"n{i}" for i in range(n)]),
            "ids": pa.array([list(range(i % 4)) for i in range(n)], pa.list_(pa.int64())),
            "meta": pa.array([{"ok": i % 2 == 0} for i in range(n)]),
        }
    )
    # Shards are made of whole row groups: small ones let the plan meet the size bounds.
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=50)
    manifest = convert(
        [str(tmp_path / "t.parquet")], tmp_path / "out", f"--target_shard_bytes={TARGET}"
    )
    assert {f.name: (f.dtype, f.shape) for f in manifest.features} == {
        "id": ("int64", []),
        "x": ("float32", []),
        "name": ("bytes", []),
        "ids": ("int64", None),
        "meta.ok": ("int64", []),
    }
    assert_sizes(manifest)
    got = sorted(read_all(tmp_path / "out"), key=lambda r: r["id"])
    assert len(got) == n
    for i, g in enumerate(got):
        assert g["x"] == np.float32(i / 3)
        assert g["name"] == ([] if i % 11 == 0 else [f"n{i}".encode()])
        assert g["ids"] == list(range(i % 4))
        assert g["meta.ok"] == int(i % 2 == 0)


# --- Text and compressed inputs ----------------------------------------------------------------


def _parquet_files(folder, extra: dict[int, pa.Array]) -> None:
    """Ten Parquet files of 30 rows; file k has `extra[k]` as a column "late" besides id."""
    folder.mkdir()
    for k in range(10):
        columns = {"id": pa.array(range(30 * k, 30 * k + 30), pa.int64())}
        if k in extra:
            columns["late"] = extra[k]
        pq.write_table(pa.table(columns), folder / f"part-{k:02d}.parquet")


def test_a_parquet_column_only_in_a_file_the_plan_did_not_sample_is_kept(tmp_path):
    # The plan samples 8 of 10 files (0, 1, 2, 3, 5, 6, 7, 9); file 4 alone has "late".
    _parquet_files(tmp_path / "in", {4: pa.array([f"v{i}" for i in range(30)])})
    manifest = convert([str(tmp_path / "in" / "*.parquet")], tmp_path / "out")
    late = manifest.feature("late")
    assert (late.dtype, late.shape, late.nullable) == ("bytes", [], True)
    rows = {r["id"]: r["late"] for r in read_all(tmp_path / "out", label_key="")}
    assert len(rows) == 300
    assert {i: v for i, v in rows.items() if v} == {120 + i: [f"v{i}".encode()] for i in range(30)}
    assert manifest.counts.ignored_fields == {}


def test_text_beside_numbers_in_a_file_not_sampled_is_refused_naming_it(tmp_path):
    numbers = {k: pa.array(range(30), pa.int64()) for k in (0, 1, 2, 3, 5)}
    _parquet_files(tmp_path / "in", {**numbers, 4: pa.array(["x"] * 30)})
    with pytest.raises(DataError, match=r"column 'late' is text in \S+part-04.parquet but numbers"):
        convert([str(tmp_path / "in" / "*.parquet")], tmp_path / "out")


def test_text_lines_from_plain_gzip_bz2_and_zstd_files(tmp_path):
    lines = [f"line {i} " + "x" * (i % 50) for i in range(2000)] + ["", "last\r"]
    data = "\n".join(lines).encode() + b"\n"
    (tmp_path / "a.txt").write_bytes(data)
    (tmp_path / "b.txt.gz").write_bytes(gzip.compress(data))
    (tmp_path / "c.txt.bz2").write_bytes(bz2.compress(data))
    (tmp_path / "d.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(data))
    manifest = convert(
        [str(tmp_path / "*.txt*")], tmp_path / "out", "--format=text", "--target_shard_bytes=16KiB"
    )
    assert [(f.name, f.dtype, f.shape) for f in manifest.features] == [("text", "bytes", [])]
    want = [line.rstrip("\r").encode() for line in lines]
    got = [r["text"] for r in read_all(tmp_path / "out")]
    assert sorted(got) == sorted(want * 4)
    assert manifest.total_records == 4 * len(lines)


def test_gzip_csv_reads_every_value(sample_csv, tmp_path):
    for path in sample_csv:
        with (
            open(path, "rb") as f,
            gzip.open(tmp_path / (path.rsplit("/", 1)[1] + ".gz"), "wb") as g,
        ):
            g.write(f.read())
    manifest = convert(
        [str(tmp_path / "*.csv.gz")], tmp_path / "out", "--num_shards=3", "--order=input"
    )
    oracle = expected_rows(sample_csv)
    # A compressed file is read whole by one writer: one shard per file, in file order.
    assert [s.records for s in manifest.shards] == [4000, 4000, 4000]
    got = sorted(read_all(tmp_path / "out"), key=lambda r: r["id"])
    want = sorted(oracle, key=lambda r: int(r["id"]))
    assert [g["id"] for g in got] == [int(w["id"]) for w in want]
    assert [g["note"] for g in got] == [[w["note"].encode()] if w["note"] else [] for w in want]
    assert [g["city"] for g in got] == [w["city"].encode() for w in want]


# --- TFRecord re-sharding ----------------------------------------------------------------------


def _example(i: int) -> bytes:
    feature = {
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "emb": tf.train.Feature(float_list=tf.train.FloatList(value=[i, i / 2, -i])),
        "word": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"w%d" % (i % 13)])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_tfrecord_reshard_plain_and_gzip_inputs(tmp_path):
    with tf.io.TFRecordWriter(str(tmp_path / "big.tfrecord")) as w:
        for i in range(3000):
            w.write(_example(i))
    with tf.io.TFRecordWriter(str(tmp_path / "small-gz"), options="GZIP") as w:
        for i in range(3000, 3500):
            w.write(_example(i))
    manifest = convert(
        [str(tmp_path / "big.tfrecord"), str(tmp_path / "small-gz")],
        tmp_path / "out",
        "--format=tfrecord",
        f"--target_shard_bytes={TARGET}",
    )
    assert {f.name: (f.dtype, f.shape) for f in manifest.features} == {
        "id": ("int64", []),
        "emb": ("float32", [3]),
        "word": ("bytes", []),
    }
    assert manifest.total_records == 3500
    got = sorted(read_all(tmp_path / "out"), key=lambda r: r["id"])
    assert [g["id"] for g in got] == list(range(3500))
    assert all(g["emb"] == [i, np.float32(i / 2), -i] for i, g in enumerate(got))
    assert all(g["word"] == b"w%d" % (i % 13) for i, g in enumerate(got))
    assert verify(str(tmp_path / "out"))[1] == []


# --- Images ------------------------------------------------------------------------------------


def _png(pixels: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def _images(root, count=12, seed=3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    made = {}
    for i in range(count):
        label = ("cat", "dog", "eel")[i % 3]
        pixels = rng.integers(0, 256, size=(8 + i, 10 + 2 * i, 3), dtype=np.uint8)
        (root / label).mkdir(parents=True, exist_ok=True)
        (root / label / f"img{i:02d}.png").write_bytes(_png(pixels))
        made[f"{label}/img{i:02d}.png"] = pixels
    return made


def test_image_folder_with_folder_labels_decodes_exactly(tmp_path):
    made = _images(tmp_path / "imgs")
    (tmp_path / "imgs" / "dog" / "broken.png").write_bytes(b"\x89PNG not really")
    manifest = convert(
        [str(tmp_path / "imgs")],
        tmp_path / "out",
        "--format=images",
        "--num_shards=3",
        "--max_bad_fraction=0.2",
    )
    assert manifest.label_vocabulary == ["cat", "dog", "eel"]
    assert manifest.counts.bad_records == 1
    [dead] = [
        json.loads(line)
        for name in manifest.dead_letter
        for line in (tmp_path / "out" / name).read_text().splitlines()
    ]
    assert dead["filename"] == "dog/broken.png"
    assert dead["reason"].startswith("not a decodable image")
    assert " at 0x" not in dead["reason"]  # no memory address: the same on every run
    rows = {r["filename"].decode(): r for r in read_all(tmp_path / "out", decode_images=True)}
    assert sorted(rows) == sorted(made)
    for name, pixels in made.items():
        row = rows[name]
        assert row["label"] == ["cat", "dog", "eel"].index(name.split("/")[0])
        assert (row["height"], row["width"], row["channels"]) == (*pixels.shape[:2], 3)
        assert np.array_equal(np.array(row["image"], dtype=np.uint8), pixels)
    resized = next(
        iter(
            make_dataset(
                str(tmp_path / "out"), 4, shuffle=False, decode_images=True, image_size=(5, 6)
            )
        )
    )
    assert resized["image"].shape == (4, 5, 6, 3) and resized["image"].dtype == tf.uint8


def test_images_with_a_labels_csv_and_extra_columns(tmp_path):
    made = _images(tmp_path / "imgs", count=6)
    names = sorted(made)
    labels = "filename,label,weight\n" + "".join(
        f"{n},{'big' if i % 2 else 'small'},{i / 4}\n" for i, n in enumerate(names[:-1])
    )
    (tmp_path / "labels.csv").write_text(labels)
    manifest = convert(
        [str(tmp_path / "imgs/*/*.png")],
        tmp_path / "out",
        "--labels",
        str(tmp_path / "labels.csv"),
        "--max_bad_fraction=0.5",
    )
    assert manifest.label_vocabulary == ["big", "small"]
    assert manifest.counts.bad_records == 1  # the image without a row in labels.csv
    rows = {r["filename"].decode(): r for r in read_all(tmp_path / "out")}
    assert sorted(rows) == names[:-1]
    for i, name in enumerate(names[:-1]):
        assert rows[name]["label"] == (0 if i % 2 else 1)
        assert rows[name]["weight"] == np.float32(i / 4)
        assert rows[name]["image"] == _png(made[name])


@pytest.mark.parametrize("name", ["../secret.png", "/etc/passwd", "a/../../b.png", "C:/x.png"])
def test_labels_csv_paths_cannot_escape_the_image_root(tmp_path, name):
    _images(tmp_path / "imgs", count=3)
    (tmp_path / "labels.csv").write_text(f"filename,label\ncat/img00.png,1\n{name},2\n")
    with pytest.raises(
        DataError,
        match=r"labels.csv: 1 filename\(s\) are empty, absolute or "
        r"leave the image root .*line 3: ",
    ):
        convert(
            [str(tmp_path / "imgs")],
            tmp_path / "out",
            "--format=images",
            "--labels",
            str(tmp_path / "labels.csv"),
        )


# --- Splits -------------------------------------------------------------------------------------


def test_splits_are_deterministic_disjoint_and_complete(sample_csv, tmp_path):
    flags = ["--splits=train=80,eval=20", "--split_key=id", "--target_shard_bytes=64KiB"]
    first = convert(sample_csv, tmp_path / "a", *flags)
    second = convert(sample_csv, tmp_path / "b", *flags)
    assert [s.records for s in second.shards] == [s.records for s in first.shards]
    assert first.splits == {"train": 80, "eval": 20}
    names = {s.split: [] for s in first.shards}
    for shard in first.shards:
        names[shard.split].append(shard.path)
    assert names["train"][0] == f"train-00000-of-{len(names['train']):05d}.tfrecord"
    assert names["eval"][0] == f"eval-00000-of-{len(names['eval']):05d}.tfrecord"
    ids = {}
    for split in ("train", "eval"):
        ids[split] = [r["id"] for r in read_all(tmp_path / "a", split=split, features=["id"])]
        again = [r["id"] for r in read_all(tmp_path / "b", split=split, features=["id"])]
        assert sorted(ids[split]) == sorted(again)
    assert not set(ids["train"]) & set(ids["eval"])
    assert sorted(ids["train"] + ids["eval"]) == sorted(range(12000))
    assert 0.75 < len(ids["train"]) / 12000 < 0.85
    summary = json.loads((tmp_path / "a" / "manifest.json").read_text())["splits"]
    assert summary["eval"]["records"] == len(ids["eval"])
    with pytest.raises(
        ValueError, match="no split 'test' in this dataset; its splits: train, eval"
    ):
        make_dataset(str(tmp_path / "a"), 8, split="test")


def test_inspect_prints_the_inferred_spec_of_raw_inputs(tmp_path, capsys):
    from beam_jobs.cli import main

    (tmp_path / "a.jsonl").write_text('{"id": 1, "x": {"y": [1.5]}}\n{"id": 2, "z": "q"}\n')
    assert main(["inspect", "--input", str(tmp_path / "a.jsonl"), "--schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema == {
        "features": [
            {"name": "id", "dtype": "int64", "shape": [], "nullable": False},
            {"name": "x.y", "dtype": "float32", "shape": None, "nullable": True},
            {"name": "z", "dtype": "bytes", "shape": [], "nullable": True},
        ]
    }
    (tmp_path / "schema.json").write_text(
        json.dumps({"features": [{"name": "id", "dtype": "float32"}]})
    )
    manifest = convert(
        [str(tmp_path / "a.jsonl")], tmp_path / "out", f"--schema={tmp_path / 'schema.json'}"
    )
    assert manifest.feature("id").dtype == "float32"
    assert sorted(r["id"] for r in read_all(tmp_path / "out")) == [1.0, 2.0]


# --- Size bounds --------------------------------------------------------------------------------


def _write_text(folder):
    (folder / "a.txt").write_text("".join(f"line {i} {'y' * (i % 70)}\n" for i in range(12000)))
    return [str(folder / "a.txt")], []


def _write_tfrecords(folder):
    with tf.io.TFRecordWriter(str(folder / "a.tfrecord")) as w:
        for i in range(5000):
            w.write(_example(i))
    with tf.io.TFRecordWriter(str(folder / "b.tfrecord")) as w:
        for i in range(5000, 5100):
            w.write(_example(i))
        w.write(b"not an Example")
    return [str(folder / "*.tfrecord")], []


def _write_images(folder):
    rng = np.random.default_rng(0)
    for i in range(240):
        (folder / f"c{i % 4}").mkdir(exist_ok=True)
        pixels = rng.integers(0, 256, size=(20, 20 + i % 9, 3), dtype=np.uint8)
        (folder / f"c{i % 4}" / f"{i:03d}.png").write_bytes(_png(pixels))
    return [str(folder)], ["--format=images"]


@pytest.mark.parametrize(
    "write, records, bad",
    [(_write_text, 12000, 0), (_write_tfrecords, 5100, 1), (_write_images, 240, 0)],
    ids=["text", "tfrecord", "images"],
)
def test_size_bounds_hold_for_every_format(tmp_path, write, records, bad):
    (tmp_path / "in").mkdir()
    inputs, flags = write(tmp_path / "in")
    manifest = convert(
        inputs, tmp_path / "out", f"--target_shard_bytes={TARGET}", "--max_bad_fraction=0.01",
        *flags,
    )  # fmt: skip
    assert (manifest.total_records, manifest.counts.bad_records) == (records, bad)
    assert_sizes(manifest)


def test_an_image_named_twice_with_two_labels_is_refused_naming_the_lines(tmp_path):
    made = sorted(_images(tmp_path / "imgs", count=3))
    (tmp_path / "labels.csv").write_text(
        f"filename,label\n{made[0]},a\n{made[1]},b\n{made[1]},b\n{made[2]},a\n./{made[0]},b\n"
    )
    with pytest.raises(
        DataError,
        match=rf"1 image\(s\) are named twice with different rows \('\./{made[0]}' on "
        r"lines 2 and 6\)",
    ):
        convert([str(tmp_path / "imgs")], tmp_path / "out", "--format=images",
                "--labels", str(tmp_path / "labels.csv"))  # fmt: skip


def test_labels_rows_naming_no_input_image_are_said(tmp_path, caplog):
    made = sorted(_images(tmp_path / "imgs", count=2))
    (tmp_path / "labels.csv").write_text(
        f"filename,label\n{made[0]},a\nnot/there.png,b\n{made[1]},b\n"
    )
    manifest = convert([str(tmp_path / "imgs")], tmp_path / "out", "--format=images",
                       "--labels", str(tmp_path / "labels.csv"))  # fmt: skip
    assert manifest.total_records == 2
    assert "1 row(s) name images that are not among the inputs (line 3: 'not/there.png')" in (
        caplog.text
    )


def test_a_labels_csv_that_cannot_be_read_is_a_usage_error(tmp_path):
    from beam_jobs.core.errors import UsageError

    _images(tmp_path / "imgs", count=2)
    with pytest.raises(UsageError, match=r"--labels \S+nope.csv: cannot be read"):
        convert([str(tmp_path / "imgs")], tmp_path / "out", "--format=images",
                "--labels", str(tmp_path / "nope.csv"))  # fmt: skip
