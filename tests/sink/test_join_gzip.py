"""A GZIP shard written in parts is joined into one gzip member (`codec.gzip_member`), which
TensorFlow reads whole: its reader stopped at an empty member (0 of the shard's records read
when the first part held none) and near a member end straddling one of its 256 KiB reads."""

from __future__ import annotations

import gzip
import pathlib
import random

import google_crc32c
import pytest
import tensorflow as tf
from support.gzip_files import gzip_members

from beam_jobs.codec.framing import frame_records
from beam_jobs.codec.shard_file import ShardFileWriter
from beam_jobs.core.errors import DataError
from beam_jobs.core.tasks import WrittenShard
from beam_jobs.sink.join_parts import join_parts

_NAME = "train-00000-of-00001.tfrecord.gz"


def _part(tmp_path, index: int, records: list[bytes], level: int) -> WrittenShard:
    path = tmp_path / f"part-{index}"
    with ShardFileWriter(open(path, "wb"), "gzip", level, joinable=True) as writer:
        for start in range(0, len(records), 700):  # several batches, as a writer gets them
            writer.write_records(records[start : start + 700])
    stored = path.read_bytes()
    assert writer.bytes == len(stored) and writer.member is not None
    assert gzip.decompress(stored) == frame_records(records)  # a part alone is a gzip file
    return WrittenShard(0, str(path), _NAME, writer.records, writer.bytes, writer.crc32c,
                        split="train", num_shards=1, part=index, member=writer.member)  # fmt: skip


def _records(rng: random.Random, count: int) -> list[bytes]:
    return [rng.randbytes(rng.randrange(600)) for _ in range(count)]


@pytest.mark.parametrize("level", [1, 6])
@pytest.mark.parametrize("sizes", [[0, 5, 3], [4, 0, 0, 6], [7, 0], [0, 0], [2000, 1, 1500]])
def test_parts_join_into_one_member_that_tensorflow_reads_whole(tmp_path, level, sizes):
    rng = random.Random(len(sizes) * 10 + level)
    parts = [_records(rng, n) for n in sizes]
    written = [_part(tmp_path, i, records, level) for i, records in enumerate(parts)]
    joined = join_parts(written, str(tmp_path), list(range(len(sizes))))
    stored = pathlib.Path(joined.temp_path).read_bytes()
    everything = [r for records in parts for r in records]
    assert (joined.records, joined.bytes) == (len(everything), len(stored))
    assert joined.crc32c == f"{google_crc32c.value(stored):08x}" and joined.member is None
    assert gzip_members(stored) == 1
    assert gzip.decompress(stored) == frame_records(everything)
    read = [r.numpy() for r in tf.data.TFRecordDataset(joined.temp_path, compression_type="GZIP")]
    assert read == everything


def test_a_join_retried_after_appending_writes_the_same_file(tmp_path):
    from beam_jobs.sink.join_parts import _concatenate

    rng = random.Random(1)
    records = [_records(rng, 50) for _ in range(3)]
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    once = join_parts([_part(fresh, i, r, 1) for i, r in enumerate(records)], str(fresh), [0, 1, 2])
    written = [_part(tmp_path, i, r, 1) for i, r in enumerate(records)]
    _concatenate(written, str(tmp_path), "0" * 16)  # a join that failed after appending
    again = join_parts(written, str(tmp_path), [0, 1, 2])
    assert pathlib.Path(again.temp_path).read_bytes() == pathlib.Path(once.temp_path).read_bytes()
    assert (again.bytes, again.crc32c) == (once.bytes, once.crc32c)


def test_a_gzip_part_written_whole_is_refused_rather_than_joined_as_two_members(tmp_path):
    rng = random.Random(2)
    whole = tmp_path / "whole"
    with ShardFileWriter(open(whole, "wb"), "gzip") as writer:
        writer.write_records(_records(rng, 5))
    assert writer.member is None  # a whole shard ends as it always did
    part = WrittenShard(0, str(whole), _NAME, 5, writer.bytes, writer.crc32c,
                        split="train", num_shards=1, part=1)  # fmt: skip
    with pytest.raises(DataError, match="not written to be joined"):
        join_parts([_part(tmp_path, 0, _records(rng, 3), 1), part], str(tmp_path), [0, 1])
