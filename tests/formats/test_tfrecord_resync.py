"""Re-sharding TFRecord files cut anywhere: payloads that hold framed records themselves, and
damage right after a cut, never give wrong or missing records."""

from __future__ import annotations

import itertools

import pytest
import tensorflow as tf
from support.datasets import convert, read_all

from beam_jobs.codec.framing import frame_records
from beam_jobs.core.errors import DataError


def _example(i: int, blob: bytes) -> bytes:
    feature = {
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "blob": tf.train.Feature(bytes_list=tf.train.BytesList(value=[blob])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _nested_file(path, n: int = 400) -> list[bytes]:
    # Every payload holds a small TFRecord file of its own: valid frames inside the records.
    inner = frame_records([b"inner-%d" % k * 7 for k in range(12)])
    records = [_example(i, inner * (1 + i % 3)) for i in range(n)]
    path.write_bytes(frame_records(records))
    return records


@pytest.mark.parametrize("shards", [3, 7, 16])
def test_payloads_that_hold_framed_records_do_not_fool_the_resync(tmp_path, shards):
    path = tmp_path / "nested.tfrecord"
    _nested_file(path)
    manifest = convert([str(path)], tmp_path / "out", f"--num_shards={shards}")
    assert manifest.total_records == 400 and manifest.counts.bad_records == 0
    assert sorted(r["id"] for r in read_all(tmp_path / "out")) == list(range(400))


@pytest.mark.parametrize(
    "fraction, where, message",
    [
        # Right after a cut, the next writer's resync steps past the broken record, so no
        # writer reads it: publishing finds the gap.
        (1 / 4, 3, r"bytes \d+-\d+ were read by no writer"),  # its length field
        (1 / 4, 20, r"bytes \d+-\d+ were read by no writer"),  # its data
        # Inside a piece, the writer reading it stops there.
        (3 / 8, 20, r"corrupt TFRecord file: record \d+ \(byte \d+\): data fails"),
    ],
    ids=["length_after_cut", "data_after_cut", "data_mid_piece"],
)
def test_damage_is_an_error_never_lost_records(tmp_path, fraction, where, message):
    path = tmp_path / "damaged.tfrecord"
    records = [_example(i, b"x" * 100) for i in range(400)]
    data = bytearray(frame_records(records))
    starts = list(itertools.accumulate((len(r) + 16 for r in records), initial=0))
    # 4 shards: cuts at quarters of the file; break the first record starting past `fraction`.
    victim = next(s for s in starts if s > len(data) * fraction)
    data[victim + where] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=rf"^{path}: {message}"):
        convert([str(path)], tmp_path / "out", "--num_shards=4", "--sample_bytes=4096")
    assert not (tmp_path / "out" / "manifest.json").exists()


def _sequence_example(i: int) -> bytes:
    context = tf.train.Features(
        feature={"id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))}
    )
    steps = tf.train.FeatureList(
        feature=[tf.train.Feature(float_list=tf.train.FloatList(value=[t])) for t in range(3)]
    )
    lists = tf.train.FeatureLists(feature_list={"steps": steps})
    return tf.train.SequenceExample(context=context, feature_lists=lists).SerializeToString()


@pytest.mark.parametrize("first_bad", [0, 350], ids=["in_the_sample", "past_the_sample"])
def test_sequence_examples_are_refused_not_read_without_their_feature_lists(tmp_path, first_bad):
    path = tmp_path / "seq.tfrecord"
    records = [_example(i, b"x") for i in range(first_bad)]
    records += [_sequence_example(i) for i in range(first_bad, 400)]
    path.write_bytes(frame_records(records))
    offset = sum(len(r) + 16 for r in records[:first_bad])
    with pytest.raises(DataError) as e:
        convert([str(path)], tmp_path / "out", "--sample_bytes=4096")
    assert str(e.value).startswith(
        f"{path}: the record at byte {offset} is a tf.train.SequenceExample (it has feature_lists)"
    )
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_record_with_fields_an_example_lacks_is_a_dead_letter(tmp_path):
    path = tmp_path / "extra.tfrecord"
    records = [_example(i, b"x") for i in range(300)]
    records[200] = records[200] + b"\x18\x07"  # field 3 = 7: not part of a tf.train.Example
    path.write_bytes(frame_records(records))
    manifest = convert([str(path)], tmp_path / "out", "--max_bad_fraction=0.01")
    assert (manifest.total_records, manifest.counts.bad_records) == (299, 1)
    letter = (tmp_path / "out" / manifest.dead_letter[0]).read_text()
    assert "not a tf.train.Example: it has field(s) [3]" in letter
