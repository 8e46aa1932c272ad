"""Shuffled conversions (the default order): every record once, in a seeded random order across
all shards, the same bytes on every run and runner; every format; dead letters, splits and
statistics as in input order; seek points on record starts."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
import struct
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
from support.datasets import convert, read_all
from tensorflow_metadata.proto.v0 import statistics_pb2

from beam_jobs.codec.framing import masked_crc32c
from beam_jobs.inspection.verify import verify


def _sorted_csv(path, rows: int, bad: tuple[int, ...] = ()) -> list[dict]:
    """A CSV sorted by its label (20 labels), with `bad` rows whose n is no integer."""
    lines = [
        {"id": i, "label": f"c{i * 20 // rows:02d}", "n": i % 7, "x": i / 8} for i in range(rows)
    ]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, ["id", "label", "n", "x"])
        w.writeheader()
        for row in lines:
            w.writerow({**row, "n": "oops" if row["id"] in bad else row["n"]})
    return lines


def _ids(out) -> list[int]:
    """The ids in stored order: shard by shard, as TensorFlow's reader reads them."""
    manifest = json.loads((out / "manifest.json").read_text())
    kind = "GZIP" if manifest["compression"] == "gzip" else ""
    found = []
    for shard in manifest["shards"]:
        for batch in tf.data.TFRecordDataset(str(out / shard["path"]), kind).batch(10_000):
            parsed = tf.io.parse_example(batch, {"id": tf.io.FixedLenFeature([], tf.int64)})
            found += parsed["id"].numpy().tolist()
    return found


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_records_of_a_sorted_input_are_spread_over_every_shard(tmp_path, compression):
    _sorted_csv(tmp_path / "in.csv", 20_000)
    out = tmp_path / "out"
    manifest = convert([str(tmp_path / "in.csv")], out, "--target_shard_bytes=48KiB",
                       f"--compression={compression}")  # fmt: skip
    ids = _ids(out)
    assert sorted(ids) == list(range(20_000))
    assert len(manifest.shards) >= 4
    # Every shard holds its share of every label as a random sample would (a sorted input's
    # labels spread out): the table of shard by label passes Pearson's test of independence
    # (chi-square within 4 standard deviations of its degrees of freedom; a shard of one
    # label would add thousands) and no label is missing from a shard.
    labels = np.array(ids) * 20 // 20_000
    shard_of = np.repeat(np.arange(len(manifest.shards)), [s.records for s in manifest.shards])
    table = np.zeros((len(manifest.shards), 20))
    np.add.at(table, (shard_of, labels), 1)
    expected = np.outer(table.sum(1), table.sum(0)) / table.sum()
    chi2 = ((table - expected) ** 2 / expected).sum()
    freedom = (len(manifest.shards) - 1) * 19
    assert chi2 < freedom + 4 * np.sqrt(2 * freedom), (chi2, freedom)
    assert table.min() >= 0.4 * expected.min(), table
    assert abs(np.corrcoef(ids, np.arange(len(ids)))[0, 1]) < 0.03
    records = [s.records for s in manifest.shards]
    # Balanced: each write task deals its records out evenly (one more or less a shard a task).
    assert max(records) - min(records) <= len(manifest.shards) + 1
    assert max(s.bytes for s in manifest.shards) <= 1.1 * 48 * 1024
    assert verify(str(out))[1] == []


def test_the_same_inputs_give_the_same_bytes_on_every_runner_mode_and_seed_changes_them(tmp_path):
    _sorted_csv(tmp_path / "in.csv", 8000)
    source = [str(tmp_path / "in.csv")]
    flags = ["--target_shard_bytes=32KiB"]
    one = convert(source, tmp_path / "one", *flags)
    threads = convert(source, tmp_path / "threads", *flags, "--direct_running_mode=multi_threading",
                      "--direct_num_workers=2", in_process=False)  # fmt: skip
    processes = convert(source, tmp_path / "procs", *flags,
                        "--direct_running_mode=multi_processing", "--direct_num_workers=2",
                        in_process=False)  # fmt: skip
    assert one.fingerprint == threads.fingerprint == processes.fingerprint
    other = convert(source, tmp_path / "seed", *flags, "--shuffle_seed=7")
    assert other.fingerprint != one.fingerprint and other.order.seed == 7
    assert sorted(_ids(tmp_path / "seed")) == sorted(_ids(tmp_path / "one"))
    kept = convert(source, tmp_path / "kept", *flags, "--order=input")
    assert kept.order.kind == "input" and _ids(tmp_path / "kept") == list(range(8000))


def test_dead_letters_counts_and_statistics_are_those_of_input_order(tmp_path):
    _sorted_csv(tmp_path / "in.csv", 6000, bad=(17, 4242))
    source = [str(tmp_path / "in.csv")]
    flags = ["--target_shard_bytes=16KiB", "--max_bad_fraction=0.01"]
    shuffled = convert(source, tmp_path / "s", *flags)
    kept = convert(source, tmp_path / "k", *flags, "--order=input")
    # The same counts, but for the tasks: the shuffle's units are tasks too.
    untasked = [dataclasses.replace(d.counts, tasks=0) for d in (shuffled, kept)]
    assert untasked[0] == untasked[1]
    assert shuffled.counts.bad_records == 2
    assert (kept.counts.tasks, kept.counts.tasks_reused) == (len(kept.shards), 0)
    # A unit a shard, and 8 write tasks (MIN_TASKS): its shards are smaller than an eighth
    # of the input, so the first pass reads it in eighths (`first_pass_tasks`).
    assert shuffled.counts.tasks == 8 + len(shuffled.shards) == 8 + 29
    # The same bad rows in the same order; each in the dead letter of the shard that carries
    # what its write task read (input order: of the shard its row would have gone to).
    named = "dead_letter/data-{:05}-of-00029.tfrecord.jsonl".format
    assert list(shuffled.dead_letter) == [named(0), named(18)]
    assert list(kept.dead_letter) == [named(0), named(20)]
    # The same letters but for the byte range read (the task's: an eighth against a shard's).
    letters = [[{k: v for k, v in json.loads(x).items() if k not in ("byte_range", "row_in_range")}
                for n in sorted(d.dead_letter)
                for x in (tmp_path / folder / n).read_text().splitlines()]
               for d, folder in ((shuffled, "s"), (kept, "k"))]  # fmt: skip
    assert letters[0] == letters[1]
    assert [letter["line"] for letter in letters[0]] == [19, 4244]
    assert shuffled.features == kept.features
    # The same statistics, but for those of the quantile sketches (median, histograms), whose
    # approximation depends on how the records were cut among write tasks; standard
    # deviations merged in another order agree to the last digits.
    stats = [_exact_statistics(tmp_path / folder / "statistics.pb") for folder in ("s", "k")]
    assert stats[0] == stats[1]
    assert (tmp_path / "s" / "schema.pbtxt").read_text() == (
        tmp_path / "k" / "schema.pbtxt"
    ).read_text()


def _exact_statistics(path) -> statistics_pb2.DatasetFeatureStatisticsList:
    found = statistics_pb2.DatasetFeatureStatisticsList.FromString(path.read_bytes())
    for feature in found.datasets[0].features:
        if feature.HasField("num_stats"):
            feature.num_stats.ClearField("median")
            feature.num_stats.ClearField("histograms")
            feature.num_stats.std_dev = round(feature.num_stats.std_dev, 9)
    return found


def _frames_at(data: bytes, offsets) -> None:
    """Each offset is where a TFRecord frame starts: its length's checksum holds."""
    for offset in offsets:
        length = data[offset : offset + 8]
        (crc,) = struct.unpack("<I", data[offset + 8 : offset + 12])
        assert crc == masked_crc32c(length), offset


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_seek_points_are_record_starts_and_reading_from_them_gives_the_records(
    tmp_path, compression
):
    _sorted_csv(tmp_path / "in.csv", 30_000)
    out = tmp_path / "out"
    manifest = convert([str(tmp_path / "in.csv")], out, "--num_shards=2",
                       f"--compression={compression}")  # fmt: skip
    ids = _ids(out)
    start = 0
    for shard in manifest.shards:
        data = (out / shard.path).read_bytes()
        data = gzip.decompress(data) if compression == "gzip" else data
        assert len(shard.seek) >= 8
        _frames_at(data, [o for _, o in shard.seek])
        # The record a seek point names is the one at its offset.
        for record, offset in shard.seek[:3]:
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            example = tf.train.Example.FromString(data[offset + 12 : offset + 12 + length])
            assert example.features.feature["id"].int64_list.value[0] == ids[start + record]
        start += shard.records


def _oracle(rows) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def _read_back(out) -> list[str]:
    rows = []
    for r in read_all(out):
        rows.append({k: (v.decode() if isinstance(v, bytes) else v) for k, v in r.items()})
    return _oracle(rows)


def test_every_format_keeps_every_record_shuffled(tmp_path):
    rows = [{"id": i, "name": f"n{i}", "x": i / 4} for i in range(3000)]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "a.json").write_text(json.dumps(rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "a.parquet", row_group_size=500)
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as z:
        z.writestr("inner.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    text = [f"line {i}" for i in range(3000)]
    (tmp_path / "a.txt").write_text("\n".join(text) + "\n")
    for name in ("a.jsonl", "a.json", "a.parquet", "a.zip"):
        out = tmp_path / f"out-{name.replace('.', '-')}"
        manifest = convert([str(tmp_path / name)], out, "--num_shards=3")
        assert manifest.order.shuffled and manifest.total_records == 3000, name
        assert _read_back(out) == _oracle(rows), name
        assert _ids(out) != list(range(3000)), name
    manifest = convert([str(tmp_path / "a.txt")], tmp_path / "txt", "--num_shards=2")
    assert sorted(r["text"].decode() for r in read_all(tmp_path / "txt")) == sorted(text)
    # Re-sharding TFRecords (the JSON lines' shards) keeps every record too.
    again = convert(
        [str(tmp_path / "out-a-jsonl" / "*.tfrecord")], tmp_path / "tf", "--num_shards=2"
    )
    assert again.total_records == 3000 and _read_back(tmp_path / "tf") == _oracle(rows)


def test_images_of_a_folder_class_by_class_are_spread(tmp_path):
    from PIL import Image

    for label in ("ant", "bee", "cat", "dog"):
        (tmp_path / "img" / label).mkdir(parents=True)
        for i in range(30):
            Image.new("RGB", (4, 4), (i, 0, 0)).save(tmp_path / "img" / label / f"{i}.png")
    out = tmp_path / "out"
    manifest = convert([str(tmp_path / "img")], out, "--format=images", "--num_shards=2")
    assert manifest.total_records == 120 and manifest.order.shuffled
    labels = [r["label"] for r in read_all(out, label_key="")]
    assert sorted(labels) == sorted([0, 1, 2, 3] * 30)
    assert len(set(labels[:12])) >= 3  # the first records already mix the classes


def test_shards_of_many_buckets_in_parts_or_whole_hold_every_record(tmp_path, monkeypatch):
    """Buckets smaller than a shard: a shard is several buckets, written as parts joined in
    order (few shards) or by one unit (many); the same records, balanced, reproducible."""
    _sorted_csv(tmp_path / "in.csv", 12_000)
    monkeypatch.setattr("beam_jobs.plan.shuffle.BUCKET_BYTES", 20_000)
    monkeypatch.setattr("beam_jobs.plan.shuffle.RUN_BYTES", 50_000)  # several runs a task
    monkeypatch.setattr("beam_jobs.plan.shuffle.MIN_STRETCH_BYTES", 1)  # sizes kept as set
    for shards, compression in ((2, "none"), (3, "gzip"), (9, "none")):
        out = tmp_path / f"out{shards}"
        flags = [f"--num_shards={shards}", f"--compression={compression}"]
        manifest = convert([str(tmp_path / "in.csv")], out, *flags)
        assert len(manifest.shards) == shards
        assert sorted(_ids(out)) == list(range(12_000))
        again = convert([str(tmp_path / "in.csv")], tmp_path / f"again{shards}", *flags)
        assert again.fingerprint == manifest.fingerprint
        assert verify(str(out))[1] == []
